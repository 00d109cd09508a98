#include "gateway/sim/simulator.hpp"

#include <optional>
#include <string>

#include "gateway/core/key_block.hpp"
#include "gateway/core/text.hpp"
#include "gateway/limit/headers.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/sim/logged_tiers.hpp"

namespace tollgate::sim {

namespace {

/// The headers a logged request is taken to carry: none, except the two of a WebSocket
/// upgrade when the log shows one, and the two that make a CORS preflight (empty) when the log
/// shows one answered. A log has no headers, so limits keyed on headers, cookies or bearer
/// tokens do not apply (they are counted unkeyed). Its logged consumer tier is answered as
/// logged_tier_field, which the policy's tier sources read in place of those a log cannot feed.
class logged_headers final : public admission::header_source {
 public:
  logged_headers(bool upgrade, bool preflight, std::string_view tier = {}) noexcept
      : upgrade_(upgrade), preflight_(preflight), tier_(tier) {}

  std::string_view value(std::string_view name) const override {
    if (upgrade_ && core::iequals(name, "upgrade")) return "websocket";
    if (upgrade_ && core::iequals(name, "connection")) return "upgrade";
    if (name == logged_tier_field) return tier_;
    return {};
  }
  std::size_t count(std::string_view name) const override {
    if (preflight_ &&
        (core::iequals(name, "origin") || core::iequals(name, "access-control-request-method"))) {
      return 1;
    }
    return value(name).empty() ? 0 : 1;
  }
  void each(std::string_view name, void (*f)(void*, std::string_view),
            void* context) const override {
    if (const std::string_view v = value(name); !v.empty()) f(context, v);
  }

 private:
  bool upgrade_;           ///< the request was a WebSocket upgrade
  bool preflight_;         ///< a CORS preflight the gateway answered
  std::string_view tier_;  ///< the logged consumer tier, or ""
};

/// The table sizes the gateway's store has under `c` (gateway/app/store_setup.cpp).
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

bool simulated::same_as(const simulated& o) const noexcept {
  if (result != o.result || (limit == nullptr) != (o.limit == nullptr)) return false;
  return limit == nullptr || (tier == o.tier && limit->name == o.limit->name);
}

void append_limit(std::string& out, const simulated& o) {
  if (o.limit == nullptr) return;
  out += o.limit->name;
  out += '.';
  // A quota has no tier: it is told as "<name>.quota", as the access log writes it.
  out += o.limit->is_quota() ? std::string_view("quota") : limit::tier_name(o.tier);
}

simulator::simulator(config::gateway_config c)
    : config_(std::move(c)),
      policy_(with_logged_tiers(config_.policy), sim_key),
      attack_(policy_),
      router_(config_, policy_),
      store_(capacity_of(config_.store), 0x5eed, 1),
      // The secret only signs challenges nobody will answer.
      pow_("tollgate simulate", config_.pow, config_.policy.pow_counters),
      gate_(pow_) {}

const policy::route* simulator::route(const log_record& r, bool upgrade) {
  if (!policy::normalize_path(r.target, path_)) return nullptr;
  const logged_headers headers(upgrade, false);
  return &router_.match({r.method, path_, &admission::header_of, &headers});
}

bool simulator::decide(const log_record& r, bool upgrade, simulated& out) {
  const policy::route* to = route(r, upgrade);
  if (to == nullptr) return false;
  decide(r, *to, upgrade, out);
  return true;
}

void simulator::prefetch(const log_record& r, const policy::route& to, bool upgrade) {
  std::uint32_t unkeyed = 0;
  const logged_headers headers(upgrade, false);
  const policy::key_sources keys{&admission::header_of, &headers, r.target};
  store_.prepare(policy_.request(*to.category, r.client, keys, to.cost, r.time, unkeyed));
}

std::optional<core::key_block> simulator::ban_for(const log_record& r) {
  std::string error;
  const auto block = core::key_block::parse(r.client.to_string(), policy_.prefixes(), error);
  if (!block) return std::nullopt;
  pow_.manual_bans().place({*block, r.time, r.time + 1, "logged"}, r.time);
  return block;
}

const policy::category_limits* simulator::preflight_category(const log_record& r) const {
  if (!answered_preflight(r)) return nullptr;
  for (const auto& c : policy_.categories()) {
    if (c.name == r.category) return c.cors ? &c : nullptr;
  }
  return nullptr;
}

void simulator::decide(const log_record& r, const policy::route& to, bool upgrade, simulated& out) {
  // A ban comes from violations a log does not show (an upstream's reports, failed proofs) or
  // from an operator: a line the gateway logged banned says the client was banned then, and
  // is replayed so, for that line alone. The access lists still come first.
  std::optional<core::key_block> banned;
  if (r.decision == "banned") banned = ban_for(r);
  const policy::category_limits* preflight = preflight_category(r);
  if (preflight != nullptr) preflight_route_ = {preflight, &policy_, to.upstream, to.cost, to.line};
  const logged_headers headers(upgrade, preflight != nullptr, r.consumer_tier);
  // No proof is ever sent (a log does not show one), no body, never over TLS: the client's
  // address was logged, so it is the peer, and no proxy is trusted.
  const admission::request_view view{r.method,
                                     r.target,
                                     &headers,
                                     r.client,
                                     false,
                                     upgrade,
                                     false,
                                     true,
                                     true,
                                     r.time,
                                     preflight != nullptr ? &preflight_route_ : &to};
  // Attack mode's levels are those the log's own times give (docs/design.md §16): its
  // monitors tick at each whole second before the request is decided.
  attack_.advance(r.time);
  const admission::setting s{.config = config_,
                             .policy = policy_,
                             .router = router_,
                             .page = nullptr,
                             .gate = gate_,
                             .pow = pow_,
                             .attack = attack_.board()};
  admission::record& a = record_;
  admission::step step = admission::spend_claimed(pow_, s, admission::admit(s, view, a), a);
  if (step == admission::step::ask_store) {
    a.decision = store_.decide(a.limits);
    step = admission::spend_claimed(pow_, s, admission::after_store(s, a), a);
  }
  if (banned) pow_.manual_bans().lift(*banned, r.time);
  out = {};
  out.category = static_cast<std::uint16_t>(&a.category() - policy_.categories().data());
  out.exempt = a.exempt;
  out.unkeyed = a.unkeyed;
  out.consumer_tier = a.consumer_tier;
  out.result = a.fx.outcome;
  attack_.count(out.category, r.time, out.result);
  if (!a.verdict.limits_checked) return;
  const limit::decision& d = a.decision;
  const std::uint8_t binding = out.result == core::outcome::shadow_limited
                                   ? d.shadow_binding
                                   : (d.admitted ? limit::no_binding : d.binding);
  if (binding != limit::no_binding) {
    const limit::limit_outcome& o = d.limits[binding];
    out.limit = a.limits.groups[o.group].spec;
    out.tier = o.tier;
  }
}

}  // namespace tollgate::sim
