#pragma once
/// The one problem+json writer (RFC 9457) of every answer the gateway makes itself: 400, 403,
/// 413, 428, 429, 431, 502, 503, 504. Members come in the order docs/design.md §4 and §5 show.
/// Used by admission and by net (502, 504).

#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/policy/pow_gate.hpp"
#include "gateway/policy/verdict.hpp"

namespace tollgate::admission {

/// Builds one problem object into a string: `{"type":"about:blank","title":...,"status":...`,
/// then members in call order, then `}` from finish(). Text values are JSON-escaped.
class problem_writer {
 public:
  /// Starts the object in `out` (cleared first; its capacity is kept).
  problem_writer(std::string& out, int status, std::string_view title);
  /// Adds `"name":"value"`.
  problem_writer& text(std::string_view name, std::string_view value);
  /// Adds `"name":value`.
  problem_writer& number(std::string_view name, std::int64_t value);
  /// Closes the object.
  void finish() { out_ += '}'; }

 private:
  std::string& out_;  ///< the body being built
};

/// An RFC 9457 body with a `detail` (400, 413, 431, 502, 504).
std::string problem_body(int status, std::string_view title, std::string_view detail);

/// The 429 body for a rejection described by `f` (docs/design.md §4).
void write_limited_body(std::string& out, const policy::rate_limit_fields& f);

/// The 428 body and header lines (X-PoW-Challenge, X-PoW-Difficulty, X-PoW-Algorithm, each
/// ending in CRLF) for challenge `c` (docs/design.md §5).
void write_challenge(std::string& body, std::string& fields, const policy::challenge_values& c);

/// The 403 body and Retry-After line for a client banned for `retry_after` more seconds.
void write_banned(std::string& body, std::string& fields, std::int64_t retry_after);

}  // namespace tollgate::admission
