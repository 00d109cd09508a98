#pragma once
/// The tiers upstreams set (docs/design.md §15, the `upstream` tier source): `X-Tollgate-Tier:
/// <tier>` on a response sets its client's tier for `tier_ttl`. "The client" is its identity
/// (the verified token's `sub`) when it has one, else its individual address. Process-wide,
/// across reloads (a tier is remembered by name), bounded (least recently set go first).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gateway/core/clock.hpp"
#include "gateway/core/siphash.hpp"
#include "gateway/core/state_codec.hpp"
#include "gateway/pow/lru_map.hpp"

namespace tollgate::policy {

/// Thread safety: every member may be called from any thread.
class tier_memory {
 public:
  /// Longest tier name a state file may hold (a policy's names are far shorter).
  static constexpr std::size_t max_tier_name = 256;
  /// At most `capacity` clients.
  explicit tier_memory(std::size_t capacity = 100'000) : map_(capacity) {}

  /// The key of a client with identity `sub` ("" for none) and individual address key
  /// `individual`.
  static pow::subject client(std::string_view sub, const pow::subject& individual) noexcept {
    if (sub.empty()) return individual;
    return {core::siphash13(sub, {0x7469657273756221ULL, 0x6964656e74697479ULL}), 0xfe};
  }
  /// Remembers `tier` for `client` until `until`.
  void set(const pow::subject& client, std::string_view tier, core::nanos until) {
    map_.update(client, [&](entry& e) {
      e.tier.assign(tier);
      e.until = until;
    });
  }
  /// The tier remembered for `client` at `now`, if any; "" when none or expired.
  std::string_view find(const pow::subject& client, core::nanos now, std::string& out) const {
    out.clear();
    map_.find(client, [&](const entry& e) {
      if (now < e.until) out = e.tier;
    });
    return out;
  }
  /// Writes every tier set (the state file, docs/design.md §18).
  void save(core::state_writer& w) const {
    core::write_counted(
        w, [&](auto&& f) { map_.for_each_oldest_first(f); },
        [](core::state_writer& b, const pow::subject& k, const entry& e) {
          b.u64(k.key);
          b.u8(k.level);
          b.text(e.tier);
          b.i64(e.until);
        });
  }
  /// Reads what save() wrote, dropping tiers that ended before `now`; false when it is
  /// malformed (what was read before stays).
  bool load(core::state_reader& r, core::nanos now) {
    for (std::uint32_t i = 0, n = r.count(8 + 1 + 4 + 8); i < n && r.ok(); ++i) {
      const pow::subject k{r.u64(), r.u8()};
      const std::string_view tier = r.text(max_tier_name);
      const core::nanos until = r.i64();
      if (r.ok() && until > now) set(k, tier, until);
    }
    return r.ok();
  }

  /// Clients remembered.
  std::size_t size() const noexcept { return map_.size(); }

 private:
  struct entry {
    std::string tier;
    core::nanos until = 0;
  };
  pow::lru_map<entry> map_;
};

}  // namespace tollgate::policy
