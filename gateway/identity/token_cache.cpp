#include "gateway/identity/token_cache.hpp"

#include <cstring>

namespace tollgate::identity {

namespace {

/// Whether refusal `f` may be answered from memory: time cannot change it.
constexpr bool lasting(failure f) noexcept {
  return f != failure::expired && f != failure::not_yet_valid && f != failure::issued_in_future;
}

/// 8 bytes of `p` as a number (unaligned).
std::uint64_t load64(const char* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

std::uint64_t token_cache::quick_key(std::string_view token) const noexcept {
  std::uint64_t a = token.size(), b = 0;
  if (token.size() >= 16) {
    a ^= load64(token.data() + token.size() - 16);
    b = load64(token.data() + token.size() - 8);
  } else {
    char tail[16] = {};
    // An empty view may have no data at all: memcpy is never handed it (found by fuzz_jwt).
    if (!token.empty()) std::memcpy(tail, token.data(), token.size());
    a ^= load64(tail);
    b = load64(tail + 8);
  }
  // A multiply-xorshift mix under the process's random key: where an entry lands cannot be
  // chosen by whoever writes the token.
  std::uint64_t h = (a ^ key_.k0) * 0x9e3779b97f4a7c15ULL;
  h ^= (b ^ key_.k1) + (h >> 29);
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ (h >> 32);
}

bool token_cache::remembers(const entry& e, std::string_view token) const {
  if (e.length != token.size()) return false;
  if (e.result.verified) return e.token == token;
  return e.digest == core::siphash13(token, key_);
}

token_cache::token_cache(std::size_t capacity, core::siphash_key key)
    : capacity_(capacity), key_(key) {
  index_.reserve(capacity);
}

token_result token_cache::check(const verifier& v, std::string_view token, std::int64_t now) {
  token_result r;
  if (find(v, token, now, r)) return r;
  return verify(v, token, now);
}

bool token_cache::find(const verifier& v, std::string_view token, std::int64_t now,
                       token_result& out) {
  const std::uint64_t hash = quick_key(token);
  const auto it = index_.find(hash);
  if (it == index_.end()) return false;
  entry& e = *it->second;
  if (e.generation == v.generation() && remembers(e, token)) {
    const std::int64_t expires = e.result.verified ? e.result.verified->expires : 0;
    if (expires == 0 || now <= expires) {
      ++hits_;
      order_.splice(order_.begin(), order_, it->second);
      out = e.result;
      out.cached = true;
      return true;
    }
  }
  order_.erase(it->second);  // stale: verify() verifies it again
  index_.erase(it);
  return false;
}

token_result token_cache::verify(const verifier& v, std::string_view token, std::int64_t now) {
  const std::uint64_t generation = v.generation();
  const std::uint64_t hash = quick_key(token);
  if (const auto it = index_.find(hash); it != index_.end()) {
    order_.erase(it->second);  // another token of the same key: this one takes its place
    index_.erase(it);
  }
  ++verifications_;
  auto verified = std::make_shared<claims>();
  token_result r;
  r.why = v.verify(token, now, *verified);
  if (r.why == failure::none) r.verified = std::move(verified);
  if (capacity_ == 0 || !lasting(r.why)) return r;
  if (order_.size() >= capacity_) {
    index_.erase(order_.back().hash);
    order_.pop_back();
  }
  entry e{hash, generation, {}, 0, token.size(), r};
  if (r.verified) {
    e.token.assign(token);
  } else {
    e.digest = core::siphash13(token, key_);
  }
  order_.push_front(std::move(e));
  index_.emplace(hash, order_.begin());
  return r;
}

}  // namespace tollgate::identity
