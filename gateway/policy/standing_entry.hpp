#pragma once
/// The entries of the journal replicas share a client's standing through (docs/design.md §18,
/// app/standing.hpp), as text: what a replica writes and every replica reads back. Read from
/// Redis, so parsed as untrusted bytes (a fuzz target: tests/fuzz/fuzz_standing.cpp).
///
/// Entries are text, one line, fields separated by spaces, the first the format's version:
///   1 v <origin> <ns> <individual level> <key> <network level> <key> <i> <n> <threshold>
///       <ban ns> <ban max ns> <reason>               a violation (i, n: the levels it raises)
///   1 b <origin> <since ns> <until ns> <block> <note...>   a manual ban
///   1 u <origin> <ns> <block>                              a lift (manual, and automatic
///                                                          when the block is one client)
///   1 r <origin> <ns> <block>                              a reset
///   1 p <origin> <ns>                                      points on the penalty ladder,
///   <level> <key> <points> <name>                          one line per client (at most
///   ...                                                    max_point_records; name: how
///                                                          logs call it)
///   1 k <origin> <ns> <level> <key>                        a client taken off the ladder
///   1 a <origin> <ns> <level> <until ns> <category>       attack mode forced by hand
///                                                          (level 255: released; until
///                                                          0: until released)
///   1 t <origin> <ns>                                      tiers upstreams set, one line
///   <level> <key> <until ns> <tier>                        per client (at most
///   ...                                                    max_point_records)
/// where a block is `<4|6>/<prefix>/<net>` (key_block's fields). An entry of another version
/// or malformed is logged and skipped.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/bans/manual_bans.hpp"
#include "gateway/core/key_block.hpp"
#include "gateway/policy/pow_gate.hpp"

namespace tollgate::policy {

namespace standing_entry {

/// Most clients one points entry carries.
inline constexpr std::size_t max_point_records = 512;

/// Points for one client on the penalty ladder (docs/design.md §16).
struct point_record {
  pow::subject who;          ///< the client (an address level, or 0xfe: an identity)
  std::uint32_t points = 0;  ///< added
  std::string name;          ///< its address or identity, for the log
};

/// A tier an upstream set for one client (docs/design.md §15), until when.
struct tier_record {
  pow::subject who;       ///< the client (an address level, or 0xfe: an identity)
  core::nanos until = 0;  ///< when it ends
  std::string tier;       ///< its name
};

/// One entry, decoded.
struct entry {
  char kind = 0;                     ///< 'v', 'b', 'u' or 'r'
  std::string origin;                ///< the replica that wrote it
  core::nanos at = 0;                ///< when (a ban: since)
  core::nanos until = 0;             ///< a ban's end
  policy::client_subjects who;       ///< a violation's client
  pow::reason_rule rule;             ///< a violation's rule
  std::string reason;                ///< a violation's reason, a ban's note, an attack's category
  core::key_block block;             ///< a ban's, lift's or reset's block
  std::vector<point_record> points;  ///< a points entry's clients
  std::vector<tier_record> tiers;    ///< a tiers entry's clients
  std::uint8_t level = 0;            ///< attack mode: the level forced (255: released)
};

/// The level of an attack entry that releases a category to automatic.
inline constexpr std::uint8_t released = 255;

std::string violation(std::string_view origin, const policy::client_subjects& who,
                      std::string_view reason, const pow::reason_rule& rule, core::nanos now);
std::string ban(std::string_view origin, const bans::manual_ban& b);
std::string lift(std::string_view origin, const core::key_block& block, core::nanos now);
std::string reset(std::string_view origin, const core::key_block& block, core::nanos now);
std::string points(std::string_view origin, core::nanos now,
                   const std::vector<point_record>& records);
std::string tiers(std::string_view origin, core::nanos now,
                  const std::vector<tier_record>& records);
std::string attack(std::string_view origin, std::string_view category, std::uint8_t level,
                   core::nanos until, core::nanos now);
std::string clear_client(std::string_view origin, const pow::subject& who, core::nanos now);
/// The entry `text` says, or nothing (with `error`) when it is malformed or of another version.
std::optional<entry> parse(std::string_view text, std::string& error);

}  // namespace standing_entry

}  // namespace tollgate::policy
