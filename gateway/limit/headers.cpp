#include "gateway/limit/headers.hpp"

#include "gateway/core/text.hpp"

namespace tollgate::limit {

namespace {

void append_name(std::string& out, level l, tier t) {
  out += '"';
  out += level_name(l);
  out += '.';
  out += tier_name(t);
  out += '"';
}

}  // namespace

binding_view binding_of(const limit_request& req, const decision& d) noexcept {
  const limit_outcome& o = d.limits[d.binding];
  const limit_group& g = req.groups[o.group];
  const gcra_params& p = g.params->tiers[static_cast<int>(o.tier)];
  return {g.lvl, o.tier, p.burst, gcra_remaining(o.tat, req.now, p), o.tat, o.wait};
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

void append_ratelimit_field(std::string& out, const binding_view& b, nanos now) {
  append_name(out, b.lvl, b.which);
  out += ";r=";
  core::append_decimal(out, b.remaining);
  out += ";t=";
  core::append_decimal(out, core::ceil_seconds(b.reset - now));
}

std::string policy_field(std::span<const limit_group> groups) {
  std::string out;
  for (const limit_group& g : groups) {
    for (int t = 0; t < 2; ++t) {
      const gcra_params& p = g.params->tiers[t];
      if (p.burst == 0) continue;
      if (!out.empty()) out += ", ";
      append_name(out, g.lvl, static_cast<tier>(t));
      out += ";q=";
      core::append_decimal(out, p.burst);
      out += ";w=";
      core::append_decimal(out, gcra_window_seconds(p));
    }
  }
  return out;
}

void append_rejection_detail(std::string& out, const binding_view& b) {
  out += "rate limit exceeded at ";
  out += level_name(b.lvl);
  out += " (";
  out += tier_name(b.which);
  out += " tier)";
}

}  // namespace tollgate::limit
