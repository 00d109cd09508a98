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
/// 4 manual bans, 5 tiers upstreams set, 6 overrides (each as the admin API's JSON). A
/// section of an unknown tag is skipped; nothing is applied unless the header, the length and
/// the checksum are right.

#include <cstddef>
#include <string>
#include <string_view>

#include "gateway/core/clock.hpp"
#include "gateway/policy/overrides.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/policy/tier_memory.hpp"

namespace tollgate::app {

/// The tables the state file holds.
struct state_parts {
  policy::pow_state& pow;            ///< violations, bans, penalties, spent proofs
  policy::tier_memory& tiers;        ///< tiers upstreams set
  policy::override_book& overrides;  ///< the admin API's overrides
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

/// Writes `parts` to `path` atomically: "" when done, else why not. `bytes` gets its size.
std::string save_state_file(const std::string& path, state_parts& parts, core::nanos now,
                            std::size_t& bytes);
/// Reads `path` into `parts`, and logs what came of it (missing: info; anything else wrong:
/// warn).
void load_state_file(const std::string& path, state_parts& parts, core::nanos now);

}  // namespace tollgate::app
