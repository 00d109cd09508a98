#pragma once
/// The state file of `store: memory` (docs/design.md §18): what a client's standing depends on,
/// kept over a restart. Written whole and atomically (a temporary file beside it, fsync,
/// rename, fsync of the folder) every `save_interval` and at a stop; read once at start. A
/// missing, truncated, corrupt or foreign file is logged and ignored, never fatal.
///
/// Format (version 1), integers little-endian (core/state_codec.hpp):
///   "TOLLGATE STATE\n\0"  u32 version  i64 written at (ns)  u64 payload bytes  payload
///   u64 SipHash-1-3 of all that precedes it (header and payload) under a fixed key
/// The payload is sections, each `u8 tag, u64 bytes, bytes`: 1 violation counters and
/// automatic bans (with the names of their reason slots), 2 penalty ladder, 3 spent proofs,
/// 4 manual bans, 5 tiers upstreams set, 6 overrides (each as the admin API's JSON), 7 the key
/// identity values are hashed under (so that the keys of 8 still name the same clients), 8
/// quotas' counts (table, scope, key, count, end of window), 9 attack levels forced by hand. A
/// section of an unknown tag is skipped; nothing is applied unless the header, the length and
/// the checksum are right.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/core/clock.hpp"
#include "gateway/core/siphash.hpp"
#include "gateway/policy/overrides.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/policy/tier_memory.hpp"

namespace tollgate::limit {
class memory_store;
}

namespace tollgate::app {

/// Where a quota of the configuration keeps its counts in the limiter's tables.
struct quota_place {
  std::uint8_t table = 0;   ///< limit_spec::table()
  std::uint32_t scope = 0;  ///< limit_spec::scope
  friend bool operator==(const quota_place&, const quota_place&) = default;
};

/// An attack level forced by hand (docs/design.md §16).
struct forced_attack {
  std::string category;    ///< as the admin API names it
  std::uint8_t level = 0;  ///< 1..3
  core::nanos until = 0;   ///< 0: until released
};

/// The tables the state file holds.
struct state_parts {
  state_parts(policy::pow_state& p, policy::tier_memory& t, policy::override_book& o)
      : pow(p), tiers(t), overrides(o) {}

  policy::pow_state& pow;                 ///< violations, bans, penalties, spent proofs
  policy::tier_memory& tiers;             ///< tiers upstreams set
  policy::override_book& overrides;       ///< the admin API's overrides
  core::siphash_key identity_key{};       ///< saved: what the snapshot hashes identity values with
  limit::memory_store* limits = nullptr;  ///< the quotas' counts (null: not kept)
  std::vector<quota_place> quotas;        ///< where the configuration's quotas live
  /// Saved: the levels forced now. Loaded: what the file held, still in force, for the caller
  /// to apply once attack mode runs.
  std::vector<forced_attack> forced;
};

/// The file's bytes for `parts` at `now`.
std::string encode_state(state_parts& parts, core::nanos now);

/// What decode_state() read.
struct state_read {
  std::string error;         ///< "" when it was read; else why not (and from where on)
  std::size_t sections = 0;  ///< sections applied
  core::nanos written = 0;   ///< when it was written
};
/// Reads `bytes` into `parts` at `now` (what expired meanwhile is dropped). Nothing is applied
/// when the header, the length or the checksum is wrong.
state_read decode_state(std::string_view bytes, state_parts& parts, core::nanos now);

/// The identity key a well-formed state file holds, if any (read before the configuration is
/// compiled, so that its limits hash identity values as the process that wrote it did).
std::optional<core::siphash_key> state_identity_key(std::string_view bytes);

/// Writes `parts` to `path` atomically: "" when done, else why not. `bytes` gets its size.
std::string save_state_file(const std::string& path, state_parts& parts, core::nanos now,
                            std::size_t& bytes);
/// The bytes of `path`; nothing when it is missing or cannot be read, which is logged (missing
/// at info, anything else at warn).
std::optional<std::string> read_state_file(const std::string& path);
/// Reads `bytes`, read from `path`, into `parts`, and logs what came of it.
void load_state(const std::string& path, std::string_view bytes, state_parts& parts,
                core::nanos now);

}  // namespace tollgate::app
