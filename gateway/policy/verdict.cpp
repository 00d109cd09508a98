#include "gateway/policy/verdict.hpp"

#include "gateway/core/text.hpp"
#include "gateway/limit/headers.hpp"

namespace tollgate::policy {

namespace {

void assign_int(std::string& out, std::int64_t v) {
  out.clear();  // keeps the capacity: no allocation per request
  core::append_decimal(out, v);
}

}  // namespace

void describe(const limit::limit_request& req, const limit::decision& d, const category_limits& c,
              core::family fam, rate_limit_fields& out, const scaled_set* scaled) {
  out.retry_after.clear();
  out.reason = {};
  out.shadow.clear();
  if (d.shadow_limited) {
    // Told to the upstream only: the client sees nothing a shadowed limit would have set.
    limit::append_limit_name(out.shadow, limit::binding_of(req, d, d.shadow_binding));
  }
  out.present = d.binding != limit::no_binding;
  if (!out.present) return;
  const limit::binding_view b = limit::binding_of(req, d, d.binding);
  assign_int(out.limit, b.burst);
  assign_int(out.remaining, b.remaining);
  assign_int(out.reset, limit::reset_unix_seconds(b));
  out.level = b.name;
  out.tier = limit::tier_word(b);
  out.quota = b.quota;
  out.period = b.quota ? core::period_name(b.period) : std::string_view();
  const int f = fam == core::family::v4 ? 0 : 1;
  if (scaled != nullptr && !c.policy_varies && req.group_count == scaled->family_limits[f]) {
    out.policy = scaled->policy_field[f];  // attack mode's numbers, made once per worker
  } else if (req.group_count == c.family_limits[f] && !c.policy_varies && !req.overridden) {
    // A consumer tier's own numbers (docs/design.md §15), else the configured ones.
    out.policy = req.consumer_tier < c.tiered_policy_field.size()
                     ? std::string_view(c.tiered_policy_field[req.consumer_tier][f])
                     : std::string_view(c.policy_field[f]);
  } else {
    // Some limit's key was missing, so that limit was not applied and is not listed (docs/design.md
    // §4: only the limits applied to this request); or a monthly quota's window length is this
    // month's; or an override's numbers replace some limit's.
    out.policy_text.clear();
    limit::append_policy_field(out.policy_text, req);
    out.policy = out.policy_text;
  }
  out.ratelimit.clear();
  limit::append_ratelimit_field(out.ratelimit, b, req.now);
  if (d.admitted) return;
  out.retry_seconds = limit::retry_after_seconds(b.wait);
  assign_int(out.retry_after, out.retry_seconds);
  out.reason = limit::rejection_reason(b);
}

}  // namespace tollgate::policy
