/// Fuzz target: proof-of-work challenges and proofs (gateway/pow/challenge.*, crypto.*).
///
/// Input: an X-PoW-Solution value, checked as if sent by client `fuzz_client` in category
/// "auth" at `fuzz_now` with `fuzz_bits` required (the seeds hold challenges signed under
/// `fuzz_secret` for them). Its first 21 bytes also give the claims of a challenge issued here.
///
/// Checked: challenger::check agrees with a reference written with OpenSSL's one-shot HMAC()
/// and SHA256() and a plain base64url decoder, so nothing but a string carrying the signer's
/// MAC gets past `bad_signature`; base64url_decode agrees with the reference decoder and
/// re-encodes to its input; a challenge issued here is 94 characters, decodes back to the
/// claims it was issued with, passes check with a matching proof and expires a second late.
/// The same input as an X-PoW-Clearance (gateway/pow/clearance.*): accepted only when it
/// carries the MAC the reference computes under the clearance key, and a clearance issued from
/// the input's bytes is accepted for its client and scope until it expires, and by no other.

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/pow/challenge.hpp"
#include "gateway/pow/clearance.hpp"

namespace {

using namespace tollgate::pow;

constexpr std::string_view fuzz_secret = "tollgate fuzz secret";
constexpr std::int64_t fuzz_now = 1'700'000'000;
constexpr std::uint64_t fuzz_client = 0x0123456789abcdefULL;
constexpr unsigned fuzz_bits = 4;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_challenge: %s\n", what);
  std::abort();
}

/// RFC 4648 §5 without padding, canonical: no length of 1 mod 4, unused low bits zero.
std::optional<std::string> ref_decode(std::string_view text) {
  const auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '-') return 62;
    if (c == '_') return 63;
    return -1;
  };
  if (text.size() % 4 == 1) return std::nullopt;
  std::string out;
  std::uint32_t bits = 0;
  int held = 0;
  for (const char c : text) {
    const int v = value(c);
    if (v < 0) return std::nullopt;
    bits = (bits << 6) | static_cast<std::uint32_t>(v);
    held += 6;
    if (held >= 8) {
      held -= 8;
      out += static_cast<char>((bits >> held) & 0xff);
    }
  }
  if ((bits & ((1u << held) - 1)) != 0) return std::nullopt;
  return out;
}

std::uint64_t be(std::string_view s, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v = (v << 8) | static_cast<std::uint8_t>(s[at + static_cast<std::size_t>(i)]);
  return v;
}

unsigned zero_bits(std::string_view s) {
  unsigned char d[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(s.data()), s.size(), d);
  unsigned n = 0;
  for (const unsigned char b : d) {
    if (b == 0) {
      n += 8;
      continue;
    }
    for (unsigned char m = 0x80; (b & m) == 0; m >>= 1)
      ++n;
    break;
  }
  return n;
}

/// docs/design.md §5's proof check: "<94-char challenge>:<nonce>", version 1, then the HMAC-SHA-256
/// of the first 38 bytes, then expiry, binding and work. `claims` set past the signature.
proof_failure ref_check(std::string_view solution, std::int64_t now, std::uint64_t client,
                        std::uint32_t category, unsigned required, challenge_claims& claims) {
  const auto colon = solution.find(':');
  if (colon != challenge_length || !valid_nonce(solution.substr(colon + 1))) {
    return proof_failure::malformed;
  }
  const auto raw = ref_decode(solution.substr(0, colon));
  if (!raw || raw->size() != 70 || (*raw)[0] != 1) return proof_failure::malformed;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned mac_length = 0;
  HMAC(EVP_sha256(), fuzz_secret.data(), static_cast<int>(fuzz_secret.size()),
       reinterpret_cast<const unsigned char*>(raw->data()), 38, mac, &mac_length);
  if (mac_length != 32 || std::memcmp(mac, raw->data() + 38, 32) != 0) {
    return proof_failure::bad_signature;
  }
  claims = {static_cast<std::int64_t>(be(*raw, 17, 8)), static_cast<std::uint8_t>((*raw)[25]),
            static_cast<std::uint32_t>(be(*raw, 26, 4)), be(*raw, 30, 8)};
  if (now > claims.expires) return proof_failure::expired;
  if (claims.client != client || claims.category != category) return proof_failure::wrong_client;
  if (claims.bits < required || zero_bits(solution) < claims.bits) {
    return proof_failure::insufficient_work;
  }
  return proof_failure::none;
}

bool same_claims(const challenge_claims& a, const challenge_claims& b) {
  return a.expires == b.expires && a.bits == b.bits && a.category == b.category &&
         a.client == b.client;
}

void check_issued(const challenger& signer, const std::uint8_t* data, std::size_t size) {
  std::uint8_t bytes[21] = {};
  std::memcpy(bytes, data, std::min(size, sizeof bytes));
  challenge_claims c;
  c.expires = static_cast<std::int64_t>(be({reinterpret_cast<const char*>(bytes), 8}, 0, 8));
  c.bits = bytes[8] % 4;  // cheap to solve
  c.category = static_cast<std::uint32_t>(be({reinterpret_cast<const char*>(bytes + 9), 4}, 0, 4));
  c.client = be({reinterpret_cast<const char*>(bytes + 13), 8}, 0, 8);
  const std::string ch = signer.issue(c);
  require(ch.size() == challenge_length, "an issued challenge has the wrong length");
  // A matching proof: at most 3 bits, so a few tries (pow::solve would start a thread).
  std::string proof;
  for (unsigned nonce = 0; proof.empty() || zero_bits(proof) < c.bits; ++nonce)
    proof = ch + ":" + std::to_string(nonce);
  challenge_claims out, ref;
  std::string_view spent;
  require(signer.check(proof, c.expires, c.client, c.category, c.bits, out, spent) ==
              proof_failure::none,
          "an issued challenge with a matching proof is refused");
  require(same_claims(out, c) && spent == ch, "an issued challenge decodes to other claims");
  require(ref_check(proof, c.expires, c.client, c.category, c.bits, ref) == proof_failure::none &&
              same_claims(ref, c),
          "an issued challenge fails the reference check");
  if (c.expires < INT64_MAX) {
    require(signer.check(proof, c.expires + 1, c.client, c.category, 0, out, spent) ==
                proof_failure::expired,
            "an issued challenge does not expire");
  }
}

/// The clearance check against a reference: 60 characters of canonical base64url, version 1,
/// HMAC-SHA-256 under "tollgate clearance v1:" + secret of the first 30 bytes, its first 15
/// bytes after them; then unexpired, for this client and scope.
bool ref_clearance(std::string_view token, std::int64_t now, std::uint64_t client,
                   std::uint32_t scope) {
  if (token.size() != clearance_length) return false;
  const auto raw = ref_decode(token);
  if (!raw || raw->size() != 45 || (*raw)[0] != 1) return false;
  const std::string key = "tollgate clearance v1:" + std::string(fuzz_secret);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned mac_length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(raw->data()), 30, mac, &mac_length);
  if (std::memcmp(mac, raw->data() + 30, 15) != 0) return false;
  const auto expires = static_cast<std::int64_t>(be(*raw, 9, 8));
  return now < expires && be(*raw, 18, 8) == client && be(*raw, 26, 4) == scope;
}

void check_clearance(const clearance_signer& signer, std::string_view input,
                     const std::uint8_t* data, std::size_t size) {
  const std::int64_t now = fuzz_now * 1'000'000'000;
  require(signer.check(input, now, fuzz_client, 7).has_value() ==
              ref_clearance(input, now, fuzz_client, 7),
          "clearance check differs from the reference");
  std::uint8_t bytes[21] = {};
  std::memcpy(bytes, data, std::min(size, sizeof bytes));
  clearance_claims c;
  c.issued = now;
  c.expires =
      now + 1 + static_cast<std::int64_t>(be({reinterpret_cast<const char*>(bytes), 4}, 0, 4));
  c.bits = bytes[4];
  c.client = be({reinterpret_cast<const char*>(bytes + 5), 8}, 0, 8);
  c.scope = static_cast<std::uint32_t>(be({reinterpret_cast<const char*>(bytes + 13), 4}, 0, 4));
  const std::string token = signer.issue(c);
  require(token.size() == clearance_length, "an issued clearance has the wrong length");
  const auto back = signer.check(token, now, c.client, c.scope);
  require(back && back->bits == c.bits && back->issued == c.issued && back->expires == c.expires,
          "an issued clearance is refused or decodes otherwise");
  require(ref_clearance(token, now, c.client, c.scope), "an issued clearance fails the reference");
  require(!signer.check(token, c.expires, c.client, c.scope),
          "an issued clearance does not expire");
  require(!signer.check(token, now, c.client ^ 1, c.scope), "a clearance serves another client");
  require(!signer.check(token, now, c.client, c.scope ^ 1), "a clearance serves another scope");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const challenger signer(fuzz_secret);
  const std::string_view input(reinterpret_cast<const char*>(data), size);

  const auto decoded = base64url_decode(input);
  const auto expected = ref_decode(input);
  require(decoded.has_value() == expected.has_value(), "base64url_decode accepts otherwise");
  if (decoded) {
    require(*decoded == *expected, "base64url_decode gives other bytes");
    require(base64url_encode(*decoded) == input, "base64url does not round-trip");
  }

  const std::uint32_t category = category_tag("auth");
  challenge_claims claims, ref_claims;
  std::string_view challenge;
  const proof_failure got =
      signer.check(input, fuzz_now, fuzz_client, category, fuzz_bits, claims, challenge);
  const proof_failure want =
      ref_check(input, fuzz_now, fuzz_client, category, fuzz_bits, ref_claims);
  require(got == want, "check differs from the reference");
  if (got != proof_failure::malformed && got != proof_failure::bad_signature) {
    require(same_claims(claims, ref_claims), "check decodes other claims");
    require(challenge == input.substr(0, challenge_length), "check names another challenge");
  }

  check_issued(signer, data, size);
  static const clearance_signer clearances(fuzz_secret);
  check_clearance(clearances, input, data, size);
  return 0;
}
