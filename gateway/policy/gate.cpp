#include "gateway/policy/gate.hpp"

#include <algorithm>

#include "gateway/pow/challenge.hpp"

namespace tollgate::policy {

namespace {

/// Whether only limits a proof may pay for rejected `d`: address levels, never a global or a
/// key limit (docs/design.md §3, §5). Shadowed limits reject nothing.
bool only_payable_rejected(const limit::limit_request& req, const limit::decision& d) noexcept {
  for (std::uint8_t i = 0; i < d.count; ++i) {
    const limit::limit_outcome& o = d.limits[i];
    const limit::limit_spec& s = *req.groups[o.group].spec;
    if (o.wait > 0 && !s.shadow && !s.payable()) return false;
  }
  return true;
}

/// Difficulty `bits` moved by a consumer tier's `shift` (docs/design.md §15), never below 8
/// bits when moved.
unsigned shifted(unsigned bits, int shift) noexcept {
  if (shift == 0) return bits;
  return static_cast<unsigned>(std::clamp(static_cast<int>(bits) + shift, 8, 64));
}

std::int64_t seconds(core::nanos t) noexcept {
  return t / core::ns_per_s;
}

}  // namespace

void gate::settle(gate_verdict& v) const {
  // A proof's result is counted once its fate is known: spent, or refused and why.
  if (v.sent.sent) v.effects.verification = v.sent.failure;
}

void gate::refuse(const gate_input& in, unsigned bits, gate_verdict& v) const {
  // A proof already spent on this request was honest: a second payment is asked for, with no
  // reason and no violation. Any other failed proof counts against the client's network,
  // except one that merely expired.
  if (v.sent.spent) v.sent = {};
  if (v.sent.sent && v.sent.failure != pow::proof_failure::expired) v.effects.pow_failed = true;
  issue_challenge(pow_, *in.who, in.category->pow, bits, v.sent.failure, seconds(in.now),
                  v.challenge);
  v.result = core::outcome::challenged;
  settle(v);
}

void gate::claim(claim_stage stage, unsigned bits, gate_verdict& v) const {
  v.effects.spend = true;
  v.claimed = stage;
  v.claimed_bits = bits;
}

bool gate::screen(const gate_input& in, gate_verdict& v) const {
  v.ask_limits = false;
  v.limits_checked = false;
  v.effects = {};
  v.paid = false;
  v.claimed = claim_stage::none;
  v.sent = {};
  // 0. The access allow list: no ban, proof or limit applies.
  if (in.exempt) {
    v.result = core::outcome::allowed;
    return true;
  }
  // 1. A ban, automatic or placed by an operator, covers the address in every category.
  if (const auto until = pow_.banned_until(*in.who, in.now)) {
    v.result = core::outcome::banned;
    v.retry_after = core::ceil_seconds(*until - in.now);
    return true;
  }
  return false;
}

void gate::before_limits(const gate_input& in, gate_verdict& v) const {
  if (screen(in, v)) return;
  const category_limits& c = *in.category;
  v.sent = check_proof(pow_, in.solution, *in.who, c.pow, seconds(in.now));
  // 2. A client with violations (or on the penalty ladder's pow step, or uncleared in attack
  // mode) shows a proof first, in categories that ask for one.
  if (c.pow.enabled) {
    const unsigned counted =
        pow_.violations().requirement(in.who->individual, in.who->network, in.now);
    const unsigned n = in.require_proof ? std::max(counted, 1u) : counted;
    const unsigned bits = shifted(
        pow::required_bits(n, c.pow.base_bits, c.pow.step_bits, c.pow.max_bits), in.pow_shift);
    // A clearance earned since the client's last violation waives it (docs/design.md §16).
    if (n > 0 && cleared(in, bits)) {
      v.effects.cleared = true;
    } else if (n > 0) {
      v.paid = claim_proof(pow_, v.sent, bits);
      if (!v.paid) return refuse(in, bits, v);
      claim(claim_stage::requirement, bits, v);
    }
  }
  // 3. The limits.
  v.ask_limits = true;
}

void gate::after_limits(const gate_input& in, const limit::limit_request& req,
                        const limit::decision& d, gate_verdict& v) const {
  v.ask_limits = false;
  v.limits_checked = true;
  // A claim of step 1 was made good by the caller before the limits were asked.
  v.effects.spend = false;
  v.claimed = claim_stage::none;
  const category_limits& c = *in.category;
  if (d.admitted) {
    // A proof sent is spent, whatever it paid for.
    if (v.sent.sent && !v.sent.spent && claim_proof(pow_, v.sent, 0)) {
      claim(claim_stage::admitted, 0, v);
    }
    v.result = d.shadow_limited ? core::outcome::shadow_limited : core::outcome::allowed;
    return settle(v);
  }
  if (!c.pow.on_limit || !only_payable_rejected(req, d)) {
    v.result = core::outcome::limited;
    return settle(v);
  }
  // Pay to pass: a proof admits this one request past the address levels, committing nothing.
  if (claim_proof(pow_, v.sent, shifted(c.pow.on_limit_bits, in.pow_shift))) {
    claim(claim_stage::pay, shifted(c.pow.on_limit_bits, in.pow_shift), v);
    v.result = core::outcome::pow_passed;
    return settle(v);
  }
  // A proof that went to the violations' requirement was valid: counted so here, since
  // refuse() forgets it.
  v.effects.extra_valid = v.paid;
  refuse(in, shifted(c.pow.on_limit_bits, in.pow_shift), v);
}

bool gate::cleared(const gate_input& in, unsigned bits) const {
  if (in.clearance.empty()) return false;
  const auto c = pow_.clearances().check(in.clearance, in.now, in.who->tag, in.category->pow.scope);
  return c && c->bits >= bits && c->issued > pow_.violations().last_violation(in.who->individual);
}

void gate::claim_lost(const gate_input& in, gate_verdict& v) const {
  const claim_stage stage = v.claimed;
  v.claimed = claim_stage::none;
  v.effects.spend = false;
  v.sent.spent = false;
  v.sent.failure = pow::proof_failure::replayed;
  switch (stage) {
    case claim_stage::requirement:
      v.ask_limits = false;
      v.paid = false;
      return refuse(in, v.claimed_bits, v);
    case claim_stage::admitted:
      return settle(v);  // forwarded all the same; counted as the replay it was
    case claim_stage::pay:
      v.effects.extra_valid = v.paid;
      return refuse(in, shifted(in.category->pow.on_limit_bits, in.pow_shift), v);
    case claim_stage::none:
      return;
  }
}

}  // namespace tollgate::policy
