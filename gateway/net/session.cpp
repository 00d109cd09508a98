#include <array>
#include <cstring>
#include <span>

#include <spdlog/spdlog.h>

#include "gateway/net/deadline.hpp"
#include "gateway/net/forward.hpp"
#include "gateway/net/heads.hpp"
#include "gateway/net/http_helpers.hpp"
#include "gateway/net/worker.hpp"
#include "gateway/policy/client_address.hpp"
#include "gateway/policy/proxy_header.hpp"

namespace tollgate::net {

namespace {

constexpr std::string_view pow_solution_field = "X-PoW-Solution";

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
/// `timeout`: on TLS connections, whose heads await_whole_head does not collect.
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

/// Counts a rejection by the limits under its binding limit.
void count_limited(metrics::worker_counters& c, std::uint16_t category,
                   const limit::limit_request& req, const limit::decision& d) {
  const auto& binding = d.limits[d.binding];
  c.rate_limited[category][static_cast<std::size_t>(req.groups[binding.group].lvl)]
                [static_cast<std::size_t>(binding.tier)]
                    .add();
}

/// What becomes of a request.
struct plan {
  bool forward = false;                                    ///< admitted: forward it
  http::status status = http::status::ok;                  ///< otherwise the answer's status
  std::string_view body;                                   ///< the answer's body
  std::string_view extra_fields;                           ///< its further header lines
  const policy::rate_limit_fields* rate = nullptr;         ///< its rate-limit fields, if checked
  metrics::decision outcome = metrics::decision::allowed;  ///< for tollgate_requests_total
};

/// A 428 with a new challenge of `bits` for `who`; counts the challenge.
plan challenge(worker& w, const snapshot& snap, const policy::category_limits& category,
               const policy::client_subjects& who, unsigned bits, const policy::proof& p,
               connection_scratch& sc, std::int64_t now_s) {
  sc.answer = policy::make_challenge(w.shared.pow, who, category.pow, bits, p.failure, now_s);
  w.counters.pow_challenges[snap.metric_of(category)].add();
  return {false,   http::status::precondition_required, sc.answer.body, sc.answer.fields,
          nullptr, metrics::decision::challenged};
}

/// Whether only address levels rejected `d`: a proof may pay for those, never for a global or
/// identity limit (DESIGN §5).
bool only_address_limits_rejected(const limit::limit_request& req, const limit::decision& d) {
  for (std::size_t i = 0; i < d.count; ++i) {
    const auto& o = d.limits[i];
    if (o.wait > 0 && req.groups[o.group].lvl >= limit::level::global) return false;
  }
  return true;
}

/// Decides a request in the order of DESIGN §5: a ban, then a proof the client's violations
/// require, then the limits (with pay-to-pass when the category has it). Fills the rate-limit
/// fields of `sc` when the limits were checked.
plan decide_request(worker& w, const snapshot& snap, const policy::category_limits& category,
                    const core::address& client, const policy::client_subjects& who,
                    std::string_view identity, std::string_view solution, connection_scratch& sc) {
  auto& guard = w.shared.pow;
  const core::nanos now = w.shared.clock.now();
  const std::int64_t now_s = now / core::ns_per_s;
  sc.fields.present = false;
  if (const auto until = guard.violations().banned_until(who.individual, now)) {
    sc.answer = policy::make_ban_answer(core::ceil_seconds(*until - now));
    return {false,   http::status::forbidden,  sc.answer.body, sc.answer.fields,
            nullptr, metrics::decision::banned};
  }
  policy::proof p = policy::check_proof(guard, solution, who, category.pow, now_s);
  // A proof's result is counted once its fate is known (spent, or refused and why).
  auto counted = [&](plan out) {
    if (p.sent) w.counters.pow_verifications[static_cast<std::size_t>(p.failure)].add();
    return out;
  };
  auto refuse = [&](unsigned bits) {
    // A proof already spent on this request was honest: a second payment is asked for, with no
    // reason and no violation. Any other failed proof counts against the client's network,
    // except one that merely expired.
    if (p.spent) p = {};
    if (p.sent && p.failure != pow::proof_failure::expired) {
      record_violation(w, snap, who, snap.policy.violations().pow_failed, now);
    }
    return challenge(w, snap, category, who, bits, p, sc, now_s);
  };
  bool paid = false;
  if (category.pow.enabled) {
    const unsigned n = guard.violations().requirement(who.individual, who.network, now);
    const unsigned bits = pow::required_bits(n, category.pow.base_bits, category.pow.step_bits,
                                             category.pow.max_bits);
    if (n > 0 && !(paid = policy::spend_proof(guard, p, bits, now_s))) return counted(refuse(bits));
  }

  const auto lreq = snap.policy.request(category, client, identity, now);
  limit::decision d;
  // The in-process store answers at once; an asynchronous one would complete on this
  // worker's io_context (Redis, DESIGN §11), which this session does not await yet.
  const auto check_start = std::chrono::steady_clock::now();
  w.shared.limiter.decide(lreq, d, {});
  w.counters.limiter_check.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - check_start).count(),
      metrics::limiter_buckets);
  policy::describe(lreq, d, category, client.family(), sc.fields);
  if (d.admitted) {
    if (p.sent && !p.spent) policy::spend_proof(guard, p, 0, now_s);  // sent, so spent
    return counted({true, http::status::ok, {}, {}, &sc.fields, metrics::decision::allowed});
  }
  count_limited(w.counters, snap.metric_of(category), lreq, d);
  if (!category.pow.on_limit || !only_address_limits_rejected(lreq, d)) {
    return counted({false,
                    http::status::too_many_requests,
                    sc.fields.body,
                    {},
                    &sc.fields,
                    metrics::decision::limited});
  }
  // Pay to pass: a proof admits this one request past the limits, committing nothing.
  if (policy::spend_proof(guard, p, category.pow.on_limit_bits, now_s)) {
    return counted({true, http::status::ok, {}, {}, &sc.fields, metrics::decision::pow_passed});
  }
  // A proof that went to the violations' requirement was valid: counted so here, since
  // refuse() forgets it.
  if (paid) w.counters.pow_verifications[0].add();
  plan out = refuse(category.pow.on_limit_bits);
  out.rate = &sc.fields;  // it went through the limits
  return counted(out);
}

/// What serve() does with a request whose head was read (or could not be).
enum class next_step {
  close,   ///< the connection ended: nothing to answer
  answer,  ///< a local answer (request.status, body, ...), then close unless keep_open
  forward  ///< admitted: to the upstream of request.route
};

/// Starts the request in hand: a fresh parser under the configuration in force now (which
/// serves the whole request); the fields of the previous request and response are gone.
void begin_request(worker& w, connection_scratch& sc) {
  request_in_hand& r = sc.request;
  r.parser.reset();
  sc.arena.reset();
  r.route = nullptr;
  r.snap = w.current;
  const auto& limits = r.snap->config.limits;
  std::apply([&](auto&&... a) { r.parser.emplace(a...); }, on_arena(sc.arena));
  r.parser->header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
  r.parser->body_limit(limits.max_request_body);
}

/// A local answer that closes the connection: 400, 413 or 431 with `body`.
next_step refuse_head(request_in_hand& r, connection_scratch& sc, http::status status,
                      std::string body) {
  sc.problem = std::move(body);
  r.status = status;
  r.body = sc.problem;
  r.extra_fields = {};
  r.rate = nullptr;
  r.keep_open = false;
  return next_step::answer;
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
  if (snap.config.logging.access_log) r.started = std::chrono::steady_clock::now();
  if (const std::string_view fault = head_fault(*r.parser, r.has_host); !fault.empty()) {
    return refuse_head(r, sc, http::status::bad_request, problem_body(400, "Bad Request", fault));
  }
  if (!policy::normalize_path(sv(req.target()), sc.path)) {
    return refuse_head(r, sc, http::status::bad_request,
                       problem_body(400, "Bad Request", "malformed request target"));
  }
  r.route = &snap.router.match({sv(req.method_string()), sc.path, &header_of, &req.base()});
  r.client = client_address_of(req.base(), peer, snap.config.trusted_proxies);
  const auto& category = *r.route->category;
  const std::string_view identity = category.identity_header.empty()
                                        ? std::string_view()
                                        : header_of(&req.base(), category.identity_header);
  r.who = policy::subjects_of(r.client, snap.policy.prefixes());
  // A category without proof of work has no use for a proof (it is still removed upstream).
  const bool pow_category = category.pow.enabled || category.pow.on_limit;
  const auto solution = pow_category ? sv(req[pow_solution_field]) : std::string_view();
  const plan pl = decide_request(w, snap, category, r.client, r.who, identity, solution, sc);
  r.outcome = pl.outcome;
  w.counters.requests[snap.metric_of(category)][static_cast<std::size_t>(pl.outcome)].add();
  if (pl.forward) return next_step::forward;
  r.status = pl.status;
  r.body = pl.body;
  r.extra_fields = pl.extra_fields;
  r.rate = pl.rate;
  // The body, if any, is not read: close afterwards rather than parse what we refuse.
  r.keep_open = r.keep_alive && r.parser->is_done();
  return next_step::answer;
}

/// One access log line for the request in hand (only when the access log is on: nothing is
/// formatted per request otherwise).
void log_access(const connection_scratch& sc) {
  const request_in_hand& r = sc.request;
  const auto& req = r.parser->get();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - r.started)
          .count();
  spdlog::info("access {} \"{} {} HTTP/{}.{}\" {} category={} decision={} {:.3f}ms",
               r.client.to_string(), sv(req.method_string()), sv(req.target()), r.version / 10,
               r.version % 10, sc.status, r.route->category->name,
               metrics::decision_name(r.outcome), ms);
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

/// Makes sure the scratch holds a whole request head (or more than `limit` bytes of one, which
/// the parser then refuses) before the request is parsed. A head that did not come whole with
/// its first bytes is collected, within `timeout`, in a string sized to what arrived, and the
/// scratch goes back to the worker meanwhile: a client sending its head slowly holds its bytes,
/// not a scratch block. False when the connection ended or the head ran out of time.
task<bool> await_whole_head(worker& w, deadline_watch& watch,
                            std::unique_ptr<connection_scratch>& sc, std::uint64_t limit,
                            std::chrono::nanoseconds timeout) {
  auto view = [](const beast::flat_buffer& b) {
    return std::string_view(static_cast<const char*>(b.cdata().data()), b.size());
  };
  constexpr std::string_view end_of_head = "\r\n\r\n";
  if (watch.stream.tls() || sc->buffer.size() > limit ||
      view(sc->buffer).find(end_of_head) != std::string_view::npos) {
    co_return true;  // TLS reads go through OpenSSL's buffers, which it keeps anyway
  }
  std::string partial(view(sc->buffer));
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

/// The request loop of one connection; `watch` bounds every phase.
task<void> serve(worker& w, deadline_watch& watch, core::address peer, const listener_info& l,
                 address_slot& slot) {
  tcp_socket& client = watch.client;
  error_code ec;
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
  if (l.proxy_protocol) {
    if (!co_await read_proxy_header(watch, sc->buffer,
                                    duration_of(w.current->config.limits.header_timeout), peer)) {
      co_return;
    }
    // The client is known now: its place under the per-address cap.
    const auto key = address_slots::key_of(peer);
    if (!w.per_address->try_take(key, w.current->config.limits.max_connections_per_address)) {
      refuse(w, client, l, metrics::refusal::per_address, peer);
      co_return;
    }
    slot = address_slot(*w.per_address, key);
  }
  // TLS begins after the PROXY header; the handshake shares the header's timeout.
  std::shared_ptr<asio::ssl::context> tls_context;
  if (l.tls) {
    // The context of this listener (by name: listeners themselves change at restart only) in
    // the current snapshot, so a reload's renewed certificate serves new connections; held for
    // the connection's life.
    tls_context = w.current->tls_context(l.name);
    if (tls_context == nullptr) {
      spdlog::error("listener {}: no TLS settings in the configuration in force", l.name);
      co_return;
    }
    watch.client_for(duration_of(w.current->config.limits.header_timeout));
    if (const error_code hec = co_await watch.stream.handshake(*tls_context, sc->buffer)) {
      spdlog::debug("TLS handshake with {} failed: {}", peer.to_string(), hec.message());
      co_return;
    }
  }
  const std::string peer_text = peer.to_string();  // made once for the connection
  // The request in hand lives in the scratch, not in this frame, which every idle connection
  // keeps (and a coroutine per request would cost a frame allocation per request).
  for (bool first = true;; first = false) {
    const auto& idle_limits = w.current->config.limits;
    const auto idle =
        duration_of(first ? idle_limits.header_timeout : idle_limits.keepalive_timeout);
    if (!co_await await_request(w, watch, sc, idle, !first)) co_return;
    if (!co_await await_whole_head(w, watch, sc, w.current->config.limits.max_header_bytes,
                                   duration_of(w.current->config.limits.header_timeout))) {
      co_return;
    }
    begin_request(w, *sc);
    request_in_hand& r = sc->request;
    const auto& limits = r.snap->config.limits;
    // Usually the whole head came with the first read: parsed without another await.
    std::uint64_t head_bytes = 0;
    error_code rec;
    if (!parse_head_buffered(*r.parser, sc->buffer, head_bytes, limits.max_header_bytes, rec) &&
        !rec) {
      rec = co_await read_request_head(watch, sc->buffer, *r.parser, head_bytes,
                                       limits.max_header_bytes, duration_of(limits.header_timeout));
    }
    const worker_count busy(w.in_flight);  // graceful stop waits for these
    bool stay = false;
    switch (plan_request(w, *sc, peer, rec)) {
      case next_step::close:
        co_return;
      case next_step::answer:
        stay = co_await write_local(watch, *sc, r.version, r.status, r.body, r.rate, r.keep_open,
                                    duration_of(limits.body_timeout), r.extra_fields);
        break;
      case next_step::forward:
        sc->forwarding.emplace(*r.snap, *r.route, peer, r.client, peer_text, l.tls, r.keep_alive,
                               r.version, r.who, !r.has_host);
        stay = co_await forward(w, *sc->forwarding, watch, sc->buffer, *r.parser, *sc);
        break;
    }
    // Heads refused before a route was chosen are not logged (their bytes are not trusted).
    if (r.snap->config.logging.access_log && r.route != nullptr) log_access(*sc);
    if (!stay) {
      client.shutdown(tcp::socket::shutdown_send, ec);
      co_return;
    }
  }
}

}  // namespace

task<void> run_session(worker& w, tcp_socket socket, const listener_info& l, core::address peer,
                       address_slot slot) {
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
  // The watchdog closes the socket under the session's pending operation when a client phase
  // runs out; the session ends the watchdog however it ends itself.
  start_watchdog(watch);
  struct end_watch {
    deadline_watch& w;
    ~end_watch() { w.end(); }
  } const ender{*watch};
  co_await serve(w, *watch, peer, l, slot);
}

}  // namespace tollgate::net
