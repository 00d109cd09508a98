#pragma once
/// SHA-256 and HMAC-SHA-256 (OpenSSL's block functions underneath), and URL-safe base64
/// without padding: the primitives of the challenge format.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tollgate::pow {

using digest = std::array<std::uint8_t, 32>;

/// SHA-256 of the concatenation of `a` and `b`.
digest sha256(std::string_view a, std::string_view b = {}) noexcept;

/// Leading zero bits of `d`, most significant bit of the first byte first.
unsigned leading_zero_bits(const digest& d) noexcept;

/// An HMAC-SHA-256 key with its inner and outer hash states computed once, so a MAC costs
/// the hashing of the message and two blocks, not four.
/// Thread safety: const member functions may be called from any number of threads.
class hmac_key {
 public:
  explicit hmac_key(std::string_view secret);
  ~hmac_key();
  hmac_key(const hmac_key&) = delete;
  hmac_key& operator=(const hmac_key&) = delete;
  /// HMAC-SHA-256 of `message`.
  digest mac(std::string_view message) const noexcept;

 private:
  struct states;
  states* states_;  ///< the hash states after the padded key blocks
};

/// Constant-time comparison of `n` bytes.
bool equal_secret(const void* a, const void* b, std::size_t n) noexcept;

/// `n` random bytes from the operating system's generator (OpenSSL's RAND_bytes).
void random_bytes(void* out, std::size_t n);

/// Appends the low `bytes` bytes of `v` to `out`, most significant first (the token formats'
/// integers).
inline void append_be(std::string& out, std::uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i)
    out += static_cast<char>((v >> (8 * i)) & 0xff);
}
/// The `bytes` bytes of `in` at `at` as a number, most significant first.
inline std::uint64_t read_be(std::string_view in, std::size_t at, int bytes) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v = (v << 8) | static_cast<std::uint8_t>(in[at + static_cast<std::size_t>(i)]);
  return v;
}

/// URL-safe base64 without padding (RFC 4648 §5).
std::string base64url_encode(std::string_view bytes);
/// The bytes of `text`, or nothing when it is not canonical URL-safe base64 without padding.
std::optional<std::string> base64url_decode(std::string_view text);

}  // namespace tollgate::pow
