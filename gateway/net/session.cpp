#include <array>
#include <span>

#include <spdlog/spdlog.h>

#include "gateway/net/deadline.hpp"
#include "gateway/net/forward.hpp"
#include "gateway/net/http_helpers.hpp"
#include "gateway/net/worker.hpp"
#include "gateway/policy/client_address.hpp"
#include "gateway/policy/proxy_header.hpp"

namespace tollgate::net {

namespace {

core::address to_address(const tcp::endpoint& ep) noexcept {
  const auto a = ep.address();
  if (a.is_v4()) return core::address::from_v4(a.to_v4().to_uint());
  const auto bytes = a.to_v6().to_bytes();
  unsigned char raw[16];
  std::copy(bytes.begin(), bytes.end(), raw);
  return core::address::from_v6(raw);
}

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

/// Waits for the first byte of the next request within `idle`, so that the header timeout
/// bounds the head itself, not the pause between requests. False when the connection ended.
task<bool> await_request(deadline_watch& watch, beast::flat_buffer& buffer,
                         std::chrono::nanoseconds idle) {
  if (buffer.size() > 0) co_return true;  // pipelined: the next request is already here
  watch.client_for(idle);
  error_code ec;
  std::size_t n = 0;
  if (watch.stream.tls()) {
    std::tie(ec, n) = co_await watch.stream.tls_read_some(buffer.prepare(4096));
  } else {
    std::tie(ec, n) = co_await watch.client.async_read_some(buffer.prepare(4096), use_tuple);
  }
  if (ec) co_return false;
  buffer.commit(n);
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

/// The request loop of one connection; `watch` bounds every phase.
task<void> serve(worker& w, deadline_watch& watch, core::address peer, const listener_info& l) {
  tcp_socket& client = watch.client;
  error_code ec;
  beast::flat_buffer buffer;
  if (l.proxy_protocol &&
      !co_await read_proxy_header(watch, buffer,
                                  duration_of(w.current->config.limits.header_timeout), peer)) {
    co_return;
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
    if (const error_code hec = co_await watch.stream.handshake(*tls_context, buffer)) {
      spdlog::debug("TLS handshake with {} failed: {}", peer.to_string(), hec.message());
      co_return;
    }
  }
  auto sc = std::make_unique<connection_scratch>();
  sc->peer_text = peer.to_string();

  for (bool first = true;; first = false) {
    // The snapshot in force when this request starts serves the whole request.
    const std::shared_ptr<const snapshot> snap = w.current;
    const auto& limits = snap->config.limits;
    const auto idle = duration_of(first ? limits.header_timeout : limits.keepalive_timeout);
    if (!co_await await_request(watch, buffer, idle)) {
      co_return;
    }
    // A fresh parser per message; the fields of the previous request and response are gone.
    sc->arena.reset();
    auto parser = std::make_from_tuple<request_parser>(on_arena(sc->arena));
    parser.header_limit(static_cast<std::uint32_t>(limits.max_header_bytes));
    parser.body_limit(limits.max_request_body);
    error_code rec;
    // Usually the whole head came with the first read: parse it without another await.
    parse_buffered(parser, buffer, rec);
    if (!rec && !parser.is_header_done()) {
      watch.client_for(duration_of(limits.header_timeout));
      rec = co_await read_head(watch.stream, buffer, parser);
    }
    if (rec) {
      if (is_ending(rec)) co_return;
      // Named before the co_await (GCC 12 mishandles temporaries in co_await arguments).
      http::status status;
      const std::string body = bad_head_answer(rec, status);
      co_await write_local(watch, *sc, 11, status, body, nullptr, false,
                           duration_of(limits.body_timeout));
      co_return;
    }
    const worker_count busy(w.in_flight);  // graceful stop waits for these
    const bool access_log = snap->config.logging.access_log;
    const auto started =
        access_log ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    auto& req = parser.get();
    const bool keep_alive = req.keep_alive();
    const unsigned version = req.version();
    if (!policy::normalize_path(sv(req.target()), sc->path)) {
      std::string body = problem_body(400, "Bad Request", "malformed request target");
      co_await write_local(watch, *sc, version, http::status::bad_request, body, nullptr, false,
                           duration_of(limits.body_timeout));
      co_return;
    }

    const policy::route& route =
        snap->router.match({sv(req.method_string()), sc->path, &header_of, &req.base()});
    const core::address client_addr =
        client_address_of(req.base(), peer, snap->config.trusted_proxies);

    const auto& category = *route.category;
    const std::string_view identity = category.identity_header.empty()
                                          ? std::string_view()
                                          : header_of(&req.base(), category.identity_header);
    const auto who = policy::subjects_of(client_addr, snap->policy.prefixes());
    // A category without proof of work has no use for a proof (it is still removed upstream).
    const bool pow_category = category.pow.enabled || category.pow.on_limit;
    const auto solution = pow_category ? sv(req[pow_solution_field]) : std::string_view();
    const plan pl = decide_request(w, *snap, category, client_addr, who, identity, solution, *sc);
    w.counters.requests[snap->metric_of(category)][static_cast<std::size_t>(pl.outcome)].add();

    bool stay = false;
    if (!pl.forward) {
      // The body, if any, is not read: close afterwards rather than parse what we refuse.
      stay = co_await write_local(watch, *sc, version, pl.status, pl.body, pl.rate,
                                  keep_alive && parser.is_done(), duration_of(limits.body_timeout),
                                  pl.extra_fields);
    } else {
      const forward_request fr{*snap, route, peer, client_addr, l.tls, keep_alive, version, who};
      stay = co_await forward(w, fr, watch, buffer, parser, *sc);
    }
    if (access_log) {
      // Formatted only when asked for: nothing is built per request otherwise.
      const double ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started)
              .count();
      spdlog::info("access {} \"{} {} HTTP/{}.{}\" {} category={} decision={} {:.3f}ms",
                   client_addr.to_string(), sv(req.method_string()), sv(req.target()), version / 10,
                   version % 10, sc->status, category.name, metrics::decision_name(pl.outcome), ms);
    }
    if (!stay) {
      client.shutdown(tcp::socket::shutdown_send, ec);
      co_return;
    }
  }
}

}  // namespace

task<void> run_session(worker& w, tcp_socket socket, const listener_info& l) {
  error_code ec;
  const auto peer_endpoint = socket.remote_endpoint(ec);
  if (ec) co_return;  // the client left before we looked
  socket.set_option(tcp::no_delay(true), ec);
  // Writes are tried at once and awaited only for what the kernel did not take (write_now).
  socket.non_blocking(true, ec);
  if (ec) co_return;
  const core::address peer = to_address(peer_endpoint);
  client_stream stream(socket);
  auto watch = std::make_shared<deadline_watch>(socket, stream);
  // The watchdog closes the socket under the session's pending operation when a client phase
  // runs out; the session ends the watchdog however it ends itself.
  asio::co_spawn(socket.get_executor(), watch_deadline(watch), [watch](std::exception_ptr e) {
    if (!e || watch->ended) return;
    // A bug: without its watchdog the connection has no timeouts, so it goes.
    spdlog::error("a connection's deadline watchdog failed; closing the connection");
    error_code ignored;
    watch->client.close(ignored);
  });
  struct end_watch {
    deadline_watch& w;
    ~end_watch() { w.end(); }
  } const ender{*watch};
  co_await serve(w, *watch, peer, l);
}

}  // namespace tollgate::net
