// What a token costs (docs/design.md §15): the first verification of a token per algorithm
// (the signature checked: what a worker pays once per token), and a token answered from a
// worker's cache (what every later request with it pays). Tokens and keys are the unit tests'
// vectors (tests/unit/golden/jwt_vectors.json, made by python3-jwt).
//   build/bench/tollgate_jwt_bench

#include <benchmark/benchmark.h>

#include <string>

#include "gateway/identity/jwt.hpp"
#include "gateway/identity/token_cache.hpp"
#include "tests/identity/jwt_vectors.hpp"

namespace {

using namespace tollgate;

const identity::verifier& verifier() {
  static const identity::verifier v = test::vectors().verifier();
  return v;
}

std::string token(const char* name) {
  return test::vectors().token(name);
}

void verify(benchmark::State& state, const char* name) {
  const std::string t = token(name);
  identity::claims c;
  for (auto _ : state) {
    if (verifier().verify(t, test::vectors().now, c) != identity::failure::none)
      state.SkipWithError("refused");
    benchmark::DoNotOptimize(c);
  }
}

void BM_first_verification_RS256(benchmark::State& s) {
  verify(s, "RS256 verifies");
}
void BM_first_verification_PS256(benchmark::State& s) {
  verify(s, "PS256 verifies");
}
void BM_first_verification_ES256(benchmark::State& s) {
  verify(s, "ES256 verifies");
}
void BM_first_verification_EdDSA(benchmark::State& s) {
  verify(s, "EdDSA verifies");
}
void BM_first_verification_HS256(benchmark::State& s) {
  verify(s, "HS256 verifies with the secret");
}

void BM_cached_token(benchmark::State& state) {
  const std::string t = token("ES256 verifies");
  identity::token_cache cache(1024, {1, 2});
  cache.check(verifier(), t, test::vectors().now);
  for (auto _ : state) {
    benchmark::DoNotOptimize(cache.check(verifier(), t, test::vectors().now));
  }
}

BENCHMARK(BM_first_verification_RS256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_first_verification_PS256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_first_verification_ES256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_first_verification_EdDSA)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_first_verification_HS256)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_cached_token)->Unit(benchmark::kNanosecond);

}  // namespace

BENCHMARK_MAIN();
