// Micro-benchmark of the proof-of-work path (issue: proof of work): issuing a challenge and
// verifying a proof on one core, the client's work excluded. Run by bench/pow.sh.

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "gateway/policy/pow_gate.hpp"

using namespace tollgate;

namespace {

constexpr std::int64_t now_s = 1'800'000'000;

policy::pow_state make_state() {
  config::pow_settings settings;
  settings.replay_cache_entries = 1'000'000;
  return policy::pow_state("a secret of the benchmark", settings, config::pow_counters_config{});
}

policy::client_subjects client() {
  return policy::subjects_of(*core::address::parse("198.51.100.7"), limit::level_prefixes{});
}

/// The 428's values: a new challenge (header lines and body are rendered by net).
void issue_challenge(benchmark::State& state) {
  const auto s = make_state();
  const auto who = client();
  policy::category_pow cat;
  cat.tag = pow::category_tag("auth");
  policy::challenge_values a;
  for (auto _ : state) {
    policy::issue_challenge(s, who, cat, 20, pow::proof_failure::none, now_s, a);
    benchmark::DoNotOptimize(a);
  }
}
BENCHMARK(issue_challenge);

/// A valid proof checked and spent (MAC, expiry, binding, work, replay cache). Proofs are
/// solved beforehand at 8 bits: the difficulty changes the client's cost, not ours.
void verify_valid_proof(benchmark::State& state) {
  auto s = make_state();
  const auto who = client();
  policy::category_pow cat;
  cat.tag = pow::category_tag("auth");
  std::vector<std::string> solutions;
  for (int i = 0; i < 20'000; ++i) {
    const std::string ch = s.challenger().issue({now_s + 60, 8, cat.tag, who.tag});
    solutions.push_back(ch + ":" + pow::solve(ch, 8, 1));
  }
  std::size_t i = 0;
  for (auto _ : state) {
    auto p = policy::check_proof(s, solutions[i++ % solutions.size()], who, cat, now_s);
    benchmark::DoNotOptimize(policy::claim_proof(s, p, 8) && policy::commit_proof(s, p, now_s));
  }
}
BENCHMARK(verify_valid_proof)->Iterations(20'000);

/// A forged proof (the flood of invalid proofs): refused at the MAC.
void verify_forged_proof(benchmark::State& state) {
  const auto s = make_state();
  const auto who = client();
  policy::category_pow cat;
  cat.tag = pow::category_tag("auth");
  std::string forged =
      policy::pow_state("another secret", config::pow_settings{}, config::pow_counters_config{})
          .challenger()
          .issue({now_s + 60, 8, cat.tag, who.tag});
  forged += ":12345";
  for (auto _ : state) {
    auto p = policy::check_proof(s, forged, who, cat, now_s);
    benchmark::DoNotOptimize(p);
  }
}
BENCHMARK(verify_forged_proof);

}  // namespace

BENCHMARK_MAIN();
