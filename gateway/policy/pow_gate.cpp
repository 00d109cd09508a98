#include "gateway/policy/pow_gate.hpp"

#include <algorithm>
#include <cmath>

#include "gateway/core/text.hpp"

namespace tollgate::policy {

std::optional<std::size_t> violation_rules::find(std::string_view name) const noexcept {
  const auto it = by_name.find(name);
  if (it == by_name.end()) return std::nullopt;
  return it->second;
}

violation_rules compile_violations(const config::policy_config& p) {
  violation_rules out;
  for (const auto& v : p.violations) {
    pow::reason_rule r{v.individual, v.network};
    if (v.ban) {
      r.ban_threshold = v.ban->threshold;
      // The PoW tables do their arithmetic on integer nanoseconds, as the limiter does.
      r.ban_duration = v.ban->duration.count();
      r.ban_max_duration = v.ban->max_duration.count();
    }
    if (v.name == "pow_failed") out.pow_failed = out.names.size();
    if (v.name == "token_invalid") out.token_invalid = out.names.size();
    if (v.name == "protocol_abuse") out.protocol_abuse = out.names.size();
    out.by_name.emplace(v.name, out.names.size());
    out.names.push_back(v.name);
    out.rules.push_back(r);
  }
  return out;
}

category_pow compile_pow(const config::category_config& c, const violation_rules& rules) {
  category_pow p;
  p.enabled = c.pow.enabled;
  p.base_bits = c.pow.base_bits;
  p.step_bits = c.pow.step_bits;
  p.max_bits = c.pow.max_bits;
  p.on_limit = c.pow.on_limit;
  p.on_limit_bits = c.pow.on_limit_bits;
  p.tag = pow::category_tag(c.name);
  for (const auto& [status, reason] : c.status_violations) {
    // The loader checked that every reason named here is defined.
    if (const auto i = rules.find(reason)) p.status_violations.emplace_back(status, *i);
  }
  return p;
}

client_subjects subjects_of(const core::address& a, const limit::level_prefixes& p) noexcept {
  const limit::address_keys k = limit::keys_of(a, p);
  client_subjects s;
  s.individual = {k.fine_key, static_cast<std::uint8_t>(k.fine)};
  s.network = {k.coarse_key, static_cast<std::uint8_t>(k.coarse)};
  // IPv4 keys fit in 32 bits; the level in the top byte keeps them apart from IPv6 prefixes.
  s.tag = k.fine_key ^ (std::uint64_t{static_cast<std::uint8_t>(k.fine)} << 56);
  return s;
}

pow_state::pow_state(std::string_view secret, const config::pow_settings& settings,
                     const config::pow_counters_config& counters)
    : challenger_(secret),
      clearances_(secret),
      replays_(settings.replay_cache_entries),
      violations_(pow::counter_settings{counters.max_counter, counters.decay_interval.count(),
                                        counters.max_individual_entries,
                                        counters.max_network_entries, counters.network_min_sources},
                  max_reason_slots),
      // Clients on the ladder are bounded like those with violations.
      penalties_(counters.max_individual_entries),
      // Challenges carry their expiry in whole seconds (the wire's unit).
      ttl_(std::max<std::int64_t>(
          1, std::chrono::duration_cast<std::chrono::seconds>(settings.challenge_ttl).count())),
      hash_rate_(static_cast<double>(std::max<std::uint64_t>(1, settings.solver_hash_rate))) {}

std::int64_t pow_state::lifetime(unsigned bits) const noexcept {
  const double work =
      std::ceil(std::ldexp(8.0, static_cast<int>(std::min(bits, 64u))) / hash_rate_);
  const double capped = std::min(work, static_cast<double>(max_lifetime));
  return std::max(ttl_, static_cast<std::int64_t>(capped));
}

std::size_t pow_state::slot(const std::string& name) {
  const std::lock_guard lock(slots_mutex_);
  for (std::size_t i = 0; i < slot_names_.size(); ++i) {
    if (slot_names_[i] == name) return i;
  }
  if (slot_names_.size() == max_reason_slots) return max_reason_slots;
  slot_names_.push_back(name);
  return slot_names_.size() - 1;
}

void pow_state::save_violations(core::state_writer& w) {
  {
    const std::lock_guard lock(slots_mutex_);
    w.u32(static_cast<std::uint32_t>(slot_names_.size()));
    for (const auto& name : slot_names_)
      w.text(name);
  }
  violations_.save(w);
}

bool pow_state::load_violations(core::state_reader& r) {
  std::vector<std::size_t> slots;
  for (std::uint32_t i = 0, n = r.count(4); i < n && r.ok(); ++i) {
    const std::string_view name = r.text(256);
    if (r.ok()) slots.push_back(slot(std::string(name)));
  }
  return r.ok() && violations_.load(r, slots);
}

std::optional<std::int64_t> pow_state::banned_until(const client_subjects& who,
                                                    std::int64_t now) const noexcept {
  auto until = violations_.banned_until(who.individual, now);
  // Empty (the usual case), manual bans cost the request one load.
  if (const auto manual = manual_bans_.banned_until(who.individual, now)) {
    if (!until || *manual > *until) until = manual;
  }
  return until;
}

proof check_proof(const pow_state& s, std::string_view solution, const client_subjects& who,
                  const category_pow& c, std::int64_t now) {
  proof p;
  if (solution.empty()) return p;
  p.sent = true;
  // Required bits are judged when the proof is spent, against what it pays for.
  p.failure = s.challenger().check(solution, now, who.tag, c.tag, 0, p.claims, p.challenge);
  return p;
}

bool claim_proof(const pow_state& s, proof& p, unsigned bits) {
  if (!p.sent || p.failure != pow::proof_failure::none) return false;
  if (p.spent) {
    p.failure = pow::proof_failure::replayed;  // one proof pays once
    return false;
  }
  if (p.claims.bits < bits) {
    p.failure = pow::proof_failure::insufficient_work;
    return false;
  }
  if (s.replays().spent(p.challenge)) {
    p.failure = pow::proof_failure::replayed;
    return false;
  }
  p.spent = true;
  return true;
}

bool commit_proof(pow_state& s, const proof& p, std::int64_t now) {
  return s.replays().spend(p.challenge, p.claims.expires, now);
}

void issue_challenge(const pow_state& s, const client_subjects& who, const category_pow& c,
                     unsigned bits, pow::proof_failure reason, std::int64_t now,
                     challenge_values& out) {
  out.expires = now + s.lifetime(bits);
  out.bits = bits;
  out.reason = reason;
  out.challenge =
      s.challenger().issue({out.expires, static_cast<std::uint8_t>(bits), c.tag, who.tag});
}

}  // namespace tollgate::policy
