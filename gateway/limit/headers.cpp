#include "gateway/limit/headers.hpp"

#include "gateway/core/text.hpp"

namespace tollgate::limit {

namespace {

void append_name(std::string& out, std::string_view name, tier t) {
  out += '"';
  out += name;
  out += '.';
  out += tier_name(t);
  out += '"';
}

}  // namespace

binding_view binding_of(const limit_request& req, const decision& d, std::uint8_t index) noexcept {
  const limit_outcome& o = d.limits[index];
  const limit_spec& spec = *req.groups[o.group].spec;
  if (spec.is_quota()) {
    return {.name = spec.name,
            .which = o.tier,
            .burst = spec.quota.limit,
            .remaining = remaining_of(spec, o, req.now),
            .reset = o.tat,
            .wait = o.wait,
            .quota = true,
            .period = spec.quota.period};
  }
  const gcra_params& p = spec.tiers[static_cast<int>(o.tier)];
  return {spec.name, o.tier, p.burst, gcra_remaining(o.tat, req.now, p), o.tat, o.wait};
}

std::int64_t reset_unix_seconds(const binding_view& b) noexcept {
  return core::ceil_seconds(b.reset);
}

std::int64_t retry_after_seconds(nanos wait) noexcept {
  const std::int64_t s = core::ceil_seconds(wait);
  return s < 1 ? 1 : s;
}

std::string_view rejection_reason(tier t) noexcept {
  return t == tier::short_term ? "burst_exhausted" : "hourly_limit_exceeded";
}

std::string_view rejection_reason(const binding_view& b) noexcept {
  return b.quota ? "quota_exceeded" : rejection_reason(b.which);
}

std::string_view tier_word(const binding_view& b) noexcept {
  return b.quota ? "quota" : tier_name(b.which);
}

void append_ratelimit_field(std::string& out, const binding_view& b, nanos now) {
  if (b.quota) {
    out += '"';
    out += b.name;
    out += '"';
  } else {
    append_name(out, b.name, b.which);
  }
  out += ";r=";
  core::append_decimal(out, b.remaining);
  out += ";t=";
  core::append_decimal(out, core::ceil_seconds(b.reset - now));
}

namespace {

/// One policy item per configured tier of an enforced limit, or its quota's.
void append_policy_item(std::string& out, const limit_spec& spec, nanos now) {
  if (spec.shadow) return;
  if (spec.is_quota()) {
    if (!out.empty()) out += ", ";
    out += '"';
    out += spec.name;
    out += "\";q=";
    core::append_decimal(out, spec.quota.limit);
    out += ";w=";
    core::append_decimal(out, core::window_seconds(spec.quota.period, now));
    return;
  }
  for (int t = 0; t < 2; ++t) {
    const gcra_params& p = spec.tiers[t];
    if (p.burst == 0) continue;
    if (!out.empty()) out += ", ";
    append_name(out, spec.name, static_cast<tier>(t));
    out += ";q=";
    core::append_decimal(out, p.burst);
    out += ";w=";
    core::append_decimal(out, gcra_window_seconds(p));
  }
}

}  // namespace

std::string policy_field(std::span<const limit_spec* const> limits, nanos now) {
  std::string out;
  for (const limit_spec* spec : limits)
    append_policy_item(out, *spec, now);
  return out;
}

void append_policy_field(std::string& out, const limit_request& req) {
  for (std::uint8_t g = 0; g < req.group_count; ++g)
    append_policy_item(out, *req.groups[g].spec, req.now);
}

void append_limit_name(std::string& out, const binding_view& b) {
  out += b.name;
  out += '.';
  out += tier_word(b);
}

}  // namespace tollgate::limit
