// Micro-benchmark of the limiter core: one full IPv4 decision (keys from the address, 2 levels x
// 2 tiers checked and committed, binding limit for the headers) with 1 million live keys, on 1
// and 2 threads, and the memory each tracked key costs. Run through bench/limiter.sh.

#include <benchmark/benchmark.h>
#include <unistd.h>

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
constexpr std::size_t sequence_length = 1u << 23;  // 8M requests, visited in a random order

std::size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
}

/// Everything the benchmarks share: the default policy, a store holding 1M live /32 keys (and
/// their /24s), and a random sequence of requests over those keys.
struct world {
  limit::scope_registry scopes;
  std::unique_ptr<policy::compiled_policy> policy;
  const policy::category_limits* general = nullptr;
  std::unique_ptr<limit::memory_store> store;
  std::vector<limit::address> clients;
  std::vector<std::uint32_t> sequence;  // indexes into clients
  core::nanos start = 1'735'000'000 * core::ns_per_s;
  std::size_t bytes_per_key = 0;
  std::size_t tracked = 0;
  std::size_t reserved_per_key = 0;

  world() {
    const auto cfg =
        config::load_policies({std::string(TOLLGATE_SOURCE_DIR) + "/policies/default.yaml"});
    policy = std::make_unique<policy::compiled_policy>(cfg, scopes, core::siphash_key{1, 2});
    general = policy->find("general");

    // Random addresses: ~1M distinct /24s as well, the costly case for the cache.
    std::mt19937_64 rng(2024);
    std::vector<std::uint32_t> seen;
    clients.reserve(live_keys);
    for (std::size_t i = 0; i < live_keys; ++i) {
      clients.push_back(limit::address::from_v4(static_cast<std::uint32_t>(rng())));
    }

    const std::size_t before = resident_bytes();
    limit::store_capacity capacity;
    capacity.ipv4_individual = live_keys;
    capacity.ipv4_network = live_keys;
    capacity.ipv6_subnet = 1;
    capacity.ipv6_provider = 1;
    capacity.keyed = 1;
    store = std::make_unique<limit::memory_store>(capacity, 0x5eed);
    for (const auto& c : clients)
      store->decide_now(policy->request(*general, c, "", start));
    tracked =
        store->tracked(limit::level::ipv4_individual) + store->tracked(limit::level::ipv4_network);
    bytes_per_key = (resident_bytes() - before) / tracked;
    const auto& t1 = store->table_for(limit::level::ipv4_individual);
    reserved_per_key = t1.memory_bytes() / t1.capacity();

    sequence.resize(sequence_length);
    for (auto& s : sequence)
      s = static_cast<std::uint32_t>(rng() % live_keys);
  }
};

world& shared_world() {
  static world w;
  return w;
}

void full_ipv4_decision(benchmark::State& state) {
  world& w = shared_world();
  // Each thread walks its own stretch of the sequence and only its own half of the clients,
  // so two threads work on distinct keys.
  const std::size_t threads = static_cast<std::size_t>(state.threads());
  const std::size_t span = sequence_length / threads;
  std::size_t i = span * static_cast<std::size_t>(state.thread_index());
  const std::size_t first = i;
  // Synthetic time: 1M requests per second over 1M keys, so keys stay live and admitted.
  core::nanos now = w.start + core::ns_per_s;
  std::int64_t admitted = 0;
  for (auto _ : state) {
    const std::uint32_t c = w.sequence[i];
    const auto& client = w.clients[(c / threads) * threads + state.thread_index()];
    const auto req = w.policy->request(*w.general, client, "", now);
    const auto d = w.store->decide_now(req);
    const auto b = limit::binding_of(req, d);
    benchmark::DoNotOptimize(b);
    admitted += d.admitted;
    now += 1000;
    if (++i == first + span) i = first;
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["admitted_share"] =
      benchmark::Counter(static_cast<double>(admitted) / static_cast<double>(state.iterations()),
                         benchmark::Counter::kAvgThreads);
}
BENCHMARK(full_ipv4_decision)->Threads(1)->Threads(2)->UseRealTime()->MinTime(2.0);

void hot_key_ipv4_decision(benchmark::State& state) {
  // One client only: everything in L1, the floor under the 1M-key figure.
  world& w = shared_world();
  const auto client = w.clients[static_cast<std::size_t>(state.thread_index())];
  core::nanos now = w.start + core::ns_per_s;
  for (auto _ : state) {
    const auto req = w.policy->request(*w.general, client, "", now);
    benchmark::DoNotOptimize(w.store->decide_now(req));
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
    w.store->decide_now(w.policy->request(*w.general, client, "", now));
  for (auto _ : state) {
    const auto req = w.policy->request(*w.general, client, "", now);
    const auto d = w.store->decide_now(req);
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
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
}
