// OpenSSL 3 deprecates the SHA256_* block functions in favour of EVP, whose per-call fetch
// and context set-up cost more than hashing the ~100 bytes of a challenge. They remain
// supported in 3.x; this file is their only user.
#define OPENSSL_SUPPRESS_DEPRECATED

#include "gateway/pow/crypto.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace tollgate::pow {

digest sha256(std::string_view a, std::string_view b) noexcept {
  SHA256_CTX ctx;
  SHA256_Init(&ctx);
  SHA256_Update(&ctx, a.data(), a.size());
  if (!b.empty()) SHA256_Update(&ctx, b.data(), b.size());
  digest d;
  SHA256_Final(d.data(), &ctx);
  return d;
}

unsigned leading_zero_bits(const digest& d) noexcept {
  unsigned bits = 0;
  for (const std::uint8_t byte : d) {
    if (byte == 0) {
      bits += 8;
      continue;
    }
    return bits + static_cast<unsigned>(__builtin_clz(byte)) - 24;
  }
  return bits;
}

struct hmac_key::states {
  SHA256_CTX inner;  ///< after key ^ ipad
  SHA256_CTX outer;  ///< after key ^ opad
};

hmac_key::hmac_key(std::string_view secret) : states_(new states) {
  unsigned char block[SHA256_CBLOCK] = {};
  if (secret.size() > sizeof block) {
    const digest d = sha256(secret);
    std::memcpy(block, d.data(), d.size());
  } else {
    std::memcpy(block, secret.data(), secret.size());
  }
  unsigned char pad[SHA256_CBLOCK];
  for (std::size_t i = 0; i < sizeof block; ++i)
    pad[i] = block[i] ^ 0x36;
  SHA256_Init(&states_->inner);
  SHA256_Update(&states_->inner, pad, sizeof pad);
  for (std::size_t i = 0; i < sizeof block; ++i)
    pad[i] = block[i] ^ 0x5c;
  SHA256_Init(&states_->outer);
  SHA256_Update(&states_->outer, pad, sizeof pad);
  OPENSSL_cleanse(block, sizeof block);
  OPENSSL_cleanse(pad, sizeof pad);
}

hmac_key::~hmac_key() {
  OPENSSL_cleanse(states_, sizeof *states_);
  delete states_;
}

digest hmac_key::mac(std::string_view message) const noexcept {
  SHA256_CTX ctx = states_->inner;
  SHA256_Update(&ctx, message.data(), message.size());
  digest inner;
  SHA256_Final(inner.data(), &ctx);
  ctx = states_->outer;
  SHA256_Update(&ctx, inner.data(), inner.size());
  digest out;
  SHA256_Final(out.data(), &ctx);
  return out;
}

bool equal_secret(const void* a, const void* b, std::size_t n) noexcept {
  return CRYPTO_memcmp(a, b, n) == 0;
}

void random_bytes(void* out, std::size_t n) {
  // OpenSSL's generator costs about a microsecond per call (locks, fork checks, parameter
  // lookups): draw it in blocks and hand out slices, per thread.
  struct pool {
    unsigned char bytes[4096];
    std::size_t used = sizeof bytes;
  };
  thread_local pool p;
  auto* dst = static_cast<unsigned char*>(out);
  while (n > 0) {
    if (p.used == sizeof p.bytes) {
      if (RAND_bytes(p.bytes, sizeof p.bytes) != 1) throw std::runtime_error("RAND_bytes failed");
      p.used = 0;
    }
    const std::size_t take = std::min(n, sizeof p.bytes - p.used);
    std::memcpy(dst, p.bytes + p.used, take);
    // Never hand out the same bytes twice.
    OPENSSL_cleanse(p.bytes + p.used, take);
    p.used += take;
    dst += take;
    n -= take;
  }
}

namespace {
constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int value_of(char c) noexcept {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}
}  // namespace

std::string base64url_encode(std::string_view bytes) {
  std::string out((bytes.size() * 4 + 2) / 3, '\0');
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  std::size_t i = 0, o = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const std::uint32_t v =
        (std::uint32_t{in[i]} << 16) | (std::uint32_t{in[i + 1]} << 8) | in[i + 2];
    out[o++] = alphabet[v >> 18];
    out[o++] = alphabet[(v >> 12) & 63];
    out[o++] = alphabet[(v >> 6) & 63];
    out[o++] = alphabet[v & 63];
  }
  if (const std::size_t rest = bytes.size() - i; rest > 0) {
    const std::uint32_t v =
        (std::uint32_t{in[i]} << 16) | (rest == 2 ? std::uint32_t{in[i + 1]} << 8 : 0);
    out[o++] = alphabet[v >> 18];
    out[o++] = alphabet[(v >> 12) & 63];
    if (rest == 2) out[o++] = alphabet[(v >> 6) & 63];
  }
  return out;
}

std::optional<std::string> base64url_decode(std::string_view text) {
  if (text.size() % 4 == 1) return std::nullopt;  // no byte count ends that way
  std::string out(text.size() * 3 / 4, '\0');
  std::uint32_t acc = 0;
  int bits = 0;
  std::size_t o = 0;
  for (const char c : text) {
    const int v = value_of(c);
    if (v < 0) return std::nullopt;
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = static_cast<char>((acc >> bits) & 0xff);
    }
  }
  // Canonical only: the bits left over must be zero, so one string means one byte sequence.
  if ((acc & ((1u << bits) - 1)) != 0) return std::nullopt;
  return out;
}

}  // namespace tollgate::pow
