// Micro-benchmark of the limiter core: one full IPv4 decision (keys from the address, 2 levels x
// 2 tiers checked and committed, binding limit for the headers) with 1 million live keys, on 1
// and 2 threads, the same with a global limit in the set, and the memory each tracked key costs.
// Run through bench/limiter.sh.

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <vector>

#include "gateway/config/policy.hpp"
#include "gateway/limit/headers.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/policy/compiled_policy.hpp"

namespace {

using namespace tollgate;

constexpr std::size_t live_keys = 1'000'000;
constexpr std::size_t sequence_length = 1u << 22;  // 4M requests per thread count

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

/// Everything the benchmarks share: the default policy, a store holding 1M live /32 keys (and
/// their /24s), and a random sequence of requests over those keys.
struct world {
  std::unique_ptr<policy::compiled_policy> policy;
  const policy::category_limits* general = nullptr;
  /// general's limits plus one global limit that admits everything (docs/design.md §3: a global
  /// limit must not make every worker take one shared lock per request).
  std::unique_ptr<policy::compiled_policy> global_policy;
  const policy::category_limits* with_global = nullptr;
  std::unique_ptr<limit::memory_store> store;
  std::vector<limit::address> clients;
  /// Per thread count, per thread: the IPv4 addresses it sends from, in a random order. Read
  /// sequentially, so the benchmark's own data costs no cache misses; thread t of n only uses
  /// clients whose index is t modulo n, so threads work on distinct keys.
  std::vector<std::uint32_t> sequences[3][2];
  /// One thread's addresses drawn Zipf(1.0) over the same clients: a few send most requests,
  /// as real traffic does.
  std::vector<std::uint32_t> skewed;
  core::nanos start = 1'735'000'000 * core::ns_per_s;
  /// Synthetic time, carried from one benchmark run to the next so tats never run ahead.
  std::atomic<core::nanos> clock{start + core::ns_per_s};
  std::size_t bytes_per_key = 0;
  std::size_t tracked = 0;
  std::size_t reserved_per_key = 0;

  /// The limit set of a request of category `c` from `client` at `now`.
  limit::limit_request request(const policy::category_limits& c, const limit::address& client,
                               core::nanos now) const {
    static const policy::key_sources none{
        [](const void*, std::string_view) { return std::string_view(); }, nullptr, "/"};
    std::uint32_t unkeyed = 0;
    const auto& p = &c == with_global ? *global_policy : *policy;
    return p.request(c, client, none, c.cost, now, unkeyed);
  }

  world() {
    const auto cfg =
        config::load_policies({std::string(TOLLGATE_SOURCE_DIR) + "/policies/default.yaml"});
    policy = std::make_unique<policy::compiled_policy>(cfg, core::siphash_key{1, 2});
    general = policy->find("general");
    global_policy =
        std::make_unique<policy::compiled_policy>(config::load_policy_text(R"(
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 20/s, burst: 50 }, long: { rate: 5000/h, burst: 500 } }
      ipv4_network: { short: { rate: 100/s, burst: 250 }, long: { rate: 50000/h, burst: 5000 } }
      everyone: { key: global, short: { rate: 1000000000/s, burst: 1000000 } }
)",
                                                                           "global.yaml"),
                                                  core::siphash_key{1, 2});
    with_global = global_policy->find("general");

    // Random addresses: ~1M distinct /24s as well, the costly case for the cache.
    std::mt19937_64 rng(2024);
    clients.reserve(live_keys);
    for (std::size_t i = 0; i < live_keys; ++i) {
      clients.push_back(limit::address::from_v4(static_cast<std::uint32_t>(rng())));
    }

    const std::size_t before = resident_bytes();
    limit::store_capacity capacity;
    // 20% headroom: shards fill unevenly, and a full shard evicts (see bench/README.md, "Sizing
    // capacity").
    capacity.ipv4_individual = live_keys * 6 / 5;
    capacity.ipv4_network = live_keys * 6 / 5;
    capacity.ipv6_subnet = 1;
    capacity.ipv6_provider = 1;
    capacity.keyed = 100'000;  // the default: 256 lock stripes, as in the gateway
    // Two slices for global limits, as a gateway with two workers has.
    store = std::make_unique<limit::memory_store>(capacity, 0x5eed, 2);
    for (const auto& c : clients)
      store->decide(request(*general, c, start));
    tracked = store->tracked(0) + store->tracked(1);
    bytes_per_key = (resident_bytes() - before) / tracked;
    const auto& t1 = store->table(0);
    reserved_per_key = t1.memory_bytes() / t1.capacity();

    for (std::size_t n = 1; n <= 2; ++n) {
      for (std::size_t t = 0; t < n; ++t) {
        auto& seq = sequences[n][t];
        seq.resize(sequence_length / n);
        for (auto& a : seq)
          a = clients[(rng() % (live_keys / n)) * n + t].v4();
      }
    }
    std::vector<double> cdf(live_keys);
    double total = 0;
    for (std::size_t k = 0; k < live_keys; ++k)
      cdf[k] = total += 1.0 / static_cast<double>(k + 1);
    std::uniform_real_distribution<double> uniform(0, total);
    skewed.resize(sequence_length);
    for (auto& a : skewed) {
      const auto k = std::lower_bound(cdf.begin(), cdf.end(), uniform(rng)) - cdf.begin();
      a = clients[std::min<std::size_t>(static_cast<std::size_t>(k), live_keys - 1)].v4();
    }
  }
};

/// Kilobytes of this process's anonymous memory backed by transparent huge pages.
std::size_t huge_page_kib() {
  std::ifstream rollup("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(rollup, line)) {
    if (line.rfind("AnonHugePages:", 0) == 0) return std::stoul(line.substr(14));
  }
  return 0;
}

world& shared_world() {
  static world w;
  return w;
}

/// Hands the synthetic clock on to the next run and reports throughput and admitted share.
void finish_run(benchmark::State& state, world& w, core::nanos now, std::int64_t admitted) {
  core::nanos seen = w.clock.load();
  while (seen < now && !w.clock.compare_exchange_weak(seen, now)) {
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["admitted_share"] =
      benchmark::Counter(static_cast<double>(admitted) / static_cast<double>(state.iterations()),
                         benchmark::Counter::kAvgThreads);
}

void full_ipv4_decision(benchmark::State& state) {
  world& w = shared_world();
  const auto& seq = w.sequences[state.threads()][state.thread_index()];
  std::size_t i = 0;
  // Synthetic time: each thread sends 1M requests per second over its keys, so keys stay live
  // (about one request per key per second) and nearly all are admitted.
  core::nanos now = w.clock.load();
  std::int64_t admitted = 0;
  for (auto _ : state) {
    const auto client = limit::address::from_v4(seq[i]);
    const auto req = w.request(*w.general, client, now);
    const auto d = w.store->decide(req);
    const auto b = limit::binding_of(req, d);
    benchmark::DoNotOptimize(b);
    admitted += d.admitted;
    now += 1000;
    if (++i == seq.size()) i = 0;
  }
  finish_run(state, w, now, admitted);
}
BENCHMARK(full_ipv4_decision)->Threads(1)->Threads(2)->UseRealTime()->MinTime(2.0);

void global_limit_decision(benchmark::State& state) {
  // The full IPv4 decision with a global limit in the set: every request of every thread is
  // checked against one limit. It must not serialise the workers. Time is the real clock here:
  // threads' synthetic clocks drift apart by more than the global limit's tolerance.
  world& w = shared_world();
  const auto& seq = w.sequences[state.threads()][state.thread_index()];
  std::size_t i = 0;
  const core::nanos base = w.clock.load();
  const auto t0 = std::chrono::steady_clock::now();
  core::nanos now = base;
  std::int64_t admitted = 0;
  for (auto _ : state) {
    now = base + (std::chrono::steady_clock::now() - t0).count();
    auto req = w.request(*w.with_global, limit::address::from_v4(seq[i]), now);
    req.home = static_cast<std::uint32_t>(state.thread_index());  // a worker's own slice
    const auto d = w.store->decide(req);
    benchmark::DoNotOptimize(limit::binding_of(req, d));
    admitted += d.admitted;
    if (++i == seq.size()) i = 0;
  }
  finish_run(state, w, now, admitted);
}
BENCHMARK(global_limit_decision)->Threads(1)->Threads(2)->UseRealTime()->MinTime(2.0);

void prefetched_ipv4_decision(benchmark::State& state) {
  // As the gateway does: the next request's keys are prepared (prefetched) as soon as its
  // address and category are known, and its decision comes after other work, here the
  // decision of the request before it.
  world& w = shared_world();
  const auto& seq = w.sequences[state.threads()][state.thread_index()];
  std::size_t i = 0;
  core::nanos now = w.clock.load();
  auto next = w.request(*w.general, limit::address::from_v4(seq[0]), now);
  std::int64_t admitted = 0;
  for (auto _ : state) {
    const auto req = next;
    if (++i == seq.size()) i = 0;
    now += 1000;
    next = w.request(*w.general, limit::address::from_v4(seq[i]), now);
    w.store->prepare(next);
    const auto d = w.store->decide(req);
    benchmark::DoNotOptimize(limit::binding_of(req, d));
    admitted += d.admitted;
  }
  finish_run(state, w, now, admitted);
}
BENCHMARK(prefetched_ipv4_decision)->Threads(1)->Threads(2)->UseRealTime()->MinTime(2.0);

void skewed_ipv4_decision(benchmark::State& state) {
  // 1M live keys, requests Zipf-distributed over them (no prefetch).
  world& w = shared_world();
  std::size_t i = 0;
  core::nanos now = w.clock.load();
  std::int64_t admitted = 0;
  for (auto _ : state) {
    const auto req = w.request(*w.general, limit::address::from_v4(w.skewed[i]), now);
    const auto d = w.store->decide(req);
    benchmark::DoNotOptimize(limit::binding_of(req, d));
    admitted += d.admitted;
    now += 1000;
    if (++i == w.skewed.size()) i = 0;
  }
  finish_run(state, w, now, admitted);
}
BENCHMARK(skewed_ipv4_decision)->Threads(1)->UseRealTime()->MinTime(2.0);

void hot_key_ipv4_decision(benchmark::State& state) {
  // One client only: everything in L1, the floor under the 1M-key figure.
  world& w = shared_world();
  const auto client = w.clients[static_cast<std::size_t>(state.thread_index())];
  core::nanos now = w.start + core::ns_per_s;
  for (auto _ : state) {
    const auto req = w.request(*w.general, client, now);
    benchmark::DoNotOptimize(w.store->decide(req));
    now += 100'000'000;  // 10/s: admitted every time
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(hot_key_ipv4_decision)->Threads(1)->UseRealTime();

void rejected_ipv4_decision(benchmark::State& state) {
  // One client far past its limit: the 429 path (nothing is written).
  world& w = shared_world();
  const auto client = limit::address::parse("198.51.100.1").value();
  const core::nanos now = w.start;
  for (int i = 0; i < 100; ++i)
    w.store->decide(w.request(*w.general, client, now));
  for (auto _ : state) {
    const auto req = w.request(*w.general, client, now);
    const auto d = w.store->decide(req);
    if (d.admitted) state.SkipWithError("expected rejections");
    benchmark::DoNotOptimize(limit::binding_of(req, d));
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(rejected_ipv4_decision)->Threads(1)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  world& w = shared_world();
  std::printf(
      "memory: %zu tracked keys (1M /32 + their /24s), %zu bytes resident per key, "
      "%zu bytes reserved per key of capacity\n",
      w.tracked, w.bytes_per_key, w.reserved_per_key);
  std::printf("huge pages: %zu KiB of anonymous memory\n", huge_page_kib());
  std::printf("evictions while filling: %llu\n",
              static_cast<unsigned long long>(w.store->table(0).evictions() +
                                              w.store->table(1).evictions()));
  benchmark::RunSpecifiedBenchmarks();
  std::printf("evictions after the runs: %llu\n",
              static_cast<unsigned long long>(w.store->table(0).evictions() +
                                              w.store->table(1).evictions()));
  benchmark::Shutdown();
}
