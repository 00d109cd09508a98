#include <catch2/catch.hpp>

#include <atomic>
#include <barrier>
#include <thread>
#include <vector>

#include "gateway/limit/headers.hpp"
#include "gateway/limit/inflight.hpp"
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
  const limit_spec fine = group(params(10, sec, 10), {}, 1);
  const limit_spec coarse = group(params(10, sec, 3), {}, 2, level::ipv4_network);
  const auto keys = keys_of(address::parse("198.51.100.9").value(), {});

  for (int i = 0; i < 3; ++i) {
    CHECK(store.decide(ipv4_request("198.51.100.9", &fine, &coarse, t0)).admitted);
  }
  const auto before = store.lookup(fine, keys.fine_key).value();
  CHECK(before.tat[0] == t0 + 300 * ms);

  const auto req = ipv4_request("198.51.100.9", &fine, &coarse, t0);
  const decision d = store.decide(req);
  CHECK_FALSE(d.admitted);
  const binding_view b = binding_of(req, d);
  CHECK(b.name == "ipv4_network");
  CHECK(b.which == tier::short_term);
  CHECK(b.wait == 100 * ms);
  // Rejected: the individual tat did not move although its own limit allowed the request.
  CHECK(store.lookup(fine, keys.fine_key)->tat[0] == before.tat[0]);
  CHECK(store.lookup(coarse, keys.coarse_key)->tat[0] == t0 + 300 * ms);
}

TEST_CASE("a long-tier rejection leaves the short tier untouched", "[store][atomic]") {
  memory_store store({}, 1);
  // Short: 10/s burst 5; long: 4/h burst 2 (binds first).
  const limit_spec g = group(params(10, sec, 5), params(4, 3600 * sec, 2), 1);
  const auto key = keys_of(address::parse("192.0.2.7").value(), {}).fine_key;
  CHECK(store.decide(ipv4_request("192.0.2.7", &g, nullptr, t0)).admitted);
  CHECK(store.decide(ipv4_request("192.0.2.7", &g, nullptr, t0)).admitted);
  const auto before = store.lookup(g, key).value();

  const auto req = ipv4_request("192.0.2.7", &g, nullptr, t0 + 1 * sec);
  const decision d = store.decide(req);
  CHECK_FALSE(d.admitted);
  const binding_view b = binding_of(req, d);
  CHECK(b.which == tier::long_term);
  CHECK(rejection_reason(b.which) == "hourly_limit_exceeded");
  CHECK(b.wait == 900 * sec - 1 * sec);
  const auto after = store.lookup(g, key).value();
  CHECK(after.tat[0] == before.tat[0]);
  CHECK(after.tat[1] == before.tat[1]);
}

TEST_CASE("a rejected request for a new key creates no entry", "[store][atomic]") {
  memory_store store({}, 1);
  const limit_spec fine = group(params(10, sec, 10), {}, 1);
  const limit_spec coarse = group(params(10, sec, 1), {}, 2, level::ipv4_network);
  // Exhaust the /24 from one address, then a neighbour is rejected at the network level.
  CHECK(store.decide(ipv4_request("203.0.113.1", &fine, &coarse, t0)).admitted);
  CHECK_FALSE(store.decide(ipv4_request("203.0.113.2", &fine, &coarse, t0)).admitted);
  const auto neighbour = keys_of(address::parse("203.0.113.2").value(), {}).fine_key;
  CHECK_FALSE(store.lookup(fine, neighbour));
  CHECK(store.tracked(0) == 1);
  CHECK(store.tracked(1) == 1);
}

TEST_CASE("the binding limit of an admitted request has the fewest remaining", "[store]") {
  memory_store store({}, 1);
  const limit_spec fine = group(params(10, sec, 5), params(100, 3600 * sec, 100), 1);
  const limit_spec coarse =
      group(params(10, sec, 5), params(100, 3600 * sec, 3), 2, level::ipv4_network);
  auto req = ipv4_request("192.0.2.1", &fine, &coarse, t0);
  decision d = store.decide(req);
  REQUIRE(d.admitted);
  binding_view b = binding_of(req, d);
  CHECK(b.name == "ipv4_network");
  CHECK(b.which == tier::long_term);
  CHECK(b.remaining == 2);
  // Tie (both short tiers at 4 after one request): the individual level comes first.
  const limit_spec tie_fine = group(params(10, sec, 5), {}, 3);
  const limit_spec tie_coarse = group(params(10, sec, 5), {}, 4, level::ipv4_network);
  req = ipv4_request("192.0.2.1", &tie_fine, &tie_coarse, t0);
  d = store.decide(req);
  b = binding_of(req, d);
  CHECK(b.name == "ipv4_individual");
  CHECK(b.remaining == 4);
}

TEST_CASE("the binding limit of a rejection has the longest wait", "[store]") {
  memory_store store({}, 1);
  const limit_spec fine = group(params(1, sec, 1), params(1, 60 * sec, 1), 1);
  const limit_spec coarse = group(params(1, sec, 1), {}, 2, level::ipv4_network);
  CHECK(store.decide(ipv4_request("192.0.2.1", &fine, &coarse, t0)).admitted);
  const auto req = ipv4_request("192.0.2.1", &fine, &coarse, t0);
  const decision d = store.decide(req);
  REQUIRE_FALSE(d.admitted);
  const binding_view b = binding_of(req, d);
  CHECK(b.name == "ipv4_individual");
  CHECK(b.which == tier::long_term);
  CHECK(b.wait == 60 * sec);
  // Equal waits: individual before network, short before long.
  const limit_spec a = group(params(1, sec, 1), {}, 5);
  const limit_spec n = group(params(1, sec, 1), {}, 6, level::ipv4_network);
  CHECK(store.decide(ipv4_request("192.0.2.9", &a, &n, t0)).admitted);
  const auto req2 = ipv4_request("192.0.2.9", &a, &n, t0);
  const decision d2 = store.decide(req2);
  CHECK(binding_of(req2, d2).name == "ipv4_individual");
}

TEST_CASE("a shadowed limit's rejection admits, commits the enforced limits and not it",
          "[store][shadow]") {
  memory_store store({}, 1);
  const limit_spec fine = group(params(10, sec, 10), {}, 1);
  const limit_spec shadow = keyed("everyone", key_source::global, params(1, sec, 2), 7, true);
  auto request = [&](nanos now) {
    auto r = ipv4_request("192.0.2.1", &fine, nullptr, now);
    r.groups[r.group_count++] = {&shadow, 0};
    return r;
  };
  const auto key = keys_of(address::parse("192.0.2.1").value(), {}).fine_key;
  CHECK_FALSE(store.decide(request(t0)).shadow_limited);
  CHECK_FALSE(store.decide(request(t0)).shadow_limited);
  const auto shadow_before = store.lookup(shadow, 0).value();
  const auto fine_before = store.lookup(fine, key).value();
  const auto req = request(t0);
  const decision d = store.decide(req);
  CHECK(d.admitted);
  CHECK(d.shadow_limited);
  // The binding enforced limit is the address level; the shadow binding is the global one.
  REQUIRE(d.binding != no_binding);
  CHECK(binding_of(req, d).name == "ipv4_individual");
  REQUIRE(d.shadow_binding != no_binding);
  CHECK(binding_of(req, d, d.shadow_binding).name == "everyone");
  CHECK(store.lookup(shadow, 0)->tat[0] == shadow_before.tat[0]);  // as a rejection leaves it
  CHECK(store.lookup(fine, key)->tat[0] == fine_before.tat[0] + 100 * ms);
}

TEST_CASE("an enforced rejection commits nothing, shadowed limits included", "[store][shadow]") {
  memory_store store({}, 1);
  const limit_spec fine = group(params(1, sec, 1), {}, 1);
  const limit_spec shadow = keyed("everyone", key_source::global, params(10, sec, 10), 7, true);
  auto request = [&] {
    auto r = ipv4_request("192.0.2.1", &fine, nullptr, t0);
    r.groups[r.group_count++] = {&shadow, 0};
    return r;
  };
  CHECK(store.decide(request()).admitted);
  const auto shadow_before = store.lookup(shadow, 0).value();
  const decision d = store.decide(request());
  CHECK_FALSE(d.admitted);
  CHECK_FALSE(d.shadow_limited);
  CHECK(store.lookup(shadow, 0)->tat[0] == shadow_before.tat[0]);
}

TEST_CASE("keys other than the address live in the keyed table, apart by scope", "[store]") {
  memory_store store({}, 1);
  const limit_spec a = keyed("per_key", key_source::header, params(1, sec, 1), 11);
  const limit_spec b = keyed("per_tenant", key_source::query, params(1, sec, 1), 12);
  limit_request r;
  r.now = t0;
  r.groups[r.group_count++] = {&a, 42};
  CHECK(store.decide(r).admitted);
  CHECK_FALSE(store.decide(r).admitted);  // the same key of the same limit
  r.groups[0] = {&b, 42};
  CHECK(store.decide(r).admitted);  // the same key value under another limit
  CHECK(store.tracked(keyed_table) == 2);
  CHECK(store.tracked(0) == 0);
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
        mine += store.decide(make(t, i)).admitted;
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
    const limit_spec g = group(params(1, 3600 * sec, 1000), params(1, 3600 * sec, 5000), 1);
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
    const limit_spec g = group(params(10, sec, 20), {}, 1);
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
            mine += store.decide(ipv4_request("192.0.2.60", &g, nullptr, now)).admitted;
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
    const limit_spec fine = group(params(1, 3600 * sec, 50), {}, 1);
    const limit_spec coarse = group(params(1, 3600 * sec, 3000), {}, 2, level::ipv4_network);
    const int admitted = hammer(store, threads, 12'800 / threads * 2, [&](int t, int i) {
      const int host = (i * threads + t) % 256;
      return ipv4_request("10.1.2." + std::to_string(host), &fine, &coarse, t0);
    });
    INFO(threads << " threads");
    CHECK(admitted == 3000);
    // And no /32 went past its own 50.
    for (int host = 0; host < 256; ++host) {
      const auto key = keys_of(address::parse("10.1.2." + std::to_string(host)).value(), {});
      const auto e = store.lookup(fine, key.fine_key);
      if (e) CHECK(e->tat[0] - t0 <= 50 * 3600 * sec);
    }
  }
}

TEST_CASE("distinct /24s under concurrency each get their own full allowance",
          "[store][concurrency]") {
  memory_store store({}, 9);
  const limit_spec fine = group(params(1, 3600 * sec, 4), {}, 1);
  const limit_spec coarse = group(params(1, 3600 * sec, 10), {}, 2, level::ipv4_network);
  // 4 threads, 100 networks x 5 hosts, each host tries 8 times: per /24 min(5*4, 10) = 10.
  const int admitted = hammer(store, 4, 1000, [&](int t, int i) {
    const int n = (i * 4 + t) % 500;
    return ipv4_request("10.9." + std::to_string(n / 5) + "." + std::to_string(n % 5), &fine,
                        &coarse, t0);
  });
  CHECK(admitted == 100 * 10);
}

TEST_CASE("a global limit in slices: one thread may use the whole burst, never more",
          "[store][global]") {
  memory_store store({}, 1, 2);
  // 10/s with a burst of 5, in two slices of 3 and 2 (each 5/s).
  const limit_spec everyone = keyed("everyone", key_source::global, params(10, sec, 5), 21);
  limit_request r;
  r.now = t0;
  r.groups[r.group_count++] = {&everyone, 0};
  int admitted = 0;
  for (int i = 0; i < 8; ++i)
    admitted += store.decide(r).admitted;
  CHECK(admitted == 5);  // the whole burst, from one thread, through both slices
  const decision d = store.decide(r);
  CHECK_FALSE(d.admitted);
  CHECK(binding_of(r, d).burst == 5u);  // headers tell the whole limit
  CHECK(binding_of(r, d).wait > 0);
  // 400 ms later the slices have earned 2 (one each at 5/s): the whole limit's 4 at 10/s,
  // less what a slice cannot hold of it, never more.
  r.now = t0 + 400 * ms;
  admitted = 0;
  for (int i = 0; i < 8; ++i)
    admitted += store.decide(r).admitted;
  CHECK(admitted >= 2);
  CHECK(admitted <= 4);
}

TEST_CASE("a global limit in slices never over-admits under two threads", "[store][global]") {
  memory_store store({}, 1, 2);
  const limit_spec everyone =
      keyed("everyone", key_source::global, params(1, 3600 * sec, 1000), 22);
  std::atomic<int> admitted{0};
  auto run = [&] {
    limit_request r;
    r.now = t0;
    r.groups[r.group_count++] = {&everyone, 0};
    int mine = 0;
    for (int i = 0; i < 3000; ++i)
      mine += store.decide(r).admitted;
    admitted += mine;
  };
  std::thread a(run), b(run);
  a.join();
  b.join();
  CHECK(admitted.load() == 1000);  // exactly the burst: all of it, and no more
}

TEST_CASE("a global limit binds a rejection only when every slice of it rejects",
          "[store][global]") {
  // Issue 21: identity burst 2 and global burst 4 over two slices of 2. One user's first two
  // requests spend this worker's slice; the third is rejected by identity while the other
  // slice still has 2: the binding limit is identity, not global.
  memory_store store({}, 1, 2);
  const limit_spec identity = keyed("identity", key_source::header, params(1, 3600 * sec, 2), 31);
  const limit_spec everyone = keyed("global", key_source::global, params(1, 3600 * sec, 4), 32);
  auto request_of = [&](std::uint64_t user) {
    limit_request r;
    r.now = t0;
    r.home = 0;
    r.groups[r.group_count++] = {&identity, user};
    r.groups[r.group_count++] = {&everyone, 0};
    return r;
  };
  const auto alice = request_of(1);
  CHECK(store.decide(alice).admitted);
  CHECK(store.decide(alice).admitted);
  const decision third = store.decide(alice);
  REQUIRE_FALSE(third.admitted);
  CHECK(binding_of(alice, third).name == "identity");
  // The rejection committed nothing: bob takes the other slice's two, then the whole global
  // limit is spent and it binds.
  const auto bob = request_of(2);
  CHECK(store.decide(bob).admitted);
  CHECK(store.decide(bob).admitted);
  const auto carol = request_of(3);
  const decision last = store.decide(carol);
  REQUIRE_FALSE(last.admitted);
  CHECK(binding_of(carol, last).name == "global");
}

TEST_CASE("places in flight: a full key refuses, every hold goes back however it ends",
          "[concurrency]") {
  limit::inflight_table table;
  const std::uint64_t a = limit::inflight_table::key_of(7, 1),
                      b = limit::inflight_table::key_of(8, 1);
  CHECK(a != b);  // the same key under two limits is two counts
  {
    limit::inflight_holds first, second;
    REQUIRE(first.take(table, a, 2));
    REQUIRE(first.take(table, b, 1));
    REQUIRE(second.take(table, a, 2));
    CHECK_FALSE(second.take(table, b, 1));  // full: nothing taken
    CHECK(table.taken(a) == 2);
    CHECK(table.taken(b) == 1);
    limit::inflight_holds moved = std::move(first);  // a tunnel takes a request's places
    CHECK(first.empty());
    first.release();  // nothing left to give back
    CHECK(table.taken(a) == 2);
    moved.release();
    CHECK(table.taken(a) == 1);
    CHECK(table.taken(b) == 0);
  }  // second destroyed: its place goes back
  CHECK(table.taken(a) == 0);
}

TEST_CASE("places in flight are exact under threads", "[concurrency]") {
  limit::inflight_table table;
  const std::uint64_t key = limit::inflight_table::key_of(1, 42);
  std::atomic<int> held{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        limit::inflight_holds h;
        if (!h.take(table, key, 3)) continue;
        const int now = ++held;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        --held;
      }
    });
  }
  for (auto& t : threads)
    t.join();
  CHECK(most.load() <= 3);
  CHECK(most.load() >= 1);
  CHECK(table.taken(key) == 0);
}
