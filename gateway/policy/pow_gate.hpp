#pragma once
/// The proof-of-work side of a decision (docs/design.md §5): who is banned, who must show a proof,
/// whether a proof pays, what a violation does; and the values of a 428. The state
/// (challenger, replay cache, counters, bans) lives for the process, across reloads.

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/bans/manual_bans.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/core/address.hpp"
#include "gateway/core/text.hpp"
#include "gateway/limit/address.hpp"
#include "gateway/pow/challenge.hpp"
#include "gateway/pow/clearance.hpp"
#include "gateway/pow/penalties.hpp"
#include "gateway/pow/replay_cache.hpp"
#include "gateway/pow/violations.hpp"

namespace tollgate::policy {

/// A category's PoW settings, compiled.
struct category_pow {
  bool enabled = false;         ///< proofs required from clients with violations
  unsigned base_bits = 16;      ///< difficulty at N = 1
  unsigned step_bits = 2;       ///< per further violation
  unsigned max_bits = 28;       ///< cap
  bool on_limit = false;        ///< pay to pass: 428 instead of 429
  unsigned on_limit_bits = 20;  ///< difficulty of a pay-to-pass proof
  std::uint32_t tag = 0;        ///< pow::category_tag of the name
  /// What a clearance earned in this category is bound to: the categories of its policy
  /// (docs/design.md §16), so that it is honoured in each of them and no other policy's.
  std::uint32_t scope = 0;
  std::vector<std::pair<unsigned, std::size_t>> status_violations;  ///< status -> reason index
};

/// The violation reasons of a policy, compiled: index = position in the policy.
struct violation_rules {
  std::vector<std::string> names;       ///< by index
  std::vector<pow::reason_rule> rules;  ///< by index
  std::size_t pow_failed = 0;           ///< index of pow_failed (always defined)
  std::size_t token_invalid = 0;        ///< index of token_invalid (always defined)
  std::size_t protocol_abuse = 0;       ///< index of protocol_abuse (always defined)
  /// Index by name: an upstream's reason is looked up per response that reports one, and a
  /// policy may define thousands.
  std::unordered_map<std::string, std::size_t, core::name_hash, std::equal_to<>> by_name;
  /// The index of reason `name`, if defined.
  std::optional<std::size_t> find(std::string_view name) const noexcept;
};

/// Compiles the PoW settings of category `c`, whose reasons index into `rules`.
category_pow compile_pow(const config::category_config& c, const violation_rules& rules);
/// Compiles the violation reasons of `p`.
violation_rules compile_violations(const config::policy_config& p);

/// A client as the PoW tables know it.
struct client_subjects {
  pow::subject individual;  ///< its individual (IPv4) or subnet (IPv6) key
  pow::subject network;     ///< its network (IPv4) or provider (IPv6) key
  std::uint64_t tag = 0;    ///< what challenges bind: the individual key and its level
};
client_subjects subjects_of(const core::address& a, const limit::level_prefixes& p) noexcept;

/// The process-wide PoW state.
/// Thread safety: every member function may be called from any thread.
class pow_state {
 public:
  /// Most violation reasons whose per-address counts (toward a ban) are kept.
  static constexpr std::size_t max_reason_slots = 32;

  /// `secret` keys challenges; tables sized from `counters` and `settings`.
  pow_state(std::string_view secret, const config::pow_settings& settings,
            const config::pow_counters_config& counters);

  /// The slot of reason `name` in the per-address reason counts: the same for the life of the
  /// process, whatever reloads do to the order of reasons in the policy. Past
  /// max_reason_slots distinct names, max_reason_slots (such a reason is counted in the
  /// individual and network counters but bans nobody).
  std::size_t slot(const std::string& name);

  const pow::challenger& challenger() const noexcept { return challenger_; }
  /// Signs and checks clearances (docs/design.md §16).
  const pow::clearance_signer& clearances() const noexcept { return clearances_; }
  pow::replay_cache& replays() noexcept { return replays_; }
  const pow::replay_cache& replays() const noexcept { return replays_; }
  pow::violation_tables& violations() noexcept { return violations_; }
  const pow::violation_tables& violations() const noexcept { return violations_; }
  /// Every client's place on the penalty ladder (docs/design.md §16).
  pow::penalty_table& penalties() noexcept { return penalties_; }
  const pow::penalty_table& penalties() const noexcept { return penalties_; }
  /// Bans placed by an operator (admin API), beside the automatic ones.
  bans::manual_bans& manual_bans() noexcept { return manual_bans_; }
  const bans::manual_bans& manual_bans() const noexcept { return manual_bans_; }
  /// The end of the latest ban, automatic or manual, on `who` in force at `now`.
  std::optional<std::int64_t> banned_until(const client_subjects& who,
                                           std::int64_t now) const noexcept;
  /// Writes the violation tables with the names of their reason slots (the state file,
  /// docs/design.md §18).
  void save_violations(core::state_writer& w);
  /// Reads what save_violations() wrote, each reason counted in the slot its name has here;
  /// false when it is malformed.
  bool load_violations(core::state_reader& r);
  /// Seconds a challenge lives at the least (`pow.challenge_ttl`).
  std::int64_t challenge_ttl() const noexcept { return ttl_; }
  /// Longest life of a challenge, whatever its difficulty.
  static constexpr std::int64_t max_lifetime = 24 * 3600;
  /// Seconds a challenge of `bits` lives: challenge_ttl, or 8 times the expected work at
  /// `pow.solver_hash_rate` when that is longer (a client that slow passes 99.97% of the
  /// time: the tries needed are geometric, P(more than 8x the mean) = e^-8), at most a day.
  std::int64_t lifetime(unsigned bits) const noexcept;

 private:
  pow::challenger challenger_;
  pow::clearance_signer clearances_;
  pow::replay_cache replays_;
  pow::violation_tables violations_;
  pow::penalty_table penalties_;
  bans::manual_bans manual_bans_;
  std::int64_t ttl_;
  double hash_rate_;                     ///< pow.solver_hash_rate
  std::mutex slots_mutex_;               ///< guards slot_names_
  std::vector<std::string> slot_names_;  ///< by slot
};

/// What a request's X-PoW-Solution header came to.
struct proof {
  bool sent = false;                                      ///< the header was there
  pow::proof_failure failure = pow::proof_failure::none;  ///< why it is no good, if not
  pow::challenge_claims claims;                           ///< what its challenge said (if valid)
  std::string_view challenge;                             ///< its challenge (if well formed)
  bool spent = false;  ///< already paid for something (claimed in this request)
};

/// Checks `solution` (the header's value; empty: none sent) for client `who` in category `c`
/// at `now` (Unix seconds). Replay is judged when the proof is spent.
proof check_proof(const pow_state& s, std::string_view solution, const client_subjects& who,
                  const category_pow& c, std::int64_t now);

/// Claims `p` for something that needs `bits`: true when it is valid, carries at least `bits`
/// and was not spent before (here or in an earlier request); otherwise sets `p.failure`. Reads
/// the replay cache and writes nothing: a claim is made good by commit_proof.
bool claim_proof(const pow_state& s, proof& p, unsigned bits);

/// Spends claimed proof `p` in the replay cache at `now`: false when another request spent
/// it since it was claimed (the claim is then lost).
bool commit_proof(pow_state& s, const proof& p, std::int64_t now);

/// What a 428 tells the client (docs/design.md §5); net renders the header lines and the body.
struct challenge_values {
  std::string challenge;                                 ///< X-PoW-Challenge
  unsigned bits = 0;                                     ///< X-PoW-Difficulty
  std::int64_t expires = 0;                              ///< Unix seconds
  pow::proof_failure reason = pow::proof_failure::none;  ///< why the proof sent failed, if any
};

/// A new challenge of `bits` bits for `who` in `c` at `now` (Unix seconds); `reason` is the
/// failure of the proof that was sent, if any. Assigns into `out`, keeping its capacity.
void issue_challenge(const pow_state& s, const client_subjects& who, const category_pow& c,
                     unsigned bits, pow::proof_failure reason, std::int64_t now,
                     challenge_values& out);

}  // namespace tollgate::policy
