#include "gateway/net/upstream_pool.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <cerrno>

namespace tollgate::net {

namespace {
using clock = std::chrono::steady_clock;

/// Whether a pooled connection is as it was left: nothing to read and not closed. Bytes an
/// upstream sent after a complete response would otherwise become the answer to the next
/// request on it, perhaps another client's (nginx checks the same before reuse). A plain
/// connection knows it without a system call, by its read ahead (upstream_stream::read_ahead);
/// a TLS one is peeked at, which fails with EAGAIN on a healthy connection.
bool still_idle(upstream_connection& c) {
  if (!c.stream.tls()) return c.stream.ahead_untouched();
  char byte;
  const ssize_t n = ::recv(c.socket.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}
}  // namespace

bool upstream_pool::stale(const snapshot& s) {
  if (s.generation < generation_) return true;
  if (s.generation > generation_) {
    // A new snapshot: endpoints may differ, so connections of the old one are let go.
    state_.clear();
    state_.resize(s.upstream_endpoints.size());
    for (std::size_t i = 0; i < state_.size(); ++i) {
      state_[i].endpoints.resize(s.upstream_endpoints[i].size());
    }
    generation_ = s.generation;
  }
  return false;
}

std::size_t upstream_pool::pick(std::size_t u) {
  upstream_state& st = state_[u];
  const std::size_t n = st.endpoints.size();
  const auto now = clock::now();
  // Round-robin over endpoints not ejected; when every one is, try them anyway.
  for (std::size_t tries = 0; tries < n; ++tries) {
    const std::size_t e = st.next++ % n;
    if (st.endpoints[e].ejected_until <= now) return e;
  }
  return st.next++ % n;
}

task<std::unique_ptr<upstream_connection>> upstream_pool::acquire(const snapshot& s, std::size_t u,
                                                                  deadline_watch& watch,
                                                                  connect_failure& why) {
  why = connect_failure::none;
  if (stale(s)) {
    // A request that began before a reload: its own connection, round-robin without the
    // pool's ejections, which belong to the new snapshot's endpoints.
    const std::size_t e = stale_next_++ % s.upstream_endpoints[u].size();
    co_return co_await connect(s, u, e, watch, why);
  }
  const std::size_t e = pick(u);
  endpoint_state& es = state_[u].endpoints[e];
  const auto now = clock::now();
  const auto idle_timeout = s.config.upstreams[u].idle_timeout;
  while (!es.idle.empty()) {
    auto c = std::move(es.idle.back());
    es.idle.pop_back();
    // Past the idle timeout the upstream has likely closed it already.
    if (now - c->idle_since < idle_timeout && still_idle(*c)) {
      c->reused = true;
      co_return c;
    }
  }
  co_return co_await connect(s, u, e, watch, why);
}

task<std::unique_ptr<upstream_connection>> upstream_pool::connect(const snapshot& s, std::size_t u,
                                                                  std::size_t e,
                                                                  deadline_watch& watch,
                                                                  connect_failure& why) {
  auto c = std::make_unique<upstream_connection>(executor_);
  c->buffer.reserve(16 * 1024);  // a response head in one read; bodies in large ones
  c->generation = s.generation;
  c->upstream = u;
  c->endpoint = e;
  watch.upstream_for(&c->socket, s.config.upstreams[u].connect_timeout);
  auto [ec] = co_await c->socket.async_connect(s.upstream_endpoints[u][e], use_tuple);
  if (ec) {
    why = watch.upstream_timed_out ? connect_failure::timeout : connect_failure::refused;
    watch.drop_upstream();  // `c` is destroyed on return
    failed(s, u, e);
    co_return nullptr;
  }
  c->socket.set_option(tcp::no_delay(true), ec);
  c->socket.non_blocking(true, ec);  // for write_now
  if (ec) {
    watch.drop_upstream();
    failed(s, u, e);
    why = connect_failure::refused;
    co_return nullptr;
  }
  if (asio::ssl::context* tls = s.upstream_tls[u].get()) {
    // TLS (docs/design.md §17), within the connect timeout again: the name is the one
    // configured, else the endpoint's host; the endpoint's last session is offered.
    const auto& cfg = s.config.upstreams[u];
    const std::string& name =
        cfg.tls->server_name.empty() ? cfg.endpoints[e].host : cfg.tls->server_name;
    // Taken (a reference of its own) before the handshake starts: a reload meanwhile may
    // clear the pool's state.
    ssl_session_st* resume = stale(s) ? nullptr : state_[u].endpoints[e].session.get();
    watch.upstream_for(&c->socket, cfg.connect_timeout);
    std::string reason;
    ec = co_await c->stream.handshake(*tls, {name, resume}, reason);
    if (ec) {
      why = watch.upstream_timed_out ? connect_failure::timeout : connect_failure::tls;
      if (watch.upstream_timed_out) reason = "TLS handshake timed out";
      watch.drop_upstream();
      failed(s, u, e, "TLS handshake: " + reason);
      co_return nullptr;
    }
    if (!stale(s)) {
      if (tls_session fresh = c->stream.session())
        state_[u].endpoints[e].session = std::move(fresh);
    }
  }
  co_return c;
}

void upstream_pool::release(const snapshot& s, std::unique_ptr<upstream_connection> c) {
  // Opened under another snapshot than the pool's (a reload since), or returned under another
  // than its own: its indices may not fit `state_` or `s`. Closed.
  if (c->generation != generation_ || s.generation != c->generation) return;
  endpoint_state& es = state_[c->upstream].endpoints[c->endpoint];
  es.failures = 0;
  keep_session(s, *c);
  if (es.idle.size() >= s.config.upstreams[c->upstream].max_idle_connections) return;
  c->idle_since = clock::now();
  if (!c->stream.tls()) c->stream.read_ahead(c->buffer.prepare(c->buffer.capacity()));
  es.idle.push_back(std::move(c));
}

void upstream_pool::keep_session(const snapshot& s, const upstream_connection& c) {
  if (!c.stream.tls() || c.generation != generation_ || s.generation != c.generation) return;
  // TLS 1.3 sends its session tickets after the handshake: the newest one is here by now.
  if (tls_session fresh = c.stream.session()) {
    state_[c.upstream].endpoints[c.endpoint].session = std::move(fresh);
  }
}

void upstream_pool::failed(const snapshot& s, std::size_t u, std::size_t endpoint,
                           std::string_view why) {
  // A request that began before a reload: the pool's endpoints may not be its endpoints. Still
  // counted in tollgate_upstream_errors_total by the caller.
  if (stale(s)) return;
  endpoint_state& es = state_[u].endpoints[endpoint];
  es.idle.clear();
  const auto& cfg = s.config.upstreams[u];
  const auto& ep = s.upstream_endpoints[u][endpoint];
  // The first failure of a streak and each ejection are logged; the rest only counted
  // (tollgate_upstream_errors_total), so a dead upstream does not flood the log.
  if (++es.failures == 1 && why.empty()) {
    spdlog::warn("upstream {} endpoint {}:{} failed", cfg.name, ep.address().to_string(),
                 ep.port());
  } else if (es.failures == 1) {
    spdlog::warn("upstream {} endpoint {}:{} failed: {}", cfg.name, ep.address().to_string(),
                 ep.port(), why);
  }
  if (es.failures >= cfg.max_failures) {
    spdlog::warn("upstream {} endpoint {}:{} ejected for {} ms after {} consecutive failures",
                 cfg.name, ep.address().to_string(), ep.port(),
                 std::chrono::duration_cast<std::chrono::milliseconds>(cfg.ejection_time).count(),
                 es.failures);
    es.failures = 0;
    es.ejected_until = clock::now() + cfg.ejection_time;
    s.ejected_until[u][endpoint].store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(es.ejected_until.time_since_epoch())
            .count(),
        std::memory_order_relaxed);
  }
}

}  // namespace tollgate::net
