#include "gateway/identity/token_cache.hpp"

namespace tollgate::identity {

namespace {

/// Whether refusal `f` may be answered from memory: time cannot change it.
constexpr bool lasting(failure f) noexcept {
  return f != failure::expired && f != failure::not_yet_valid && f != failure::issued_in_future;
}

}  // namespace

token_cache::token_cache(std::size_t capacity, core::siphash_key key)
    : capacity_(capacity), key_(key) {
  index_.reserve(capacity);
}

token_result token_cache::check(const verifier& v, std::string_view token, std::int64_t now) {
  const std::uint64_t generation = v.generation();
  // One keyed hash: without the key nobody can make a token that lands on another's entry, and
  // the length is compared as well.
  const std::uint64_t hash = core::siphash13(token, key_);
  const std::uint64_t check = token.size();
  if (const auto it = index_.find(hash); it != index_.end()) {
    entry& e = *it->second;
    if (e.check == check && e.generation == generation) {
      const std::int64_t expires = e.result.verified ? e.result.verified->expires : 0;
      if (expires == 0 || now <= expires) {
        ++hits_;
        order_.splice(order_.begin(), order_, it->second);
        token_result r = e.result;
        r.cached = true;
        return r;
      }
    }
    order_.erase(it->second);  // stale: verified again below
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
  order_.push_front({hash, check, generation, r});
  index_.emplace(hash, order_.begin());
  return r;
}

}  // namespace tollgate::identity
