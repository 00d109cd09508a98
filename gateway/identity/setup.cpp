#include "gateway/identity/setup.hpp"

#include <cstdlib>

#include "gateway/config/error.hpp"

namespace tollgate::identity {

std::shared_ptr<verifier> make_verifier(const config::gateway_config& c,
                                        const std::vector<std::string>& claim_paths,
                                        std::vector<std::string>* skipped) {
  if (!c.identity.jwt) return nullptr;
  const config::jwt_config& j = *c.identity.jwt;
  verifier_options o;
  for (const std::string& name : j.algorithms) {
    algorithm a{};
    if (algorithm_of(name, a)) o.algorithms.push_back(a);
  }
  if (!j.secret_env.empty()) {
    const char* secret = std::getenv(j.secret_env.c_str());
    if (secret == nullptr || *secret == '\0') {
      throw config::error(c.file, j.line, "identity.jwt.secret_env",
                          "the environment variable " + j.secret_env + " is not set or empty");
    }
    o.secret = secret;
  }
  o.issuer = j.issuer;
  o.audiences = j.audience;
  o.leeway = std::chrono::duration_cast<std::chrono::seconds>(j.leeway).count();
  o.claim_paths = claim_paths;
  auto v = std::make_shared<verifier>(std::move(o));
  if (!j.jwks_file.empty()) {
    try {
      v->set_keys(key_set::parse(j.jwks, skipped));
    } catch (const std::exception& e) {
      throw config::error(c.file, j.jwks_file_line, "identity.jwt.jwks_file",
                          "'" + j.jwks_file + "' is not a usable JWK Set: " + e.what());
    }
  }
  return v;
}

}  // namespace tollgate::identity
