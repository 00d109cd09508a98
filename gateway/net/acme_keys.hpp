#pragma once
/// The OpenSSL side of ACME (RFC 8555, docs/design.md §17): P-256 keys, files written 0600,
/// JWS ES256 signatures, CSRs and the self-signed placeholder a listener serves until its first
/// certificate is issued. No sockets here.

#include <openssl/evp.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/config/gateway.hpp"

namespace tollgate::net::acme {

/// An OpenSSL key, freed with it.
using key_ptr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;

/// A new ECDSA P-256 key.
key_ptr new_key();
/// `key` as PKCS#8 PEM.
std::string key_pem(EVP_PKEY* key);
/// The key in PEM `text`; throws std::runtime_error when it is not one.
key_ptr read_key(const std::string& text);

/// Where the certificate of `acme` and its key are stored: `<storage>/<first domain>.crt` and
/// `.key` (docs/design.md §17).
config::certificate_files stored_files(const config::acme_config& acme);
/// Where the account key is stored: `<storage>/account.key`.
std::string account_key_file(const config::acme_config& acme);

/// The whole of file `path`; "" when it cannot be read.
std::string read_file(const std::string& path);
/// Writes `text` to `path` with mode 0600, through a temporary file renamed over it (a reader
/// never sees half a file); throws std::runtime_error saying why it cannot.
void write_private(const std::string& path, const std::string& text);

/// Base64url without padding (RFC 7515 §2).
std::string base64url(std::string_view bytes);
/// The public JWK of a P-256 key, members in the order of RFC 7638 (so it is also the input of
/// the thumbprint).
std::string jwk(EVP_PKEY* key);
/// base64url(SHA-256(jwk)): the account key's thumbprint (RFC 7638).
std::string thumbprint(EVP_PKEY* key);
/// A flattened JWS (RFC 7515) of `payload` under `protected_header`, signed ES256 by `key`.
std::string jws(EVP_PKEY* key, const std::string& protected_header, const std::string& payload);

/// A CSR (DER) for `domains` (subjectAltName; the first also the common name) signed by `key`.
std::string csr_der(EVP_PKEY* key, const std::vector<std::string>& domains);
/// A certificate for `domains` signed by its own `key`, valid `lifetime` from now, PEM.
std::string self_signed_pem(EVP_PKEY* key, const std::vector<std::string>& domains,
                            std::chrono::seconds lifetime);
/// The tls-alpn-01 certificate (RFC 8737) for `domain`: self-signed by `key`, its only name
/// `domain`, with the critical acmeIdentifier extension (1.3.6.1.5.5.7.1.31) holding
/// SHA-256(`authorization`); PEM.
std::string alpn_certificate_pem(EVP_PKEY* key, const std::string& domain,
                                 const std::string& authorization);
/// The notBefore and notAfter of the first certificate in PEM `chain`, as Unix seconds; {0, 0}
/// when there is none.
std::pair<std::int64_t, std::int64_t> validity(const std::string& chain);

}  // namespace tollgate::net::acme
