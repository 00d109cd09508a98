// One HTTP/2 stream served (docs/design.md §17): the request takes the path every request
// takes (admit_view, the store, effects, a hold), then the gateway answers it or forwards it
// to the HTTP/1.1 upstream pool, bodies streamed both ways under HTTP/2 flow control.

#include <charconv>

#include "gateway/admission/problem.hpp"
#include "gateway/core/text.hpp"
#include "gateway/net/accounting.hpp"
#include "gateway/net/admit.hpp"
#include "gateway/net/forward.hpp"
#include "gateway/net/h2_connection.hpp"
#include "gateway/net/heads.hpp"
#include "gateway/net/local_answer.hpp"
#include "gateway/net/stream_io.hpp"

namespace tollgate::net {

namespace {

using admission::problem_body;

/// Response bytes a stream holds for its client before it reads more from its upstream.
constexpr std::size_t max_out = 64 * 1024;

/// A stream's client ran out of time (it did not send its body, or did not open its window):
/// the stream is reset, and its upstream's work stops.
void time_out(h2_stream& s) {
  s.conn.reset(s, NGHTTP2_CANCEL);
  s.closed = true;
  if (s.upstream != nullptr) {
    error_code ignored;
    s.upstream->close(ignored);
  }
}

/// The stream's watch over its upstream phases, taken when it is forwarded (a client phase
/// never runs out there: see sleep). Between phases it rests (deadline_watch::rest).
deadline_watch& watch_of(h2_stream& s) {
  if (!s.watch) s.watch = s.conn.take_watch();
  return *s.watch;
}

/// Waits until the stream is woken (notify), or for `timeout`, the client's time for what it
/// is waited on for (its body, its window): then the stream is reset.
task<void> sleep(h2_stream& s, std::chrono::nanoseconds timeout) {
  s.wake.expires_after(timeout);
  const auto [ec] = co_await s.wake.async_wait(use_tuple);
  if (!ec && !s.closed) time_out(s);
}

/// Waits until nghttp2 has taken the whole response, or the stream is closed; the client has
/// `timeout` to open its window each time.
task<void> drain(h2_stream& s, std::chrono::nanoseconds timeout) {
  while (!s.out_done && !s.closed)
    co_await sleep(s, timeout);
}

/// Answers `s` with `a`: its head as an HTTP/1.1 client would get it, framed by HTTP/2.
task<void> answer(h2_connection& c, h2_stream& s, const local_answer& a) {
  connection_scratch& sc = *s.sc;
  render_local_head(sc.head, a);
  const bool body = !a.head_only && !a.body.empty();
  if (body) {
    s.body_out.assign(a.body);
    s.out_end = true;
  }
  c.respond(s, sc.head, body);
  co_await drain(s, a.timeout);
}

/// A problem answer of the gateway's own, for a request refused before admission.
task<void> refuse(h2_connection& c, h2_stream& s, http::status status, const char* title,
                  std::string detail) {
  const std::string body = problem_body(static_cast<int>(status), title, detail);
  const local_answer a{status,  body, {}, {},
                       nullptr, true, 11, s.conn.w.current->config.limits.body_timeout};
  co_await answer(c, s, a);
}

/// The fields of the response `rp` named by its Trailer field, as "name: value" lines.
void collect_trailers(const response_parser& rp, std::string& out) {
  const auto& res = rp.get();
  const auto declared = res.base().find(http::field::trailer);
  if (declared == res.base().end()) return;
  for (const auto& token : http::token_list(declared->value())) {
    const std::string_view name = sv(token);
    const auto it = res.base().find(name);
    if (it == res.base().end()) continue;
    out.append(name).append(": ").append(sv(it->value())).append("\r\n");
  }
}

/// The upstream exchange of an admitted stream: its request sent (head, then its body as DATA
/// frames arrive, each passed on before the client may send more), the response head read
/// and submitted, its body relayed as the client's window allows.
task<void> forward_stream(h2_connection& c, h2_stream& s) {
  worker& w = c.w;
  connection_scratch& sc = *s.sc;
  request_in_hand& r = sc.request;
  const auto& limits = r.snap->config.limits;
  const auto& upstream = r.snap->config.upstreams[r.adm.route->upstream];
  deadline_watch& watch = watch_of(s);
  // The head: fields as pairs, X-Forwarded-For of the client's lines and the peer.
  std::vector<std::pair<std::string_view, std::string_view>> fields;
  fields.reserve(s.fields.size());
  sc.forwarded_for.clear();
  for (const auto& f : s.fields) {
    fields.emplace_back(s.name_of(f), s.value_of(f));
    if (s.name_of(f) == "x-forwarded-for") {
      sc.forwarded_for.append(s.value_of(f)).append(", ");
    }
  }
  sc.forwarded_for += c.peer_text;
  std::string_view real_ip = c.peer_text;
  if (!(r.adm.client == c.peer)) {
    sc.client_text = r.adm.client.to_string();
    real_ip = sc.client_text;
  }
  const bool has_body = !s.request_ended || !s.body_in.empty();
  const bool chunked = has_body && !s.content_length;
  const bool usually_body = s.method == "POST" || s.method == "PUT" || s.method == "PATCH";
  render_upstream_head(
      sc.head,
      {s.method, s.path, s.authority.empty() ? s.value("host") : s.authority, fields,
       has_body ? s.content_length : std::nullopt, chunked, !has_body && usually_body},
      {sc.forwarded_for,
       r.adm.tls ? "https" : "http",
       real_ip,
       {},
       r.adm.rate.shadow,
       false,
       c.watch.stream.certificate_fields(),
       r.snap->certificate_fields});
  const bool head_request = s.method == "HEAD";
  const bool replayable = !has_body && idempotent(http::string_to_verb(s.method));
  const auto exchange_start = std::chrono::steady_clock::now();
  std::unique_ptr<upstream_connection> conn;
  std::optional<response_parser> rp;
  struct forget {
    h2_stream& s;
    deadline_watch& watch;
    ~forget() {
      s.upstream = nullptr;
      watch.drop_upstream();
    }
  } const forgetting{s, watch};
  auto fail = [&](metrics::upstream_error kind, std::string what) -> local_answer {
    w.counters
        .upstream_errors[r.snap->upstream_metric[r.adm.route->upstream]]
                        [static_cast<std::size_t>(kind)]
        .add();
    const bool timeout = kind == metrics::upstream_error::timeout;
    sc.response_fields.clear();
    admission::append_own_fields(r.adm, sc.response_fields);
    sc.problem = upstream_problem(timeout, upstream.name, what);
    return {timeout ? http::status::gateway_timeout : http::status::bad_gateway,
            sc.problem,
            sc.response_fields,
            {},
            &r.adm.rate,
            true,
            11,
            limits.body_timeout,
            head_request};
  };
  for (int attempt = 0;; ++attempt) {
    connect_failure why;
    conn = co_await w.pool.acquire(*r.snap, r.adm.route->upstream, watch, why);
    watch.rest();
    if (s.closed) co_return;
    if (!conn) {
      const bool timeout = why == connect_failure::timeout;
      const local_answer a =
          fail(timeout ? metrics::upstream_error::timeout : metrics::upstream_error::connect,
               timeout ? "did not accept a connection in time" : "refused the connection");
      co_await answer(c, s, a);
      co_return;
    }
    s.upstream = &conn->socket;
    // The head, then the body as it comes; each piece given back to the client's window
    // once the upstream took it.
    error_code ec;
    bool head_sent = false;
    for (;;) {
      const std::size_t n = s.body_in.size();
      const bool last = s.request_ended;
      if (head_sent && n == 0 && !last) {
        co_await sleep(s, limits.body_timeout);
        if (s.closed) co_return;
        continue;
      }
      if (head_sent && n == 0 && !chunked) break;
      if (s.body_bytes > limits.max_request_body) {
        c.reset(s, NGHTTP2_CANCEL);
        co_return;
      }
      std::array<asio::const_buffer, 5> pieces;
      std::size_t k = 0;
      char size_line[20];
      if (!head_sent) pieces[k++] = asio::buffer(sc.head);
      if (n > 0) {
        if (chunked) {
          const auto end = std::to_chars(size_line, size_line + sizeof size_line - 2, n, 16).ptr;
          end[0] = '\r';
          end[1] = '\n';
          pieces[k++] = asio::buffer(size_line, static_cast<std::size_t>(end + 2 - size_line));
        }
        pieces[k++] = asio::buffer(s.body_in);
        if (chunked) pieces[k++] = asio::buffer("\r\n", 2);
      }
      if (chunked && last) {
        // The last chunk, the client's trailers, the end.
        s.request_trailers.insert(0, "0\r\n");
        s.request_trailers += "\r\n";
        pieces[k++] = asio::buffer(s.request_trailers);
      }
      watch.upstream_for(&conn->socket, upstream.response_timeout);
      ec = co_await write_all(conn->stream, std::span(pieces.data(), k));
      watch.rest();
      head_sent = true;
      s.body_in.clear();
      c.consumed(s, n);
      if (ec || last || s.closed) break;
    }
    if (s.closed) co_return;
    // An upstream that failed a write may have answered first (an early 413): read it.
    if (ec && !watch.upstream_timed_out) ec = {};
    while (!ec) {
      std::apply([&](auto&&... a) { rp.emplace(a...); }, on_arena(sc.arena));
      rp->body_limit(boost::none);
      rp->header_limit(max_response_head);
      if (head_request) rp->skip(true);
      watch.upstream_for(&conn->socket, upstream.response_timeout);
      ec = co_await read_head(conn->stream, conn->buffer, *rp);
      watch.rest();
      const unsigned status = ec ? 0 : rp->get().result_int();
      if (status == 101) ec = asio::error::operation_not_supported;
      if (ec || status >= 200) break;
    }
    if (s.closed) co_return;
    if (!ec) break;
    const bool timeout = watch.upstream_timed_out;
    if (conn->reused && replayable && attempt == 0 && !timeout && closed_before_answer(ec)) {
      continue;  // a stale pooled connection: once more on a fresh one
    }
    w.pool.failed(*r.snap, conn->upstream, conn->endpoint);
    const local_answer a =
        fail(timeout ? metrics::upstream_error::timeout : metrics::upstream_error::reset,
             timeout ? std::string("did not answer in time") : "failed: " + ec.message());
    co_await answer(c, s, a);
    co_return;
  }
  r.upstream_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_start).count();
  w.counters.upstream_duration[r.snap->upstream_metric[r.adm.route->upstream]].observe(
      r.upstream_seconds, metrics::upstream_buckets);
  record_response_violations(w, r, *rp);
  record_response_tier(w, r, *rp);
  sc.response_fields.clear();
  admission::append_own_fields(r.adm, sc.response_fields);
  render_client_head(
      sc.head, *rp,
      {11, true, head_request, &r.adm.rate, sc.response_fields, r.adm.cors != nullptr});
  const unsigned status = rp->get().result_int();
  const bool body = !head_request && status != 204 && status != 304 && !rp->is_done();
  c.respond(s, sc.head, body);
  // The body, as the client's window lets it go: no more than max_out held at once. The head
  // goes with its first bytes.
  while (body && !rp->is_done()) {
    auto& b = rp->get().body();
    b.data = sc.body.data();
    b.size = sc.body.size();
    error_code ec;
    if (!parse_buffered(*rp, conn->buffer, ec) && !ec) {
      if (conn->buffer.size() >= max_response_head) ec = http::error::header_limit;
      if (!ec) {
        if (conn->buffer.capacity() < sc.body.size()) conn->buffer.reserve(sc.body.size());
        c.resume(s);  // what the client can have goes before the wait (the head, at first)
        watch.upstream_for(&conn->socket, upstream.response_timeout);
        ec = co_await read_more(conn->stream, conn->buffer, *rp);
        watch.rest();
        if (!ec) parse_buffered(*rp, conn->buffer, ec);
      }
    }
    if (ec || s.closed) {
      // Mid-body: the head is gone; the stream is reset instead.
      c.reset(s, NGHTTP2_INTERNAL_ERROR);
      co_return;
    }
    const std::size_t n = sc.body.size() - b.size;
    if (n > 0) s.body_out.append(sc.body.data(), n);
    if (rp->is_done()) break;  // the last bytes go with the end of the stream (below)
    if (n > 0) c.resume(s);
    while (s.body_out.size() - s.out_at >= max_out && !s.closed)
      co_await sleep(s, limits.body_timeout);
    if (s.closed) co_return;
  }
  if (body) {
    collect_trailers(*rp, s.response_trailers);
    s.out_end = true;
    c.resume(s);
  }
  // The connection goes back to the pool once its response was read whole.
  if (rp->keep_alive() && conn->buffer.size() == 0) {
    s.upstream = nullptr;
    watch.drop_upstream();
    w.pool.release(*r.snap, std::move(conn));
  }
  co_await drain(s, limits.body_timeout);
}

/// Holds an admitted stream for `d` (docs/design.md §16 "Delay instead of reject"). False
/// when the client reset it meanwhile.
task<bool> hold(worker& w, h2_stream& s, std::chrono::nanoseconds d, std::uint16_t category) {
  w.counters.delayed[category].add();
  struct count_done {
    metrics::counter& done;
    ~count_done() { done.add(); }
  } const counting{w.counters.delayed_done[category]};
  // Woken early by what the stream receives meanwhile: held again until the time is up.
  const auto until = std::chrono::steady_clock::now() + d;
  while (!s.closed && std::chrono::steady_clock::now() < until) {
    s.wake.expires_at(until);
    co_await s.wake.async_wait(use_tuple);
  }
  co_return !s.closed;
}

}  // namespace

task<void> run_stream(std::shared_ptr<h2_connection> c, h2_stream& s) {
  worker& w = c->w;
  // However the stream ends, it goes (after the guard below gives its scratch back).
  struct finish {
    h2_connection& c;
    h2_stream& s;
    ~finish() { c.finished(s); }
  } const finishing{*c, s};
  if (s.closed) co_return;  // reset before it was served: nothing was done for it
  const worker_count busy(w.in_flight);
  s.sc = w.scratch.take();
  connection_scratch& sc = *s.sc;
  request_in_hand& r = sc.request;
  r.snap = w.current;
  r.adm.route = nullptr;
  r.started = std::chrono::steady_clock::now();
  r.upstream_seconds = -1;
  r.version = 20;
  r.peer = c->peer;
  r.peer_text = c->peer_text;
  const auto& limits = r.snap->config.limits;
  // Heads refused before admission, like HTTP/1.1's refuse_head: neither counted by category
  // nor logged.
  if (s.too_large) {
    s.discard_body = true;
    co_await refuse(*c, s, http::status::request_header_fields_too_large,
                    "Request Header Fields Too Large", "request head larger than the limit");
    co_return;
  }
  if (s.method == "CONNECT") {
    s.discard_body = true;
    co_await refuse(*c, s, http::status::bad_request, "Bad Request",
                    "CONNECT is not served over HTTP/2");
    co_return;
  }
  if (s.authority.empty() && s.value("host").empty()) {
    s.discard_body = true;
    co_await refuse(*c, s, http::status::bad_request, "Bad Request",
                    "malformed request: no :authority and no host");
    co_return;
  }
  if (s.content_length && *s.content_length > limits.max_request_body) {
    s.discard_body = true;
    co_await refuse(*c, s, http::status::payload_too_large, "Content Too Large",
                    "request body too large");
    co_return;
  }
  admission::request_view view{s.method,
                               s.path,
                               &s,
                               c->peer,
                               c->l.tls,
                               false,
                               !s.request_ended,
                               s.request_ended && s.body_in.empty(),
                               true,
                               w.shared.clock.now()};
  view.certificate = c->watch.stream.certificate();  // read once for the connection
  limit::held_places places;
  admission::step step = admit_view(w, *r.snap, view, r.adm, places);
  if (step == admission::step::ask_store) step = co_await await_store(w, *r.snap, r.adm, places);
  apply_effects(w, *r.snap, r.adm);
  if (r.adm.route != nullptr) c->last_client = r.adm.client;
  if (step == admission::step::forward && r.adm.decision.hold > 0 && !s.closed) {
    const std::chrono::nanoseconds d(r.adm.decision.hold);
    if (!co_await hold(w, s, d, r.snap->metric_of(r.adm.category()))) {
      r.adm.inflight.release();
      finish_exchange(w, *r.snap, r.adm, {s.method, s.path, 20, 0, r.started, -1, 0}, sc.head);
      co_return;
    }
  }
  places.release();
  if (step == admission::step::forward) {
    if (!s.closed) co_await forward_stream(*c, s);
  } else {
    s.discard_body = true;
    c->consumed(s, s.body_in.size());
    s.body_in.clear();
    const admission::answer& a = r.adm.reply;
    const local_answer la{
        static_cast<http::status>(a.status),         a.body, a.fields, a.content_type,
        a.rate_fields ? &r.adm.rate : nullptr,       true,   11,       limits.body_timeout,
        r.adm.route != nullptr && s.method == "HEAD"};
    if (!s.closed) co_await answer(*c, s, la);
  }
  r.adm.inflight.release();  // the request has ended: its places in flight go back
  if (s.out_done && !s.reset_by_client) c->completed();
  if (r.adm.route != nullptr) {
    finish_exchange(w, *r.snap, r.adm,
                    {s.method, s.path, 20, s.submitted ? s.status : 0, r.started,
                     r.upstream_seconds, s.bytes_out + sc.head.size()},
                    sc.head);
  }
}

}  // namespace tollgate::net
