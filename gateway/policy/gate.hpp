#pragma once
/// The gate: docs/design.md §5's order of decisions as values. Given a request's facts it answers
/// in two steps, before the limits (a ban, a proof the client's violations require, or "ask the
/// store") and after the store's decision (forward, 429, 428 pay-to-pass, shadow-limited),
/// with the effects the caller applies: a proof to spend, proof results to count, violations
/// to record. It writes nothing: it reads the PoW state (bans, violation counters, the replay
/// cache), and a proof it takes is only claimed, for the caller to spend (commit_proof) before
/// it goes on; a claim another request made good first is lost (claim_lost). No sockets, no
/// metrics, no wire text; `now` is passed in. Model: Envoy's local_ratelimit filter, whose
/// decodeHeaders is the same few flat steps.

#include <cstdint>
#include <optional>
#include <string_view>

#include "gateway/core/outcome.hpp"
#include "gateway/limit/request.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/policy/pow_gate.hpp"

namespace tollgate::policy {

/// What a request brings to the gate.
struct gate_input {
  const category_limits* category = nullptr;  ///< its category
  const client_subjects* who = nullptr;       ///< its client, as the PoW tables know it
  std::string_view solution;                  ///< its proof (`X-PoW-Solution`), or ""
  core::nanos now = 0;                        ///< the instant of the decision
  bool exempt = false;  ///< on the access allow list: passes, nothing asked (docs/design.md §9)
  int pow_shift = 0;    ///< bits added to every difficulty asked of it (its consumer tier's)
  /// A proof is required as for one violation at the least: its client is on the penalty
  /// ladder's pow step, or attack mode asks proofs of uncleared clients (docs/design.md §16).
  bool require_proof = false;
  /// Its clearance (`X-PoW-Clearance` or the cookie, docs/design.md §16), or "": none, or
  /// clearance is off.
  std::string_view clearance = {};
};

/// What the caller does besides answering.
struct gate_effects {
  /// Spend the proof claimed (gate_verdict::sent) now, with commit_proof, before the next
  /// step; when that fails, call gate::claim_lost.
  bool spend = false;
  /// A proof was sent and its fate is known: count this result (none: valid).
  std::optional<pow::proof_failure> verification;
  bool extra_valid = false;  ///< also count one valid proof (spent, then asked for again)
  bool pow_failed = false;   ///< record a pow_failed violation against the client
  bool cleared = false;      ///< a clearance waived the violations' requirement: count it
};

/// Where a proof was claimed: what losing the claim changes.
enum class claim_stage : std::uint8_t {
  none,         ///< no claim
  requirement,  ///< before the limits, for the proof the client's violations require
  admitted,     ///< after admitting limits: spent whatever it paid for (only its count changes)
  pay           ///< after rejecting limits: to pay past them
};

/// The gate's answer, reused request after request (its strings keep their capacity).
struct gate_verdict {
  core::outcome result =
      core::outcome::allowed;  ///< the answer, once decided (a forward or a refusal the gate gives)
  bool ask_limits = false;     ///< after step 1: decide the limits, then call step 2
  bool limits_checked = false;   ///< the answer carries the rate-limit fields (docs/design.md §4)
  std::int64_t retry_after = 0;  ///< banned: seconds until the ban ends
  challenge_values challenge;    ///< challenged: the 428's values
  gate_effects effects;          ///< to apply
  proof sent;                    ///< the proof as judged so far (carried between steps)
  bool paid = false;             ///< a proof was spent on the violations' requirement
  claim_stage claimed = claim_stage::none;  ///< where the proof to spend was claimed
  unsigned claimed_bits = 0;                ///< what it was claimed for (requirement)

  /// Whether the request goes upstream.
  bool forward() const noexcept { return core::forwarded(result); }
};

/// Decides requests against the process's PoW state (bans, violation counters, replay cache).
/// Thread safety: as pow_state: any thread.
class gate {
 public:
  /// A gate over `pow`, which outlives it.
  explicit gate(const pow_state& pow) noexcept : pow_(pow) {}

  /// Steps 0 and 1 alone: the allow list, then bans. True when they settle the request
  /// (`v.result` allowed or banned); false when the proof and the limits are still to come.
  /// What a request that cannot carry a proof (a CORS preflight) goes through.
  bool screen(const gate_input& in, gate_verdict& v) const;

  /// Step 1, before the limits: a ban (403), or a proof the client's violations require (428),
  /// or `v.ask_limits`.
  void before_limits(const gate_input& in, gate_verdict& v) const;

  /// Step 2, with the store's decision `d` on `req`: forward, shadow-limited, 429, or with
  /// pay to pass a proof spent (forward) or asked for (428).
  void after_limits(const gate_input& in, const limit::limit_request& req, const limit::decision& d,
                    gate_verdict& v) const;

  /// Whether `in` carries a valid clearance, whatever its bits (attack mode's `cleared`,
  /// docs/design.md §16).
  bool has_clearance(const gate_input& in) const { return cleared(in, 0); }

  /// The proof claimed by the step before (v.effects.spend) was spent by another request
  /// first: the verdict becomes what it would have been had that proof been a replay.
  void claim_lost(const gate_input& in, gate_verdict& v) const;

 private:
  void refuse(const gate_input& in, unsigned bits, gate_verdict& v) const;
  void settle(gate_verdict& v) const;

  void claim(claim_stage stage, unsigned bits, gate_verdict& v) const;
  /// Whether `in` carries a clearance that waives a requirement of `bits`: signed for this
  /// client and policy, unexpired, earned with at least `bits`, and after its last violation.
  bool cleared(const gate_input& in, unsigned bits) const;

  const pow_state& pow_;  ///< bans, counters, challenges, replays
};

}  // namespace tollgate::policy
