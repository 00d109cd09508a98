#pragma once
/// The page a browser gets with a 428 (docs/design.md §5 "Browsers"): a template, the built-in one
/// or the operator's, compiled once per configuration into literal pieces and placeholders, and the
/// Content-Security-Policy that lets exactly its own inline scripts and styles run.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/policy/pow_gate.hpp"

namespace tollgate::policy {

/// The built-in template (gateway/policy/challenge_page.html, compiled in).
std::string_view builtin_challenge_page() noexcept;

/// A compiled challenge page. Placeholders: {{title}}, {{text}} (the operator's, HTML-escaped),
/// {{challenge}}, {{difficulty}}, {{ttl}} (seconds the challenge has left), {{expires}} (Unix
/// seconds), {{secure}} ("1" on a TLS listener, else "0"), {{reason}} (why the last proof
/// failed, or ""). They may not appear inside <script> or <style>, whose text is hashed into
/// the page's Content-Security-Policy: a page passes values to its script in attributes.
/// Thread safety: immutable after construction.
class challenge_page {
 public:
  /// Compiles the template of `c` (the built-in page when it names none). Throws config::error
  /// at `pow.page.template` for an unknown placeholder, one inside a script or style, or a
  /// template without {{challenge}} and {{difficulty}}.
  explicit challenge_page(const config::pow_page_config& c);

  /// Renders the page for challenge `v` issued `ttl` seconds before it expires, on a listener
  /// with TLS or not, into `out` (cleared first; its capacity is kept).
  void render(std::string& out, const challenge_values& v, std::int64_t ttl, bool secure) const;

  /// The Content-Security-Policy value sent with the page.
  std::string_view content_security_policy() const noexcept { return csp_; }

 private:
  /// What a placeholder stands for.
  enum class slot : std::uint8_t {
    title,
    text,
    challenge,
    difficulty,
    ttl,
    expires,
    secure,
    reason
  };
  /// Literal text, then the value of a placeholder (none after the last piece).
  struct piece {
    std::string literal;  ///< copied as it is
    slot value;           ///< then this value
    bool has_value;       ///< false for the trailing literal
  };

  std::vector<piece> pieces_;  ///< the template in order
  std::string title_;          ///< {{title}}, HTML-escaped
  std::string text_;           ///< {{text}}, HTML-escaped
  std::string csp_;            ///< Content-Security-Policy
};

/// Appends `s` with `&`, `<`, `>`, `"` and `'` as character references.
void append_html_escaped(std::string& out, std::string_view s);

}  // namespace tollgate::policy
