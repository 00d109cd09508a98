#pragma once
/// Small pieces shared by the session and the forwarder: local answers, header editing,
/// per-connection scratch space. Internal to net/.

#include <sys/mman.h>

#include <array>
#include <chrono>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gateway/metrics/counters.hpp"
#include "gateway/net/address_slots.hpp"
#include "gateway/net/asio.hpp"
#include "gateway/net/client_stream.hpp"
#include "gateway/net/deadline.hpp"
#include "gateway/net/messages.hpp"
#include "gateway/net/problem.hpp"
#include "gateway/net/snapshot.hpp"
#include "gateway/net/upstream_pool.hpp"
#include "gateway/policy/gate.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/policy/router.hpp"
#include "gateway/policy/verdict.hpp"

namespace tollgate::net {

/// The request a connection is serving and what became of it. Kept in the connection's
/// scratch rather than in its coroutine frame, which lives as long as the connection: an idle
/// connection holds none of this.
struct request_in_hand {
  std::optional<request_parser> parser;    ///< reads the request (fields in the scratch's arena)
  std::shared_ptr<const snapshot> snap;    ///< the configuration in force when it started
  unsigned version = 11;                   ///< its HTTP version
  bool keep_alive = false;                 ///< the client asked to keep the connection
  bool has_host = true;                    ///< it has a Host field (HTTP/1.0 may not)
  bool upgrade = false;                    ///< it asks for a WebSocket (DESIGN §6)
  http::status status = http::status::ok;  ///< a local answer's status
  std::string_view body;                   ///< a local answer's body
  std::string_view extra_fields;           ///< a local answer's further header lines
  std::string_view content_type;           ///< a local answer's type ("": problem+json)
  const policy::rate_limit_fields* rate = nullptr;  ///< a local answer's rate-limit fields
  bool keep_open = false;                           ///< a local answer keeps the connection
  const policy::route* route = nullptr;             ///< where an admitted request goes
  core::address client;                             ///< the address it was charged to
  policy::client_subjects who;                      ///< the client as violation counters know it
  policy::gate_input gate;                          ///< what the gate was told of it
  policy::gate_verdict verdict;                     ///< what the gate answered
  limit::limit_request limits;                      ///< the limits it asks the store about
  limit::decision decision;                         ///< the store's decision on them
  std::uint32_t unkeyed = 0;  ///< slots of limits whose key it lacks (counted, not applied)
  metrics::decision outcome = metrics::decision::allowed;  ///< for the access log
  std::chrono::steady_clock::time_point started;           ///< its head in hand
  bool exempt = false;  ///< on the access allow list: no limits, proofs, bans or violations
  std::uint64_t written_before = 0;  ///< client_stream::written when it began (access log)
  double upstream_seconds = -1;      ///< to the upstream's response head; < 0: not sent
  bool tls = false;                  ///< it came over TLS
  /// It carried the proof-of-work cookie (DESIGN §5 "Browsers"): its response clears it, so
  /// that a proof, once judged, is not sent again.
  bool pow_cookie = false;
  /// Its category's CORS, when the gateway owns it (null: the upstream's business).
  const policy::cors_rules* cors = nullptr;
  std::string_view cors_origin;  ///< its Origin, when `cors` allows it; else ""
};

/// The header line that clears the proof-of-work cookie, on a TLS listener or not.
std::string_view clear_pow_cookie(bool tls) noexcept;

/// What the forwarder needs to know about an admitted request.
struct forward_request {
  const snapshot& snap;         ///< configuration in force for this request
  const policy::route& route;   ///< its upstream
  core::address peer;           ///< the socket peer
  core::address client;         ///< the address it was charged to
  std::string_view peer_text;   ///< the socket peer as text
  bool tls = false;             ///< arrived over TLS
  bool keep_alive = false;      ///< the client asked to keep the connection
  unsigned version = 11;        ///< the client's HTTP version
  policy::client_subjects who;  ///< the client as violation counters know it
  bool host_missing = false;    ///< without a Host field (HTTP/1.0): one is added upstream
  bool upgrade = false;         ///< a WebSocket upgrade: forwarded as one
  bool exempt = false;          ///< on the access allow list: its responses record no violation
};

/// Buffers a connection uses while it carries a request. A connection that stays idle, or
/// sends its head slowly, gives them back to its worker's scratch_pool (see await_request and
/// collect_slow_head in session.cpp).
struct connection_scratch {
  /// Blocks are mapped from the kernel rather than the heap: pages are resident only once
  /// touched (a request without a body never touches `body`), and a block freed after a burst
  /// of connections goes back to the system instead of staying in the heap.
  static void* operator new(std::size_t n) {
    void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return p;
  }
  static void operator delete(void* p, std::size_t n) noexcept { ::munmap(p, n); }

  beast::flat_buffer buffer;         ///< bytes read from the client and not yet parsed
  std::string path;                  ///< normalised path of the current request
  policy::rate_limit_fields fields;  ///< its rate-limit header values
  std::string forwarded_for;         ///< X-Forwarded-For to send upstream
  std::string client_text;           ///< X-Real-IP of the current request when not the peer
  std::array<char, 16 * 1024> body;  ///< one chunk of a body being relayed
  std::string head;                  ///< the head being sent (upstream or client)
  field_arena arena;                 ///< header fields of the current request and response
  std::string problem;               ///< body of an answer made by the gateway (400, 403, 428, 429)
  std::string problem_fields;        ///< its further header lines (428, 403)
  std::string response_fields;       ///< the gateway's lines on an upstream's response
  request_in_hand request;           ///< the request being served
  std::optional<forward_request> forwarding;  ///< what forward() is told of it, when admitted
  unsigned status = 0;  ///< status of the response sent for the current request (access log)
  /// A WebSocket upgrade's place under max_connections_per_address, from admission until
  /// its tunnel takes it (or the upgrade fails).
  address_slot tunnel_place;
  /// The upstream connection of an upgrade it answered with 101, for the tunnel.
  std::unique_ptr<upstream_connection> upgraded;
  bool ws_extensions = false;  ///< that 101 negotiated an extension
};

/// Scratch space of one worker's connections: taken when bytes of a request arrive, given back
/// when the connection idles or its head trickles, so memory follows requests in hand rather
/// than open connections. Keeps up to `max_spare` for reuse, frees the rest.
/// Thread safety: none needed; one worker's.
class scratch_pool {
 public:
  /// Most scratch blocks kept for reuse (each about 30-45 KiB). Connections between requests
  /// mostly keep theirs (await_request), so spares serve new connections only.
  static constexpr std::size_t max_spare = 16;
  /// Most blocks in use before waiting connections give theirs back at once (await_request).
  static constexpr std::size_t max_kept_waiting = 64;
  /// Blocks taken and not given back.
  std::size_t in_use() const noexcept { return in_use_; }
  /// A block with an empty buffer: a spare, or a new one.
  std::unique_ptr<connection_scratch> take() {
    ++in_use_;
    // Default-initialised, not value-initialised (make_unique would zero all 45 KiB first and
    // so make every page resident): the relay chunk and the arena are written before read.
    if (spare_.empty()) return std::unique_ptr<connection_scratch>(new connection_scratch);
    auto s = std::move(spare_.back());
    spare_.pop_back();
    return s;
  }
  /// Takes `s` back (its buffer must be empty). The request it held is let go, so that a
  /// spare keeps no configuration alive.
  void give(std::unique_ptr<connection_scratch> s) {
    --in_use_;
    if (spare_.size() >= max_spare) return;
    s->forwarding.reset();
    s->upgraded.reset();
    s->tunnel_place = {};
    s->request.parser.reset();
    s->request.snap.reset();
    spare_.push_back(std::move(s));
  }

 private:
  std::vector<std::unique_ptr<connection_scratch>> spare_;  ///< ready for reuse
  std::size_t in_use_ = 0;                                  ///< taken, not given back
};

/// One read from `s` into `buffer`, as large as the buffer's free room (at least 4 KiB). At the
/// end of the stream `parser` is told so: that completes a body delimited by the close, and is
/// `end_of_stream` before a message or `partial_message` inside one. The bytes read are left
/// for parse_buffered. Beast's composed reads do the same through three layers of operations.
template <class Stream, bool isRequest, class Body, class Allocator>
task<error_code> read_more(Stream& s, beast::flat_buffer& buffer,
                           http::parser<isRequest, Body, Allocator>& parser) {
  const std::size_t room = buffer.capacity() - buffer.size();
  const auto space = buffer.prepare(room >= 4096 ? room : 4096);
  error_code ec;
  std::size_t n = 0;
  if constexpr (std::is_same_v<Stream, client_stream>) {
    if (s.tls()) {
      std::tie(ec, n) = co_await s.tls_read_some(space);
    } else {
      std::tie(ec, n) = co_await s.socket().async_read_some(space, use_tuple);
    }
  } else {
    std::tie(ec, n) = co_await s.async_read_some(space, use_tuple);
  }
  if (ec == asio::error::eof) {
    // Before any byte of a message the stream simply ended (an idle keep-alive connection
    // the peer closed): Beast's put_eof must not see that case.
    if (!parser.got_some()) co_return http::error::end_of_stream;
    error_code eof;
    parser.put_eof(eof);
    co_return eof;
  }
  if (!ec) buffer.commit(n);
  co_return ec;
}

/// Reads until `parser` has the whole head (bounded by its header limit).
template <class Stream, bool isRequest, class Body, class Allocator>
task<error_code> read_head(Stream& s, beast::flat_buffer& buffer,
                           http::parser<isRequest, Body, Allocator>& parser) {
  for (;;) {
    error_code ec;
    parse_buffered(parser, buffer, ec);
    if (ec || parser.is_header_done()) co_return ec;
    if (error_code rec = co_await read_more(s, buffer, parser)) co_return rec;
  }
}

/// Writes as much of `rest` as the socket takes without waiting (sockets of the data path are
/// non-blocking) and drops what was written from `rest`; an empty `rest` means all went out.
/// Returns an error other than "would block". A write that completes at once this way costs
/// one system call; awaited, it would also cost a trip through the scheduler.
error_code write_now(tcp_socket& s, std::span<asio::const_buffer>& rest);

/// Writes all of `pieces`: at once when the socket takes it, awaited otherwise.
inline task<error_code> write_all(tcp_socket& s, std::span<asio::const_buffer> pieces) {
  if (error_code ec = write_now(s, pieces); ec || pieces.empty()) co_return ec;
  auto [ec, n] = co_await asio::async_write(s, pieces, use_tuple);
  co_return ec;
}

/// Writes all of `pieces` to the client: plain as above, or encrypted.
inline task<error_code> write_all(client_stream& s, std::span<asio::const_buffer> pieces) {
  for (const auto& p : pieces)
    s.written += p.size();
  if (s.tls()) co_return co_await s.tls_write(pieces);
  if (error_code ec = write_now(s.socket(), pieces); ec || pieces.empty()) co_return ec;
  auto [ec, n] = co_await asio::async_write(s.socket(), pieces, use_tuple);
  co_return ec;
}

/// An answer the gateway makes itself (problem+json).
struct local_answer {
  http::status status = http::status::ok;           ///< its status
  std::string_view body;                            ///< its body (alive until written)
  std::string_view extra_fields;                    ///< further header lines, each with CRLF
  std::string_view content_type;                    ///< "": application/problem+json
  const policy::rate_limit_fields* rate = nullptr;  ///< rate-limit fields, when checked
  bool keep_alive = false;                          ///< the connection stays open afterwards
  unsigned version = 11;                            ///< the client's HTTP version
  std::chrono::nanoseconds timeout{0};              ///< for the whole write
  bool head_only = false;  ///< the answer to HEAD: its head alone (Content-Length the body's)
};

/// Writes `a`, its head rendered into the connection's head buffer and sent with the body in
/// one write; records its status. Returns whether the connection stays open.
task<bool> write_local(deadline_watch& watch, connection_scratch& sc, const local_answer& a);

}  // namespace tollgate::net
