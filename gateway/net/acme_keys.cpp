#include "gateway/net/acme_keys.hpp"

#include "gateway/net/acme_alpn.hpp"

#include <fcntl.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tollgate::net {

acme_alpn& acme_alpn_challenges() {
  static acme_alpn table;
  return table;
}

}  // namespace tollgate::net

namespace tollgate::net::acme {

namespace {

using bio_ptr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using x509_ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using req_ptr = std::unique_ptr<X509_REQ, decltype(&X509_REQ_free)>;

std::string bio_text(BIO* b) {
  char* data = nullptr;
  const long n = BIO_get_mem_data(b, &data);
  return std::string(data, static_cast<std::size_t>(n));
}

/// subjectAltName "DNS:a,DNS:b" for `domains`.
std::string san_of(const std::vector<std::string>& domains) {
  std::string out;
  for (const auto& d : domains)
    out += (out.empty() ? "DNS:" : ",DNS:") + d;
  return out;
}

void check(bool ok, const char* what) {
  if (!ok) throw std::runtime_error(std::string("OpenSSL: ") + what);
}

}  // namespace

key_ptr new_key() {
  key_ptr k(EVP_EC_gen("P-256"), EVP_PKEY_free);
  check(k != nullptr, "cannot make a P-256 key");
  return k;
}

std::string key_pem(EVP_PKEY* key) {
  bio_ptr b(BIO_new(BIO_s_mem()), BIO_free);
  check(PEM_write_bio_PrivateKey(b.get(), key, nullptr, nullptr, 0, nullptr, nullptr) == 1,
        "cannot write a key");
  return bio_text(b.get());
}

key_ptr read_key(const std::string& text) {
  bio_ptr b(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())), BIO_free);
  key_ptr k(PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr), EVP_PKEY_free);
  if (!k || EVP_PKEY_get_base_id(k.get()) != EVP_PKEY_EC) {
    throw std::runtime_error("not a PEM EC private key");
  }
  return k;
}

config::certificate_files stored_files(const config::acme_config& acme) {
  config::certificate_files f;
  f.certificate = acme.storage + "/" + acme.domains.front() + ".crt";
  f.private_key = acme.storage + "/" + acme.domains.front() + ".key";
  return f;
}

std::string account_key_file(const config::acme_config& acme) {
  return acme.storage + "/account.key";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_private(const std::string& path, const std::string& text) {
  const std::string temp = path + ".new";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) throw std::runtime_error("cannot write '" + temp + "': " + std::strerror(errno));
  // The mode of a file that existed before stays what it was: set it.
  ::fchmod(fd, 0600);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      throw std::runtime_error("cannot write '" + temp + "': " + why);
    }
    done += static_cast<std::size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot rename '" + temp + "': " + std::strerror(errno));
  }
}

std::string base64url(std::string_view bytes) {
  static constexpr char table[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += table[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += table[(acc << (6 - bits)) & 63];
  return out;
}

namespace {

/// A 32-byte big-endian coordinate of `key`'s public point.
std::string coordinate(EVP_PKEY* key, const char* name) {
  BIGNUM* bn = nullptr;
  check(EVP_PKEY_get_bn_param(key, name, &bn) == 1, "cannot read a public key");
  std::string out(32, '\0');
  BN_bn2binpad(bn, reinterpret_cast<unsigned char*>(out.data()), 32);
  BN_free(bn);
  return out;
}

std::string sha256(std::string_view bytes) {
  std::string out(32, '\0');
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), reinterpret_cast<unsigned char*>(out.data()), &n,
             EVP_sha256(), nullptr);
  return out;
}

}  // namespace

std::string jwk(EVP_PKEY* key) {
  return R"({"crv":"P-256","kty":"EC","x":")" +
         base64url(coordinate(key, OSSL_PKEY_PARAM_EC_PUB_X)) + R"(","y":")" +
         base64url(coordinate(key, OSSL_PKEY_PARAM_EC_PUB_Y)) + R"("})";
}

std::string thumbprint(EVP_PKEY* key) {
  return base64url(sha256(jwk(key)));
}

std::string jws(EVP_PKEY* key, const std::string& protected_header, const std::string& payload) {
  const std::string p = base64url(protected_header);
  const std::string b = base64url(payload);
  const std::string input = p + "." + b;
  std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  check(EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) == 1, "sign init");
  std::size_t n = 0;
  check(EVP_DigestSign(ctx.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(input.data()),
                       input.size()) == 1,
        "sign");
  std::string der(n, '\0');
  check(EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(der.data()), &n,
                       reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1,
        "sign");
  // JWS wants r and s as two 32-byte numbers, not OpenSSL's DER sequence (RFC 7518 §3.4).
  const auto* d = reinterpret_cast<const unsigned char*>(der.data());
  std::unique_ptr<ECDSA_SIG, decltype(&ECDSA_SIG_free)> sig(
      d2i_ECDSA_SIG(nullptr, &d, static_cast<long>(n)), ECDSA_SIG_free);
  check(sig != nullptr, "signature");
  std::string raw(64, '\0');
  BN_bn2binpad(ECDSA_SIG_get0_r(sig.get()), reinterpret_cast<unsigned char*>(raw.data()), 32);
  BN_bn2binpad(ECDSA_SIG_get0_s(sig.get()), reinterpret_cast<unsigned char*>(raw.data()) + 32, 32);
  return R"({"protected":")" + p + R"(","payload":")" + b + R"(","signature":")" + base64url(raw) +
         R"("})";
}

std::string csr_der(EVP_PKEY* key, const std::vector<std::string>& domains) {
  req_ptr req(X509_REQ_new(), X509_REQ_free);
  X509_REQ_set_version(req.get(), 0);
  X509_NAME* name = X509_REQ_get_subject_name(req.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(domains.front().c_str()), -1,
                             -1, 0);
  X509_REQ_set_pubkey(req.get(), key);
  STACK_OF(X509_EXTENSION)* exts = sk_X509_EXTENSION_new_null();
  X509_EXTENSION* san =
      X509V3_EXT_conf_nid(nullptr, nullptr, NID_subject_alt_name, san_of(domains).c_str());
  check(san != nullptr, "subjectAltName");
  sk_X509_EXTENSION_push(exts, san);
  X509_REQ_add_extensions(req.get(), exts);
  sk_X509_EXTENSION_pop_free(exts, X509_EXTENSION_free);
  check(X509_REQ_sign(req.get(), key, EVP_sha256()) > 0, "cannot sign the CSR");
  const int n = i2d_X509_REQ(req.get(), nullptr);
  std::string out(static_cast<std::size_t>(n), '\0');
  auto* p = reinterpret_cast<unsigned char*>(out.data());
  i2d_X509_REQ(req.get(), &p);
  return out;
}

std::string self_signed_pem(EVP_PKEY* key, const std::vector<std::string>& domains,
                            std::chrono::seconds lifetime) {
  x509_ptr x(X509_new(), X509_free);
  X509_set_version(x.get(), 2);
  unsigned char serial[16];
  EVP_Digest(domains.front().data(), domains.front().size(), serial, nullptr, EVP_md5(), nullptr);
  serial[0] &= 0x7f;
  BIGNUM* bn = BN_bin2bn(serial, sizeof serial, nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), 0);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), static_cast<long>(lifetime.count()));
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(domains.front().c_str()), -1,
                             -1, 0);
  X509_set_issuer_name(x.get(), name);
  X509_set_pubkey(x.get(), key);
  X509V3_CTX v3;
  X509V3_set_ctx(&v3, x.get(), x.get(), nullptr, nullptr, 0);
  X509_EXTENSION* san =
      X509V3_EXT_conf_nid(nullptr, &v3, NID_subject_alt_name, san_of(domains).c_str());
  check(san != nullptr, "subjectAltName");
  X509_add_ext(x.get(), san, -1);
  X509_EXTENSION_free(san);
  check(X509_sign(x.get(), key, EVP_sha256()) > 0, "cannot sign a certificate");
  bio_ptr b(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_X509(b.get(), x.get());
  return bio_text(b.get());
}

std::string alpn_certificate_pem(EVP_PKEY* key, const std::string& domain,
                                 const std::string& authorization) {
  // Made as a placeholder is, then given the extension and signed again.
  const std::string pem = self_signed_pem(key, {domain}, std::chrono::hours(24));
  bio_ptr in(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  x509_ptr x(PEM_read_bio_X509(in.get(), nullptr, nullptr, nullptr), X509_free);
  check(x != nullptr, "tls-alpn-01 certificate");
  std::string value = "\x04\x20" + sha256(authorization);  // DER OCTET STRING of 32 bytes
  std::unique_ptr<ASN1_OBJECT, decltype(&ASN1_OBJECT_free)> oid(
      OBJ_txt2obj("1.3.6.1.5.5.7.1.31", 1), ASN1_OBJECT_free);
  std::unique_ptr<ASN1_OCTET_STRING, decltype(&ASN1_OCTET_STRING_free)> os(ASN1_OCTET_STRING_new(),
                                                                           ASN1_OCTET_STRING_free);
  ASN1_OCTET_STRING_set(os.get(), reinterpret_cast<const unsigned char*>(value.data()),
                        static_cast<int>(value.size()));
  X509_EXTENSION* ext = X509_EXTENSION_create_by_OBJ(nullptr, oid.get(), 1, os.get());
  check(ext != nullptr, "acmeIdentifier");
  X509_add_ext(x.get(), ext, -1);
  X509_EXTENSION_free(ext);
  check(X509_sign(x.get(), key, EVP_sha256()) > 0, "cannot sign a certificate");
  bio_ptr out(BIO_new(BIO_s_mem()), BIO_free);
  PEM_write_bio_X509(out.get(), x.get());
  return bio_text(out.get());
}

std::pair<std::int64_t, std::int64_t> validity(const std::string& chain) {
  bio_ptr b(BIO_new_mem_buf(chain.data(), static_cast<int>(chain.size())), BIO_free);
  x509_ptr x(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr), X509_free);
  if (!x) return {0, 0};
  auto seconds = [](const ASN1_TIME* t) {
    std::tm tm{};
    ASN1_TIME_to_tm(t, &tm);
    return static_cast<std::int64_t>(timegm(&tm));
  };
  return {seconds(X509_get0_notBefore(x.get())), seconds(X509_get0_notAfter(x.get()))};
}

}  // namespace tollgate::net::acme
