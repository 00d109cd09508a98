#pragma once
/// CORS for scripts on other origins (issue 13, part 4): a category with `cors` has the gateway
/// answer preflights itself (never charged, never challenged) and label every answer to an
/// allowed origin, its own 428, 429 and 403 among them, so that a script can read the
/// challenge and the rate-limit fields and answer with X-PoW-Solution. Values in, header
/// lines out; no HTTP library types.

#include <string>
#include <string_view>

#include "gateway/config/policy.hpp"

namespace tollgate::policy {

/// The fields of the gateway's answers a script may read.
inline constexpr std::string_view exposed_fields =
    "X-PoW-Challenge, X-PoW-Difficulty, X-PoW-Algorithm, X-PoW-Clearance, Retry-After, "
    "X-RateLimit-Limit, "
    "X-RateLimit-Remaining, X-RateLimit-Reset, X-RateLimit-Level, X-RateLimit-Reason, "
    "RateLimit, RateLimit-Policy";

/// Whether response field `name` is one of CORS's (`Access-Control-*`): the gateway's own
/// replace an upstream's where the gateway owns CORS.
bool is_cors_field(std::string_view name) noexcept;

/// A category's CORS settings, compiled.
/// Thread safety: immutable after construction.
class cors_rules {
 public:
  /// Compiles `c`.
  explicit cors_rules(const config::cors_config& c);

  /// Whether a request from `origin` may read the answers.
  bool allows(std::string_view origin) const noexcept;

  /// Appends the lines of an answer: `Vary: Origin` always, and for an allowed `origin` (""
  /// for none) Access-Control-Allow-Origin, -Allow-Credentials and -Expose-Headers (the
  /// gateway's fields, then the configured expose_headers).
  void append_answer_fields(std::string& out, std::string_view origin) const;

  /// Appends what a preflight's answer adds to an answer's lines for an allowed origin, the
  /// preflight having asked for `request_headers` (Access-Control-Request-Headers): the
  /// methods, the headers (those configured, or those asked for when they are a clean list of
  /// names; always X-PoW-Solution and X-PoW-Clearance) and the max age.
  void append_preflight_fields(std::string& out, std::string_view request_headers) const;

 private:
  std::vector<std::string> origins_;  ///< exact origins
  bool any_ = false;                  ///< "*" was listed
  bool credentials_ = false;          ///< Access-Control-Allow-Credentials: true
  std::string methods_;               ///< Access-Control-Allow-Methods
  std::string headers_;               ///< configured Allow-Headers; "" : as asked
  std::string max_age_;               ///< seconds
  std::string exposed_;               ///< Access-Control-Expose-Headers: ours, then the operator's
};

}  // namespace tollgate::policy
