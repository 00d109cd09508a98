#include "gateway/net/forward.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstdio>
#include <optional>
#include <span>

#include <algorithm>

#include <spdlog/spdlog.h>

#include "gateway/admission/problem.hpp"
#include "gateway/core/text.hpp"
#include "gateway/limit/address.hpp"
#include "gateway/net/heads.hpp"

namespace tollgate::net {

using admission::problem_body;

namespace {

/// How one message's body is relayed, and its bounds.
struct relay_bounds {
  std::chrono::nanoseconds read_timeout;   ///< for each read
  std::chrono::nanoseconds write_timeout;  ///< for each write
  /// Most bytes the parser may need at once inside a body: a chunk-size line with its
  /// extensions, or the trailer section. Beast buffers these without a limit of its own.
  std::size_t max_pending;
  /// Bytes a second the body must average once `read_timeout` has passed since it started
  /// (0: none), so that a trickle beating each read's timeout cannot hold the exchange forever.
  std::uint64_t min_rate = 0;
};

/// The deadline a body read gets: its own timeout, or sooner when the body has fallen behind
/// its minimum rate (a total deadline that grows with the bytes received).
std::chrono::nanoseconds read_deadline(const relay_bounds& b,
                                       deadline_watch::clock::time_point started,
                                       std::uint64_t received) {
  if (b.min_rate == 0) return b.read_timeout;
  const auto earned = std::chrono::nanoseconds(static_cast<std::int64_t>(std::min<double>(
      static_cast<double>(received) * 1e9 / static_cast<double>(b.min_rate), 1e18)));
  const auto left = started + b.read_timeout + earned - deadline_watch::clock::now();
  return std::clamp<std::chrono::nanoseconds>(left, std::chrono::nanoseconds(0), b.read_timeout);
}

/// One direction of an exchange, for relay(): where the message comes from and goes to.
/// relay() sends the message `parser` reads from `in` to `out`: `head` goes with the first
/// piece of the body, each piece framed as `chunked` says, each write one system call. Pieces
/// are sent as they arrive (read_some), so streamed bodies keep moving. `read_failed` tells a
/// failure to read from `in` from one to write to `out`.
template <bool isRequest, class In, class Out>
struct relay_path {
  In& in;                      ///< the sending side
  beast::flat_buffer& buffer;  ///< bytes read from `in` and not yet parsed
  http::parser<isRequest, http::buffer_body, arena_allocator<char>>& parser;  ///< reads `in`
  Out& out;                            ///< the receiving side
  const std::string& head;             ///< rendered head, sent with the first piece of the body
  bool chunked;                        ///< frame the body chunked towards `out`
  std::array<char, 16 * 1024>& chunk;  ///< one piece of the body
  deadline_watch& watch;               ///< bounds every read and write
  tcp_socket& upstream;                ///< the upstream side, closed when its phase runs out
  relay_bounds bounds;                 ///< timeouts and limits
};

template <bool isRequest, class In, class Out>
task<error_code> relay(const relay_path<isRequest, In, Out>& path, bool& read_failed) {
  auto& [in, in_buffer, parser, out, head, chunked, chunk, watch, upstream, bounds] = path;
  read_failed = false;
  const auto started = deadline_watch::clock::now();
  std::uint64_t received = 0;
  // A request flows client -> upstream, a response upstream -> client. (The lambdas name
  // `path`'s members: clang before 16 cannot capture a structured binding.)
  auto reading = [&] {
    if (isRequest) {
      path.watch.client_for(read_deadline(path.bounds, started, received));
    } else {
      path.watch.upstream_for(&path.upstream, read_deadline(path.bounds, started, received));
    }
  };
  auto writing = [&] {
    if (isRequest) {
      path.watch.upstream_for(&path.upstream, path.bounds.write_timeout);
    } else {
      path.watch.client_for(path.bounds.write_timeout);
    }
  };
  auto& body = parser.get().body();
  bool head_sent = false;
  for (;;) {
    std::size_t size = 0;
    if (!parser.is_done()) {
      body.data = chunk.data();
      body.size = chunk.size();
      error_code ec;
      if (!parse_buffered(parser, in_buffer, ec) && !ec) {
        // The parser took nothing of what is buffered: it waits for the end of a chunk-size
        // line or of the trailers, which must not grow without bound.
        if (in_buffer.size() >= bounds.max_pending) {
          read_failed = true;
          co_return http::error::header_limit;
        }
        // A read takes the buffer's free room: a body moves in reads as large as a chunk, not in
        // the 4 KiB a head needed.
        if (in_buffer.capacity() < chunk.size()) in_buffer.reserve(chunk.size());
        reading();
        ec = co_await read_more(in, in_buffer, parser);
        if (!ec) parse_buffered(parser, in_buffer, ec);
      }
      read_failed = static_cast<bool>(ec);
      if (ec) co_return ec;
      size = chunk.size() - body.size;
      received += size;
    }
    const bool last = parser.is_done();
    std::array<asio::const_buffer, 5> pieces;
    std::size_t n = 0;
    char size_line[20];
    if (!head_sent) pieces[n++] = asio::buffer(head);
    if (chunked && size > 0) {
      const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", size);
      pieces[n++] = asio::buffer(size_line, static_cast<std::size_t>(len));
      pieces[n++] = asio::buffer(chunk.data(), size);
      pieces[n++] = asio::buffer("\r\n", 2);
    } else if (size > 0) {
      pieces[n++] = asio::buffer(chunk.data(), size);
    }
    if (chunked && last) pieces[n++] = asio::buffer("0\r\n\r\n", 5);
    if (n > 0) {
      writing();
      if (error_code ec = co_await write_all(out, std::span(pieces.data(), n))) co_return ec;
      head_sent = true;
    }
    if (last) co_return error_code{};
  }
}

}  // namespace

std::string upstream_problem(bool timeout, const std::string& name, const std::string& what) {
  return problem_body(timeout ? 504 : 502, timeout ? "Gateway Timeout" : "Bad Gateway",
                      "upstream " + name + " " + what);
}

namespace {

/// Renders the request head for the upstream: the client's X-Forwarded-For kept and the peer
/// appended, X-Forwarded-Proto, X-Real-IP (the address the request was charged to), and the
/// facts of the client certificate of `client` in the fields the listener names.
void upstream_head(const request_parser& parser, const request_in_hand& r, connection_scratch& sc,
                   const client_stream& client) {
  sc.forwarded_for.clear();
  const auto [first, last] = parser.get().base().equal_range("X-Forwarded-For");
  for (auto f = first; f != last; ++f) {
    if (!sc.forwarded_for.empty()) sc.forwarded_for += ", ";
    sc.forwarded_for += sv(f->value());
  }
  if (!sc.forwarded_for.empty()) sc.forwarded_for += ", ";
  sc.forwarded_for += r.peer_text;
  // Usually the peer itself: its text was made once for the connection.
  std::string_view real_ip = r.peer_text;
  if (!(r.adm.client == r.peer)) {
    sc.client_text = r.adm.client.to_string();
    real_ip = sc.client_text;
  }
  // An HTTP/1.0 request may come without Host; the upstream gets one all the same (its
  // first endpoint, as a client of that endpoint would send).
  std::string host;
  if (!r.has_host) {
    const auto& endpoint = r.snap->config.upstreams[r.adm.route->upstream].endpoints.front();
    const bool literal_v6 = endpoint.host.find(':') != std::string::npos;
    host = literal_v6 ? "[" + endpoint.host + "]" : endpoint.host;
    host += ':';
    core::append_decimal(host, endpoint.port);
  }
  render_upstream_head(
      sc.head, parser,
      {sc.forwarded_for, r.adm.tls ? "https" : "http", real_ip, host, r.adm.rate.shadow,
       r.adm.upgrade, client.certificate_fields(), r.snap->certificate_fields});
}

}  // namespace

bool idempotent(http::verb v) noexcept {
  switch (v) {
    case http::verb::get:
    case http::verb::head:
    case http::verb::options:
    case http::verb::trace:
    case http::verb::put:
    case http::verb::delete_:
      return true;
    default:
      return false;
  }
}

bool closed_before_answer(const error_code& ec) noexcept {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset || ec == asio::error::broken_pipe;
}

void record_response_violations(worker& w, const request_in_hand& r, const response_parser& rp) {
  const auto& res = rp.get();
  const auto& rules = r.snap->policy.violations();
  const auto [first, last] = res.base().equal_range(violation_field);
  const auto& pow = r.adm.route->category->pow;
  const unsigned status = res.result_int();
  const bool by_status = std::any_of(pow.status_violations.begin(), pow.status_violations.end(),
                                     [&](const auto& v) { return v.first == status; });
  if (first == last && !by_status) return;  // the usual case: nothing to record
  if (r.adm.exempt) return;                 // the allow list: never banned (docs/design.md §9)
  const core::nanos now = w.shared.clock.now();
  for (auto f = first; f != last; ++f) {
    const std::string_view reason = core::trim(sv(f->value()));
    if (const auto i = rules.find(reason)) {
      record_violation(w, *r.snap, r.adm, *i, now);
    } else {
      spdlog::debug("upstream reported an unknown violation reason '{}'", reason);
    }
  }
  for (const auto& [s, reason] : pow.status_violations) {
    if (s == status) record_violation(w, *r.snap, r.adm, reason, now);
  }
}

void record_response_tier(worker& w, const request_in_hand& r, const response_parser& rp) {
  const policy::tier_rules* tiers = r.adm.route->policy->tiers();
  if (tiers == nullptr || !tiers->upstream) return;
  const auto it = rp.get().base().find(tier_field);
  if (it == rp.get().base().end()) return;
  const std::string_view name = core::trim(sv(it->value()));
  if (tiers->find(name) == policy::no_tier) {
    spdlog::debug("upstream set an unknown tier '{}'", name);
    return;
  }
  const pow::subject client = admission::consumer(r.adm);
  const core::nanos until = w.shared.clock.now() + tiers->ttl;
  // Shared, it is set on every replica (this one included) with the next poll.
  if (w.shared.standing != nullptr && w.shared.standing->tier(w.index, client, name, until)) return;
  w.shared.tiers_set->set(client, name, until);
}

void add_points(worker& w, const snapshot& snap, const admission::record& a, std::uint32_t points,
                std::string_view event, core::nanos now) {
  const pow::penalty_rules* ladder = snap.policy.penalties();
  if (ladder == nullptr || points == 0 || a.exempt) return;
  const pow::subject client = admission::consumer(a);
  const bool identified =
      a.identity && !a.identity->values.empty() && !a.identity->values[0].empty();
  // Shared, the points go to every replica with the next poll, and are applied from there.
  if (w.shared.standing != nullptr &&
      w.shared.standing->points(
          w.index, client, points,
          identified ? std::string_view(a.identity->values[0]) : std::string_view(), a.client,
          now)) {
    return;
  }
  const pow::penalty_table::change c = w.shared.pow.penalties().add(client, points, now, *ladder);
  if (!c.entered()) return;
  const pow::penalty_action action = c.after.action(*ladder);
  w.counters.penalty_transitions[static_cast<std::size_t>(action) - 1].add();
  spdlog::log(action >= pow::penalty_action::read_only ? spdlog::level::warn : spdlog::level::info,
              "penalty ladder: {} {} entered step {} ({}) at score {} after {}",
              identified ? "identity" : "address",
              identified ? a.identity->values[0] : a.client.to_string(), c.after.step + 1,
              pow::penalty_action_name(action), c.after.score, event);
}

void record_violation(worker& w, const snapshot& snap, const admission::record& a,
                      std::size_t reason, core::nanos now) {
  const policy::client_subjects& who = a.who;
  const auto& rules = snap.policy.violations();
  if (const pow::penalty_rules* ladder = snap.policy.penalties()) {
    add_points(w, snap, a, ladder->points[reason], rules.names[reason], now);
  }
  w.counters.violations[snap.reason_metric[reason]].add();
  // Shared, it is applied (and any ban it causes logged) as every replica reads it back.
  if (w.shared.standing != nullptr &&
      w.shared.standing->violation(who, rules.names[reason], rules.rules[reason], now)) {
    return;
  }
  const auto until = w.shared.pow.violations().record(
      who.individual, who.network, snap.reason_slot[reason], rules.rules[reason], now);
  if (!until) return;
  w.counters.bans.add();
  spdlog::warn("banned {} for {} s after repeated {} violations",
               limit::key_to_string(static_cast<limit::level>(who.individual.level),
                                    who.individual.key, snap.policy.prefixes()),
               core::ceil_seconds(*until - now), rules.names[reason]);
}

namespace {

/// One request's exchange with its upstream: who takes part, and what it holds. Lives in
/// forward()'s frame for the whole exchange.
struct exchange {
  worker& w;                                  ///< the worker serving it
  const request_in_hand& r;                   ///< the admitted request
  deadline_watch& watch;                      ///< bounds every phase
  beast::flat_buffer& client_buffer;          ///< client bytes read past the head
  request_parser& parser;                     ///< the request (head read, body to come)
  connection_scratch& sc;                     ///< the connection's buffers
  std::unique_ptr<upstream_connection> conn;  ///< the upstream connection, once there is one
  std::optional<response_parser> rp;          ///< its response (one parser per attempt)
};

/// Answers a failed upstream exchange with 502 or 504 and counts it. Returns whether the
/// client connection stays open.
task<bool> answer_failure(exchange& x, metrics::upstream_error kind, std::string what,
                          bool keep_alive) {
  const request_in_hand& r = x.r;
  x.w.counters
      .upstream_errors[r.snap->upstream_metric[r.adm.route->upstream]]
                      [static_cast<std::size_t>(kind)]
      .add();
  if (r.adm.upgrade) {
    x.w.counters
        .ws_refused[r.snap->metric_of(r.adm.category())]
                   [static_cast<std::size_t>(metrics::upgrade_refusal::upstream_failed)]
        .add();
  }
  const bool timeout = kind == metrics::upstream_error::timeout;
  // The gateway's own answer, with its own fields as on the upstream's.
  x.sc.response_fields.clear();
  admission::append_own_fields(r.adm, x.sc.response_fields);
  // Named before the co_await: GCC 12 destroys temporaries of a conditional expression inside
  // a co_await argument list twice.
  const std::string body =
      upstream_problem(timeout, r.snap->config.upstreams[r.adm.route->upstream].name, what);
  const local_answer answer{timeout ? http::status::gateway_timeout : http::status::bad_gateway,
                            body,
                            x.sc.response_fields,
                            {},
                            &x.r.adm.rate,
                            keep_alive,
                            r.version,
                            r.snap->config.limits.body_timeout,
                            x.parser.get().method() == http::verb::head};
  co_return co_await write_local(x.watch, x.sc, answer);
}

/// Closes the upstream connection when the client goes away while the gateway waits for the
/// upstream's answer, so that the upstream's work stops and the request's places in flight come
/// back at once (like nginx's proxy_ignore_client_abort off). Armed once the request is sent: a
/// client gone before then is found when the answer is relayed. The client's socket is watched for
/// readability; a reset or a close shows as nothing to read (bytes of a pipelined request, or
/// a TLS alert, are left alone: the client is still there or cannot be told from one that is).
class client_abort_watch {
 public:
  client_abort_watch(tcp_socket& client, tcp_socket& upstream)
      : client_(client), state_(std::make_shared<state>()) {
    state_->upstream = &upstream;
    client.async_wait(tcp_socket::wait_read, [s = state_, &client](const error_code& ec) {
      // A cancelled wait, or one that completed after the exchange ended (the socket may be
      // gone by now): nothing to do.
      if (ec || s->upstream == nullptr) return;
      char byte;
      const ssize_t n = ::recv(client.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        s->gone = true;
        error_code ignored;
        s->upstream->close(ignored);
      }
    });
  }
  ~client_abort_watch() {
    state_->upstream = nullptr;
    error_code ignored;
    client_.cancel(ignored);
  }
  client_abort_watch(const client_abort_watch&) = delete;
  client_abort_watch& operator=(const client_abort_watch&) = delete;

  /// Whether the client went away (the upstream connection was closed for it).
  bool gone() const noexcept { return state_->gone; }

 private:
  struct state {
    tcp_socket* upstream = nullptr;  ///< null once the watch is over
    bool gone = false;
  };
  tcp_socket& client_;
  std::shared_ptr<state> state_;
};

/// How exchange_head ended.
struct head_result {
  bool answered = false;  ///< no response head to relay: the exchange ended (answered or not)
  bool stay = false;      ///< then: whether the client connection stays open

  static head_result response() noexcept { return {}; }
  static head_result ended(bool stay) noexcept { return {true, stay}; }
};

/// Sends the request (head in `sc.head`, body from the client) and reads the response head
/// into `x.rp`. The result says whether a response head is there to relay, or the exchange
/// ended (a failure was answered, or the client is gone).
task<head_result> exchange_head(exchange& x) {
  auto& [w, r, watch, client_buffer, parser, sc, conn, rp] = x;
  const auto& limits = r.snap->config.limits;
  const auto body_timeout = limits.body_timeout;
  const auto response_timeout = r.snap->config.upstreams[r.adm.route->upstream].response_timeout;
  // The request's body: each write to the upstream within the response timeout.
  const relay_bounds bounds{body_timeout, response_timeout, limits.max_header_bytes,
                            limits.min_body_rate};
  const auto& req = parser.get();
  // The gateway answers "Expect: 100-continue" itself once the request is admitted.
  const bool expects_continue = beast::iequals(req[http::field::expect], "100-continue");
  // Sent again on a fresh connection, when a pooled one turns out to have been closed by the
  // upstream, only if RFC 9110 allows it and there is no body (a body is streamed once).
  const bool replayable = parser.is_done() && idempotent(req.method());
  for (int attempt = 0;; ++attempt) {
    connect_failure why;
    conn = co_await w.pool.acquire(*r.snap, r.adm.route->upstream, watch, why);
    if (!conn) {
      const bool timeout = why == connect_failure::timeout;
      // Named before the co_await (GCC 12 and temporaries of ?: in co_await arguments). The
      // reason of a failed TLS handshake is in the log, not in the client's answer.
      std::string what = timeout                       ? "did not accept a connection in time"
                         : why == connect_failure::tls ? "failed the TLS handshake"
                                                       : "refused the connection";
      const auto kind =
          timeout ? metrics::upstream_error::timeout : metrics::upstream_error::connect;
      const bool stay =
          co_await answer_failure(x, kind, std::move(what), r.keep_alive && parser.is_done());
      co_return head_result::ended(stay);
    }
    if (expects_continue && !parser.is_done()) {
      static constexpr std::string_view continue_line = "HTTP/1.1 100 Continue\r\n\r\n";
      watch.client_for(body_timeout);
      asio::const_buffer line = asio::buffer(continue_line.data(), continue_line.size());
      if (co_await write_all(watch.stream, std::span(&line, 1)))
        co_return head_result::ended(false);
    }
    // The head goes with the first piece of the body: one system call where two would do.
    bool client_failed = false;
    const relay_path<true, client_stream, upstream_stream> request_path{
        watch.stream,     client_buffer, parser, conn->stream, sc.head,
        parser.chunked(), sc.body,       watch,  conn->socket, bounds};
    error_code ec = co_await relay(request_path, client_failed);
    if (client_failed) {
      // The upstream saw a truncated body; that connection is beyond saving, and so is the
      // client's, whose framing was not followed to its end.
      if (ec == http::error::body_limit) {
        const std::string body = problem_body(413, "Content Too Large", "request body too large");
        const local_answer answer{http::status::payload_too_large,
                                  body,
                                  {},
                                  {},
                                  &r.adm.rate,
                                  false,
                                  r.version,
                                  body_timeout};
        co_await write_local(watch, sc, answer);
      } else if (ec == http::error::header_limit) {
        const std::string body =
            problem_body(400, "Bad Request", "chunk extensions or trailers too large");
        const local_answer answer{
            http::status::bad_request, body, {}, {}, &r.adm.rate, false, r.version, body_timeout};
        co_await write_local(watch, sc, answer);
      }
      // Otherwise the client stopped sending its body (gone, malformed or too slow): not the
      // upstream's failure, and nobody is left to answer.
      co_return head_result::ended(false);
    }
    // A write to the upstream failed. It may have answered before the body was all sent (a
    // 413 for a body it will not take) and closed: that answer is read and relayed like any
    // other, from the bytes the kernel received before the close.
    if (ec && !watch.upstream_timed_out) ec = {};
    // Interim responses (100 Continue, 103 Early Hints) are read past, not relayed: the client
    // had its 100 from the gateway, and hints are optional. The final response follows on the
    // same connection. A 101 is the end of an upgrade's exchange, and a failure for any other
    // request (it was not asked for).
    // A request holding places under concurrency limits gives them back as soon as its client
    // goes away (docs/design.md §15); the others, which hold nothing, spare the watch's cost.
    std::optional<client_abort_watch> abort;
    if (!ec && !r.adm.inflight.empty()) abort.emplace(watch.client, conn->socket);
    while (!ec) {
      std::apply([&](auto&&... a) { x.rp.emplace(a...); }, on_arena(sc.arena));
      rp->body_limit(boost::none);  // responses are streamed, never held
      rp->header_limit(max_response_head);
      if (req.method() == http::verb::head) rp->skip(true);
      watch.upstream_for(&conn->socket, response_timeout);
      ec = co_await read_head(conn->stream, conn->buffer, *rp);
      const unsigned status = ec ? 0 : rp->get().result_int();
      if (status == 101 && !r.adm.upgrade) ec = asio::error::operation_not_supported;
      if (ec || status >= 200 || status == 101) break;
    }
    if (!ec) co_return head_result::response();
    if (abort && abort->gone()) {
      // Nobody is left to answer; the upstream connection is closed, not the upstream's fault.
      watch.drop_upstream();
      co_return head_result::ended(false);
    }
    abort.reset();
    const bool timeout = watch.upstream_timed_out;  // the watchdog closed it
    if (conn->reused && replayable && attempt == 0 && !timeout && closed_before_answer(ec)) {
      continue;  // a stale pooled connection: once more on a fresh one
    }
    w.pool.failed(*r.snap, conn->upstream, conn->endpoint);
    std::string what = timeout ? std::string("did not answer in time") : "failed: " + ec.message();
    const auto kind = timeout ? metrics::upstream_error::timeout : metrics::upstream_error::reset;
    const bool stay =
        co_await answer_failure(x, kind, std::move(what), r.keep_alive && parser.is_done());
    co_return head_result::ended(stay);
  }
}

/// Completes an upgrade the upstream accepted: its 101 to the client, and the upstream
/// connection and the bytes read past each head kept for the tunnel (sc.upgraded). Returns
/// false: the connection is the tunnel's now, and ends with it.
task<bool> switch_protocols(exchange& x) {
  auto& [w, r, watch, client_buffer, parser, sc, conn, rp] = x;
  const auto& res = rp->get();
  if (!has_token(res.base(), http::field::upgrade, "websocket")) {
    w.pool.failed(*r.snap, conn->upstream, conn->endpoint);
    co_return co_await answer_failure(x, metrics::upstream_error::reset,
                                      "switched to another protocol than websocket", false);
  }
  // The gateway's own lines, as on every answer.
  sc.response_fields.clear();
  admission::append_own_fields(r.adm, sc.response_fields);
  render_switching_head(sc.head, *rp, r.adm.rate, sc.response_fields);
  sc.status = 101;
  watch.client_for(r.snap->config.limits.body_timeout);
  asio::const_buffer head = asio::buffer(sc.head);
  if (co_await write_all(watch.stream, std::span(&head, 1))) co_return false;
  sc.ws_extensions = res.find(http::field::sec_websocket_extensions) != res.end();
  sc.upgraded = std::move(conn);
  co_return false;
}

}  // namespace

task<bool> forward(worker& w, deadline_watch& watch, connection_scratch& sc) {
  const request_in_hand& r = sc.request;
  request_parser& parser = *sc.request.parser;
  // Whatever way this returns, the upstream connection is pooled or gone: the watchdog must
  // not hold on to it.
  struct forget_upstream {
    deadline_watch& w;
    ~forget_upstream() { w.drop_upstream(); }
  } const forget{watch};
  upstream_head(parser, r, sc, watch.stream);
  const auto exchange_start = std::chrono::steady_clock::now();
  exchange x{w, r, watch, sc.buffer, parser, sc, nullptr, std::nullopt};
  if (const head_result h = co_await exchange_head(x); h.answered) co_return h.stay;
  auto& conn = x.conn;
  auto& rp = x.rp;
  const double upstream_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - exchange_start).count();
  sc.request.upstream_seconds = upstream_seconds;
  w.counters.upstream_duration[r.snap->upstream_metric[r.adm.route->upstream]].observe(
      upstream_seconds, metrics::upstream_buckets);

  record_response_violations(w, r, *rp);
  record_response_tier(w, r, *rp);
  sc.status = rp->get().result_int();
  if (r.adm.upgrade) {
    if (sc.status == 101) co_return co_await switch_protocols(x);
    // Refused by the upstream: its answer is relayed as it is.
    w.counters
        .ws_refused[r.snap->metric_of(r.adm.category())]
                   [static_cast<std::size_t>(metrics::upgrade_refusal::upstream_refused)]
        .add();
  }
  const bool head_request = parser.get().method() == http::verb::head;
  // An answer that came before the whole request body (an early 413) ends the client's
  // connection: the rest of its body is not read.
  // The gateway's own lines: the spent proof's cookie cleared, CORS where the gateway owns it.
  sc.response_fields.clear();
  admission::append_own_fields(r.adm, sc.response_fields);
  const client_framing framing =
      render_client_head(sc.head, *rp,
                         {r.version, r.keep_alive && parser.is_done(), head_request, &r.adm.rate,
                          sc.response_fields, r.adm.cors != nullptr});
  // A response body is as slow as the upstream makes it (server-sent events trickle on
  // purpose): no minimum rate, but its chunk metadata is bounded like a head.
  const relay_bounds bounds{r.snap->config.upstreams[r.adm.route->upstream].response_timeout,
                            r.snap->config.limits.body_timeout, max_response_head, 0};
  bool upstream_failed = false;
  const relay_path<false, upstream_stream, client_stream> response_path{
      conn->stream,    conn->buffer, *rp,   watch.stream, sc.head,
      framing.chunked, sc.body,      watch, conn->socket, bounds};
  const error_code ec = co_await relay(response_path, upstream_failed);
  // Mid-body failures cannot be reported any more: the head is gone. Close.
  if (ec) co_return false;
  // Bytes past the response's end would be read as the next client's response: such a
  // connection is not kept, nor one whose request body was cut short by an early answer.
  if (parser.is_done() && rp->keep_alive() && conn->buffer.size() == 0) {
    w.pool.release(*r.snap, std::move(conn));
  } else {
    w.pool.keep_session(*r.snap, *conn);
  }
  co_return framing.keep_alive;
}

}  // namespace tollgate::net
