#include "gateway/net/session.hpp"

#include <array>
#include <cstring>
#include <span>

#include <spdlog/spdlog.h>

#include "gateway/net/access_line.hpp"
#include "gateway/net/deadline.hpp"
#include "gateway/net/forward.hpp"
#include "gateway/net/heads.hpp"
#include "gateway/net/http_helpers.hpp"
#include "gateway/net/websocket.hpp"
#include "gateway/net/worker.hpp"
#include "gateway/policy/browser.hpp"
#include "gateway/policy/client_address.hpp"
#include "gateway/policy/keys.hpp"
#include "gateway/policy/proxy_header.hpp"

namespace tollgate::net {

namespace {

/// Header lookup for the router, which sees no Beast types.
std::string_view header_of(const void* fields, std::string_view name) {
  const auto& f = *static_cast<const net::fields*>(fields);
  const auto it = f.find(beast::string_view(name.data(), name.size()));
  return it == f.end() ? std::string_view() : sv(it->value());
}

/// Whether a read error is a normal end of the connection rather than a bad request.
bool is_ending(const error_code& ec) noexcept {
  return ec == http::error::end_of_stream || ec == asio::error::eof ||
         ec == asio::error::connection_reset ||
         // The deadline watchdog ends a timed-out phase by closing the socket.
         ec == asio::error::operation_aborted;
}

/// How long a connection waits for its next request with its scratch before giving it back.
constexpr std::chrono::milliseconds idle_release{1000};

/// Waits for the first bytes of the next request within `idle` and reads them into the
/// connection's scratch, so that the header timeout bounds the head itself, not the pause
/// between requests. Between requests (`between` true) the connection stands in the worker's
/// idle list, the first closed when the worker is full; a connection idle for longer than
/// `idle_release` (or at once when its worker has many blocks in use) waits without its
/// scratch. False when the connection ended.
task<bool> await_request(worker& w, deadline_watch& watch, std::unique_ptr<connection_scratch>& sc,
                         std::chrono::nanoseconds idle, bool between) {
  if (sc->buffer.size() > 0) co_return true;  // pipelined: the next request is already here
  watch.client_for(idle);
  // In the idle list for as long as this waits, however it ends.
  struct idle_member {
    idle_connections& list;
    deadline_watch& watch;
    ~idle_member() { list.erase(watch); }
  } const member{w.idle, watch};
  if (between) w.idle.push(watch);
  error_code ec;
  std::size_t n = 0;
  if (watch.stream.tls()) {
    // TLS records are read whole by the TLS layer, which keeps its own buffers: the scratch
    // stays with the connection.
    std::tie(ec, n) = co_await watch.stream.tls_read_some(sc->buffer.prepare(4096));
    if (ec) co_return false;
    sc->buffer.commit(n);
    co_return true;
  }
  if (w.scratch.in_use() <= scratch_pool::max_kept_waiting) {
    // The ordinary read, into the scratch: the next request of a busy connection comes within
    // microseconds, and this costs no more system calls than Asio's own read (none before
    // the socket is readable, when the last read drained it). A connection still idle after
    // `idle_release` is woken by its watchdog (a cancel, no system call) and then waits
    // without its scratch. Past max_kept_waiting blocks in use, a waiting connection
    // gives it back at once instead (below), so that memory stays bounded whatever the rate
    // of new connections.
    watch.release_after(idle_release);
    std::tie(ec, n) = co_await watch.client.async_read_some(sc->buffer.prepare(4096), use_tuple);
    const bool released = watch.released;
    watch.release_after(std::chrono::nanoseconds::max());
    if (ec != asio::error::operation_aborted || !released || !watch.client.is_open()) {
      if (ec) co_return false;
      sc->buffer.commit(n);
      co_return true;
    }
  } else {
    // A read tried at once before the scratch goes back: the request may be here already.
    n = watch.client.read_some(sc->buffer.prepare(4096), ec);
    if (ec != asio::error::would_block && ec != asio::error::try_again) {
      if (ec) co_return false;
      sc->buffer.commit(n);
      co_return true;
    }
  }
  w.scratch.give(std::move(sc));
  for (;;) {
    // Asio re-arms the socket for a wait (a system call), so bytes that came in meanwhile
    // are not missed.
    std::tie(ec) = co_await watch.client.async_wait(tcp::socket::wait_read, use_tuple);
    if (ec) break;
    // Readable: the read completes at once (an awaited one would cost another trip through
    // the scheduler). Nothing after all (a spurious wake-up): wait again.
    if (sc == nullptr) sc = w.scratch.take();
    n = watch.client.read_some(sc->buffer.prepare(4096), ec);
    if (ec != asio::error::would_block && ec != asio::error::try_again) break;
  }
  if (ec) co_return false;
  sc->buffer.commit(n);
  co_return true;
}

/// Reads the PROXY protocol header that starts the connection within `timeout`, leaving the
/// bytes after it in `buffer`, and replaces `peer` with the client it names (LOCAL and UNKNOWN
/// leave the peer). False when the connection ended or did not start with a valid header: it
/// is then closed without an answer, since its bytes cannot be trusted to be HTTP.
task<bool> read_proxy_header(deadline_watch& watch, beast::flat_buffer& buffer,
                             std::chrono::nanoseconds timeout, core::address& peer) {
  watch.client_for(timeout);  // one deadline for the whole header
  for (;;) {
    const auto data = buffer.cdata();
    policy::proxy_header header;
    switch (
        policy::parse_proxy_header({static_cast<const char*>(data.data()), data.size()}, header)) {
      case policy::proxy_parse::done:
        buffer.consume(header.length);
        if (header.source) peer = *header.source;
        co_return true;
      case policy::proxy_parse::invalid:
        spdlog::debug("closing a connection from {}: no valid PROXY protocol header",
                      peer.to_string());
        co_return false;
      case policy::proxy_parse::need_more:
        break;
    }
    auto [ec, n] = co_await watch.client.async_read_some(
        buffer.prepare(policy::max_proxy_header - buffer.size()), use_tuple);
    if (ec) co_return false;
    buffer.commit(n);
  }
}

/// Reads the rest of a request head that parse_head_buffered found incomplete, within
/// `timeout`: on TLS connections, whose heads collect_slow_head does not collect.
task<error_code> read_request_head(deadline_watch& watch, beast::flat_buffer& buffer,
                                   request_parser& parser, std::uint64_t head, std::uint64_t limit,
                                   std::chrono::nanoseconds timeout) {
  watch.client_for(timeout);
  for (;;) {
    if (error_code ec = co_await read_more(watch.stream, buffer, parser)) co_return ec;
    error_code ec;
    if (parse_head_buffered(parser, buffer, head, limit, ec) || ec) co_return ec;
  }
}

/// The answer to a request head that could not be read: 431, 413 or 400.
std::string bad_head_answer(const error_code& ec, http::status& status) {
  if (ec == http::error::header_limit) {
    status = http::status::request_header_fields_too_large;
    return problem_body(431, "Request Header Fields Too Large",
                        "request head larger than the limit");
  }
  if (ec == http::error::body_limit) {
    status = http::status::payload_too_large;
    return problem_body(413, "Content Too Large", "request body too large");
  }
  status = http::status::bad_request;
  return problem_body(400, "Bad Request", "malformed request: " + ec.message());
}

/// The address a request is charged to (DESIGN §7), from its X-Forwarded-For fields.
core::address client_address_of(const fields& f, const core::address& peer,
                                std::span<const core::cidr> trusted) {
  std::array<std::string_view, 8> forwarded;
  std::size_t n = 0;
  const auto [first, last] = f.equal_range("X-Forwarded-For");
  for (auto it = first; it != last; ++it) {
    // Only the rightmost values matter: the walk stops at the first untrusted hop.
    if (n == forwarded.size()) {
      std::move(forwarded.begin() + 1, forwarded.end(), forwarded.begin());
      --n;
    }
    forwarded[n++] = sv(it->value());
  }
  return policy::client_address(peer, std::span(forwarded.data(), n), trusted);
}

/// The label of tollgate_requests_total for a gate outcome.
metrics::decision decision_of(policy::outcome o) noexcept {
  static_assert(static_cast<int>(metrics::decision::shadow_limited) ==
                static_cast<int>(policy::outcome::shadow_limited));
  return static_cast<metrics::decision>(o);
}

/// Applies what the gate asks besides its answer: proof results to count, a violation to
/// record, a challenge to count.
void apply_effects(worker& w, const request_in_hand& r) {
  const policy::gate_verdict& v = r.verdict;
  const auto& snap = *r.snap;
  if (v.effects.verification) {
    w.counters.pow_verifications[static_cast<std::size_t>(*v.effects.verification)].add();
  }
  if (v.effects.extra_valid) w.counters.pow_verifications[0].add();
  if (v.effects.pow_failed) {
    record_violation(w, snap, r.who, snap.policy.violations().pow_failed, r.gate.now);
  }
  if (v.result == policy::outcome::challenged) {
    w.counters.pow_challenges[snap.metric_of(*r.gate.category)].add();
  }
}

/// Counts what the limits did to a request: the binding rejection (enforced, or shadowed) and
/// the limits its keys were missing for.
void count_limits(worker& w, const request_in_hand& r) {
  const auto& snap = *r.snap;
  const auto& category = *r.gate.category;
  const std::size_t c = snap.metric_of(category);
  const auto& labels = snap.limit_metric[snap.index_of(category)];
  const limit::decision& d = r.decision;
  auto count = [&](std::uint8_t index, metrics::limit_mode mode) {
    const limit::limit_outcome& o = d.limits[index];
    const std::uint16_t l = labels[r.limits.groups[o.group].spec->slot];
    w.counters.rate_limited[c][l][static_cast<std::size_t>(o.tier)][static_cast<std::size_t>(mode)]
        .add();
  };
  if (!d.admitted && d.binding != limit::no_binding) count(d.binding, metrics::limit_mode::enforce);
  if (d.shadow_limited) count(d.shadow_binding, metrics::limit_mode::shadow);
  for (std::uint32_t bits = r.unkeyed; bits != 0; bits &= bits - 1) {
    w.counters.unkeyed[c][labels[static_cast<std::size_t>(__builtin_ctz(bits))]].add();
  }
  // Rejected by a limit (429, or 428 to pay past it): counted for GET /admin/limited.
  const policy::outcome o = r.verdict.result;
  if (o == policy::outcome::limited || o == policy::outcome::challenged) {
    w.limited.note({r.who.individual.key, static_cast<limit::level>(r.who.individual.level)},
                   {r.who.network.key, static_cast<limit::level>(r.who.network.level)}, r.gate.now);
  }
}

/// What serve() does with a request whose head was read (or could not be).
enum class next_step {
  close,       ///< the connection ended: nothing to answer
  answer,      ///< a local answer (request.status, body, ...), then close unless keep_open
  ask_limits,  ///< the gate wants the store's decision on request.limits
  forward      ///< admitted: to the upstream of request.route
};

/// A local answer of `status`, whose body and further header lines are already in the
/// scratch (`problem`, `problem_fields`); the connection stays open only if `keep_open`.
next_step answer_locally(request_in_hand& r, connection_scratch& sc, http::status status,
                         const policy::rate_limit_fields* rate, bool keep_open) {
  r.status = status;
  // A proof sent in the cookie has been judged: the browser is told to drop it.
  if (r.pow_cookie) sc.problem_fields += clear_pow_cookie(r.tls);
  // A script on an allowed origin may read the gateway's own answers (CORS, issue 13).
  if (r.cors != nullptr) r.cors->append_answer_fields(sc.problem_fields, r.cors_origin);
  r.body = sc.problem;
  r.extra_fields = sc.problem_fields;
  r.rate = rate;
  r.keep_open = keep_open;
  return next_step::answer;
}

/// Counts the request in hand under `outcome` (tollgate_requests_total).
void count_request(worker& w, request_in_hand& r, metrics::decision outcome) {
  r.outcome = outcome;
  w.counters.requests[r.snap->metric_of(*r.gate.category)][static_cast<std::size_t>(outcome)].add();
}

/// Counts the time of one limiter decision begun at `start`.
void observe_check(worker& w, std::chrono::steady_clock::time_point start) {
  w.counters.limiter_check.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
      metrics::limiter_buckets);
}

/// Counts an upgrade refused for `why`.
void count_refused_upgrade(worker& w, const request_in_hand& r, metrics::upgrade_refusal why) {
  w.counters.ws_refused[r.snap->metric_of(*r.gate.category)][static_cast<std::size_t>(why)].add();
}

/// Takes an admitted upgrade's place under its category's max_connections_per_address (DESIGN
/// §6), held in the scratch until the tunnel takes it. False when the client has that many
/// open: then a 429 is rendered into the scratch.
bool take_tunnel_place(worker& w, connection_scratch& sc) {
  request_in_hand& r = sc.request;
  const auto& category = *r.gate.category;
  const auto key = tunnel_key(r.who, r.snap->index_of(category));
  if (w.tunnels_per_address->try_take(key, category.websocket.max_connections_per_address)) {
    sc.tunnel_place = address_slot(*w.tunnels_per_address, key);
    return true;
  }
  count_refused_upgrade(w, r, metrics::upgrade_refusal::too_many_connections);
  problem_writer p(sc.problem, 429, "Too Many Requests");
  p.text("detail", "too many WebSocket connections from this address")
      .text("code", "too_many_connections")
      .number("retry_after", 1)
      .finish();
  sc.problem_fields = "Retry-After: 1\r\nX-RateLimit-Reason: too_many_connections\r\n";
  return false;
}

/// The label of tollgate_websocket_upgrades_refused_total for an upgrade the gate refused.
metrics::upgrade_refusal refusal_of(policy::outcome o) noexcept {
  switch (o) {
    case policy::outcome::banned:
      return metrics::upgrade_refusal::banned;
    case policy::outcome::challenged:
      return metrics::upgrade_refusal::challenged;
    default:
      return metrics::upgrade_refusal::limited;
  }
}

/// Renders the challenge of the request in hand as the browsers' page (DESIGN §5 "Browsers")
/// over the problem body; the 428's X-PoW-* fields stay.
void render_page(request_in_hand& r, connection_scratch& sc) {
  const policy::challenge_values& c = r.verdict.challenge;
  const auto& page = r.snap->page;
  page.render(sc.problem, c, c.expires - r.gate.now / core::ns_per_s, r.tls);
  sc.problem_fields += "Content-Security-Policy: ";
  sc.problem_fields += page.content_security_policy();
  // The same target answers JSON to an API client: caches keep the two apart, and keep
  // neither (a challenge is for one client, once).
  sc.problem_fields += "\r\nCache-Control: no-store\r\nVary: Accept\r\n";
  r.content_type = "text/html; charset=utf-8";
}

/// The proof in a request's proof-of-work cookie (DESIGN §5 "Browsers"), or "" when it has none,
/// for client `who` in a category of proof-of-work settings `c` at `now`. A browser may send
/// several pairs of that name (one set for a parent domain by a sibling site, which the
/// gateway's clearing cannot reach, comes first): of the first four, the first that checks
/// out is taken, else the first.
std::string_view cookie_proof(const fields& f, const policy::pow_state& pow,
                              const policy::client_subjects& who, const policy::category_pow& c,
                              core::nanos now) {
  std::array<std::string_view, 4> found;
  std::size_t n = 0;
  const auto [first, last] = f.equal_range(http::field::cookie);
  for (auto line = first; line != last && n < found.size(); ++line) {
    std::string_view rest = sv(line->value());
    if (rest.find(policy::pow_cookie) == std::string_view::npos) continue;
    std::string_view proof;
    while (n < found.size() && policy::next_cookie(rest, policy::pow_cookie, proof)) {
      if (!proof.empty()) found[n++] = proof;
    }
  }
  if (n <= 1) return found[0];  // the usual case: one, checked by the gate alone
  for (std::size_t i = 0; i < n; ++i) {
    if (policy::check_proof(pow, found[i], who, c, now / core::ns_per_s).failure ==
        pow::proof_failure::none) {
      return found[i];
    }
  }
  return found[0];
}

/// Whether `req` is a CORS preflight: OPTIONS with Origin and Access-Control-Request-Method.
bool is_preflight(const http::request_header<fields>& req) {
  return req.method() == http::verb::options && req.count(http::field::origin) > 0 &&
         req.count(http::field::access_control_request_method) > 0;
}

/// Answers a preflight of a category whose CORS the gateway owns: 200 without a body, the
/// preflight's fields for an allowed origin. Never charged to the limits nor challenged: it
/// cannot carry a proof, and charging it would halve the category's limits for scripts
/// (issue 13: never limited more strictly than its category). The access lists and bans came
/// first.
next_step answer_preflight(worker& w, connection_scratch& sc) {
  request_in_hand& r = sc.request;
  const auto& req = r.parser->get();
  count_request(w, r, metrics::decision::allowed);
  sc.problem.clear();
  sc.problem_fields.clear();
  if (!r.cors_origin.empty()) {
    r.cors->append_preflight_fields(sc.problem_fields,
                                    sv(req[http::field::access_control_request_headers]));
  }
  return answer_locally(r, sc, http::status::ok, nullptr, r.keep_alive && r.parser->is_done());
}

/// Turns the gate's verdict into the next step: counts the request, applies the effects, and
/// renders a refusal into the scratch.
next_step conclude(worker& w, connection_scratch& sc) {
  request_in_hand& r = sc.request;
  const policy::gate_verdict& v = r.verdict;
  apply_effects(w, r);
  if (v.forward() && r.upgrade && !take_tunnel_place(w, sc)) {
    count_request(w, r, metrics::decision::limited);
    return answer_locally(r, sc, http::status::too_many_requests,
                          v.limits_checked ? &sc.fields : nullptr, r.keep_alive);
  }
  count_request(w, r, decision_of(v.result));
  if (v.forward()) return next_step::forward;
  if (r.upgrade) count_refused_upgrade(w, r, refusal_of(v.result));
  http::status status = http::status::too_many_requests;
  switch (v.result) {
    case policy::outcome::banned:
      status = http::status::forbidden;
      write_banned(sc.problem, sc.problem_fields, v.retry_after);
      break;
    case policy::outcome::challenged:
      status = http::status::precondition_required;
      write_challenge(sc.problem, sc.problem_fields, v.challenge);
      if (policy::prefers_html(sv(r.parser->get()[http::field::accept]))) render_page(r, sc);
      break;
    default:  // limited
      write_limited_body(sc.problem, sc.fields);
      sc.problem_fields.clear();
      break;
  }
  // The body, if any, is not read: close afterwards rather than parse what we refuse.
  return answer_locally(r, sc, status, v.limits_checked ? &sc.fields : nullptr,
                        r.keep_alive && r.parser->is_done());
}

/// Step 2 of the gate, once the store has decided request.limits.
next_step after_limits(worker& w, connection_scratch& sc) {
  request_in_hand& r = sc.request;
  const auto& category = *r.gate.category;
  policy::describe(r.limits, r.decision, category, r.client.family(), sc.fields);
  w.shared.gate.after_limits(r.gate, r.limits, r.decision, r.verdict);
  count_limits(w, r);
  return conclude(w, sc);
}

/// Starts the request in hand: a fresh parser under the configuration in force now (which
/// serves the whole request); the fields of the previous request and response are gone.
void begin_request(worker& w, connection_scratch& sc) {
  request_in_hand& r = sc.request;
  r.parser.reset();
  sc.arena.reset();
  r.route = nullptr;
  r.snap = w.current;
  r.pow_cookie = false;
  r.content_type = {};
  r.cors = nullptr;
  r.cors_origin = {};
  const auto& limits = r.snap->config.limits;
  std::apply([&](auto&&... a) { r.parser.emplace(a...); }, on_arena(sc.arena));
  r.parser->header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  r.parser->body_limit(limits.max_request_body);
}

/// A local answer that closes the connection: 400, 413 or 431 with `body`.
next_step refuse_head(request_in_hand& r, connection_scratch& sc, http::status status,
                      std::string body) {
  sc.problem = std::move(body);
  sc.problem_fields.clear();
  return answer_locally(r, sc, status, nullptr, false);
}

/// The header-keyed limit of `c` whose header `fields` carry more than once, if any: which
/// value would be charged, and which would the upstream read? (A template on the request's
/// own fields type: `http::fields` would be a copy of every field, made per request.)
template <class Fields>
const limit::limit_spec* repeated_key_header(const policy::category_limits& c,
                                             const Fields& fields) {
  for (const std::uint8_t i : c.keyed) {
    const limit::limit_spec& s = c.limits[i];
    if (s.source == core::key_source::header && fields.count(s.key_name) > 1) return &s;
  }
  return nullptr;
}

/// Decides the request whose head reading ended with `rec`: the head's own faults, then the
/// route, the client and DESIGN §5's decision. Counts the request.
next_step plan_request(worker& w, connection_scratch& sc, const core::address& peer,
                       const error_code& rec) {
  request_in_hand& r = sc.request;
  if (rec) {
    if (is_ending(rec)) return next_step::close;
    r.version = 11;
    http::status status;
    std::string body = bad_head_answer(rec, status);
    return refuse_head(r, sc, status, std::move(body));
  }
  const snapshot& snap = *r.snap;
  const auto& req = r.parser->get();
  r.keep_alive = req.keep_alive();
  r.version = req.version();
  r.started = std::chrono::steady_clock::now();
  r.exempt = false;  // a 400 below is answered before the lists are read
  r.upstream_seconds = -1;
  if (const std::string_view fault = head_fault(*r.parser, r.has_host); !fault.empty()) {
    return refuse_head(r, sc, http::status::bad_request, problem_body(400, "Bad Request", fault));
  }
  r.upgrade = is_websocket_upgrade(*r.parser);
  if (r.upgrade && (r.parser->chunked() || r.parser->content_length().value_or(0) > 0)) {
    return refuse_head(r, sc, http::status::bad_request,
                       problem_body(400, "Bad Request", "a WebSocket upgrade carries no body"));
  }
  if (!policy::normalize_path(sv(req.target()), sc.path)) {
    return refuse_head(r, sc, http::status::bad_request,
                       problem_body(400, "Bad Request", "malformed request target"));
  }
  // A preflight asks for the method its script will send: it is routed as that request will
  // be, so that the category answering it (and its CORS) is the one the request meets.
  const bool preflight = is_preflight(req);
  const std::string_view method =
      preflight ? sv(req[http::field::access_control_request_method]) : sv(req.method_string());
  r.route = &snap.router.match({method, sc.path, &header_of, &req.base()});
  r.client = client_address_of(req.base(), peer, snap.config.trusted_proxies);
  const auto& category = *r.route->category;
  if (const auto* twice = repeated_key_header(category, req.base())) {
    // Refused like a malformed head: before a route counts it (route reset), nothing charged.
    r.route = nullptr;
    return refuse_head(r, sc, http::status::bad_request,
                       problem_body(400, "Bad Request",
                                    "the header " + twice->key_name +
                                        ", which keys a rate limit, is sent more than once"));
  }
  r.who = policy::subjects_of(r.client, snap.policy.prefixes());
  // A category without proof of work has no use for a proof (it is still removed upstream).
  const bool pow_category = category.pow.enabled || category.pow.on_limit;
  // The access lists come before everything else (DESIGN §9): deny answers here, allow
  // passes the gate.
  const auto& access = snap.config.access;
  r.exempt = core::in_any(access.allow, r.client);
  // A proof comes in X-PoW-Solution, or from a browser in the cookie its page set.
  std::string_view solution;
  if (pow_category) {
    solution = sv(req[pow_solution_field]);
    if (solution.empty()) {
      solution = cookie_proof(req.base(), w.shared.pow, r.who, category.pow, w.shared.clock.now());
      r.pow_cookie = !solution.empty();
    }
  }
  r.gate = {&category, &r.who, solution, w.shared.clock.now(), r.exempt};
  sc.fields.present = false;
  sc.fields.shadow.clear();
  if (category.cors) {
    r.cors = &*category.cors;
    const std::string_view origin = sv(req[http::field::origin]);
    if (r.cors->allows(origin)) r.cors_origin = origin;
  }
  if (core::in_any(access.deny, r.client)) {
    count_request(w, r, metrics::decision::denied);
    problem_writer(sc.problem, 403, "Forbidden")
        .text("detail", "this address is denied access")
        .text("code", "denied")
        .finish();
    sc.problem_fields.clear();
    return answer_locally(r, sc, http::status::forbidden, nullptr,
                          r.keep_alive && r.parser->is_done());
  }
  if (r.cors != nullptr && preflight) {
    // Not charged nor challenged (it cannot carry a proof), but a ban holds.
    if (w.shared.gate.screen(r.gate, r.verdict) && r.verdict.result == policy::outcome::banned) {
      return conclude(w, sc);
    }
    return answer_preflight(w, sc);
  }
  w.shared.gate.before_limits(r.gate, r.verdict);
  if (!r.verdict.ask_limits) return conclude(w, sc);
  const policy::key_sources keys{&header_of, &req.base(), sv(req.target())};
  r.limits = snap.policy.request(category, r.client, keys, r.route->cost, r.gate.now, r.unkeyed);
  r.limits.home = w.index;
  return next_step::ask_limits;
}

/// Asks the store for its decision on the request's limits and, when it answers at once (the
/// in-process store always does), takes the gate's second step. `ask_limits` when the store
/// will answer later: then await_limits.
next_step decide_limits(worker& w, connection_scratch& sc) {
  request_in_hand& r = sc.request;
  if (r.limits.group_count == 0) {
    // Nothing to ask (every limit's key missing, or a category without limits): admitted.
    r.decision = limit::decision{};
    r.decision.admitted = true;
    return after_limits(w, sc);
  }
  const auto start = std::chrono::steady_clock::now();
  if (!w.shared.store.try_decide(r.limits, r.decision)) return next_step::ask_limits;
  observe_check(w, start);
  return after_limits(w, sc);
}

/// Awaits the decision of a store that answers later (Redis, DESIGN §11) on this worker's
/// event loop, the request's state waiting in the scratch, then takes the gate's second step.
/// A store that fails to decide gets 503.
task<next_step> await_limits(worker& w, connection_scratch& sc) {
  request_in_hand& r = sc.request;
  const auto start = std::chrono::steady_clock::now();
  auto [ec] = co_await store::async_decide(w.shared.store, r.limits, r.decision, use_tuple);
  observe_check(w, start);
  if (!ec) co_return after_limits(w, sc);
  count_request(w, r, metrics::decision::error);
  problem_writer(sc.problem, 503, "Service Unavailable")
      .text("detail", "the limiter store did not answer")
      .text("code", "store_unavailable")
      .finish();
  sc.problem_fields.clear();
  co_return answer_locally(r, sc, http::status::service_unavailable, nullptr,
                           r.keep_alive && r.parser->is_done());
}

/// One access log line for the request in hand, `seconds` after its head came, with
/// `written` bytes sent to the client so far on its connection.
void log_access(worker& w, connection_scratch& sc, double seconds, std::uint64_t written) {
  const request_in_hand& r = sc.request;
  const auto& req = r.parser->get();
  // The binding limit: the one that rejected, or, forwarded past a shadowed limit, that one;
  // none when no limit was in the way.
  std::string limit;
  if (!sc.fields.shadow.empty()) {
    limit = sc.fields.shadow;
  } else if (sc.fields.present && !sc.fields.retry_after.empty()) {
    limit = std::string(sc.fields.level) + "." + std::string(sc.fields.tier);
  }
  const std::string client = r.client.to_string();
  const bool forwarded = r.upstream_seconds >= 0;
  const auto& snap = *r.snap;
  // The scratch's head buffer is free once the response is sent: the line is built there.
  std::string& line = sc.head;
  line.clear();
  append_access_line(line, snap.config.logging.format == config::logging_config::log_format::json,
                     std::chrono::system_clock::now(),
                     {client, sv(req.method_string()), sv(req.target()), r.version, sc.status,
                      r.route->category->name, metrics::decision_name(r.outcome), limit,
                      forwarded ? std::string_view(snap.config.upstreams[r.route->upstream].name)
                                : std::string_view(),
                      r.upstream_seconds, written - r.written_before, seconds});
  w.shared.access_log->write(line);
}

/// Phase 5, once the response to the request in hand is sent (its last byte: `written` so
/// far on the connection): counts it by status class and time (tollgate_responses_total,
/// tollgate_request_duration_seconds) and logs it when the access log is on (nothing is
/// formatted per request otherwise).
void finish_request(worker& w, connection_scratch& sc, std::uint64_t written) {
  const request_in_hand& r = sc.request;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - r.started).count();
  const std::size_t c = r.snap->metric_of(*r.route->category);
  if (sc.status != 0) w.counters.responses[c][metrics::code_class_of(sc.status)].add();
  w.counters.request_duration[c].observe(seconds, metrics::request_buckets);
  if (r.snap->config.logging.access_log_on() && w.shared.access_log != nullptr) {
    log_access(w, sc, seconds, written);
  }
}

/// Appends what the socket has now to `out`, read into a block on the thread's stack (not a
/// coroutine frame). False when nothing was there; errors other than "would block" in `ec`.
bool append_available(tcp_socket& s, std::string& out, error_code& ec) {
  std::array<char, 4096> block;
  const std::size_t n = s.read_some(asio::buffer(block), ec);
  if (ec == asio::error::would_block || ec == asio::error::try_again) {
    ec = {};
    return false;
  }
  if (ec) return false;
  out.append(block.data(), n);
  return true;
}

/// The bytes of `b` as text.
std::string_view view_of(const beast::flat_buffer& b) {
  return {static_cast<const char*>(b.cdata().data()), b.size()};
}

constexpr std::string_view end_of_head = "\r\n\r\n";

/// Whether the scratch holds a whole request head already (or more than `limit` bytes of one,
/// which the parser then refuses), as it almost always does after the first read. TLS heads
/// count as whole: their reads go through OpenSSL's buffers, which it keeps anyway.
bool head_in_hand(const deadline_watch& watch, const connection_scratch& sc, std::uint64_t limit) {
  return watch.stream.tls() || sc.buffer.size() > limit ||
         view_of(sc.buffer).find(end_of_head) != std::string_view::npos;
}

/// Collects a request head that did not come whole with its first bytes, within `timeout`, in
/// a string sized to what arrived, the scratch given back to the worker meanwhile: a client
/// sending its head slowly holds its bytes, not a scratch block. False when the connection
/// ended or the head ran out of time.
task<bool> collect_slow_head(worker& w, deadline_watch& watch,
                             std::unique_ptr<connection_scratch>& sc, std::uint64_t limit,
                             std::chrono::nanoseconds timeout) {
  std::string partial(view_of(sc->buffer));
  // A head already malformed is refused now (the caller parses it again), not when it ends.
  begin_request(w, *sc);
  error_code ec;
  sc->request.parser->put(asio::buffer(partial), ec);
  if (ec && ec != http::error::need_more) co_return true;
  sc->buffer.consume(sc->buffer.size());
  w.scratch.give(std::move(sc));
  watch.client_for(timeout);
  for (;;) {
    std::tie(ec) = co_await watch.client.async_wait(tcp::socket::wait_read, use_tuple);
    if (ec) co_return false;
    const std::size_t searched = partial.size() < 3 ? 0 : partial.size() - 3;
    if (!append_available(watch.client, partial, ec)) {
      if (ec) co_return false;  // the client left (or reset) mid-head
      continue;                 // woken for nothing: wait again
    }
    if (partial.size() > limit || partial.find(end_of_head, searched) != std::string::npos) break;
  }
  sc = w.scratch.take();
  const auto space = sc->buffer.prepare(partial.size());
  std::memcpy(space.data(), partial.data(), partial.size());
  sc->buffer.commit(partial.size());
  co_return true;
}

/// Phase 1, once per connection: the PROXY protocol header (and with it the client's place
/// under the per-address cap), then the TLS handshake. False when the connection is to close.
task<bool> open_connection(worker& w, deadline_watch& watch, connection_scratch& sc,
                           core::address& peer, const listener_info& l, client_places& places,
                           std::shared_ptr<asio::ssl::context>& tls_context) {
  const auto header_timeout = w.current->config.limits.header_timeout;
  if (l.proxy_protocol) {
    if (!co_await read_proxy_header(watch, sc.buffer, header_timeout, peer)) co_return false;
    // The client is known now: its places under the connection caps.
    if (const auto full = take_places(w, peer, places)) {
      refuse(w, watch.client, l, *full, peer);
      co_return false;
    }
  }
  if (!l.tls) co_return true;
  // TLS begins after the PROXY header; the handshake shares the header's timeout. The context
  // is this listener's (by name: listeners change at restart only) in the current snapshot, so
  // a reload's renewed certificate serves new connections; held for the connection's life.
  tls_context = w.current->tls_context(l.name);
  if (tls_context == nullptr) {
    spdlog::error("listener {}: no TLS settings in the configuration in force", l.name);
    co_return false;
  }
  watch.client_for(header_timeout);
  if (const error_code ec = co_await watch.stream.handshake(*tls_context, sc.buffer)) {
    spdlog::debug("TLS handshake with {} failed: {}", peer.to_string(), ec.message());
    co_return false;
  }
  co_return true;
}

/// Phase 2: waits for the next request (`first`: the connection's first) and reads its head
/// into a fresh parser. False when the connection ended; otherwise `rec` says how reading the
/// head went (an error is answered by phase 3).
task<bool> read_request(worker& w, deadline_watch& watch, std::unique_ptr<connection_scratch>& sc,
                        bool first, error_code& rec) {
  const auto& idle_limits = w.current->config.limits;
  const auto idle = first ? idle_limits.header_timeout : idle_limits.keepalive_timeout;
  if (!co_await await_request(w, watch, sc, idle, !first)) co_return false;
  // Read again after each wait: a reload meanwhile may have freed the configuration before.
  const auto& head_limits = w.current->config.limits;
  if (!head_in_hand(watch, *sc, head_limits.max_header_bytes) &&
      !co_await collect_slow_head(w, watch, sc, head_limits.max_header_bytes,
                                  head_limits.header_timeout)) {
    co_return false;
  }
  begin_request(w, *sc);
  request_in_hand& r = sc->request;
  const auto& limits = r.snap->config.limits;
  // Usually the whole head came with the first read: parsed without another await.
  std::uint64_t head_bytes = 0;
  rec = {};
  if (!parse_head_buffered(*r.parser, sc->buffer, head_bytes, limits.max_header_bytes, rec) &&
      !rec) {
    rec = co_await read_request_head(watch, sc->buffer, *r.parser, head_bytes,
                                     limits.max_header_bytes, limits.header_timeout);
  }
  co_return true;
}

/// Phase 3 (without the wait for a store that answers later): the gate's decision on the
/// request in hand, whose head reading ended with `rec`.
next_step gate_request(worker& w, connection_scratch& sc, const core::address& peer,
                       const error_code& rec) {
  const next_step step = plan_request(w, sc, peer, rec);
  return step == next_step::ask_limits ? decide_limits(w, sc) : step;
}

/// Phase 4 for a refusal: the local answer the request in hand gets.
local_answer answer_of(const request_in_hand& r) {
  return {r.status,
          r.body,
          r.extra_fields,
          r.content_type,
          r.rate,
          r.keep_open,
          r.version,
          r.snap->config.limits.body_timeout,
          r.route != nullptr && r.parser->get().method() == http::verb::head};
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
  const auto& category = *r.route->category;
  setup.limits = category.messages;
  setup.idle_timeout = category.websocket.idle_timeout;
  setup.max_lifetime = category.websocket.max_lifetime;
  setup.metric = r.snap->metric_of(category);
  setup.extensions = sc->ws_extensions;
  setup.place = std::move(sc->tunnel_place);
  if (r.snap->config.logging.access_log_on()) {
    const auto& req = r.parser->get();
    setup.log = tunnel_setup::log_fields{
        r.client.to_string(), std::string(sv(req.method_string())), std::string(sv(req.target())),
        category.name, r.snap->config.logging.format == config::logging_config::log_format::json};
  }
  sc->buffer.clear();
  w.scratch.give(std::move(sc));
  return setup;
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
  const std::string peer_text = peer.to_string();  // made once for the connection
  // The request in hand lives in the scratch, not in this frame, which every idle connection
  // keeps (and a coroutine per request would cost a frame allocation per request).
  for (bool first = true;; first = false) {
    error_code rec;
    if (!co_await read_request(w, watch, sc, first, rec)) co_return;
    const worker_count busy(w.in_flight);  // graceful stop waits for these
    sc->request.written_before = watch.stream.written;
    sc->request.tls = l.tls;
    next_step step = gate_request(w, *sc, peer, rec);
    if (step == next_step::ask_limits) step = co_await await_limits(w, *sc);
    if (step == next_step::close) co_return;
    request_in_hand& r = sc->request;
    bool stay = false;
    if (step == next_step::forward) {
      sc->forwarding.emplace(*r.snap, *r.route, peer, r.client, peer_text, l.tls, r.keep_alive,
                             r.version, r.who, !r.has_host, r.upgrade, r.exempt);
      stay = co_await forward(w, *sc->forwarding, watch, sc->buffer, *r.parser, *sc);
      if (sc->upgraded) {
        finish_request(w, *sc, watch.stream.written);
        co_await run_tunnel(w, watch, hand_over(w, held.sc));
        co_return;
      }
      sc->tunnel_place = {};  // not upgraded after all
    } else {
      const local_answer answer = answer_of(r);
      stay = co_await write_local(watch, *sc, answer);
    }
    // Phase 5. Heads refused before a route was chosen are neither counted by category nor
    // logged (their bytes are not trusted).
    if (r.route != nullptr) finish_request(w, *sc, watch.stream.written);
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
