#include "gateway/pow/replay_cache.hpp"

#include <algorithm>

#include <functional>

#include "gateway/core/siphash.hpp"

namespace tollgate::pow {

namespace {
constexpr std::size_t shard_count = 16;

/// A challenge ends in its MAC, which nobody but the gateway can choose: a hash under a fixed
/// key cannot be steered into collisions, and is the same after a restart.
std::uint64_t fingerprint(std::string_view challenge) {
  return core::siphash13(challenge, {0x7370656e742d706fULL, 0x6f66732d746f6c6cULL});
}
}  // namespace

replay_cache::replay_cache(std::size_t capacity)
    : per_shard_(std::max<std::size_t>(1, capacity / shard_count)) {
  for (std::size_t i = 0; i < shard_count; ++i)
    shards_.push_back(std::make_unique<shard>());
}

bool replay_cache::spend(std::string_view challenge, std::int64_t expires, std::int64_t now) {
  return insert(fingerprint(challenge), expires, now);
}

bool replay_cache::insert(std::uint64_t f, std::int64_t expires, std::int64_t now) {
  shard& s = *shards_[f % shard_count];
  const std::lock_guard lock(s.mutex);
  if (s.expiry.contains(f)) return false;
  // Forget what has expired (in arrival order, which is expiry order for one TTL), and the
  // oldest when full.
  while (!s.arrival.empty() && (s.arrival.front().second < now || s.arrival.size() >= per_shard_)) {
    const auto [old, old_expires] = s.arrival.front();
    s.arrival.pop_front();
    const auto it = s.expiry.find(old);
    if (it != s.expiry.end() && it->second == old_expires) s.expiry.erase(it);
  }
  s.expiry.emplace(f, expires);
  s.arrival.emplace_back(f, expires);
  return true;
}

bool replay_cache::spent(std::string_view challenge) const {
  const std::uint64_t f = fingerprint(challenge);
  const shard& s = *shards_[f % shard_count];
  const std::lock_guard lock(s.mutex);
  return s.expiry.contains(f);
}

std::size_t replay_cache::size() const {
  std::size_t n = 0;
  for (const auto& s : shards_) {
    const std::lock_guard lock(s->mutex);
    n += s->expiry.size();
  }
  return n;
}

void replay_cache::save(core::state_writer& w) const {
  core::write_counted(
      w,
      [&](auto&& f) {
        for (const auto& s : shards_) {
          const std::lock_guard lock(s->mutex);
          for (const auto& [fingerprint, expires] : s->arrival) {
            const auto it = s->expiry.find(fingerprint);
            if (it != s->expiry.end() && it->second == expires) f(fingerprint, expires);
          }
        }
      },
      [](core::state_writer& b, std::uint64_t fingerprint, std::int64_t expires) {
        b.u64(fingerprint);
        b.i64(expires);
      });
}

bool replay_cache::load(core::state_reader& r, std::int64_t now) {
  for (std::uint32_t i = 0, n = r.count(16); i < n && r.ok(); ++i) {
    const std::uint64_t f = r.u64();
    const std::int64_t expires = r.i64();
    if (r.ok() && expires >= now) insert(f, expires, now);
  }
  return r.ok();
}

}  // namespace tollgate::pow
