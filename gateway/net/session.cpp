#include "gateway/net/session.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>

#include "gateway/admission/admission.hpp"
#include "gateway/admission/problem.hpp"
#include "gateway/net/accounting.hpp"
#include "gateway/net/admit.hpp"
#include "gateway/net/deadline.hpp"
#include "gateway/net/forward.hpp"
#include "gateway/net/h2.hpp"
#include "gateway/net/heads.hpp"
#include "gateway/net/local_answer.hpp"
#include "gateway/net/reading.hpp"
#include "gateway/net/websocket.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

namespace {

/// Whether a read error is a normal end of the connection rather than a bad request.
bool is_ending(const error_code& ec) noexcept {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset ||
         // The deadline watchdog ends a timed-out phase by closing the socket.
         ec == asio::error::operation_aborted;
}

/// The answer to a request head that could not be read (431, 413, 400) into `body`.
http::status bad_head_answer(const error_code& ec, std::string& body) {
  if (ec == http::error::header_limit) {
    body = admission::problem_body(431, "Request Header Fields Too Large",
                                   "request head larger than the limit");
    return http::status::request_header_fields_too_large;
  }
  if (ec == http::error::body_limit) {
    body = admission::problem_body(413, "Content Too Large", "request body too large");
    return http::status::payload_too_large;
  }
  body = admission::problem_body(400, "Bad Request", "malformed request: " + ec.message());
  return http::status::bad_request;
}

/// Answers a head whose framing cannot be trusted (`rec` from reading it, or else its `fault`
/// under RFC 9112's Host and Transfer-Encoding rules) and ends the connection; nothing else is
/// done with it. The request in hand was not admitted: neither counted by category nor logged.
task<void> refuse_head(deadline_watch& watch, connection_scratch& sc, const error_code& rec,
                       std::string_view fault) {
  const request_in_hand& r = sc.request;
  http::status status = http::status::bad_request;
  unsigned version = 11;
  if (rec) {
    if (is_ending(rec)) co_return;
    status = bad_head_answer(rec, sc.problem);
  } else {
    sc.problem = admission::problem_body(400, "Bad Request", fault);
    version = r.parser->get().version();
  }
  const local_answer answer{status,  sc.problem, {},      {},
                            nullptr, false,      version, r.snap->config.limits.body_timeout};
  co_await write_local(watch, sc, answer);
  error_code ignored;
  watch.client.shutdown(tcp::socket::shutdown_send, ignored);
}

/// Answers an http-01 challenge the ACME client has under way with its key authorization
/// (RFC 8555 §8.3), and ends the connection; false, having sent nothing, for another token.
task<bool> answer_acme(worker& w, deadline_watch& watch, connection_scratch& sc) {
  const auto& head = sc.request.parser->get();
  const std::string_view target = head.target();
  const auto authorization = w.shared.acme->find(target.substr(acme_challenge_prefix.size()));
  if (!authorization || head.method() != http::verb::get) co_return false;
  const local_answer answer{http::status::ok,
                            *authorization,
                            {},
                            "application/octet-stream",
                            nullptr,
                            false,
                            head.version(),
                            sc.request.snap->config.limits.body_timeout};
  co_await write_local(watch, sc, answer);
  spdlog::info("acme: http-01 challenge answered");
  error_code ignored;
  watch.client.shutdown(tcp::socket::shutdown_send, ignored);
  co_return true;
}

/// Admits the request in hand (its head well framed): admit_view over its head.
admission::step admit_request(worker& w, connection_scratch& sc, const client_stream& client,
                              limit::held_places& held) {
  request_in_hand& r = sc.request;
  const auto& req = r.parser->get();
  r.headers.of(req.base());
  admission::request_view view{sv(req.method_string()),
                               sv(req.target()),
                               &r.headers,
                               r.peer,
                               client.tls(),
                               is_websocket_upgrade(*r.parser),
                               r.parser->chunked() || r.parser->content_length().value_or(0) > 0,
                               r.parser->is_done(),
                               r.keep_alive,
                               w.shared.clock.now()};
  view.certificate = client.certificate();  // read once for the connection (docs/design.md §17)
  return admit_view(w, *r.snap, view, r.adm, held);
}

/// What the wait on a held request's client socket shares with the hold.
struct hold_state {
  timer* alarm = nullptr;  ///< the hold's timer; null once the hold is over
  bool gone = false;       ///< the client closed or reset its connection
};

/// Holds the request in hand, admitted with a wait (docs/design.md §16 "Delay instead of
/// reject"), for `d` on a timer of its worker: no thread waits and no lock is held. Its limits
/// were committed when it was decided, as if at the instant it passes. True when the time ran
/// out with the client still there; false when the client went away first (then nothing is
/// left to forward, and ending the connection gives back what the request holds).
task<bool> hold_request(worker& w, deadline_watch& watch, std::chrono::nanoseconds d,
                        std::uint16_t category) {
  w.counters.delayed[category].add();
  struct count_done {
    metrics::counter& done;
    ~count_done() { done.add(); }
  } const counting{w.counters.delayed_done[category]};
  // No phase of the client's, but a connection is never left without a deadline: this one
  // covers the hold, and the next phase sets its own.
  watch.client_for(d + std::chrono::seconds(1));
  timer alarm(watch.client.get_executor());
  alarm.expires_after(d);
  auto state = std::make_shared<hold_state>();
  state->alarm = &alarm;
  // A client gone while held ends the hold at once (as client_abort_watch in forward.cpp ends
  // an upstream exchange). Bytes of a pipelined request, or a TLS alert, leave it alone: the
  // client is still there, or cannot be told from one that is.
  watch.client.async_wait(
      tcp_socket::wait_read, [state, &client = watch.client](const error_code& ec) {
        if (ec || state->alarm == nullptr) return;  // cancelled, or the hold is over
        char byte;
        const ssize_t n = ::recv(client.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          state->gone = true;
          state->alarm->cancel();
        }
      });
  co_await alarm.async_wait(use_tuple);
  state->alarm = nullptr;
  error_code ignored;
  watch.client.cancel(ignored);
  co_return !state->gone;
}

/// Takes an admitted upgrade's place under its category's max_connections_per_address
/// (docs/design.md §6), held in the scratch until the tunnel takes it. When the client has
/// that many open, the upgrade is refused with 429 instead.
admission::step take_tunnel_place(worker& w, connection_scratch& sc) {
  request_in_hand& r = sc.request;
  const auto& category = r.adm.category();
  const auto key = tunnel_key(r.adm.who, r.snap->index_of(category));
  if (w.tunnels_per_address->try_take(key, category.websocket.max_connections_per_address)) {
    sc.tunnel_place = address_slot(*w.tunnels_per_address, key);
    return admission::step::forward;
  }
  count_refused_upgrade(w, r, metrics::upgrade_refusal::too_many_connections);
  return admission::tunnels_full(r.adm);
}

/// The local answer admission made for the request in hand.
local_answer answer_of(const request_in_hand& r) {
  const admission::answer& a = r.adm.reply;
  return {static_cast<http::status>(a.status),
          a.body,
          a.fields,
          a.content_type,
          a.rate_fields ? &r.adm.rate : nullptr,
          a.keep_open,
          r.version,
          r.snap->config.limits.body_timeout,
          r.adm.route != nullptr && r.parser->get().method() == http::verb::head};
}

/// Starts serving the request in hand, whose head was read whole, from `peer`.
void start_request(request_in_hand& r, const core::address& peer, std::string_view peer_text,
                   std::uint64_t written) {
  const auto& req = r.parser->get();
  r.keep_alive = req.keep_alive();
  r.version = req.version();
  r.started = std::chrono::steady_clock::now();
  r.upstream_seconds = -1;
  r.written_before = written;
  r.adm.decision.hold = 0;  // a request that asks no store (exempt, unkeyed) is never held
  r.peer = peer;
  r.peer_text = peer_text;
}

/// What a tunnel takes from the connection whose upgrade succeeded: the upstream connection,
/// the bytes each side sent past its head, the category's options; the scratch goes back to
/// the worker (a WebSocket holds no scratch).
tunnel_setup hand_over(worker& w, std::unique_ptr<connection_scratch>& sc) {
  request_in_hand& r = sc->request;
  tunnel_setup setup;
  setup.upstream = std::move(sc->upgraded);
  setup.from_client.assign(view_of(sc->buffer));
  setup.from_upstream.assign(view_of(setup.upstream->buffer));
  setup.upstream->buffer = beast::flat_buffer();  // its capacity freed
  const auto& category = r.adm.category();
  setup.limits = category.messages;
  setup.idle_timeout = category.websocket.idle_timeout;
  setup.max_lifetime = category.websocket.max_lifetime;
  setup.metric = r.snap->metric_of(category);
  setup.extensions = sc->ws_extensions;
  setup.place = std::move(sc->tunnel_place);
  setup.inflight = std::move(r.adm.inflight);  // an open WebSocket is in flight until it closes
  if (r.snap->config.logging.access_log_on()) {
    const auto& req = r.parser->get();
    setup.log = tunnel_setup::log_fields{
        r.adm.client.to_string(), std::string(sv(req.method_string())),
        std::string(sv(req.target())), category.name,
        r.snap->config.logging.format == config::logging_config::log_format::json};
  }
  sc->buffer.clear();
  w.scratch.give(std::move(sc));
  return setup;
}

/// Whether a plain connection on a listener with http2 starts with HTTP/2's preface (h2c with
/// prior knowledge, docs/design.md §17): its first bytes are read into the scratch, within the
/// header timeout, until they tell. False, the bytes left for the HTTP/1.1 path, when they are
/// not the preface; false too when the connection ended, `sc` then perhaps null.
task<bool> starts_h2(worker& w, deadline_watch& watch, std::unique_ptr<connection_scratch>& sc) {
  using clock = deadline_watch::clock;
  const auto until = clock::now() + w.current->config.limits.header_timeout;
  for (;;) {
    const preface_match m = match_preface(view_of(sc->buffer));
    if (m == preface_match::yes) co_return true;
    if (m == preface_match::no && sc->buffer.size() > 0) co_return false;
    const auto left = until - clock::now();
    if (left <= clock::duration::zero()) co_return false;
    if (sc->buffer.size() == 0) {
      // Nothing yet: waited for as an HTTP/1.1 connection waits for its first request, the
      // scratch given back while it is silent (a silent connection held its 45 KiB block
      // until header_timeout).
      if (!co_await await_request(w, watch, sc, left, false)) co_return false;
      continue;
    }
    // A part of the preface: the rest within the same header_timeout.
    watch.client_for(left);
    auto [ec, n] = co_await watch.client.async_read_some(sc->buffer.prepare(4096), use_tuple);
    if (ec) co_return false;
    sc->buffer.commit(n);
  }
}

/// The request loop of one connection, phase by phase; `watch` bounds every one.
task<void> serve(worker& w, deadline_watch& watch, core::address peer, const listener_info& l,
                 client_places& places) {
  // The connection's scratch, given back to the worker when the session ends (and while it
  // waits between requests).
  struct scratch_holder {
    worker& w;
    std::unique_ptr<connection_scratch> sc;
    ~scratch_holder() {
      if (sc == nullptr) return;
      sc->buffer.clear();
      w.scratch.give(std::move(sc));
    }
  } held{w, w.scratch.take()};
  std::unique_ptr<connection_scratch>& sc = held.sc;
  std::shared_ptr<asio::ssl::context> tls_context;
  if (!co_await open_connection(w, watch, *sc, peer, l, places, tls_context)) co_return;
  if (l.http2) {
    // (No co_await inside a conditional expression: GCC 12 mishandles its temporaries.)
    bool h2 = watch.stream.alpn_h2();
    if (!watch.stream.tls()) {
      h2 = co_await starts_h2(w, watch, held.sc);
      if (sc == nullptr || !watch.client.is_open()) co_return;  // it ended before a byte came
    }
    if (h2) {
      co_await serve_h2(w, watch, held.sc, peer, l);
      co_return;
    }
  }
  const std::string peer_text = peer.to_string();  // made once for the connection
  // The request in hand lives in the scratch, not in this frame, which every idle connection
  // keeps (and a coroutine per request would cost a frame allocation per request).
  for (bool first = true;; first = false) {
    error_code rec;
    if (!co_await read_request(w, watch, sc, first, rec)) co_return;
    const worker_count busy(w.in_flight);  // graceful stop waits for these
    request_in_hand& r = sc->request;
    // A fault names a literal: it outlives the await.
    const std::string_view fault = rec ? std::string_view() : head_fault(*r.parser, r.has_host);
    if (rec || !fault.empty()) {
      co_await refuse_head(watch, *sc, rec, fault);
      co_return;
    }
    if (!watch.stream.tls() && r.parser->get().target().starts_with(acme_challenge_prefix)) {
      // An ACME server's http-01 check (docs/design.md §17): before admission and limits, so
      // that no limit or ban on its addresses can fail the certificate's order.
      if (co_await answer_acme(w, watch, *sc)) co_return;
    }
    start_request(r, peer, peer_text, watch.stream.written);
    limit::held_places places;  // under max_delayed, while the request is decided or held
    admission::step step = admit_request(w, *sc, watch.stream, places);
    if (step == admission::step::ask_store) step = co_await await_store(w, *r.snap, r.adm, places);
    if (step == admission::step::forward && r.adm.upgrade) step = take_tunnel_place(w, *sc);
    apply_effects(w, r);
    bool stay = false;
    if (step == admission::step::forward && r.adm.decision.hold > 0) {
      const std::chrono::nanoseconds hold(r.adm.decision.hold);
      if (!co_await hold_request(w, watch, hold, r.snap->metric_of(r.adm.category()))) {
        // The client went away while held: nothing was sent, its places go back now.
        r.adm.inflight.release();
        sc->tunnel_place = {};
        sc->status = 0;
        finish_request(w, *sc, watch.stream.written);
        co_return;
      }
    }
    places.release();
    if (step == admission::step::forward) {
      stay = co_await forward(w, watch, *sc);
      if (sc->upgraded) {
        finish_request(w, *sc, watch.stream.written);
        co_await run_tunnel(w, watch, hand_over(w, held.sc));
        co_return;
      }
      sc->tunnel_place = {};     // not upgraded after all
      r.adm.inflight.release();  // the request has ended: its places in flight go back
    } else {
      stay = co_await write_local(watch, *sc, answer_of(r));
    }
    // Phase 5. Heads refused before a route was chosen are neither counted by category nor
    // logged (their bytes are not trusted).
    if (r.adm.route != nullptr) finish_request(w, *sc, watch.stream.written);
    if (!stay) {
      error_code ignored;
      watch.client.shutdown(tcp::socket::shutdown_send, ignored);
      co_return;
    }
  }
}

}  // namespace

task<void> run_session(worker& w, tcp_socket socket, const listener_info& l, core::address peer,
                       client_places places) {
  const worker_count open(w.connections);
  w.counters.connections_opened[l.metric].add();
  struct count_closed {
    metrics::counter& closed;
    ~count_closed() { closed.add(); }
  } const closing{w.counters.connections_closed[l.metric]};
  error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  // Writes are tried at once and awaited only for what the kernel did not take (write_now).
  socket.non_blocking(true, ec);
  if (ec) co_return;
  client_stream stream(socket);
  auto watch = std::make_shared<deadline_watch>(socket, stream);
  // The connection's bytes, read from the kernel once as it ends (or as it was closed).
  struct count_bytes {
    worker& w;
    std::uint16_t listener;
    deadline_watch& watch;
    ~count_bytes() {
      watch.sample_wire_bytes();
      w.counters.bytes_received[listener].add(watch.bytes_received);
      w.counters.bytes_sent[listener].add(watch.bytes_sent);
    }
  } const bytes{w, l.metric, *watch};
  // The watchdog closes the socket under the session's pending operation when a client phase
  // runs out; the session ends the watchdog however it ends itself.
  start_watchdog(watch);
  struct end_watch {
    deadline_watch& w;
    ~end_watch() { w.end(); }
  } const ender{*watch};
  co_await serve(w, *watch, peer, l, places);
}

}  // namespace tollgate::net
