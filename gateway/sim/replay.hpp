#pragma once
/// A replay: the requests of a log_set in time order through one configuration, or two side by
/// side (--compare), tallied per category; for Tollgate's own logs, each simulated decision
/// compared with the logged one.

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "gateway/sim/log_set.hpp"
#include "gateway/sim/simulator.hpp"

namespace tollgate::sim {

/// An address or a network as a map key: family and the 128 (or 32) bits.
struct address_key {
  std::uint64_t high = 0;  ///< IPv6 high half, or 0
  std::uint64_t low = 0;   ///< IPv6 low half, or the IPv4 bits
  bool v6 = false;         ///< family
  friend bool operator==(const address_key&, const address_key&) = default;
};

/// Hash of an address_key.
struct address_key_hash {
  /// Mixes the halves.
  std::size_t operator()(const address_key& k) const noexcept {
    return static_cast<std::size_t>((k.high * 0x9e3779b97f4a7c15ULL) ^ k.low ^ (k.v6 ? 1 : 0) ^
                                    ((k.low >> 29) * 0xbf58476d1ce4e5b9ULL));
  }
};

/// What happened to the requests of one category.
struct category_tally {
  std::uint64_t requests = 0;                                 ///< replayed
  std::uint64_t admitted = 0;                                 ///< forwarded
  std::uint64_t exempt = 0;                                   ///< on the allow list
  std::array<std::uint64_t, core::outcome_count> outcomes{};  ///< by outcome
  std::vector<std::array<std::uint64_t, 2>> limited;  ///< by limit slot and tier: 429 or 428
  std::vector<std::array<std::uint64_t, 2>> shadow;   ///< by limit slot and tier: shadowed
  std::vector<std::uint64_t> unkeyed;                 ///< by limit slot: key missing
  std::vector<std::uint64_t> tier_requests;           ///< by consumer tier (the policy's): replayed
  std::vector<std::uint64_t> tier_limited;            ///< by consumer tier: limited or challenged
  /// Limited or challenged requests per address and per network (the policy's coarse prefix).
  std::unordered_map<address_key, std::uint64_t, address_key_hash> addresses, networks;
};

/// One configuration's tallies.
struct run_tally {
  std::vector<category_tally> categories;  ///< by category index
  std::uint64_t unroutable = 0;            ///< targets that are no valid path (400, not logged)
};

/// One request whose outcome differs between the two configurations.
struct difference {
  std::uint32_t file = 0;   ///< which log
  std::uint64_t line = 0;   ///< its line number
  core::nanos time = 0;     ///< the decision's instant
  core::address client;     ///< the client
  std::string method;       ///< decoded
  std::string target;       ///< decoded
  std::string category[2];  ///< under each configuration
  std::string decision[2];  ///< under each
  std::string limit[2];     ///< binding limit under each, or ""
};

/// Simulated decisions against the logged ones (Tollgate's logs only).
struct log_agreement {
  std::uint64_t compared = 0;  ///< lines whose logged decision the simulation can make
  std::uint64_t differ = 0;    ///< of those, decided otherwise (decision or binding limit)
  /// Lines replayed in another category than the one logged: routes on headers (a log has
  /// none) or routes changed since.
  std::uint64_t other_category = 0;
  /// Lines whose logged decision needs what a log does not show (a proof, a ban, a violation,
  /// a store error, the WebSocket connection count), by logged decision.
  std::map<std::string, std::uint64_t> not_comparable;
  /// "logged -> simulated" (with limits) -> lines.
  std::map<std::string, std::uint64_t, std::less<>> pairs;
  std::vector<difference> first;  ///< the first differing lines (config 0 only)
};

/// Everything a replay found.
struct replay_result {
  std::array<run_tally, 2> runs;        ///< per configuration (the second with --compare)
  log_agreement agreement;              ///< against the log, under the first configuration
  std::vector<difference> differences;  ///< between the two, the first max_differences
  std::uint64_t differences_total = 0;  ///< between the two, all
  std::uint64_t upgrades = 0;           ///< requests replayed as WebSocket upgrades
  std::uint64_t requests = 0;           ///< requests replayed
  core::nanos first = 0, last = 0;      ///< time span of the requests
};

/// Options of a replay.
struct replay_options {
  std::size_t max_differences = 100'000;         ///< differences kept (all are counted)
  std::size_t max_log_differences = 20;          ///< differences from the log kept
  std::function<void(std::uint64_t done)> tick;  ///< every 2^16 requests
};

/// Replays the requests of `logs` (indexed) through `a`, and through `b` too when not null;
/// each line is read whole here (log_set::read), so `logs` counts requests and bad lines now.
replay_result replay(log_set& logs, simulator& a, simulator* b, const replay_options& o);

}  // namespace tollgate::sim
