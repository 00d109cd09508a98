#pragma once
/// Records every replica shares through Redis (docs/design.md §15: the admin API's overrides):
/// one hash of named values and a version that every change moves, both under one hash tag
/// (`{<prefix><name>}` and `{<prefix><name>}:version`, one Cluster slot). Each change is one
/// script call that writes and moves the version; every replica reads the version every
/// `poll` and the whole hash when it moved, and hands it to its owner. Runs on a thread of its
/// own with one connection (redis::link: AUTH, TLS, reconnection), so that neither the workers
/// nor the admin listener wait on it except for the change they asked.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gateway/store/redis_link.hpp"
#include "gateway/store/redis_store.hpp"

namespace tollgate::store {

/// Thread safety: write() from any thread but the records' own; the rest from the thread that
/// made it.
class redis_records final : private redis::link_events {
 public:
  /// Named values as Redis holds them.
  using records = std::vector<std::pair<std::string, std::string>>;
  /// Told every record whenever the version moved (on the records' thread); returns the
  /// names of records to drop (expired ones), which are then removed.
  using on_change = std::function<std::vector<std::string>(const records&)>;

  /// The records `name` under `o`'s key prefix, on `o`'s first node (with a Cluster, the node
  /// the hash slot's MOVED names), through `tls` when set.
  redis_records(const redis_options& o, boost::asio::ssl::context* tls, std::string name,
                std::chrono::nanoseconds poll, on_change changed);
  ~redis_records() override;
  redis_records(const redis_records&) = delete;
  redis_records& operator=(const redis_records&) = delete;

  /// Starts following (the first read as soon as the connection is up).
  void start();
  /// Sets each (name, value) of `changes`, or removes it when its value is "", in one call,
  /// and waits at most `wait` for Redis to take it. "" when it did; else why not.
  std::string write(records changes, std::chrono::nanoseconds wait);

 private:
  enum kind : std::uint8_t { read_version, read_all, change };
  struct waiter;

  void on_reply(redis::pending_call& c, const redisReply* reply, redis::failure why) override;
  void on_state(bool ready, const std::string& why) override;
  /// Connects to `host`:`port` (a new link; the old one's calls fail).
  void connect(const std::string& host, std::uint16_t port);
  /// Asks the version, and everything when it moved; then again after `poll_`.
  void tick();
  /// Sends a change for `w` (or for no one when null).
  void send_change(const records& changes, std::shared_ptr<waiter> w);
  /// Follows a MOVED error: whether `reply` was one (the link then goes to the node it names).
  bool redirected(const redisReply& reply);

  redis_options o_;
  boost::asio::ssl::context* tls_;
  std::string hash_key_, version_key_;
  std::chrono::nanoseconds poll_;
  on_change changed_;
  boost::asio::io_context io_;
  boost::asio::steady_timer timer_{io_};
  /// The link to the node of the hash's slot. One replaced after a MOVED keeps running on io_
  /// (its coroutine owns it; a link has no stop) until the records end: MOVED for one slot is
  /// rare, so these stay few.
  std::shared_ptr<redis::link> link_;
  std::optional<std::string> seen_;  ///< the version last read whole
  bool reading_ = false;             ///< a read is under way
  bool down_logged_ = false;         ///< said that Redis is unreachable
  std::thread thread_;
};

}  // namespace tollgate::store
