#pragma once
/// The admin API's overrides (docs/design.md §15, "Overrides") as the process keeps them: their
/// JSON (what an operator PUTs, what GET lists, what Redis holds), and where they are kept — the
/// process's override_book, and with `store: redis` a hash in Redis that every replica follows.

#include <boost/json/object.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/core/clock.hpp"
#include "gateway/policy/overrides.hpp"
#include "gateway/store/decision_store.hpp"

namespace tollgate::store {
class redis_records;
}

namespace tollgate::app {

/// Unix ns `t` as RFC 3339 UTC ("2027-01-01T00:00:00Z").
std::string rfc3339(core::nanos t);
/// RFC 3339 date-time (`Z` or an offset, optional fraction) as unix ns; nullopt otherwise.
std::optional<core::nanos> parse_rfc3339(std::string_view text);

/// The override an operator wrote in `body` (a PUT at unix time `now`), or, when `stored`, one
/// as override_json wrote it (its id and creation time kept). nullopt, and `error` saying
/// what is wrong, when it is not one.
std::optional<policy::override_rule> override_from_json(std::string_view body, core::nanos now,
                                                        bool stored, std::string& error);
/// `r` as JSON: its id, target, tier or numbers, expiry and creation.
boost::json::object override_json(const policy::override_rule& r);

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
