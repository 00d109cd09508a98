#include "gateway/sim/simulator.hpp"

#include "gateway/core/text.hpp"
#include "gateway/limit/headers.hpp"
#include "gateway/policy/pow_gate.hpp"

namespace tollgate::sim {

namespace {

/// The headers a logged request is taken to carry: none, except the two of a WebSocket
/// upgrade when the log shows one (`context` points at that flag). A log has no headers, so
/// limits keyed on headers, cookies or bearer tokens do not apply (they are counted unkeyed).
std::string_view logged_header(const void* context, std::string_view name) {
  if (!*static_cast<const bool*>(context)) return {};
  if (core::iequals(name, "upgrade")) return "websocket";
  if (core::iequals(name, "connection")) return "upgrade";
  return {};
}

/// The table sizes the gateway's store has under `c` (gateway/app/main.cpp: make_store).
limit::store_capacity capacity_of(const config::store_config& c) {
  const auto& cap = c.capacity;
  return {cap[0], cap[1], cap[2], cap[3], cap[4]};
}

/// Whether `r` is, by its log line, a CORS preflight the gateway answered itself: an OPTIONS
/// allowed with 200 and sent nowhere. The gateway routed it by the method it announced, which
/// the log does not show: its logged category stands for that route.
bool answered_preflight(const log_record& r) noexcept {
  return r.has_decision() && !r.forwarded && r.status == 200 && r.method == "OPTIONS" &&
         r.decision == "allowed";
}

/// The key that hashes key values: any fixed one does offline (values are only compared).
constexpr core::siphash_key sim_key{0x73696d756c617465ULL, 0x746f6c6c67617465ULL};

}  // namespace

std::string_view decision_name(decision d) noexcept {
  constexpr std::string_view names[] = {"allowed", "limited",        "challenged", "pow_passed",
                                        "banned",  "shadow_limited", "denied"};
  return names[static_cast<std::size_t>(d)];
}

bool outcome::same_as(const outcome& o) const noexcept {
  if (result != o.result || (limit == nullptr) != (o.limit == nullptr)) return false;
  return limit == nullptr || (tier == o.tier && limit->name == o.limit->name);
}

void append_limit(std::string& out, const outcome& o) {
  if (o.limit == nullptr) return;
  out += o.limit->name;
  out += '.';
  out += limit::tier_name(o.tier);
}

simulator::simulator(config::gateway_config c)
    : config_(std::move(c)),
      policy_(config_.policy, sim_key),
      router_(config_, policy_),
      store_(capacity_of(config_.store), 0x5eed, 1),
      // The secret only signs challenges nobody will answer.
      pow_("tollgate simulate", config_.pow, config_.policy.pow_counters),
      gate_(pow_) {}

const policy::route* simulator::route(const log_record& r, bool upgrade) {
  if (!policy::normalize_path(r.target, path_)) return nullptr;
  return &router_.match({r.method, path_, &logged_header, &upgrade});
}

bool simulator::decide(const log_record& r, bool upgrade, outcome& out) {
  const policy::route* to = route(r, upgrade);
  if (to == nullptr) return false;
  decide(r, *to, upgrade, out);
  return true;
}

void simulator::prefetch(const log_record& r, const policy::route& to, bool upgrade) {
  std::uint32_t unkeyed = 0;
  const policy::key_sources keys{&logged_header, &upgrade, r.target};
  store_.prepare(policy_.request(*to.category, r.client, keys, to.cost, r.time, unkeyed));
}

const policy::category_limits* simulator::preflight_category(const log_record& r) const {
  if (!answered_preflight(r)) return nullptr;
  for (const auto& c : policy_.categories()) {
    if (c.name == r.category) return c.cors ? &c : nullptr;
  }
  return nullptr;
}

void simulator::decide(const log_record& r, const policy::route& to, bool upgrade, outcome& out) {
  // The order of gateway/net/session.cpp: plan_request, decide_limits, after_limits.
  const policy::category_limits* preflight = preflight_category(r);
  const policy::category_limits& category = preflight != nullptr ? *preflight : *to.category;
  out = {};
  out.category = static_cast<std::uint16_t>(&category - policy_.categories().data());
  const policy::client_subjects who = policy::subjects_of(r.client, policy_.prefixes());
  // The deny list answers first: a denied address is not counted exempt too.
  if (core::in_any(config_.access.deny, r.client)) {
    out.result = decision::denied;
    return;
  }
  out.exempt = core::in_any(config_.access.allow, r.client);
  // No proof is ever sent: a log does not show one.
  const policy::gate_input in{&category, &who, {}, r.time, out.exempt};
  if (preflight != nullptr) {
    // A preflight of a category whose CORS the gateway owns: neither charged nor challenged,
    // but a ban holds.
    const bool banned = gate_.screen(in, verdict_) && verdict_.result == policy::outcome::banned;
    out.result = banned ? decision::banned : decision::allowed;
    return;
  }
  gate_.before_limits(in, verdict_);
  if (verdict_.ask_limits) {
    const policy::key_sources keys{&logged_header, &upgrade, r.target};
    const limit::limit_request req =
        policy_.request(category, r.client, keys, to.cost, r.time, out.unkeyed);
    limit::decision d;
    if (req.group_count == 0) {
      d.admitted = true;  // nothing to ask: every key missing, or no limits
    } else {
      d = store_.decide(req);
    }
    gate_.after_limits(in, req, d, verdict_);
    const std::uint8_t binding = verdict_.result == policy::outcome::shadow_limited
                                     ? d.shadow_binding
                                     : (d.admitted ? limit::no_binding : d.binding);
    if (binding != limit::no_binding) {
      const limit::limit_outcome& o = d.limits[binding];
      out.limit = req.groups[o.group].spec;
      out.tier = o.tier;
    }
  }
  // The gate's effects (a challenge counted, a violation recorded) are left out on purpose.
  static_assert(static_cast<int>(policy::outcome::shadow_limited) ==
                static_cast<int>(decision::shadow_limited));
  out.result = static_cast<decision>(verdict_.result);
}

}  // namespace tollgate::sim
