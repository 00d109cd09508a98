#pragma once
/// What the gateway reads from a browser's request (docs/design.md §5 "Browsers"): whether it wants
/// a page rather than JSON, and the proof of work a page left in a cookie. No HTTP library types:
/// values in, values out.

#include <string>
#include <string_view>

namespace tollgate::policy {

/// The cookie the challenge page stores its proof in: `tollgate_pow=<challenge>:<nonce>`.
inline constexpr std::string_view pow_cookie = "tollgate_pow";
/// The header a client sends its proof of work in (docs/design.md §5); never forwarded.
inline constexpr std::string_view pow_solution_field = "X-PoW-Solution";
/// The header a clearance comes in, both ways (docs/design.md §16); never forwarded.
inline constexpr std::string_view clearance_field = "X-PoW-Clearance";
/// The cookie a browser keeps its clearance in; never forwarded.
inline constexpr std::string_view clearance_cookie = "tollgate_clearance";

/// Whether an `Accept` value prefers `text/html` to JSON: `text/html` is listed with a q above
/// 0 and no JSON type (`application/json`, `application/problem+json`) has a higher q. A
/// browser's navigation says so; fetch()'s `*/*`, curl's `*/*` and an API client's
/// `application/json` do not. Items with a malformed q count as q=0.
bool prefers_html(std::string_view accept) noexcept;

/// Writes a `Cookie` value without its pairs named `name` to `out`, and says whether any was
/// named so. The other pairs' bytes are kept as they came (an upstream may read a value the
/// gateway would not), each taken pair with its `;`; separators left at the ends go.
bool strip_cookie(std::string_view cookies, std::string_view name, std::string& out);

}  // namespace tollgate::policy
