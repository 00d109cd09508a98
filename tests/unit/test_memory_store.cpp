#include <catch2/catch.hpp>

#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

#include "gateway/limit/headers.hpp"
#include "gateway/limit/memory_store.hpp"
#include "support.hpp"

using namespace tollgate;
using namespace tollgate::limit;
using namespace tollgate::test;

namespace {
const nanos t0 = 1'700'000'000 * sec;
}

TEST_CASE("a rejection at the network level leaves the individual level untouched",
          "[store][atomic]") {
  memory_store store({}, 1);
  // Individual: 10/s burst 10. Network: 10/s burst 3 (binds first).
  const group_params fine = group(params(10, sec, 10), {}, 1);
  const group_params coarse = group(params(10, sec, 3), {}, 2);
  const auto keys = keys_of(address::parse("198.51.100.9").value(), {});

  for (int i = 0; i < 3; ++i) {
    CHECK(store.decide_now(ipv4_request("198.51.100.9", &fine, &coarse, t0)).admitted);
  }
  const auto before = store.lookup(level::ipv4_individual, keys.fine_key, 1).value();
  CHECK(before.tat[0] == t0 + 300 * ms);

  const auto req = ipv4_request("198.51.100.9", &fine, &coarse, t0);
  const decision d = store.decide_now(req);
  CHECK_FALSE(d.admitted);
  const binding_view b = binding_of(req, d);
  CHECK(b.lvl == level::ipv4_network);
  CHECK(b.which == tier::short_term);
  CHECK(b.wait == 100 * ms);
  // Rejected: the individual tat did not move although its own limit allowed the request.
  CHECK(store.lookup(level::ipv4_individual, keys.fine_key, 1)->tat[0] == before.tat[0]);
  CHECK(store.lookup(level::ipv4_network, keys.coarse_key, 2)->tat[0] == t0 + 300 * ms);
}

TEST_CASE("a long-tier rejection leaves the short tier untouched", "[store][atomic]") {
  memory_store store({}, 1);
  // Short: 10/s burst 5; long: 4/h burst 2 (binds first).
  const group_params g = group(params(10, sec, 5), params(4, 3600 * sec, 2), 1);
  const auto key = keys_of(address::parse("192.0.2.7").value(), {}).fine_key;
  CHECK(store.decide_now(ipv4_request("192.0.2.7", &g, nullptr, t0)).admitted);
  CHECK(store.decide_now(ipv4_request("192.0.2.7", &g, nullptr, t0)).admitted);
  const auto before = store.lookup(level::ipv4_individual, key, 1).value();

  const auto req = ipv4_request("192.0.2.7", &g, nullptr, t0 + 1 * sec);
  const decision d = store.decide_now(req);
  CHECK_FALSE(d.admitted);
  const binding_view b = binding_of(req, d);
  CHECK(b.which == tier::long_term);
  CHECK(rejection_reason(b.which) == "hourly_limit_exceeded");
  CHECK(b.wait == 900 * sec - 1 * sec);
  const auto after = store.lookup(level::ipv4_individual, key, 1).value();
  CHECK(after.tat[0] == before.tat[0]);
  CHECK(after.tat[1] == before.tat[1]);
}

TEST_CASE("a rejected request for a new key creates no entry", "[store][atomic]") {
  memory_store store({}, 1);
  const group_params fine = group(params(10, sec, 10), {}, 1);
  const group_params coarse = group(params(10, sec, 1), {}, 2);
  // Exhaust the /24 from one address, then a neighbour is rejected at the network level.
  CHECK(store.decide_now(ipv4_request("203.0.113.1", &fine, &coarse, t0)).admitted);
  CHECK_FALSE(store.decide_now(ipv4_request("203.0.113.2", &fine, &coarse, t0)).admitted);
  const auto neighbour = keys_of(address::parse("203.0.113.2").value(), {}).fine_key;
  CHECK_FALSE(store.lookup(level::ipv4_individual, neighbour, 1));
  CHECK(store.tracked(level::ipv4_individual) == 1);
  CHECK(store.tracked(level::ipv4_network) == 1);
}

TEST_CASE("the binding limit of an admitted request has the fewest remaining", "[store]") {
  memory_store store({}, 1);
  const group_params fine = group(params(10, sec, 5), params(100, 3600 * sec, 100), 1);
  const group_params coarse = group(params(10, sec, 5), params(100, 3600 * sec, 3), 2);
  auto req = ipv4_request("192.0.2.1", &fine, &coarse, t0);
  decision d = store.decide_now(req);
  REQUIRE(d.admitted);
  binding_view b = binding_of(req, d);
  CHECK(b.lvl == level::ipv4_network);
  CHECK(b.which == tier::long_term);
  CHECK(b.remaining == 2);
  // Tie (both short tiers at 4 after one request): the individual level comes first.
  const group_params tie_fine = group(params(10, sec, 5), {}, 3);
  const group_params tie_coarse = group(params(10, sec, 5), {}, 4);
  req = ipv4_request("192.0.2.1", &tie_fine, &tie_coarse, t0);
  d = store.decide_now(req);
  b = binding_of(req, d);
  CHECK(b.lvl == level::ipv4_individual);
  CHECK(b.remaining == 4);
}

TEST_CASE("the binding limit of a rejection has the longest wait", "[store]") {
  memory_store store({}, 1);
  const group_params fine = group(params(1, sec, 1), params(1, 60 * sec, 1), 1);
  const group_params coarse = group(params(1, sec, 1), {}, 2);
  CHECK(store.decide_now(ipv4_request("192.0.2.1", &fine, &coarse, t0)).admitted);
  const auto req = ipv4_request("192.0.2.1", &fine, &coarse, t0);
  const decision d = store.decide_now(req);
  REQUIRE_FALSE(d.admitted);
  const binding_view b = binding_of(req, d);
  CHECK(b.lvl == level::ipv4_individual);
  CHECK(b.which == tier::long_term);
  CHECK(b.wait == 60 * sec);
  // Equal waits: individual before network, short before long.
  const group_params a = group(params(1, sec, 1), {}, 5);
  const group_params n = group(params(1, sec, 1), {}, 6);
  CHECK(store.decide_now(ipv4_request("192.0.2.9", &a, &n, t0)).admitted);
  const auto req2 = ipv4_request("192.0.2.9", &a, &n, t0);
  const decision d2 = store.decide_now(req2);
  CHECK(binding_of(req2, d2).lvl == level::ipv4_individual);
}

TEST_CASE("the decide interface completes at once for the memory store", "[store]") {
  memory_store store({}, 1);
  limiter& l = store;
  const group_params g = group(params(1, sec, 2), {}, 1);
  const auto req = ipv4_request("192.0.2.1", &g, nullptr, t0);
  decision d;
  bool called = false;
  completion done{[](void* c) { *static_cast<bool*>(c) = true; }, &called};
  CHECK(l.decide(req, d, done));
  CHECK(d.admitted);
  CHECK(d.count == 1);
  CHECK_FALSE(called);
}

namespace {

/// Runs `threads` threads that each send `per_thread` requests made by `make(thread, i)` and
/// returns how many were admitted in total.
template <class Make>
int hammer(memory_store& store, int threads, int per_thread, Make make) {
  std::atomic<int> admitted{0};
  std::barrier start(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      start.arrive_and_wait();
      int mine = 0;
      for (int i = 0; i < per_thread; ++i)
        mine += store.decide_now(make(t, i)).admitted;
      admitted += mine;
    });
  }
  for (auto& th : pool)
    th.join();
  return admitted.load();
}

}  // namespace

TEST_CASE("threads hammering one key admit exactly the burst", "[store][concurrency]") {
  for (int threads : {2, 4}) {
    memory_store store({}, 3);
    const group_params g = group(params(1, 3600 * sec, 1000), params(1, 3600 * sec, 5000), 1);
    const int admitted = hammer(store, threads, 20'000, [&](int, int) {
      return ipv4_request("192.0.2.50", &g, nullptr, t0);
    });
    INFO(threads << " threads");
    CHECK(admitted == 1000);
  }
}

TEST_CASE("threads on one key with a moving clock admit what the formula allows",
          "[store][concurrency]") {
  // 10/s burst 20. Time advances in phases of 100ms (one T): every phase all threads race for
  // the one new cell. Over P phases exactly burst + P requests may pass.
  const int phases = 300;
  for (int threads : {2, 4}) {
    memory_store store({}, 3);
    const group_params g = group(params(10, sec, 20), {}, 1);
    std::atomic<int> admitted{0};
    std::barrier sync(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        int mine = 0;
        for (int p = 0; p <= phases; ++p) {
          sync.arrive_and_wait();
          const nanos now = t0 + p * 100 * ms;
          for (int i = 0; i < 30; ++i) {
            mine += store.decide_now(ipv4_request("192.0.2.60", &g, nullptr, now)).admitted;
          }
        }
        admitted += mine;
      });
    }
    for (auto& th : pool)
      th.join();
    INFO(threads << " threads");
    CHECK(admitted.load() == 20 + phases);
  }
}

TEST_CASE("many /32 keys in one /24 admit exactly the network burst", "[store][concurrency]") {
  for (int threads : {2, 4}) {
    memory_store store({}, 5);
    // Each /32 may send 50 at once; the /24 only 3000 in total, and 256 x 50 = 12800 try.
    const group_params fine = group(params(1, 3600 * sec, 50), {}, 1);
    const group_params coarse = group(params(1, 3600 * sec, 3000), {}, 2);
    const int admitted = hammer(store, threads, 12'800 / threads * 2, [&](int t, int i) {
      const int host = (i * threads + t) % 256;
      return ipv4_request("10.1.2." + std::to_string(host), &fine, &coarse, t0);
    });
    INFO(threads << " threads");
    CHECK(admitted == 3000);
    // And no /32 went past its own 50.
    for (int host = 0; host < 256; ++host) {
      const auto key = keys_of(address::parse("10.1.2." + std::to_string(host)).value(), {});
      const auto e = store.lookup(level::ipv4_individual, key.fine_key, 1);
      if (e) CHECK(e->tat[0] - t0 <= 50 * 3600 * sec);
    }
  }
}

TEST_CASE("distinct /24s under concurrency each get their own full allowance",
          "[store][concurrency]") {
  memory_store store({}, 9);
  const group_params fine = group(params(1, 3600 * sec, 4), {}, 1);
  const group_params coarse = group(params(1, 3600 * sec, 10), {}, 2);
  // 4 threads, 100 networks x 5 hosts, each host tries 8 times: per /24 min(5*4, 10) = 10.
  const int admitted = hammer(store, 4, 1000, [&](int t, int i) {
    const int n = (i * 4 + t) % 500;
    return ipv4_request("10.9." + std::to_string(n / 5) + "." + std::to_string(n % 5), &fine,
                        &coarse, t0);
  });
  CHECK(admitted == 100 * 10);
}
