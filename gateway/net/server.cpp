#include "gateway/net/server.hpp"

#include "gateway/net/accept_failures.hpp"
#include "gateway/net/session.hpp"

#include <spdlog/spdlog.h>
#include <sys/socket.h>

#include <algorithm>
#include <chrono>

namespace tollgate::net {

namespace {

asio::ip::address to_asio(const core::address& a) {
  if (a.family() == core::family::v4) return asio::ip::address_v4(a.v4());
  asio::ip::address_v6::bytes_type bytes;
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<unsigned char>(a.v6_high() >> (56 - 8 * i));
    bytes[8 + i] = static_cast<unsigned char>(a.v6_low() >> (56 - 8 * i));
  }
  return asio::ip::address_v6(bytes);
}

std::unique_ptr<tcp_acceptor> open_acceptor(asio::io_context& io, const tcp::endpoint& ep) {
  auto a = std::make_unique<tcp_acceptor>(io);
  a->open(ep.protocol());
  a->set_option(asio::socket_base::reuse_address(true));
  // Every worker listens on the same port; the kernel balances new connections among them.
  const int one = 1;
  if (::setsockopt(a->native_handle(), SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) {
    throw std::system_error(errno, std::generic_category(), "SO_REUSEPORT");
  }
  a->bind(ep);
  a->listen(asio::socket_base::max_listen_connections);
  return a;
}

/// Logs what ended a coroutine with an exception: a bug, since the data path does not throw.
auto log_exception(std::string what) {
  return [what = std::move(what)](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("{} ended by an exception: {}", what, ex.what());
    }
  };
}

core::address to_address(const tcp::endpoint& ep) noexcept {
  const auto a = ep.address();
  if (a.is_v4()) return core::address::from_v4(a.to_v4().to_uint());
  const auto bytes = a.to_v6().to_bytes();
  unsigned char raw[16];
  std::copy(bytes.begin(), bytes.end(), raw);
  return core::address::from_v6(raw);
}

task<void> accept_loop(worker& w, tcp_acceptor& acceptor, const listener_info& l) {
  tcp::endpoint peer_endpoint;
  accept_failures failures;
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(peer_endpoint, use_tuple);
    if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;  // stopping
    if (ec) {
      // Out of descriptors: an idle keep-alive connection gives one back if there is one;
      // otherwise the loop pauses (see accept_failures) rather than spin on the backlog.
      if (accept_failures::out_of_resources(ec) && w.idle.close_oldest()) {
        w.counters.idle_closed[l.metric].add();
        continue;
      }
      const auto pause = failures.note(ec, l.name);
      if (pause.count() > 0) {
        timer wait(acceptor.get_executor(), pause);
        co_await wait.async_wait(use_tuple);
      }
      continue;
    }
    const core::address peer = to_address(peer_endpoint);
    if (w.connections.load(std::memory_order_relaxed) >= w.max_connections) {
      // Over this worker's share: an idle keep-alive connection makes room if there is one.
      if (!w.idle.close_oldest()) {
        refuse(w, socket, l, metrics::refusal::max_connections, peer);
        continue;
      }
      w.counters.idle_closed[l.metric].add();
    }
    client_places places;
    // Behind a PROXY protocol listener the peer is the balancer: the session takes the places
    // of the client its header names.
    if (!l.proxy_protocol) {
      if (const auto full = take_places(w, peer, places)) {
        refuse(w, socket, l, *full, peer);
        continue;
      }
    }
    // Only that one connection is lost if its session throws.
    asio::co_spawn(w.io, run_session(w, std::move(socket), l, peer, std::move(places)),
                   log_exception("a session on " + l.name));
  }
}

}  // namespace

std::uint32_t network_cap(const worker& w) {
  const auto& limits = w.current->config.limits;
  if (limits.max_connections_per_network != 0) return limits.max_connections_per_network;
  return std::max(limits.max_connections_per_address, w.max_connections_total / 8);
}

std::optional<metrics::refusal> take_places(worker& w, const core::address& client,
                                            client_places& places) {
  const auto& config = w.current->config;
  if (core::in_any(config.trusted_proxies, client)) return std::nullopt;
  const auto key = address_slots::key_of(client);
  if (!w.per_address->try_take(key, config.limits.max_connections_per_address)) {
    return metrics::refusal::per_address;
  }
  places.address = address_slot(*w.per_address, key);
  const auto network = address_slots::network_key_of(client);
  if (!w.per_network->try_take(network, network_cap(w))) {
    places.address = {};
    return metrics::refusal::per_network;
  }
  places.network = address_slot(*w.per_network, network);
  return std::nullopt;
}

void refuse(worker& w, tcp_socket& socket, const listener_info& l, metrics::refusal why,
            const core::address& peer) {
  w.counters.connections_refused[l.metric][static_cast<std::size_t>(why)].add();
  // A reset rather than an orderly close: the refused client holds no state of ours, and the
  // kernel keeps none (no FIN_WAIT or TIME_WAIT) for a connection that may be one of thousands.
  error_code ec;
  socket.set_option(asio::socket_base::linger(true, 0), ec);
  socket.close(ec);
  ++w.refusals_unlogged;
  const auto now = std::chrono::steady_clock::now();
  if (now - w.refusals_logged < std::chrono::seconds(10)) return;
  const auto& limits = w.current->config.limits;
  if (why == metrics::refusal::per_address) {
    spdlog::warn(
        "listener {}: refused {} connection(s); the last from {}, which has {} open "
        "(max_connections_per_address)",
        l.name, w.refusals_unlogged, peer.to_string(), limits.max_connections_per_address);
  } else if (why == metrics::refusal::per_network) {
    spdlog::warn(
        "listener {}: refused {} connection(s); the last from {}, whose network has {} open "
        "(max_connections_per_network)",
        l.name, w.refusals_unlogged, peer.to_string(), network_cap(w));
  } else {
    spdlog::warn(
        "listener {}: refused {} connection(s); the last from {}: {} open on this worker "
        "and none idle (max_connections {})",
        l.name, w.refusals_unlogged, peer.to_string(), w.max_connections, limits.max_connections);
  }
  w.refusals_unlogged = 0;
  w.refusals_logged = now;
}

server::server(std::shared_ptr<const snapshot> initial, shared_state& shared, unsigned workers,
               std::uint32_t max_connections, metrics::registry& metrics)
    : metrics_(metrics), shared_(shared), initial_(std::move(initial)) {
  shared_.overrides->attach(initial_->generation, initial_->policies(), initial_);
  for (unsigned i = 0; i < std::max(1u, workers); ++i) {
    workers_.push_back(std::make_unique<worker>(shared_));
    workers_.back()->index = static_cast<std::uint32_t>(workers_.size() - 1);
    shared_.store.attach(workers_.back()->index, workers_.back()->io);
    workers_.back()->adopt(initial_);
    workers_.back()->per_address = &per_address_;
    workers_.back()->per_network = &per_network_;
    workers_.back()->tunnels_per_address = &tunnels_per_address_;
    workers_.back()->inflight = &inflight_;
    // Like nginx's worker_connections: each worker holds its share of the limit.
    const unsigned n = std::max(1u, workers);
    workers_.back()->max_connections = (max_connections + n - 1) / n;
    workers_.back()->max_connections_total = max_connections;
  }
  acceptors_.resize(workers_.size());
}

server::~server() {
  for (auto& w : workers_)
    w->io.stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void server::bind() {
  const auto& listeners = initial_->config.listeners;
  for (std::size_t li = 0; li < listeners.size(); ++li) {
    const auto& l = listeners[li];
    infos_.push_back(
        {l.name, l.tls.has_value(), l.proxy_protocol, metrics_.listeners.index(l.name), l.http2});
    tcp::endpoint ep(to_asio(l.address), l.port);
    for (std::size_t wi = 0; wi < workers_.size(); ++wi) {
      auto acceptor = open_acceptor(workers_[wi]->io, ep);
      // Port 0: the first worker's port, so that every worker shares one.
      if (wi == 0) ep = acceptor->local_endpoint();
      acceptors_[wi].push_back({std::move(acceptor), li});
    }
    bound_.emplace_back(l.name, ep);
  }
}

void server::start() {
  for (std::size_t wi = 0; wi < workers_.size(); ++wi) {
    worker& w = *workers_[wi];
    for (auto& a : acceptors_[wi]) {
      asio::co_spawn(w.io, accept_loop(w, *a.acceptor, infos_[a.listener]),
                     log_exception("the accept loop of " + infos_[a.listener].name));
    }
    threads_.emplace_back([&w] { w.io.run(); });
  }
}

std::vector<const metrics::worker_counters*> server::counters() const {
  std::vector<const metrics::worker_counters*> out;
  for (const auto& w : workers_)
    out.push_back(&w->counters);
  return out;
}

void server::count_ban() {
  worker& w = *workers_.front();
  asio::post(w.io, [&w] { w.counters.bans.add(); });
}

void server::count_transition(pow::penalty_action a) {
  if (a == pow::penalty_action::none) return;
  worker& w = *workers_.front();
  asio::post(w.io,
             [&w, a] { w.counters.penalty_transitions[static_cast<std::size_t>(a) - 1].add(); });
}

std::vector<const limit::rejection_tally*> server::limited() const {
  std::vector<const limit::rejection_tally*> out;
  for (const auto& w : workers_)
    out.push_back(&w->limited);
  return out;
}

void server::publish(std::shared_ptr<const snapshot> s) {
  // The overrides compiled for it before any worker sees it.
  shared_.overrides->attach(s->generation, s->policies(), s);
  for (auto& w : workers_) {
    asio::post(w->io, [wp = w.get(), s] { wp->adopt(s); });
  }
}

void server::stop(std::chrono::nanoseconds grace) {
  for (std::size_t wi = 0; wi < workers_.size(); ++wi) {
    for (auto& a : acceptors_[wi]) {
      asio::post(workers_[wi]->io, [acc = a.acceptor.get()] {
        error_code ignored;
        acc->close(ignored);
      });
    }
  }
  // WebSockets are told the gateway is going away (1001) and have the grace period for their
  // close handshakes.
  for (auto& w : workers_) {
    asio::post(w->io, [wp = w.get()] { wp->tunnels.close_all(protocol::ws::going_away); });
  }
  // Requests in flight may finish; idle keep-alive connections are simply closed.
  const auto deadline = std::chrono::steady_clock::now() + grace;
  auto busy = [&] {
    for (const auto& w : workers_) {
      if (w->in_flight.load(std::memory_order_relaxed) > 0) return true;
    }
    return false;
  };
  while (busy() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& w : workers_)
    w->io.stop();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
}

}  // namespace tollgate::net
