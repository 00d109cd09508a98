#include "gateway/net/websocket.hpp"

#include <algorithm>
#include <span>

#include <spdlog/spdlog.h>

#include "gateway/net/access_line.hpp"
#include "gateway/net/heads.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

bool is_websocket_upgrade(const request_parser& parser) {
  const auto& req = parser.get();
  return req.version() >= 11 && req.method() == http::verb::get &&
         has_token(req.base(), http::field::upgrade, "websocket") &&
         has_token(req.base(), http::field::connection, "upgrade");
}

std::uint64_t tunnel_key(const policy::client_subjects& who, std::size_t category) noexcept {
  auto mix = [](std::uint64_t x) {  // splitmix64's finaliser
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  };
  return mix(who.individual.key) ^ mix(std::uint64_t{who.individual.level} << 32 | category);
}

namespace {

namespace ws = protocol::ws;
using clock = deadline_watch::clock;

/// How long a peer has to answer a close frame, or to end its side once the other has ended,
/// before the gateway drops the connection.
constexpr std::chrono::seconds close_timeout{5};
/// How long the client's close waits for the upstream's answer to the gateway's close (what
/// the upstream sends meanwhile is delivered first); then it goes without.
constexpr std::chrono::seconds answer_timeout{1};
/// A pending write's buffer larger than this is freed after use: an idle tunnel keeps none.
constexpr std::size_t kept_pending = 4096;

/// One direction of a tunnel: where its bytes are in the frame they belong to, and what it
/// owes its receiver.
struct direction {
  ws::frame_splitter frames;                            ///< the sender's stream, frame by frame
  ws::frame_action action = ws::frame_action::forward;  ///< what becomes of the current frame
  /// The current frame is a close frame: its first two payload bytes (the code) are read.
  bool reading_close = false;
  std::uint8_t code_bytes = 0;             ///< of the code read so far
  std::array<std::uint8_t, 2> code{};      ///< the close code, unmasked
  std::array<std::uint8_t, 4> mask{};      ///< the current frame's mask (client frames)
  std::vector<asio::const_buffer> pieces;  ///< what one read gives the receiver
  std::string pending;      ///< bytes a write that could not complete at once still owes
  std::string own;          ///< a close frame of the gateway's own, sent this way
  bool close_sent = false;  ///< a close frame went this way (relayed or the gateway's)
  bool close_seen = false;  ///< the sender answered a close
  bool own_sent = false;    ///< the close that went this way was the gateway's

  /// Whether a frame of the gateway's own may be sent now: the receiver is not inside a
  /// frame relayed to it.
  bool between_frames() const noexcept {
    return frames.payload_left() == 0 || action != ws::frame_action::forward;
  }
  /// Adds `n` bytes at `p` to what the receiver gets, joined to the last piece when adjacent.
  void emit(const void* p, std::size_t n) {
    if (n == 0) return;
    if (!pieces.empty()) {
      auto& last = pieces.back();
      if (static_cast<const char*>(last.data()) + last.size() == p) {
        last = asio::const_buffer(last.data(), last.size() + n);
        return;
      }
    }
    pieces.emplace_back(p, n);
  }
};

/// Who ended a tunnel first (label `by` of tollgate_websocket_closes_total).
enum class closer : std::uint8_t { client, upstream, gateway };

/// A tunnel between one client and its upstream connection.
struct tunnel final : tunnel_list::member {
  tunnel(worker& w, deadline_watch& watch, tunnel_setup& s)
      : w(w),
        watch(watch),
        up(std::move(s.upstream)),
        meter(s.limits, s.extensions),
        metric(s.metric),
        idle(s.idle_timeout),
        lifetime_end(clock::now() + s.max_lifetime),
        place(std::move(s.place)),
        inflight(std::move(s.inflight)),
        log(std::move(s.log)) {}

  worker& w;
  deadline_watch& watch;                                    ///< the client connection's
  std::unique_ptr<upstream_connection> up;                  ///< the upstream connection
  ws::client_meter meter;                                   ///< the client's messages
  std::uint16_t metric;                                     ///< the category's label index
  std::chrono::nanoseconds idle;                            ///< idle_timeout
  clock::time_point lifetime_end;                           ///< max_lifetime from the start
  clock::time_point idle_end;                               ///< the last activity + idle
  clock::time_point write_end = clock::time_point::max();   ///< a blocked write's deadline
  clock::time_point close_end = clock::time_point::max();   ///< closing: the peers' deadline
  clock::time_point answer_end = clock::time_point::max();  ///< see answer_timeout
  bool answer_late = false;  ///< the upstream did not answer the gateway's close in time
  /// Wake a pump waiting to read (a cancellation of that read only: a write in progress in
  /// the other direction on the same socket is left alone).
  asio::cancellation_signal wake_client_read, wake_upstream_read;
  address_slot place;               ///< under max_connections_per_address
  limit::inflight_holds inflight;   ///< under concurrency limits (docs/design.md §15)
  direction from_client;            ///< client -> upstream
  direction from_upstream;          ///< upstream -> client
  std::uint16_t own_code = 0;       ///< the gateway's close code, once it closes
  std::string_view own_reason;      ///< and its reason ("pings"; "": none), static text
  bool counted = false;             ///< the close was counted
  bool upstream_pump_done = false;  ///< the upstream -> client coroutine has returned
  std::unique_ptr<std::array<char, 16 * 1024>> tls_in;     ///< TLS reads (plain: the worker's)
  std::unique_ptr<std::array<char, 16 * 1024>> tls_up_in;  ///< the same, from a TLS upstream
  timer joined{w.io.get_executor()};            ///< wakes the tunnel when that coroutine returns
  std::optional<tunnel_setup::log_fields> log;  ///< see tunnel_setup::log
  std::array<std::uint64_t, 2> messages{};      ///< relayed, by direction (the access log)
  closer closed_by = closer::client;            ///< who closed first (the access log)
  std::uint16_t close_code = ws::abnormal;      ///< with which code
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  /// Moves the client's deadline to the earliest of what bounds the tunnel now.
  void rearm() noexcept {
    watch.at = std::min({idle_end, lifetime_end, write_end, close_end, answer_end});
  }
  /// Traffic came: the idle deadline moves (unless the tunnel is closing already).
  void active() noexcept {
    if (idle_end != clock::time_point::max()) idle_end = clock::now() + idle;
    rearm();
  }
  /// Counts the end of the tunnel once: the first close frame's code and sender.
  void count_close(closer by, std::uint16_t code) noexcept {
    if (counted) return;
    counted = true;
    closed_by = by;
    close_code = code;
    w.counters.ws_closes[static_cast<std::size_t>(by)][metrics::ws_close_slot(code)].add();
  }
  /// One side has ended: the other has close_timeout to follow.
  void ending() noexcept {
    close_end = std::min(close_end, clock::now() + close_timeout);
    rearm();
  }
  /// Drops both connections at once (a peer that does not answer, a failed write).
  void drop() noexcept {
    watch.close_client();
    error_code ignored;
    up->socket.close(ignored);
  }
  /// Starts the gateway's close with `code`: each direction sends its close frame as soon as
  /// its receiver is between frames (the pumps are woken for it), and the peers have
  /// close_timeout to answer.
  void close_with(std::uint16_t code) override {
    if (own_code != 0) return;
    close_end = std::min(close_end, clock::now() + close_timeout);
    rearm();
    // A close handshake under way already (the client's or the upstream's) needs no other.
    if (from_client.close_sent || from_upstream.close_sent) return;
    own_code = code;
    count_close(closer::gateway, code);
    answer_end = clock::now() + answer_timeout;
    rearm();
    // The pump towards the upstream sends the close as soon as it can; a read it waits on
    // is cancelled (no system call) to wake it.
    wake_client_read.emit(asio::cancellation_type::terminal);
  }
  /// The deadline came: idle or lifetime over (close 1001), or a peer too slow (dropped).
  static void due(void* self) {
    auto& t = *static_cast<tunnel*>(self);
    const auto now = clock::now();
    if (now >= t.close_end || now >= t.write_end) {
      // The gateway ends it: a peer that did not take a write, or did not finish a close
      // handshake, in time (unless a close frame was counted first).
      t.count_close(closer::gateway, ws::abnormal);
      t.drop();
      return;
    }
    if (now >= t.answer_end) {
      // The client's close goes without the upstream's answer.
      t.answer_end = clock::time_point::max();
      t.answer_late = true;
      t.wake_upstream_read.emit(asio::cancellation_type::terminal);
    }
    if (now >= t.idle_end || now >= t.lifetime_end) {
      // Closing from now on: only the close's own deadline (and a blocked write's) remain.
      t.idle_end = t.lifetime_end = clock::time_point::max();
      t.close_with(ws::going_away);
    }
    t.rearm();
  }
};

/// Adds the gateway's close frame to what `d`'s receiver gets, if the gateway is closing and
/// none went that way yet. Call only between frames.
void own_close(tunnel& t, direction& d, bool to_upstream) {
  if (t.own_code == 0 || d.close_sent) return;
  d.close_sent = true;
  d.own_sent = true;
  d.own.clear();
  // A client's frames are masked (RFC 6455 §5.3); the key needs no secrecy here: the
  // upstream is not a browser's peer that a crafted payload could confuse.
  const std::array<std::uint8_t, 4> mask = {0x37, 0xfa, 0x21, 0x3d};
  ws::append_close_frame(d.own, t.own_code, t.own_reason, to_upstream ? &mask : nullptr);
  d.emit(d.own.data(), d.own.size());
}

/// The close code in a close frame's first payload bytes, as far as they were read.
std::uint16_t close_code_of(const direction& d) noexcept {
  if (d.code_bytes < 2) return 1005;  // a close frame without a code
  return static_cast<std::uint16_t>(d.code[0] << 8 | d.code[1]);
}

/// Notes a frame header from one side: for client frames (`from_client`) the meter's
/// verdict; for both, close frames, and the upstream's answer to a close of the gateway's,
/// which the client gets the gateway's close in place of. Returns what becomes of the frame.
ws::frame_action on_header(tunnel& t, direction& d, bool from_client, const ws::frame_header& h) {
  auto& counters = t.w.counters;
  ws::frame_action action = ws::frame_action::forward;
  if (from_client) {
    if (t.own_code != 0) {
      // The gateway has closed towards the upstream: nothing more goes there, and a close
      // frame from the client is its answer.
      action = ws::frame_action::drop;
    } else {
      const ws::frame_verdict v = t.meter.judge(h, t.w.shared.clock.now());
      if (v.limited) {
        counters.ws_limited[t.metric][v.action == ws::frame_action::drop ? 1 : 0].add();
      }
      if (v.action == ws::frame_action::close) {
        if (t.own_code == 0) t.own_reason = v.reason;
        t.close_with(v.code);
        return d.action = ws::frame_action::drop;
      }
      action = v.action;
      if (v.message_start && action == ws::frame_action::forward) {
        counters.ws_messages[t.metric][0].add();
        ++t.messages[0];
      }
    }
  } else if (d.close_sent) {
    action = ws::frame_action::drop;  // nothing may follow a close frame (RFC 6455 §5.5.1)
  } else if (h.op == ws::close && t.from_client.own_sent) {
    // The upstream's answer to the gateway's close: the client gets the gateway's close in
    // its place, after everything the upstream sent before it.
    own_close(t, d, false);
    action = ws::frame_action::drop;
  } else if (!h.control() && h.op != ws::continuation) {
    counters.ws_messages[t.metric][1].add();
    ++t.messages[1];
  }
  if (h.op == ws::close) {
    d.reading_close = true;
    d.code_bytes = 0;
    d.mask = h.mask;
    if (action == ws::frame_action::forward) {
      d.close_sent = true;
    } else {
      d.close_seen = true;
    }
  }
  d.action = action;
  return action;
}

/// Walks the frames in `n` bytes at `p` from one side, collecting in `d.pieces` what its
/// receiver gets.
void take_bytes(tunnel& t, direction& d, bool from_client, const std::uint8_t* p, std::size_t n) {
  const closer by = from_client ? closer::client : closer::upstream;
  auto header = [&](const ws::frame_header& h, std::span<const std::uint8_t> head) {
    // The gateway's close goes to the upstream first, while it is between frames; when the
    // meter closes on this very frame, the close frame goes instead of it. The client gets
    // the gateway's close once the upstream has answered it (on_header).
    if (from_client) own_close(t, d, true);
    const auto action = on_header(t, d, from_client, h);
    if (from_client) own_close(t, d, true);
    if (action == ws::frame_action::forward) d.emit(head.data(), head.size());
    if (h.length == 0 && h.op == ws::close) {
      d.reading_close = false;
      t.count_close(by, 1005);  // a close frame without a code
    }
  };
  auto payload = [&](std::span<const std::uint8_t> piece, bool end) {
    if (d.reading_close) {
      for (std::size_t i = 0; i < piece.size() && d.code_bytes < 2; ++i, ++d.code_bytes) {
        // Client frames are masked; the code is the first two bytes, mask offsets 0 and 1.
        d.code[d.code_bytes] = piece[i] ^ (from_client ? d.mask[d.code_bytes] : 0);
      }
      if (end) {
        d.reading_close = false;
        t.count_close(by, close_code_of(d));
      }
    }
    if (d.action == ws::frame_action::forward) d.emit(piece.data(), piece.size());
  };
  d.frames.feed(std::span(p, n), header, payload);
}

/// Sends what `d.pieces` holds to `out` (the client's stream or the upstream's): at once as far
/// as a plain socket takes it, the rest copied (the bytes may be in the worker's shared buffer)
/// and awaited.
template <class Out>
task<error_code> deliver(tunnel& t, direction& d, Out& out) {
  std::span<asio::const_buffer> rest(d.pieces.data(), d.pieces.size());
  if (!out.tls()) {
    if (error_code ec = write_now(out.socket(), rest); ec || rest.empty()) {
      d.pieces.clear();
      co_return ec;
    }
  }
  d.pending.clear();
  for (const auto& b : rest)
    d.pending.append(static_cast<const char*>(b.data()), b.size());
  d.pieces.clear();
  t.write_end = clock::now() + t.idle;
  t.rearm();
  asio::const_buffer all = asio::buffer(d.pending);
  const error_code ec = co_await write_all(out, std::span(&all, 1));
  t.write_end = clock::time_point::max();
  t.rearm();
  d.pending.clear();
  if (d.pending.capacity() > kept_pending) std::string().swap(d.pending);
  co_return ec;
}

/// One read from plain socket `s` once it is readable, into the worker's shared buffer: a
/// waiting tunnel holds no buffer. A signal on `wake` ends the wait (operation_aborted).
task<std::pair<error_code, std::span<const std::uint8_t>>> read_when_readable(
    tunnel& t, tcp_socket& s, asio::cancellation_signal& wake) {
  auto& buffer = t.w.relay_buffer();
  for (;;) {
    error_code ec;
    const std::size_t n = s.read_some(asio::buffer(buffer), ec);
    if (ec != asio::error::would_block && ec != asio::error::try_again) {
      co_return std::pair{ec, std::span(reinterpret_cast<const std::uint8_t*>(buffer.data()), n)};
    }
    std::tie(ec) =
        co_await s.async_wait(tcp::socket::wait_read, use_tuple_cancellable(wake.slot()));
    if (ec) co_return std::pair{ec, std::span<const std::uint8_t>()};
  }
}

/// One read from a TLS client, into the tunnel's own buffer (the TLS layer keeps buffers of
/// its own anyway).
task<std::pair<error_code, std::span<const std::uint8_t>>> read_tls_client(tunnel& t) {
  if (!t.tls_in) t.tls_in = std::make_unique<std::array<char, 16 * 1024>>();
  auto [ec, n] =
      co_await t.watch.stream.tls_read_some(asio::buffer(*t.tls_in), t.wake_client_read.slot());
  co_return std::pair{ec, std::span(reinterpret_cast<const std::uint8_t*>(t.tls_in->data()), n)};
}

/// One read from a TLS upstream (docs/design.md §17), into the tunnel's own buffer.
task<std::pair<error_code, std::span<const std::uint8_t>>> read_tls_upstream(tunnel& t) {
  if (!t.tls_up_in) t.tls_up_in = std::make_unique<std::array<char, 16 * 1024>>();
  auto [ec, n] =
      co_await t.up->stream.tls_read_some(asio::buffer(*t.tls_up_in), t.wake_upstream_read.slot());
  co_return std::pair{ec, std::span(reinterpret_cast<const std::uint8_t*>(t.tls_up_in->data()), n)};
}

/// Sends the gateway's close frame `d` owes its receiver, if the gateway is closing and the
/// receiver is between frames.
template <class Out>
task<error_code> send_own_close(tunnel& t, direction& d, Out& out, bool to_upstream) {
  if (t.own_code == 0 || d.close_sent || !d.between_frames()) co_return error_code{};
  own_close(t, d, to_upstream);
  co_return co_await deliver(t, d, out);
}

/// Ends the sending side of `out` (FIN): the receiver learns its peer is done.
void shutdown_send(tcp_socket& s) {
  error_code ignored;
  s.shutdown(tcp::socket::shutdown_send, ignored);
}

/// Client -> upstream, until the client's stream ends.
task<void> pump_from_client(tunnel& t) {
  direction& d = t.from_client;
  upstream_stream& out = t.up->stream;
  for (;;) {
    if (co_await send_own_close(t, d, out, true)) break;
    // Plain reads straight from the socket: no coroutine frame between (the hot path).
    std::pair<error_code, std::span<const std::uint8_t>> read;
    if (t.watch.stream.tls()) {
      read = co_await read_tls_client(t);
    } else {
      read = co_await read_when_readable(t, t.watch.client, t.wake_client_read);
    }
    const auto [ec, bytes] = read;
    if (ec == asio::error::operation_aborted && t.watch.client.is_open()) continue;  // woken
    if (ec || bytes.empty()) break;
    t.active();
    take_bytes(t, d, true, bytes.data(), bytes.size());
    if (!d.pieces.empty() && co_await deliver(t, d, out)) break;
    // The gateway's close answered by the client, and its own sent: the server side ends the
    // TCP connection (RFC 6455 §7.1.1).
    if (d.close_seen && t.from_upstream.close_sent && t.from_upstream.pending.empty()) {
      shutdown_send(t.watch.client);
    }
  }
  t.count_close(closer::client, ws::abnormal);
  // Over TLS too the end is a FIN without close_notify: the close handshake of the WebSocket
  // has said all there is to say.
  shutdown_send(t.up->socket);
  t.ending();
}

/// Upstream -> client, until the upstream's stream ends.
task<void> pump_from_upstream(tunnel& t) {
  direction& d = t.from_upstream;
  client_stream& out = t.watch.stream;
  for (;;) {
    if (t.answer_late && co_await send_own_close(t, d, out, false)) break;
    std::pair<error_code, std::span<const std::uint8_t>> read;
    if (t.up->stream.tls()) {
      read = co_await read_tls_upstream(t);
    } else {
      read = co_await read_when_readable(t, t.up->socket, t.wake_upstream_read);
    }
    const auto [ec, bytes] = read;
    if (ec == asio::error::operation_aborted && t.up->socket.is_open()) continue;  // woken
    if (ec || bytes.empty()) {
      // The upstream went without answering the gateway's close: the client still gets it.
      if (t.from_client.own_sent && !ec) co_await send_own_close(t, d, out, false);
      break;
    }
    t.active();
    take_bytes(t, d, false, bytes.data(), bytes.size());
    if (!d.pieces.empty() && co_await deliver(t, d, out)) break;
  }
  t.count_close(closer::upstream, ws::abnormal);
  shutdown_send(t.watch.client);
  t.ending();
}

}  // namespace

task<void> run_tunnel(worker& w, deadline_watch& watch, tunnel_setup setup) {
  tunnel t(w, watch, setup);
  w.counters.ws_opened[t.metric].add();
  w.tunnels.push(t);
  watch.on_due = &tunnel::due;
  watch.due_context = &t;
  t.active();
  // However this ends: out of the list, no more deadline calls, counted closed.
  struct leave {
    tunnel& t;
    ~leave() {
      t.watch.on_due = nullptr;
      t.watch.due_context = nullptr;
      t.w.tunnels.erase(t);
      t.w.counters.ws_closed[t.metric].add();
      if (!t.log || t.w.shared.access_log == nullptr) return;
      const auto& l = *t.log;
      std::string line;
      append_tunnel_line(
          line, l.json, std::chrono::system_clock::now(),
          {l.client, l.method, l.target, l.category, t.close_code,
           metrics::ws_closer_names[static_cast<std::size_t>(t.closed_by)], t.messages[0],
           t.messages[1],
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t.started).count()});
      t.w.shared.access_log->write(line);
    }
  } const leaving{t};
  // Bytes that came with the handshake go first, each to its receiver.
  if (!setup.from_client.empty()) {
    take_bytes(t, t.from_client, true,
               reinterpret_cast<const std::uint8_t*>(setup.from_client.data()),
               setup.from_client.size());
    if (!t.from_client.pieces.empty() && co_await deliver(t, t.from_client, t.up->stream)) t.drop();
  }
  if (!setup.from_upstream.empty()) {
    take_bytes(t, t.from_upstream, false,
               reinterpret_cast<const std::uint8_t*>(setup.from_upstream.data()),
               setup.from_upstream.size());
    if (!t.from_upstream.pieces.empty() && co_await deliver(t, t.from_upstream, watch.stream)) {
      t.drop();
    }
  }
  // Kohlhoff's transfer(a, b) || transfer(b, a), but joined by hand: `||` would cancel one
  // direction when the other ends, and a half-closed tunnel still relays the other way. The
  // upstream's side runs beside this one; the frame of this coroutine owns the tunnel and
  // outlives it (it waits for it below).
  asio::co_spawn(w.io, pump_from_upstream(t), [&t](std::exception_ptr) {
    t.upstream_pump_done = true;
    t.joined.cancel();
  });
  co_await pump_from_client(t);
  while (!t.upstream_pump_done) {
    t.joined.expires_at(timer::time_point::max());
    co_await t.joined.async_wait(use_tuple);
  }
}

}  // namespace tollgate::net
