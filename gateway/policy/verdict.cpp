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
              core::family fam, rate_limit_fields& out) {
  out.present = d.count > 0;
  out.retry_after.clear();
  out.reason = {};
  out.body.clear();
  if (!out.present) return;
  const limit::binding_view b = limit::binding_of(req, d);
  assign_int(out.limit, b.burst);
  assign_int(out.remaining, b.remaining);
  assign_int(out.reset, limit::reset_unix_seconds(b));
  out.level = limit::level_name(b.lvl);
  out.policy = c.policy_field[fam == core::family::v4 ? 0 : 1];
  out.ratelimit.clear();
  limit::append_ratelimit_field(out.ratelimit, b, req.now);
  if (d.admitted) return;

  const std::int64_t retry = limit::retry_after_seconds(b.wait);
  assign_int(out.retry_after, retry);
  out.reason = limit::rejection_reason(b.which);
  // RFC 9457 problem details; every value is ours, so no escaping is needed.
  out.body = R"({"type":"about:blank","title":"Too Many Requests","status":429,"detail":")";
  limit::append_rejection_detail(out.body, b);
  out.body += R"(","code":"rate_limit_exceeded","level":")";
  out.body += limit::level_name(b.lvl);
  out.body += R"(","tier":")";
  out.body += limit::tier_name(b.which);
  out.body += R"(","retry_after":)";
  out.body += out.retry_after;
  out.body += '}';
}

}  // namespace tollgate::policy
