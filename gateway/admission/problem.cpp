#include "gateway/admission/problem.hpp"

#include "gateway/core/text.hpp"

namespace tollgate::admission {

problem_writer::problem_writer(std::string& out, int status, std::string_view title) : out_(out) {
  out_.clear();
  out_ += R"({"type":"about:blank","title":")";
  core::append_json_escaped(out_, title);
  out_ += R"(","status":)";
  core::append_decimal(out_, status);
}

problem_writer& problem_writer::text(std::string_view name, std::string_view value) {
  out_ += ",\"";
  out_ += name;
  out_ += "\":\"";
  core::append_json_escaped(out_, value);
  out_ += '"';
  return *this;
}

problem_writer& problem_writer::number(std::string_view name, std::int64_t value) {
  out_ += ",\"";
  out_ += name;
  out_ += "\":";
  core::append_decimal(out_, value);
  return *this;
}

std::string problem_body(int status, std::string_view title, std::string_view detail) {
  std::string out;
  problem_writer(out, status, title).text("detail", detail).finish();
  return out;
}

void write_limited_body(std::string& out, const policy::rate_limit_fields& f) {
  problem_writer p(out, 429, "Too Many Requests");
  if (f.quota) {
    // "quota exceeded at <limit> (<period>)": the window ends at Retry-After.
    out += R"(,"detail":"quota exceeded at )";
    core::append_json_escaped(out, f.level);
    out += " (";
    out += f.period;
    out += ")\"";
    p.text("code", "quota_exceeded").text("level", f.level).text("period", f.period);
    if (!f.consumer_tier.empty()) p.text("consumer_tier", f.consumer_tier);
    p.number("retry_after", f.retry_seconds).finish();
    return;
  }
  // The detail is written in place: "rate limit exceeded at <limit> (<tier> tier)", no copy.
  out += R"(,"detail":"rate limit exceeded at )";
  core::append_json_escaped(out, f.level);
  out += " (";
  out += f.tier;
  out += " tier)\"";
  p.text("code", "rate_limit_exceeded").text("level", f.level).text("tier", f.tier);
  if (!f.consumer_tier.empty()) p.text("consumer_tier", f.consumer_tier);
  p.number("retry_after", f.retry_seconds).finish();
}

void write_challenge(std::string& body, std::string& fields, const policy::challenge_values& c) {
  fields.clear();
  fields += "X-PoW-Challenge: ";
  fields += c.challenge;
  fields += "\r\nX-PoW-Difficulty: ";
  core::append_decimal(fields, c.bits);
  fields += "\r\nX-PoW-Algorithm: sha256\r\n";
  problem_writer p(body, 428, "Precondition Required");
  p.text("code", "pow_required").text("challenge", c.challenge).number("difficulty", c.bits);
  p.text("algorithm", "sha256").number("expires", c.expires);
  if (c.reason != pow::proof_failure::none) p.text("reason", pow::failure_name(c.reason));
  p.text("hint",
         "find a nonce such that SHA-256(challenge ':' nonce) has at least `difficulty` leading "
         "zero bits; resend with X-PoW-Solution: <challenge>:<nonce>");
  p.finish();
}

void write_banned(std::string& body, std::string& fields, std::int64_t retry_after) {
  fields.clear();
  fields += "Retry-After: ";
  core::append_decimal(fields, retry_after);
  fields += "\r\n";
  problem_writer(body, 403, "Forbidden")
      .text("detail", "this address is banned")
      .text("code", "banned")
      .number("retry_after", retry_after)
      .finish();
}

}  // namespace tollgate::admission
