#pragma once
// The JWT vectors of tests/unit/golden/jwt_vectors.json (made by python3-jwt,
// tests/identity/make_vectors.py), read once: the unit tests, fuzz_jwt and bench/jwt_bench
// verify against the same key set, secret and instant. Needs TOLLGATE_SOURCE_DIR.

#include <boost/json.hpp>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/identity/jwt.hpp"

namespace tollgate::test {

struct jwt_vectors {
  boost::json::object root;            ///< the whole file
  std::string jwks;                    ///< its JWK Set, as text
  identity::verifier_options options;  ///< its algorithms, secret, issuer, audience, paths
  std::int64_t now = 0;                ///< the instant of every verdict

  /// The token of case `name`, or "".
  std::string token(std::string_view name) const {
    for (const auto& c : root.at("cases").as_array()) {
      if (c.at("name").as_string() == name) return std::string(c.at("token").as_string());
    }
    return {};
  }
  /// A verifier of these options over the vectors' key set; the keys it leaves out in `skipped`.
  identity::verifier verifier(std::vector<std::string>* skipped = nullptr) const {
    identity::verifier v(options);
    v.set_keys(identity::key_set::parse(jwks, skipped));
    return v;
  }
};

/// The vectors, read at the first call.
inline const jwt_vectors& vectors() {
  static const jwt_vectors v = [] {
    std::ifstream in(TOLLGATE_SOURCE_DIR "/tests/unit/golden/jwt_vectors.json");
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    jwt_vectors out;
    out.root = boost::json::parse(text).as_object();
    out.jwks = boost::json::serialize(out.root.at("jwks"));
    out.now = out.root.at("now").as_int64();
    for (const auto& a : out.root.at("algorithms").as_array()) {
      identity::algorithm alg{};
      if (identity::algorithm_of(std::string(a.as_string()), alg))
        out.options.algorithms.push_back(alg);
    }
    out.options.secret = std::string(out.root.at("secret").as_string());
    out.options.issuer = std::string(out.root.at("issuer").as_string());
    out.options.audiences = {std::string(out.root.at("audience").as_string())};
    out.options.leeway = 30;
    for (const auto& p : out.root.at("claim_paths").as_array())
      out.options.claim_paths.emplace_back(p.as_string());
    return out;
  }();
  return v;
}

}  // namespace tollgate::test
