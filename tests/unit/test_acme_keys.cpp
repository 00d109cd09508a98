#include <catch2/catch.hpp>

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>

#include "gateway/net/acme_keys.hpp"

using namespace tollgate::net;

namespace {

/// Decodes base64url without padding (the tests' own, not the code's under test).
std::string unbase64url(const std::string& s) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : s) {
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '-'             ? 62
                                   : 63;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("base64url has no padding and the URL alphabet (RFC 4648 section 5)", "[acme]") {
  CHECK(acme::base64url("") == "");
  CHECK(acme::base64url("f") == "Zg");
  CHECK(acme::base64url("fo") == "Zm8");
  CHECK(acme::base64url("foo") == "Zm9v");
  CHECK(acme::base64url("foob") == "Zm9vYg");
  CHECK(acme::base64url("\xfb\xff") == "-_8");
}

TEST_CASE("a JWS ES256 verifies with the key's public half, r and s as 64 bytes", "[acme]") {
  auto key = acme::new_key();
  const std::string header = R"({"alg":"ES256","nonce":"n","url":"https://a.test/x"})";
  const auto jws = boost::json::parse(acme::jws(key.get(), header, "{}")).as_object();
  const std::string p(jws.at("protected").as_string()), b(jws.at("payload").as_string());
  CHECK(unbase64url(p) == header);
  CHECK(unbase64url(b) == "{}");
  const std::string raw = unbase64url(std::string(jws.at("signature").as_string()));
  REQUIRE(raw.size() == 64);
  // Back to DER, then verified by OpenSSL with the key.
  ECDSA_SIG* sig = ECDSA_SIG_new();
  ECDSA_SIG_set0(sig, BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), 32, nullptr),
                 BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()) + 32, 32, nullptr));
  unsigned char* der = nullptr;
  const int n = i2d_ECDSA_SIG(sig, &der);
  const std::string input = p + "." + b;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  REQUIRE(EVP_DigestVerifyInit(ctx, nullptr, EVP_sha256(), nullptr, key.get()) == 1);
  CHECK(EVP_DigestVerify(ctx, der, static_cast<std::size_t>(n),
                         reinterpret_cast<const unsigned char*>(input.data()), input.size()) == 1);
  EVP_MD_CTX_free(ctx);
  OPENSSL_free(der);
  ECDSA_SIG_free(sig);
  // The JWK: P-256, members in RFC 7638's order, 32-byte coordinates; a 43-character thumbprint.
  const std::string jwk = acme::jwk(key.get());
  CHECK(jwk.rfind(R"({"crv":"P-256","kty":"EC","x":")", 0) == 0);
  const auto j = boost::json::parse(jwk).as_object();
  CHECK(unbase64url(std::string(j.at("x").as_string())).size() == 32);
  CHECK(unbase64url(std::string(j.at("y").as_string())).size() == 32);
  CHECK(acme::thumbprint(key.get()).size() == 43);
}

TEST_CASE("a key survives PEM, files are written 0600, a CSR names the domains", "[acme]") {
  auto key = acme::new_key();
  const std::string pem = acme::key_pem(key.get());
  auto again = acme::read_key(pem);
  CHECK(acme::jwk(again.get()) == acme::jwk(key.get()));
  CHECK_THROWS(acme::read_key("not a key"));

  const auto dir =
      std::filesystem::temp_directory_path() / ("tollgate-acme-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "k.key").string();
  acme::write_private(path, pem);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(acme::read_file(path) == pem);
  std::filesystem::remove_all(dir);

  const std::string der = acme::csr_der(key.get(), {"a.test", "b.test"});
  const auto* d = reinterpret_cast<const unsigned char*>(der.data());
  X509_REQ* req = d2i_X509_REQ(nullptr, &d, static_cast<long>(der.size()));
  REQUIRE(req != nullptr);
  CHECK(X509_REQ_verify(req, key.get()) == 1);
  X509_REQ_free(req);

  const std::string cert = acme::self_signed_pem(key.get(), {"a.test"}, std::chrono::hours(24));
  const auto [not_before, not_after] = acme::validity(cert);
  CHECK(not_after - not_before == 24 * 3600);
  CHECK(acme::validity("") == std::pair<std::int64_t, std::int64_t>{0, 0});
}
