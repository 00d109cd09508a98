#pragma once
/// What replicas tell each other through Redis about their clients' standing (docs/design.md
/// §18): one stream, `{<prefix><name>}`, that every replica appends to and every replica reads
/// in the stream's order, so that state built from it by the same rules is the same on every
/// replica whichever replica saw the event; beside it, keys set once (spent proofs,
/// `{<prefix><name>}spent:<challenge>`, in the stream's slot) and keys deleted on request (a
/// reset's limiter keys). The stream keeps at most `max_entries` entries and expires
/// `retention` after its latest, so Redis memory stays bounded whatever the clients do.
///
/// Runs on a thread of its own with one connection (redis::link: AUTH, TLS, reconnection) to
/// the node of the stream's slot, and one more per node a deletion is redirected to; the
/// stream is read every `poll` (XREAD, no blocking, so appends never wait behind a read),
/// from its start when the journal starts: a replica that starts rebuilds what the stream
/// holds. Shape: redis_records, with a stream where it has a hash.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gateway/store/redis_link.hpp"
#include "gateway/store/redis_store.hpp"

namespace tollgate::store {

/// Completes a claim: whether the key was new (the proof unspent until now); an error when
/// Redis could not say in time. Called on the journal's thread (or the caller's, at once, when
/// Redis is known to be away): the caller takes it to its own.
using claim_handler = std::function<void(boost::system::error_code, bool)>;

/// Thread safety: append, append_and_wait, claim, remove and ready from any thread but the
/// journal's own; start from the thread that made it.
class redis_journal final : private redis::link_events {
 public:
  /// Told each entry's payload, in the stream's order, on the journal's thread.
  using on_entry = std::function<void(std::string_view payload)>;

  /// The journal `name` under `o`'s key prefix, through `tls` when set.
  redis_journal(const redis_options& o, boost::asio::ssl::context* tls, std::string name,
                std::chrono::nanoseconds poll, std::size_t max_entries,
                std::chrono::nanoseconds retention, on_entry read);
  ~redis_journal() override;
  redis_journal(const redis_journal&) = delete;
  redis_journal& operator=(const redis_journal&) = delete;

  /// Runs `f` on the journal's thread every `poll`, before the read (the owner's batches go
  /// out then). Before start().
  void every_poll(std::function<void()> f) { every_poll_ = std::move(f); }
  /// Runs `f` with the payload of an append() that could not be written after all (Redis went
  /// away before it was sent), on the journal's thread: the owner applies it itself. Before
  /// start().
  void on_unsent(on_entry f) { on_unsent_ = std::move(f); }
  /// Starts following (the first read from the stream's start once the connection is up).
  void start();
  /// The prefix of every key (store.key_prefix).
  const std::string& key_prefix() const noexcept { return o_.key_prefix; }
  /// Whether Redis can be reached now (the last the journal knows).
  bool ready() const noexcept { return ready_.load(std::memory_order_acquire); }

  /// Appends `payload` without waiting; false, with nothing sent, when Redis cannot be reached
  /// (and on_unsent's callback gets it if it cannot be written later).
  bool append(std::string payload);
  /// Appends `payload` and waits at most `wait` for Redis to take it: "" when it did; else why
  /// not.
  std::string append_and_wait(std::string payload, std::chrono::nanoseconds wait);

  /// Sets `{<prefix><name>}spent:<id>` unless it exists, expiring at `expires` (Unix seconds),
  /// and completes `done` with whether it did, or with an error when no reply came within
  /// `o.timeout` of this call (`fail_mode` then decides).
  void claim(std::string_view id, std::int64_t expires, claim_handler done);

  /// Deletes `keys`, which share one hash slot, waiting at most `wait`: the number deleted,
  /// or -1 with `error` set.
  long long remove(std::vector<std::string> keys, std::chrono::nanoseconds wait,
                   std::string& error);

 private:
  enum kind : std::uint8_t { read_stream, add, claim_key, delete_keys };
  struct waiter;
  struct claim_call;

  void on_reply(redis::pending_call& c, const redisReply* reply, redis::failure why) override;
  void on_state(bool ready, const std::string& why) override;
  /// A link to `host`:`port` (on io_).
  std::shared_ptr<redis::link> connect(const std::string& host, std::uint16_t port);
  /// Reads what the stream holds past the last entry read; again after `poll_`.
  void tick();
  void read_more();
  /// Settles `w` as never written (and hands an append nobody waits for to on_unsent).
  void unsent(const std::shared_ptr<waiter>& w);
  /// Sends `w`'s append, or its deletion on `via`.
  void send(const std::shared_ptr<waiter>& w, redis::link* via = nullptr);
  /// Hands the entries of an XREAD reply to the owner; whether it read a full page.
  bool take_entries(const redisReply& reply);

  redis_options o_;
  boost::asio::ssl::context* tls_;
  std::string stream_key_, spent_prefix_;
  std::chrono::nanoseconds poll_;
  std::string max_entries_, retention_ms_;
  on_entry read_;
  std::function<void()> every_poll_;
  on_entry on_unsent_;
  boost::asio::io_context io_;
  boost::asio::steady_timer timer_{io_};
  std::shared_ptr<redis::link> link_;  ///< to the stream's node
  /// Links to the nodes deletions were redirected to, by "host:port" (few: one per node).
  std::map<std::string, std::shared_ptr<redis::link>> others_;
  /// Their events (replies to this journal), alive as long as it is.
  std::vector<std::unique_ptr<redis::link_events>> adapters_;
  std::string last_id_ = "0-0";  ///< the last entry read
  bool reading_ = false;         ///< a read is under way
  bool down_logged_ = false;     ///< said that Redis is unreachable
  std::atomic<bool> ready_{false};
  std::thread thread_;
};

}  // namespace tollgate::store
