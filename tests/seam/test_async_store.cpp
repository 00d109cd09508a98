// The asynchronous decision seam, proven with a store that answers later: the gateway's own
// workers and sessions in this process (net::server), a real upstream process, real sockets.
// The store holds every request of cost 2 until the test lets it go, so that whether the
// session awaits the store on its event loop (and serves others meanwhile) is a matter of
// order, not of timing.

#include <catch2/catch.hpp>

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/prefer.hpp>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "../integration/harness.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/core/clock.hpp"
#include "gateway/metrics/exposition.hpp"
#include "gateway/net/server.hpp"
#include "gateway/store/local_store.hpp"

using namespace tollgate;

namespace {

/// A store that decides requests of cost 1 at once and holds the others until release().
class held_store final : public store::decision_store {
 public:
  bool try_decide(const limit::limit_request& req, limit::decision& out) override {
    if (req.cost == 1) return inner_.try_decide(req, out);
    return false;
  }
  void start_decide(const limit::limit_request& req, limit::decision& out,
                    store::decide_handler done) override {
    const std::lock_guard lock(mutex_);
    held_.push_back({&req, &out, std::move(done)});
  }
  std::vector<store::table_size> tracked() const override { return inner_.tracked(); }
  std::optional<store::limit_state> state_of(const limit::limit_spec& spec,
                                             std::uint64_t key) override {
    return inner_.state_of(spec, key);
  }

  /// Requests waiting for a decision.
  std::size_t held() {
    const std::lock_guard lock(mutex_);
    return held_.size();
  }
  /// Decides every held request (or fails them all, when `fail`) and completes each on its
  /// session's own executor, from this (another) thread, as a remote store's reply would.
  void release(bool fail = false) {
    std::vector<pending> now;
    {
      const std::lock_guard lock(mutex_);
      now.swap(held_);
    }
    for (pending& p : now) {
      boost::system::error_code ec;
      if (fail) {
        ec = boost::asio::error::timed_out;
      } else {
        *p.out = inner_.memory().decide(*p.req);
      }
      const auto ex = boost::asio::prefer(boost::asio::get_associated_executor(p.done),
                                          boost::asio::execution::blocking.never);
      ex.execute([done = std::move(p.done), ec]() mutable { std::move(done)(ec); });
    }
  }

 private:
  struct pending {
    const limit::limit_request* req;
    limit::decision* out;
    store::decide_handler done;
  };
  store::local_store inner_{{}, 1};
  std::mutex mutex_;
  std::vector<pending> held_;
};

/// The gateway in this process, one worker, with the held store.
struct in_process_gateway {
  explicit in_process_gateway(std::uint16_t echo_port) {
    dir = std::filesystem::temp_directory_path() /
          ("tollgate-seam-" + std::to_string(::getpid()) + "-" + std::to_string(echo_port));
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "policy.yaml") << R"(
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 4 } }
)";
    std::ofstream(dir / "gateway.yaml")
        << "listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
           "admin: { address: 127.0.0.1, port: 0 }\n"
           "workers: 1\n"
           "upstreams: { app: { endpoints: [\"127.0.0.1:"
        << echo_port
        << "\"] } }\n"
           "routes: [{ match: { path: /slow }, category: general, "
           "upstream: app, cost: 2 }]\n"
           "default_route: { category: general, upstream: app }\n"
           "policies: [policy.yaml]\n";
    auto cfg = config::load_gateway((dir / "gateway.yaml").string());
    pow = std::make_unique<policy::pow_state>("seam-secret", cfg.pow, cfg.policy.pow_counters);
    shared = std::make_unique<net::shared_state>(net::shared_state{store, clock, *pow});
    auto snap = std::make_shared<const net::snapshot>(std::move(cfg), core::siphash_key{1, 2},
                                                      metrics, *pow);
    server = std::make_unique<net::server>(snap, *shared, 1, snap->config.limits.max_connections,
                                           metrics);
    server->bind();
    port = server->bound().front().second.port();
    server->start();
  }
  ~in_process_gateway() {
    store.release(true);  // nothing may stay held past the test
    server->stop(std::chrono::seconds(1));
    std::filesystem::remove_all(dir);
  }
  /// tollgate_requests_total{decision} summed over the worker.
  std::uint64_t requests(core::outcome o) {
    std::uint64_t n = 0;
    for (const auto* c : server->counters())
      n += c->requests[0][static_cast<std::size_t>(o)].value();
    return n;
  }

  std::filesystem::path dir;
  held_store store;
  core::steady_unix_clock clock;
  metrics::registry metrics;
  std::unique_ptr<policy::pow_state> pow;
  std::unique_ptr<net::shared_state> shared;
  std::unique_ptr<net::server> server;
  std::uint16_t port = 0;
};

/// Waits up to 5 s for `condition`.
template <class Condition>
bool eventually(Condition condition) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

}  // namespace

TEST_CASE("a session awaits a store that answers later, and its worker serves others meanwhile",
          "[seam]") {
  test::echo_server echo;
  in_process_gateway g(echo.port);
  // A request of cost 2: the store holds it.
  auto slow =
      std::async(std::launch::async, [&] { return test::request(g.port, test::get("/slow")); });
  REQUIRE(eventually([&] { return g.store.held() == 1; }));
  // The one worker is not blocked by it: a request of cost 1 is answered at once.
  const auto fast = test::request(g.port, test::get("/fast"));
  CHECK(fast.status == 200);
  CHECK(fast.header("x-ratelimit-remaining") == "3");
  CHECK(slow.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout);
  CHECK(echo.requests() == 1);

  // The store answers: the held request goes on from where it waited, through the gate's
  // second step, to the upstream.
  g.store.release();
  const auto answered = slow.get();
  CHECK(answered.status == 200);
  // 4 - 1 - 2 = 1 at the later request's instant; but the held request is decided at its own
  // instant, before the other's, so its bucket is a fraction short of one more: 0.
  CHECK(answered.header("x-ratelimit-remaining") == "0");
  CHECK(answered.header("x-ratelimit-level") == "ipv4_individual");
  CHECK(echo.requests() == 2);

  // A rejection that comes later is a 429 like any other, and never reaches the upstream.
  auto limited =
      std::async(std::launch::async, [&] { return test::request(g.port, test::get("/slow")); });
  REQUIRE(eventually([&] { return g.store.held() == 1; }));
  g.store.release();
  const auto rejected = limited.get();
  CHECK(rejected.status == 429);
  CHECK(rejected.header("retry-after") != "");
  CHECK(rejected.body.find(R"("code":"rate_limit_exceeded")") != std::string::npos);
  CHECK(echo.requests() == 2);
  CHECK(g.requests(core::outcome::limited) == 1);
}

TEST_CASE("a store that fails to decide gets 503, and the connection's next request is served",
          "[seam]") {
  test::echo_server echo;
  in_process_gateway g(echo.port);
  auto failed = std::async(std::launch::async, [&] {
    // Two requests on one connection: the held one, then one the store decides at once.
    return test::exchange(g.port, test::get("/slow") + test::get("/fast"), 2);
  });
  REQUIRE(eventually([&] { return g.store.held() == 1; }));
  g.store.release(true);
  const auto answers = failed.get();
  REQUIRE(answers.size() == 2);
  CHECK(answers[0].status == 503);
  CHECK(answers[0].header("content-type") == "application/problem+json");
  CHECK(answers[1].status == 200);
  CHECK(echo.requests() == 1);
  CHECK(g.requests(core::outcome::error) == 1);
}
