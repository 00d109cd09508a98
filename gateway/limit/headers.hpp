#pragma once
/// The values of the rate-limit response headers (docs/design.md §4), computed from a decision.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gateway/limit/request.hpp"

namespace tollgate::limit {

/// The binding limit of a decision, with everything the headers and the 429 body say of it.
struct binding_view {
  std::string_view name;          ///< X-RateLimit-Level: the limit's name
  tier which = tier::short_term;  ///< the tier, for RateLimit and X-RateLimit-Reason
  std::uint32_t burst = 0;        ///< X-RateLimit-Limit
  std::int64_t remaining = 0;     ///< X-RateLimit-Remaining
  nanos reset = 0;                ///< instant its bucket is full again (tat)
  nanos wait = 0;                 ///< rejected: time until admission; else 0
  /// A quota: `burst` is its limit, `reset` its window's end, `which` unused.
  bool quota = false;
  core::period period = core::period::day;  ///< a quota's window
};

/// Describes tier `index` of `d` (its binding or shadow_binding, not no_binding).
binding_view binding_of(const limit_request& req, const decision& d, std::uint8_t index) noexcept;
/// Describes the binding enforced tier of `d` (which must have one).
inline binding_view binding_of(const limit_request& req, const decision& d) noexcept {
  return binding_of(req, d, d.binding);
}

/// X-RateLimit-Reset: the reset instant in Unix seconds, rounded up.
std::int64_t reset_unix_seconds(const binding_view& b) noexcept;

/// Retry-After: the wait in whole seconds, rounded up, never less than 1.
std::int64_t retry_after_seconds(nanos wait) noexcept;

/// X-RateLimit-Reason of a rejection: "burst_exhausted" (short) or "hourly_limit_exceeded".
std::string_view rejection_reason(tier t) noexcept;
/// The same for `b`, and "quota_exceeded" when a quota binds.
std::string_view rejection_reason(const binding_view& b) noexcept;
/// The word for `b`'s tier in the access log, metrics and X-Tollgate-Shadow: "short", "long",
/// or "quota".
std::string_view tier_word(const binding_view& b) noexcept;

/// Appends the RateLimit field, `"<level>.<tier>";r=<remaining>;t=<seconds to reset>`
/// (a quota: `"<name>";r=...`).
void append_ratelimit_field(std::string& out, const binding_view& b, nanos now);

/// The RateLimit-Policy field for `limits` at `now`: one item per configured tier of each
/// enforced limit, `"<name>.<tier>";q=<burst>;w=<seconds to refill>`, and one per quota,
/// `"<name>";q=<limit>;w=<window in seconds>`, comma-separated (shadowed limits are left out:
/// the client sees none of them). Computed once per category and address family when a
/// configuration is loaded, unless a monthly quota's `w` (the length of the month) varies.
std::string policy_field(std::span<const limit_spec* const> limits, nanos now);
/// The same for the limits of `req` at req.now, appended to `out` (a request that lacks some
/// key, or a category with a monthly quota).
void append_policy_field(std::string& out, const limit_request& req);

/// Appends `<name>.<tier>` of `b` (the value of X-Tollgate-Shadow; a quota: `<name>.quota`).
void append_limit_name(std::string& out, const binding_view& b);

}  // namespace tollgate::limit
