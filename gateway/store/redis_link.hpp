#pragma once
/// One connection from one worker to one Redis server (docs/design.md §11): pipelined (every call
/// written as soon as it is made, replies matched in order), on the worker's io_context, with
/// a deadline per call, reconnection with backoff, AUTH and SCRIPT LOAD on every connection,
/// and optional TLS. RESP is hiredis's (its reader and formatter); the socket is Asio's.

#include <boost/asio/io_context.hpp>
#include <boost/asio/ssl/context.hpp>

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "gateway/store/decision_store.hpp"

struct redisReply;

namespace tollgate::store::redis {

/// Why a call got no reply.
enum class failure : std::uint8_t {
  none,      ///< a reply came
  timeout,   ///< not within its deadline (a late reply is read and dropped)
  io,        ///< the connection broke before the reply came
  overload,  ///< not sent: too many calls in flight
};

/// One call waiting for its reply. The link owns it from `call()` until it completes; a
/// call whose deadline passed is completed then (failure::timeout) and its reply, when it
/// comes, is dropped.
struct pending_call {
  pending_call() = default;
  pending_call(const limit::limit_request* r, limit::decision* o, decide_handler&& d)
      : req(r), out(o), done(std::move(d)) {}
  pending_call(pending_call&&) = default;
  /// Not assignable: Boost 1.81's any_completion_handler move assignment recurses forever
  /// (it constructs from an lvalue of itself).
  pending_call& operator=(pending_call&&) = delete;

  const limit::limit_request* req = nullptr;  ///< what is decided (nullptr: the link's own)
  limit::decision* out = nullptr;             ///< where the decision goes
  decide_handler done;                        ///< the session waiting for it
  std::shared_ptr<void> context;  ///< the owner's, for calls that are part of something larger
  std::uint8_t kind = 0;          ///< the owner's, says what the call is
  std::uint8_t part = 0;          ///< the owner's, e.g. which part of a decision
  std::uint8_t redirects = 0;     ///< Cluster redirections followed so far
  std::chrono::steady_clock::time_point sent;      ///< when it was written
  std::chrono::steady_clock::time_point deadline;  ///< when it fails
  std::uint8_t own = 0;  ///< the link's own calls (AUTH, SCRIPT LOAD): which one
  bool live = true;      ///< still waited for (false: completed early, reply to be dropped)
};

/// What the link tells its owner (the store's worker side).
class link_events {
 public:
  virtual ~link_events() = default;
  /// The reply to `c` (a decision), or nullptr and why none came. The callee completes
  /// `c.done`; the link forgets `c` afterwards.
  virtual void on_reply(pending_call& c, const redisReply* reply, failure why) = 0;
  /// The link became usable (true) or stopped being so (false).
  virtual void on_state(bool ready, const std::string& why) = 0;
};

/// Where and how to connect.
struct link_options {
  std::string host;                                                   ///< name or address
  std::uint16_t port = 6379;                                          ///< port
  std::string username;                                               ///< ACL user, or ""
  std::string password;                                               ///< "": no AUTH
  std::chrono::nanoseconds timeout{std::chrono::milliseconds(5)};     ///< per call
  std::chrono::nanoseconds connect_timeout{std::chrono::seconds(1)};  ///< per attempt
  boost::asio::ssl::context* tls = nullptr;                           ///< TLS toward Redis when set
  std::string server_name;            ///< SNI and verified name with TLS
  std::size_t max_in_flight = 16384;  ///< calls waiting for replies, at most
};

/// Thread safety: one thread (the io_context's); made and started from any before it runs.
class link : public std::enable_shared_from_this<link> {
 public:
  /// A link that will connect through `io` and report to `events` (which outlives it).
  static std::shared_ptr<link> make(boost::asio::io_context& io, link_options o,
                                    link_events& events);
  virtual ~link() = default;

  /// Starts connecting (and reconnecting, for as long as its io_context runs).
  virtual void start() = 0;
  /// Whether calls may be made: connected, authenticated, the script loaded.
  virtual bool ready() const noexcept = 0;
  /// Sends `command` (RESP, complete) for `c` now, pipelined behind the calls in flight, and
  /// says failure::none. Otherwise, with `c` untouched, why not: io when the link is not
  /// ready, overload when too many calls wait; the caller then decides by fail_mode.
  virtual failure call(std::string_view command, pending_call&& c) = 0;
  /// Loads the scripts again (after a NOSCRIPT: Redis lost its script cache).
  virtual void reload_script() = 0;
  /// As call(), but never refused for overload (a refund, a slot map query: few, and needed).
  virtual failure call_now(std::string_view command, pending_call&& c) = 0;
  /// "host:port", for logs.
  virtual std::string name() const = 0;
};

}  // namespace tollgate::store::redis
