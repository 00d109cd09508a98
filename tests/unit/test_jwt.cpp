// Verified identity (docs/design.md §15): tokens made by a library that is not ours (python3-jwt
// over python3-cryptography, tests/identity/make_vectors.py), each with the verdict the verifier
// must give: every algorithm accepted, every refusal with its reason; and the worker's cache of
// verified tokens.

#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>

#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "gateway/identity/jwt.hpp"
#include "gateway/identity/token_cache.hpp"
#include "gateway/pow/crypto.hpp"
#include "tests/identity/jwt_vectors.hpp"

namespace {

using namespace tollgate;
namespace json = boost::json;

const test::jwt_vectors& load() {
  return test::vectors();
}

identity::verifier make_verifier() {
  std::vector<std::string> skipped;
  identity::verifier out = load().verifier(&skipped);
  // The 1024-bit RSA key and the oct key are left out, each named.
  REQUIRE(skipped.size() == 2);
  CHECK(skipped[0].find("small") != std::string::npos);
  CHECK(skipped[0].find("2048") != std::string::npos);
  CHECK(skipped[1].find("unusable kty \"oct\"") != std::string::npos);
  return out;
}

std::string token_of(const char* name) {
  const std::string t = load().token(name);
  if (t.empty()) FAIL("no case " << name);
  return t;
}

}  // namespace

TEST_CASE("each token of the vectors gets its verdict, with its claims", "[identity]") {
  const identity::verifier v = make_verifier();
  const test::jwt_vectors& data = load();
  std::size_t verified = 0, refused = 0;
  for (const auto& c : data.root.at("cases").as_array()) {
    const std::string name(c.at("name").as_string());
    const std::string token(c.at("token").as_string());
    const std::string expect(c.at("expect").as_string());
    identity::claims claims;
    const identity::failure f = v.verify(token, data.now, claims);
    INFO(name);
    CHECK(identity::failure_name(f) == expect);
    if (f == identity::failure::none) {
      ++verified;
      const auto& want = c.at("claims").as_object();
      for (std::size_t i = 0; i < data.options.claim_paths.size(); ++i) {
        const std::string& path = data.options.claim_paths[i];
        CHECK(claims.values[i] == std::string(want.at(path).as_string()));
      }
    } else {
      ++refused;
    }
  }
  CHECK(verified == 14);
  CHECK(refused == 28);
}

TEST_CASE("HS256 is refused without a secret, whatever the list says", "[identity]") {
  identity::verifier_options o = load().options;
  o.secret.clear();
  identity::verifier v(o);
  v.set_keys(identity::key_set::parse(load().jwks));
  identity::claims c;
  CHECK(v.verify(token_of("HS256 verifies with the secret"), load().now, c) ==
        identity::failure::alg_not_allowed);
  CHECK(v.verify(token_of("RS256 verifies"), load().now, c) == identity::failure::none);
}

TEST_CASE("without a key set every asymmetric token is refused as of an unknown key",
          "[identity]") {
  identity::verifier v(load().options);
  identity::claims c;
  CHECK(v.verify(token_of("RS256 verifies"), load().now, c) == identity::failure::unknown_kid);
}

TEST_CASE("a key set that is not one is refused with its reason", "[identity]") {
  CHECK_THROWS_WITH(identity::key_set::parse("[1]"), "not a JSON object");
  CHECK_THROWS_WITH(identity::key_set::parse("{\"keys\": 1}"), "\"keys\" is not an array");
  CHECK_THROWS_WITH(identity::key_set::parse("{\"keys\": []}"), "no usable key in the set");
  CHECK_THROWS_WITH(identity::key_set::parse("{\"keys\": [{\"kty\": \"EC\", \"crv\": \"P-256\", "
                                             "\"x\": \"AAAA\", \"y\": \"AAAA\"}]}"),
                    "no usable key in the set");
  // A point that is not on the curve is refused by OpenSSL, not trusted.
  const std::string off_curve = "{\"kty\":\"EC\",\"crv\":\"P-256\",\"x\":\"" +
                                std::string(43, 'A') + "\",\"y\":\"" + std::string(42, 'A') +
                                "E\"}";
  std::vector<std::string> skipped;
  CHECK_THROWS(identity::key_set::parse(off_curve, &skipped));
  REQUIRE(skipped.size() == 1);
}

TEST_CASE("an EC key whose coordinates leave out leading zero bytes is read, padded",
          "[identity]") {
  // PyJWT before 2.8 writes an EC coordinate in as few bytes as its number needs: a P-256 key
  // whose x starts with a zero byte (one in 256) is published with a 31-byte x.
  std::string x, y;
  for (int tries = 0; tries < 20000 && x.empty(); ++tries) {
    EVP_PKEY* key = EVP_EC_gen("P-256");
    REQUIRE(key != nullptr);
    unsigned char point[65];
    std::size_t length = 0;
    REQUIRE(EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_PUB_KEY, point, sizeof point,
                                            &length) == 1);
    EVP_PKEY_free(key);
    REQUIRE(length == 65);
    if (point[1] != 0) continue;
    x.assign(reinterpret_cast<const char*>(point) + 2, 31);  // the zero byte left out
    y.assign(reinterpret_cast<const char*>(point) + 33, 32);
  }
  REQUIRE(x.size() == 31);
  auto jwk = [](std::string_view xs, std::string_view ys) {
    return json::serialize(
        json::object{{"keys", json::array{json::object{{"kty", "EC"},
                                                       {"crv", "P-256"},
                                                       {"kid", "short"},
                                                       {"x", pow::base64url_encode(xs)},
                                                       {"y", pow::base64url_encode(ys)}}}}});
  };
  CHECK(identity::key_set::parse(jwk(x, y))->keys().size() == 1);
  // Longer than the curve's size, or empty: refused.
  std::vector<std::string> skipped;
  CHECK_THROWS(identity::key_set::parse(jwk(std::string(2, '\0') + x, y), &skipped));
  CHECK_THROWS(identity::key_set::parse(jwk("", y), &skipped));
}

TEST_CASE("a hot token is verified once, then answered from the cache", "[identity]") {
  const identity::verifier v = make_verifier();
  identity::token_cache cache(16, {1, 2});
  const std::string token = token_of("ES256 verifies");
  for (int i = 0; i < 5; ++i) {
    const identity::token_result r = cache.check(v, token, load().now);
    REQUIRE(r.why == identity::failure::none);
    CHECK(r.verified->values[0] == "user-1");
  }
  CHECK(cache.verifications() == 1);
  CHECK(cache.hits() == 4);
  // A refusal time cannot change is remembered too; an expired token is not.
  const std::string forged = token_of("a signature of another key");
  CHECK(cache.check(v, forged, load().now).why == identity::failure::bad_signature);
  CHECK(cache.check(v, forged, load().now).why == identity::failure::bad_signature);
  CHECK(cache.verifications() == 2);
  const std::string expired = token_of("expired");
  CHECK(cache.check(v, expired, load().now).why == identity::failure::expired);
  CHECK(cache.check(v, expired, load().now).why == identity::failure::expired);
  CHECK(cache.verifications() == 4);
}

TEST_CASE(
    "a token that copies a cached token's signature over other claims is verified, and refused",
    "[identity]") {
  const identity::verifier v = make_verifier();
  identity::token_cache cache(16, {7, 8});
  const std::string token = token_of("ES256 verifies");
  REQUIRE(cache.check(v, token, load().now).why == identity::failure::none);
  // The same length and the same last bytes (the signature), another payload: the cache finds
  // the entry by its tail, compares the whole token, and verifies this one, which fails.
  const auto first_dot = token.find('.');
  std::string altered = token;
  altered[first_dot + 5] = altered[first_dot + 5] == 'A' ? 'B' : 'A';
  const identity::token_result r = cache.check(v, altered, load().now);
  CHECK_FALSE(r.cached);
  CHECK(r.why != identity::failure::none);
  CHECK(cache.verifications() == 2);
  // Tokens shorter than the tail the cache reads, the empty one included, are refused alike.
  for (const std::string_view tiny : {std::string_view(), std::string_view("a.b.c")}) {
    CHECK(cache.check(v, tiny, load().now).why == identity::failure::malformed);
  }
  // And the same holds for a refusal remembered: its whole token's hash is compared.
  std::string again = altered;
  again[first_dot + 6] = again[first_dot + 6] == 'A' ? 'B' : 'A';
  CHECK_FALSE(cache.check(v, again, load().now).cached);
  CHECK(cache.check(v, again, load().now).cached);
  CHECK(cache.check(v, token, load().now).why == identity::failure::none);
}

TEST_CASE("a cached token expires with its exp, and a new key set verifies it again",
          "[identity]") {
  identity::verifier v = make_verifier();
  identity::token_cache cache(16, {3, 4});
  const std::string token = token_of("RS256 verifies");
  const std::int64_t now = load().now;
  REQUIRE(cache.check(v, token, now).why == identity::failure::none);
  CHECK(cache.check(v, token, now + 3600 + 30).why == identity::failure::none);  // leeway
  CHECK(cache.verifications() == 1);
  CHECK(cache.check(v, token, now + 3600 + 31).why == identity::failure::expired);
  CHECK(cache.verifications() == 2);
  // Keys rotated: the key "rsa" is gone, and the token with it.
  const std::string only_ec = json::serialize(
      json::object{{"keys", json::array{[&] {
                      for (const auto& k : load().root.at("jwks").at("keys").as_array())
                        if (k.at("kid") == "p256") return k;
                      return json::value();
                    }()}}});
  REQUIRE(cache.check(v, token, now).why == identity::failure::none);
  v.set_keys(identity::key_set::parse(only_ec));
  CHECK(cache.check(v, token, now).why == identity::failure::unknown_kid);
  CHECK(cache.check(v, token_of("ES256 verifies"), now).why == identity::failure::none);
}

TEST_CASE("the cache holds at most its capacity, the least recently used going first",
          "[identity]") {
  const identity::verifier v = make_verifier();
  identity::token_cache cache(2, {5, 6});
  const std::string a = token_of("RS256 verifies"), b = token_of("ES256 verifies"),
                    c = token_of("EdDSA verifies");
  const std::int64_t now = load().now;
  cache.check(v, a, now);
  cache.check(v, b, now);
  cache.check(v, a, now);  // a is now the most recent
  cache.check(v, c, now);  // b goes
  CHECK(cache.size() == 2);
  CHECK(cache.verifications() == 3);
  cache.check(v, a, now);
  CHECK(cache.verifications() == 3);
  cache.check(v, b, now);
  CHECK(cache.verifications() == 4);
}
