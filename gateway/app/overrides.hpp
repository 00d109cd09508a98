#pragma once
/// Where the admin API's overrides (docs/design.md §15, "Overrides") are kept: the process's
/// override_book, and with `store: redis` a hash in Redis that every replica follows. Their JSON
/// is override_json.hpp's.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/app/override_json.hpp"
#include "gateway/core/clock.hpp"
#include "gateway/policy/overrides.hpp"
#include "gateway/store/decision_store.hpp"

namespace tollgate::store {
class redis_records;
}

namespace tollgate::app {

/// Where the overrides are kept: the book the workers read, and with `store: redis` Redis.
/// Thread safety: put and remove from the control thread; the follower writes the book from
/// its own.
class override_keeper {
 public:
  /// Over `book`; shared through Redis when `store` is the Redis store, polled every `poll`.
  override_keeper(policy::override_book& book, store::decision_store& store,
                  const core::clock& clock,
                  std::chrono::nanoseconds poll = std::chrono::milliseconds(100));
  ~override_keeper();

  /// Starts following Redis (nothing without it).
  void start();
  /// Whether the overrides are shared with other replicas.
  bool shared() const noexcept { return records_ != nullptr; }
  /// The book.
  policy::override_book& book() noexcept { return book_; }

  /// What put() did.
  struct put_result {
    policy::override_book::placed placed = policy::override_book::placed::added;
    std::string error;  ///< the shared store did not take it: why
  };
  /// Puts `r`: into Redis first when shared, then the book.
  put_result put(const policy::override_rule& r);
  /// Removes override `id`: "" when done, else why not (Redis did not take it).
  std::string remove(std::string_view id);

 private:
  policy::override_book& book_;
  const core::clock& clock_;
  std::unique_ptr<store::redis_records> records_;  ///< with store: redis
};

}  // namespace tollgate::app
