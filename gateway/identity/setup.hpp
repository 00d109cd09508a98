#pragma once
/// The verifier of a configuration (`identity.jwt`, docs/design.md §15), made when a
/// configuration is loaded or checked.

#include <memory>
#include <string>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/identity/jwt.hpp"

namespace tollgate::identity {

/// The verifier `identity.jwt` of gateway file `c` describes, reading `claim_paths` of every
/// token; null when it has none. Its key set is jwks_file's, read now (a jwks_url's arrives
/// later, through verifier::set_keys); the HS* secret comes from secret_env. Throws
/// config::error naming the file, line and key when the key set is not one, or the variable is
/// unset or empty. Keys of the set it cannot use are named in `skipped`.
std::shared_ptr<verifier> make_verifier(const config::gateway_config& c,
                                        const std::vector<std::string>& claim_paths,
                                        std::vector<std::string>* skipped = nullptr);

}  // namespace tollgate::identity
