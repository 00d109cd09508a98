// What a token costs (docs/design.md §15): the first verification of a token per algorithm
// (the signature checked: what a worker pays once per token), and a token answered from a
// worker's cache (what every later request with it pays). Tokens and keys are the unit tests'
// vectors (tests/unit/golden/jwt_vectors.json, made by python3-jwt).
//   build/bench/tollgate_jwt_bench

#include <benchmark/benchmark.h>

#include <boost/json.hpp>
#include <fstream>
#include <iterator>
#include <string>

#include "gateway/identity/jwt.hpp"
#include "gateway/identity/token_cache.hpp"

namespace {

using namespace tollgate;

struct vectors {
  identity::verifier v{identity::verifier_options{}};
  boost::json::object root;
  std::int64_t now = 0;
};

vectors& data() {
  static vectors* d = [] {
    std::ifstream in(TOLLGATE_SOURCE_DIR "/tests/unit/golden/jwt_vectors.json");
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    auto root = boost::json::parse(text).as_object();
    identity::verifier_options o;
    for (const auto& a : root.at("algorithms").as_array()) {
      identity::algorithm alg{};
      if (identity::algorithm_of(std::string(a.as_string()), alg)) o.algorithms.push_back(alg);
    }
    o.secret = std::string(root.at("secret").as_string());
    o.issuer = std::string(root.at("issuer").as_string());
    o.audiences = {std::string(root.at("audience").as_string())};
    for (const auto& p : root.at("claim_paths").as_array())
      o.claim_paths.emplace_back(p.as_string());
    auto* out = new vectors{identity::verifier(o), root, root.at("now").as_int64()};
    out->v.set_keys(identity::key_set::parse(boost::json::serialize(root.at("jwks"))));
    return out;
  }();
  return *d;
}

std::string token(const char* name) {
  for (const auto& c : data().root.at("cases").as_array()) {
    if (c.at("name").as_string() == name) return std::string(c.at("token").as_string());
  }
  return {};
}

void verify(benchmark::State& state, const char* name) {
  const std::string t = token(name);
  identity::claims c;
  for (auto _ : state) {
    if (data().v.verify(t, data().now, c) != identity::failure::none)
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
  cache.check(data().v, t, data().now);
  for (auto _ : state) {
    benchmark::DoNotOptimize(cache.check(data().v, t, data().now));
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
