#include "gateway/identity/jwt.hpp"

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/param_build.h>
#include <openssl/rsa.h>

#include <atomic>
#include <boost/json.hpp>
#include <mutex>
#include <stdexcept>

#include "gateway/pow/crypto.hpp"

namespace tollgate::identity {

namespace json = boost::json;

namespace {

constexpr std::string_view names[algorithm_count] = {"RS256", "RS384", "RS512", "PS256", "PS384",
                                                     "PS512", "ES256", "ES384", "ES512", "EdDSA",
                                                     "HS256", "HS384", "HS512"};

enum family : std::uint8_t { rsa, p256, p384, p521, ed25519 };

/// The key family algorithm `a` verifies with.
std::uint8_t family_of(algorithm a) noexcept {
  switch (a) {
    case algorithm::ES256:
      return p256;
    case algorithm::ES384:
      return p384;
    case algorithm::ES512:
      return p521;
    case algorithm::EdDSA:
      return ed25519;
    default:
      return rsa;
  }
}

/// The digest of `a`; null for EdDSA (Ed25519 hashes inside).
const EVP_MD* digest_of(algorithm a) noexcept {
  switch (a) {
    case algorithm::RS256:
    case algorithm::PS256:
    case algorithm::ES256:
    case algorithm::HS256:
      return EVP_sha256();
    case algorithm::RS384:
    case algorithm::PS384:
    case algorithm::ES384:
    case algorithm::HS384:
      return EVP_sha384();
    case algorithm::RS512:
    case algorithm::PS512:
    case algorithm::ES512:
    case algorithm::HS512:
      return EVP_sha512();
    case algorithm::EdDSA:
      break;
  }
  return nullptr;
}

/// Bytes of one coordinate (and of r and s) per EC family.
std::size_t coordinate_bytes(std::uint8_t f) noexcept {
  return f == p256 ? 32 : f == p384 ? 48 : 66;
}

/// JSON parsing with small bounds: a token's parts and a key set are objects a few levels deep.
json::value parse_json(std::string_view text, std::size_t depth) {
  json::parse_options opt;
  opt.max_depth = depth;
  std::error_code ec;
  json::value v = json::parse(json::string_view(text.data(), text.size()), ec, {}, opt);
  if (ec) return nullptr;
  return v;
}

std::string_view string_of(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(json::string_view(name.data(), name.size()));
  if (v == nullptr || !v->is_string()) return {};
  const json::string& s = v->get_string();
  return {s.data(), s.size()};
}

/// The bytes of a base64url member of a JWK; throws when absent or malformed.
std::string member_bytes(const json::object& k, std::string_view name) {
  const auto bytes = pow::base64url_decode(string_of(k, name));
  if (!bytes || bytes->empty()) {
    throw std::runtime_error("member \"" + std::string(name) + "\" missing or not base64url");
  }
  return *bytes;
}

using pkey_ptr = std::shared_ptr<void>;
pkey_ptr own(EVP_PKEY* k) {
  if (k == nullptr) throw std::runtime_error("OpenSSL refused the key");
  return pkey_ptr(k, [](void* p) { EVP_PKEY_free(static_cast<EVP_PKEY*>(p)); });
}

/// An EVP_PKEY from OSSL_PARAMs built by `push`, of key type `type`.
template <class Push>
pkey_ptr from_params(const char* type, Push&& push) {
  OSSL_PARAM_BLD* bld = OSSL_PARAM_BLD_new();
  std::vector<BIGNUM*> bns;
  EVP_PKEY* key = nullptr;
  EVP_PKEY_CTX* ctx = nullptr;
  OSSL_PARAM* params = nullptr;
  if (bld != nullptr && push(bld, bns) && (params = OSSL_PARAM_BLD_to_param(bld)) != nullptr &&
      (ctx = EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr)) != nullptr &&
      EVP_PKEY_fromdata_init(ctx) == 1) {
    if (EVP_PKEY_fromdata(ctx, &key, EVP_PKEY_PUBLIC_KEY, params) != 1) key = nullptr;
  }
  EVP_PKEY_CTX_free(ctx);
  OSSL_PARAM_free(params);
  OSSL_PARAM_BLD_free(bld);
  for (BIGNUM* b : bns)
    BN_free(b);
  return own(key);
}

pkey_ptr rsa_key(const json::object& k) {
  const std::string n = member_bytes(k, "n");
  const std::string e = member_bytes(k, "e");
  if (n.size() < 256) throw std::runtime_error("RSA key under 2048 bits");
  return from_params("RSA", [&](OSSL_PARAM_BLD* bld, std::vector<BIGNUM*>& bns) {
    for (const auto& [name, bytes] :
         {std::pair{OSSL_PKEY_PARAM_RSA_N, &n}, {OSSL_PKEY_PARAM_RSA_E, &e}}) {
      BIGNUM* b = BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes->data()),
                            static_cast<int>(bytes->size()), nullptr);
      if (b == nullptr) return false;
      bns.push_back(b);
      if (OSSL_PARAM_BLD_push_BN(bld, name, b) != 1) return false;
    }
    return true;
  });
}

pkey_ptr ec_key(const json::object& k, std::uint8_t f) {
  std::string x = member_bytes(k, "x");
  std::string y = member_bytes(k, "y");
  const std::size_t n = coordinate_bytes(f);
  if (x.empty() || y.empty() || x.size() > n || y.size() > n) {
    throw std::runtime_error("EC coordinates of the wrong size");
  }
  // RFC 7518 §6.2.1.2 wants the curve's full size, but some libraries (PyJWT before 2.8) leave
  // out leading zero bytes, about one key in a hundred: padded back (the point is still checked
  // on the curve).
  x.insert(0, n - x.size(), '\0');
  y.insert(0, n - y.size(), '\0');
  std::string point = "\x04" + x + y;  // uncompressed (SEC 1 §2.3.3); checked on the curve
  const char* group = f == p256 ? "prime256v1" : f == p384 ? "secp384r1" : "secp521r1";
  return from_params("EC", [&](OSSL_PARAM_BLD* bld, std::vector<BIGNUM*>&) {
    return OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, group, 0) == 1 &&
           OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                            point.size()) == 1;
  });
}

pkey_ptr ed25519_key(const json::object& k) {
  const std::string x = member_bytes(k, "x");
  if (x.size() != 32) throw std::runtime_error("Ed25519 key of the wrong size");
  return own(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                         reinterpret_cast<const unsigned char*>(x.data()), 32));
}

/// One JWK of a set; throws with the reason it cannot be used.
jwk read_jwk(const json::object& k) {
  jwk out;
  out.kid = std::string(string_of(k, "kid"));
  const std::string_view use = string_of(k, "use");
  if (!use.empty() && use != "sig") throw std::runtime_error("\"use\" is not \"sig\"");
  const std::string_view kty = string_of(k, "kty");
  const std::string_view alg = string_of(k, "alg");
  if (!alg.empty()) {
    if (!algorithm_of(alg, out.alg))
      throw std::runtime_error("unknown alg \"" + std::string(alg) + "\"");
    if (is_hmac(out.alg)) throw std::runtime_error("HMAC keys come from secret_env only");
    out.alg_fixed = true;
  }
  if (kty == "RSA") {
    out.family = rsa;
    out.key = rsa_key(k);
    if (!out.alg_fixed) out.alg = algorithm::RS256;
  } else if (kty == "EC") {
    const std::string_view crv = string_of(k, "crv");
    if (crv == "P-256") {
      out.family = p256;
    } else if (crv == "P-384") {
      out.family = p384;
    } else if (crv == "P-521") {
      out.family = p521;
    } else {
      throw std::runtime_error("unknown curve \"" + std::string(crv) + "\"");
    }
    out.key = ec_key(k, out.family);
    if (!out.alg_fixed)
      out.alg = out.family == p256   ? algorithm::ES256
                : out.family == p384 ? algorithm::ES384
                                     : algorithm::ES512;
  } else if (kty == "OKP") {
    if (string_of(k, "crv") != "Ed25519") throw std::runtime_error("OKP key not on Ed25519");
    out.family = ed25519;
    out.key = ed25519_key(k);
    if (!out.alg_fixed) out.alg = algorithm::EdDSA;
  } else {
    throw std::runtime_error("unusable kty \"" + std::string(kty) + "\"");
  }
  if (out.alg_fixed && family_of(out.alg) != out.family) {
    throw std::runtime_error("\"alg\" does not fit the key type");
  }
  return out;
}

/// An ECDSA signature in JWS form (r || s, RFC 7518 §3.4) as DER, which OpenSSL verifies.
bool ecdsa_der(std::string_view rs, std::size_t n, std::string& der) {
  if (rs.size() != 2 * n) return false;
  ECDSA_SIG* sig = ECDSA_SIG_new();
  if (sig == nullptr) return false;
  BIGNUM* r =
      BN_bin2bn(reinterpret_cast<const unsigned char*>(rs.data()), static_cast<int>(n), nullptr);
  BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(rs.data() + n), static_cast<int>(n),
                        nullptr);
  bool ok = false;
  if (r != nullptr && s != nullptr && ECDSA_SIG_set0(sig, r, s) == 1) {
    r = s = nullptr;  // owned by sig now
    unsigned char* p = nullptr;
    const int len = i2d_ECDSA_SIG(sig, &p);
    if (len > 0) {
      der.assign(reinterpret_cast<const char*>(p), static_cast<std::size_t>(len));
      ok = true;
    }
    OPENSSL_free(p);
  }
  BN_free(r);
  BN_free(s);
  ECDSA_SIG_free(sig);
  return ok;
}

/// Verifies `signature` over `input` with `key` under asymmetric algorithm `a`.
bool verify_signature(algorithm a, EVP_PKEY* key, std::uint8_t f, std::string_view input,
                      std::string_view signature) {
  std::string der;
  if (f == p256 || f == p384 || f == p521) {
    if (!ecdsa_der(signature, coordinate_bytes(f), der)) return false;
    signature = der;
  }
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return false;
  EVP_PKEY_CTX* pctx = nullptr;
  bool ok = EVP_DigestVerifyInit(ctx, &pctx, digest_of(a), nullptr, key) == 1;
  if (ok && (a == algorithm::PS256 || a == algorithm::PS384 || a == algorithm::PS512)) {
    // RFC 7518 §3.5: MGF1 with the same hash, a salt as long as the hash.
    ok = EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) == 1 &&
         EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_DIGEST) == 1;
  } else if (ok && f == rsa) {
    ok = EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) == 1;
  }
  ok = ok && EVP_DigestVerify(
                 ctx, reinterpret_cast<const unsigned char*>(signature.data()), signature.size(),
                 reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1;
  EVP_MD_CTX_free(ctx);
  return ok;
}

bool verify_hmac(algorithm a, std::string_view secret, std::string_view input,
                 std::string_view signature) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(digest_of(a), secret.data(), static_cast<int>(secret.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), mac,
           &len) == nullptr) {
    return false;
  }
  return signature.size() == len && CRYPTO_memcmp(mac, signature.data(), len) == 0;
}

/// A NumericDate claim (RFC 7519 §2): absent (true, `out` untouched), a number (true), or of
/// the wrong type (false).
bool numeric_date(const json::object& o, std::string_view name, std::int64_t& out, bool& present) {
  const json::value* v = o.if_contains(json::string_view(name.data(), name.size()));
  present = v != nullptr;
  if (v == nullptr) return true;
  if (v->is_int64()) {
    out = v->get_int64();
  } else if (v->is_uint64()) {
    out = v->get_uint64() > static_cast<std::uint64_t>(INT64_MAX / 2)
              ? INT64_MAX / 2
              : static_cast<std::int64_t>(v->get_uint64());
  } else if (v->is_double()) {
    const double d = v->get_double();
    if (!(d > -1e15 && d < 1e15)) return false;
    out = static_cast<std::int64_t>(d);
  } else {
    return false;
  }
  return true;
}

/// The claim at dotted path `path` of `o` as text, or "".
std::string claim_text(const json::object& o, std::string_view path) {
  const json::object* at = &o;
  for (;;) {
    const std::size_t dot = path.find('.');
    const std::string_view name = path.substr(0, dot);
    const json::value* v = at->if_contains(json::string_view(name.data(), name.size()));
    if (v == nullptr) return {};
    if (dot != std::string_view::npos) {
      if (!v->is_object()) return {};
      at = &v->get_object();
      path.remove_prefix(dot + 1);
      continue;
    }
    if (v->is_string()) return std::string(v->get_string());
    if (v->is_int64()) return std::to_string(v->get_int64());
    if (v->is_uint64()) return std::to_string(v->get_uint64());
    if (v->is_bool()) return v->get_bool() ? "true" : "false";
    return {};
  }
}

bool audience_matches(const json::value* aud, const std::vector<std::string>& wanted) {
  auto named = [&](const json::value& v) {
    if (!v.is_string()) return false;
    for (const std::string& w : wanted)
      if (v.get_string() == w) return true;
    return false;
  };
  if (aud == nullptr) return false;
  if (aud->is_array()) {
    for (const json::value& v : aud->get_array())
      if (named(v)) return true;
    return false;
  }
  return named(*aud);
}

}  // namespace

std::string_view algorithm_name(algorithm a) noexcept {
  return names[static_cast<std::size_t>(a)];
}

bool algorithm_of(std::string_view name, algorithm& out) noexcept {
  for (std::size_t i = 0; i < algorithm_count; ++i) {
    if (names[i] == name) {
      out = static_cast<algorithm>(i);
      return true;
    }
  }
  return false;
}

std::shared_ptr<const key_set> key_set::parse(std::string_view text,
                                              std::vector<std::string>* skipped) {
  if (text.size() > 1 << 20) throw std::runtime_error("the key set is over 1 MiB");
  const json::value v = parse_json(text, 16);
  if (!v.is_object()) throw std::runtime_error("not a JSON object");
  auto set = std::make_shared<key_set>();
  auto add = [&](const json::value& k, std::size_t i) {
    try {
      if (!k.is_object()) throw std::runtime_error("not an object");
      set->keys_.push_back(read_jwk(k.get_object()));
    } catch (const std::exception& e) {
      if (skipped != nullptr) {
        const std::string_view kid = k.is_object() ? string_of(k.get_object(), "kid") : "";
        skipped->push_back("key " + std::to_string(i) +
                           (kid.empty() ? "" : " (kid \"" + std::string(kid) + "\")") + ": " +
                           e.what());
      }
    }
  };
  const json::object& o = v.get_object();
  if (const json::value* keys = o.if_contains("keys")) {
    if (!keys->is_array()) throw std::runtime_error("\"keys\" is not an array");
    std::size_t i = 0;
    for (const json::value& k : keys->get_array())
      add(k, i++);
  } else {
    add(v, 0);
  }
  if (set->keys_.empty()) throw std::runtime_error("no usable key in the set");
  return set;
}

namespace {
/// Generations are unique in the process, so that a cache of verified tokens never takes an
/// entry of one verifier (or key set) for another's.
std::uint64_t next_generation() noexcept {
  static std::atomic<std::uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) + 1;
}
}  // namespace

struct verifier::state {
  mutable std::mutex mutex;
  std::shared_ptr<const key_set> keys;
  std::atomic<std::uint64_t> generation{next_generation()};
};

verifier::verifier(verifier_options o) : options_(std::move(o)), state_(std::make_shared<state>()) {
  for (algorithm a : options_.algorithms) {
    if (is_hmac(a) && options_.secret.empty()) continue;  // HS* only with a secret
    allowed_[static_cast<std::size_t>(a)] = true;
  }
}

void verifier::set_keys(std::shared_ptr<const key_set> keys) {
  const std::lock_guard lock(state_->mutex);
  state_->keys = std::move(keys);
  state_->generation.store(next_generation(), std::memory_order_release);
}

std::shared_ptr<const key_set> verifier::keys() const {
  const std::lock_guard lock(state_->mutex);
  return state_->keys;
}

std::uint64_t verifier::generation() const noexcept {
  return state_->generation.load(std::memory_order_acquire);
}

failure verifier::verify(std::string_view token, std::int64_t now, claims& out) const {
  if (token.size() > max_token_bytes) return failure::too_long;
  const std::size_t d1 = token.find('.');
  const std::size_t d2 = d1 == std::string_view::npos ? d1 : token.find('.', d1 + 1);
  if (d2 == std::string_view::npos || token.find('.', d2 + 1) != std::string_view::npos) {
    return failure::malformed;
  }
  const auto header_bytes = pow::base64url_decode(token.substr(0, d1));
  const auto payload_bytes = pow::base64url_decode(token.substr(d1 + 1, d2 - d1 - 1));
  const auto signature = pow::base64url_decode(token.substr(d2 + 1));
  if (!header_bytes || !payload_bytes || !signature || header_bytes->empty()) {
    return failure::malformed;
  }
  const json::value header = parse_json(*header_bytes, 4);
  if (!header.is_object()) return failure::malformed;
  const json::object& h = header.get_object();
  const std::string_view alg_name = string_of(h, "alg");
  if (alg_name.empty()) return failure::malformed;
  algorithm alg{};
  if (alg_name.size() == 4 && (alg_name[0] | 0x20) == 'n' && (alg_name[1] | 0x20) == 'o' &&
      (alg_name[2] | 0x20) == 'n' && (alg_name[3] | 0x20) == 'e') {
    return failure::alg_none;
  }
  if (!algorithm_of(alg_name, alg) || !allowed_[static_cast<std::size_t>(alg)]) {
    return failure::alg_not_allowed;
  }
  // Extensions a verifier must understand (RFC 7515 §4.1.11): none is supported.
  if (h.contains("crit")) return failure::malformed;
  const std::string_view input = token.substr(0, d2);
  if (is_hmac(alg)) {
    if (!verify_hmac(alg, options_.secret, input, *signature)) return failure::bad_signature;
  } else {
    const std::shared_ptr<const key_set> set = keys();
    if (!set) return failure::unknown_kid;
    const json::value* kid_value = h.if_contains("kid");
    if (kid_value != nullptr && !kid_value->is_string()) return failure::malformed;
    const std::string_view kid = string_of(h, "kid");
    const jwk* key = nullptr;
    if (kid_value != nullptr) {
      for (const jwk& k : set->keys())
        if (k.kid == kid) {
          key = &k;
          break;
        }
      if (key == nullptr) return failure::unknown_kid;
    } else {
      // No kid: the one key of the set that fits the algorithm, if there is exactly one.
      for (const jwk& k : set->keys()) {
        if (k.family != family_of(alg) || (k.alg_fixed && k.alg != alg)) continue;
        if (key != nullptr) return failure::unknown_kid;
        key = &k;
      }
      if (key == nullptr) return failure::unknown_kid;
    }
    if (key->family != family_of(alg) || (key->alg_fixed && key->alg != alg)) {
      return failure::key_mismatch;
    }
    if (!verify_signature(alg, static_cast<EVP_PKEY*>(key->key.get()), key->family, input,
                          *signature)) {
      return failure::bad_signature;
    }
  }
  const json::value payload = parse_json(*payload_bytes, 16);
  if (!payload.is_object()) return failure::malformed;
  const json::object& p = payload.get_object();
  std::int64_t exp = 0, nbf = 0, iat = 0;
  bool has_exp = false, has_nbf = false, has_iat = false;
  if (!numeric_date(p, "exp", exp, has_exp) || !numeric_date(p, "nbf", nbf, has_nbf) ||
      !numeric_date(p, "iat", iat, has_iat)) {
    return failure::bad_claim;
  }
  const std::int64_t leeway = options_.leeway;
  if (has_exp && now > exp + leeway) return failure::expired;
  if (has_nbf && now + leeway < nbf) return failure::not_yet_valid;
  if (has_iat && now + leeway < iat) return failure::issued_in_future;
  if (!options_.issuer.empty()) {
    const json::value* iss = p.if_contains("iss");
    if (iss == nullptr || !iss->is_string() || iss->get_string() != options_.issuer) {
      return failure::issuer;
    }
  }
  if (!options_.audiences.empty() && !audience_matches(p.if_contains("aud"), options_.audiences)) {
    return failure::audience;
  }
  out.values.resize(options_.claim_paths.size());
  for (std::size_t i = 0; i < options_.claim_paths.size(); ++i)
    out.values[i] = claim_text(p, options_.claim_paths[i]);
  out.expires = has_exp ? exp + leeway : 0;
  return failure::none;
}

}  // namespace tollgate::identity
