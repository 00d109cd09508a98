/// Fuzz target: what the identity layer reads from untrusted bytes (gateway/identity/jwt.*): a
/// request's token, and a JWK Set (a file an operator points at, or the body a jwks_url
/// answers with).
///
/// Input: one byte, then the rest. Byte 0 even: the rest is a token, verified against the JWK
/// Set and secret of tests/unit/golden/jwt_vectors.json at that file's instant, through a
/// worker's cache as the gateway does; checked: the verdict is the same twice, and the same
/// from the cache as without it; a verified token has one value per claim path. Byte 0 odd: the
/// rest is a JWK Set; checked: it is read or refused with an exception, never more keys than
/// the text could hold, and every key it keeps is usable (has an EVP key).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/identity/jwt.hpp"
#include "gateway/identity/token_cache.hpp"
#include "tests/identity/jwt_vectors.hpp"

namespace {

using namespace tollgate;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_jwt: %s\n", what);
  std::abort();
}

struct setup {
  identity::verifier v = test::vectors().verifier();
  identity::token_cache cache{64, {7, 9}};
  std::int64_t now = test::vectors().now;
};

setup& state() {
  static setup* s = new setup;
  return *s;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  setup& s = state();
  // A heap copy of exactly the bytes given, so that ASan sees any over-read.
  const std::vector<char> rest(data + 1, data + size);
  const std::string_view text(rest.data(), rest.size());
  if ((data[0] & 1) == 0) {
    identity::claims a, b;
    const identity::failure first = s.v.verify(text, s.now, a);
    require(first == s.v.verify(text, s.now, b), "two verdicts on one token");
    require(static_cast<std::size_t>(first) < core::token_failure_count, "a verdict out of range");
    if (first == identity::failure::none) {
      require(a.values.size() == s.v.options().claim_paths.size(), "claims missing");
      require(a.values == b.values, "claims differ");
    }
    const identity::token_result cached = s.cache.check(s.v, text, s.now);
    require(cached.why == first, "the cache changes the verdict");
    require((cached.verified != nullptr) == (first == identity::failure::none),
            "claims without a verdict");
    if (cached.verified) require(cached.verified->values == a.values, "cached claims differ");
    return 0;
  }
  try {
    const auto set = identity::key_set::parse(text);
    require(!set->keys().empty(), "an empty set was accepted");
    require(set->keys().size() <= text.size() / 8, "more keys than the text holds");
    for (const auto& k : set->keys())
      require(k.key != nullptr, "a key without its EVP key");
  } catch (const std::exception&) {
    // Refused, with a reason: what a broken file gets.
  }
  return 0;
}
