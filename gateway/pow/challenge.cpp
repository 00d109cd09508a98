#include "gateway/pow/challenge.hpp"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <thread>
#include <vector>

namespace tollgate::pow {

namespace {

// Binary layout before encoding: version, 16 random bytes, expiry (8, big-endian), bits (1),
// category tag (4), client tag (8), then the HMAC-SHA-256 of all of that (32): 70 bytes.
constexpr std::uint8_t version = 1;
constexpr std::size_t signed_length = 1 + 16 + 8 + 1 + 4 + 8;
constexpr std::size_t raw_length = signed_length + 32;
static_assert((raw_length * 4 + 2) / 3 == challenge_length);

}  // namespace

std::uint32_t category_tag(std::string_view name) noexcept {
  std::uint32_t h = 2166136261u;  // FNV-1a
  for (const char c : name)
    h = (h ^ static_cast<std::uint8_t>(c)) * 16777619u;
  return h;
}

unsigned required_bits(unsigned n, unsigned base_bits, unsigned step_bits,
                       unsigned max_bits) noexcept {
  if (n == 0) return 0;
  const std::uint64_t bits = base_bits + std::uint64_t{n - 1} * step_bits;
  return static_cast<unsigned>(std::min<std::uint64_t>(bits, max_bits));
}

bool valid_nonce(std::string_view nonce) noexcept {
  if (nonce.empty() || nonce.size() > 64) return false;
  return std::all_of(nonce.begin(), nonce.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
}

std::string challenger::issue(const challenge_claims& c) const {
  std::string raw;
  raw.reserve(raw_length);
  raw += static_cast<char>(version);
  char random[16];
  random_bytes(random, sizeof random);
  raw.append(random, sizeof random);
  append_be(raw, static_cast<std::uint64_t>(c.expires), 8);
  raw += static_cast<char>(c.bits);
  append_be(raw, c.category, 4);
  append_be(raw, c.client, 8);
  const digest mac = key_.mac(raw);
  raw.append(reinterpret_cast<const char*>(mac.data()), mac.size());
  return base64url_encode(raw);
}

proof_failure challenger::check(std::string_view solution, std::int64_t now, std::uint64_t client,
                                std::uint32_t category, unsigned required, challenge_claims& claims,
                                std::string_view& challenge) const {
  const auto colon = solution.find(':');
  if (colon != challenge_length) return proof_failure::malformed;
  challenge = solution.substr(0, colon);
  const std::string_view nonce = solution.substr(colon + 1);
  if (!valid_nonce(nonce)) return proof_failure::malformed;
  const auto raw = base64url_decode(challenge);
  if (!raw || raw->size() != raw_length || static_cast<std::uint8_t>((*raw)[0]) != version) {
    return proof_failure::malformed;
  }
  const std::string_view signed_part(raw->data(), signed_length);
  const digest mac = key_.mac(signed_part);
  if (!equal_secret(mac.data(), raw->data() + signed_length, mac.size())) {
    return proof_failure::bad_signature;
  }
  claims.expires = static_cast<std::int64_t>(read_be(*raw, 17, 8));
  claims.bits = static_cast<std::uint8_t>((*raw)[25]);
  claims.category = static_cast<std::uint32_t>(read_be(*raw, 26, 4));
  claims.client = read_be(*raw, 30, 8);
  if (now > claims.expires) return proof_failure::expired;
  if (claims.client != client || claims.category != category) return proof_failure::wrong_client;
  if (claims.bits < required || leading_zero_bits(sha256(solution)) < claims.bits) {
    return proof_failure::insufficient_work;
  }
  return proof_failure::none;
}

std::string solve(std::string_view challenge, unsigned bits, unsigned threads) {
  threads = std::max(1u, threads);
  std::atomic<bool> found{false};
  std::string answer;
  std::atomic_flag answer_taken = ATOMIC_FLAG_INIT;
  auto search = [&](std::uint64_t start) {
    // The hash input is "<challenge>:<nonce>": the prefix is copied once per thread.
    std::string input(challenge);
    input += ':';
    const std::size_t prefix = input.size();
    char digits[24];
    for (std::uint64_t n = start; !found.load(std::memory_order_relaxed); n += threads) {
      const auto end = std::to_chars(digits, digits + sizeof digits, n).ptr;
      input.resize(prefix);
      input.append(digits, end);
      if (leading_zero_bits(sha256(input)) >= bits) {
        if (!answer_taken.test_and_set()) answer.assign(digits, end);
        found = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back(search, t);
  for (auto& t : pool)
    t.join();
  return answer;
}

}  // namespace tollgate::pow
