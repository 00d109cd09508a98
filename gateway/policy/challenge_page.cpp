#include "gateway/policy/challenge_page.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "gateway/config/error.hpp"
#include "gateway/core/text.hpp"
#include "gateway/pow/crypto.hpp"

namespace tollgate::policy {

namespace {

/// Placeholder names, by slot.
constexpr std::array<std::string_view, 8> slot_names = {
    "title", "text", "challenge", "difficulty", "ttl", "expires", "secure", "reason"};

/// Standard base64 with padding (CSP hash sources use it, not the URL-safe form).
std::string base64(const pow::digest& d) {
  std::string s =
      pow::base64url_encode(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
  std::replace(s.begin(), s.end(), '-', '+');
  std::replace(s.begin(), s.end(), '_', '/');
  while (s.size() % 4 != 0)
    s += '=';
  return s;
}

/// The position of `needle` in `hay` from `from`, ignoring ASCII case, or npos.
std::size_t ifind(std::string_view hay, std::string_view needle, std::size_t from) {
  for (std::size_t i = from; i + needle.size() <= hay.size(); ++i) {
    if (core::iequals(hay.substr(i, needle.size()), needle)) return i;
  }
  return std::string_view::npos;
}

/// Throws the error of a template problem at byte `at` of it.
[[noreturn]] void fail(const config::pow_page_config& c, std::string_view text, std::size_t at,
                       const std::string& problem) {
  const auto line =
      1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  const std::string where =
      c.template_path.empty() ? "the built-in page" : "'" + c.template_path + "'";
  throw config::error(c.file, c.line, "pow.page.template",
                      where + " line " + std::to_string(line) + ": " + problem);
}

/// The hash sources of every <tag>...</tag> element of `text` (script or style), checking that
/// none holds a placeholder.
std::string hash_sources(const config::pow_page_config& c, std::string_view text,
                         std::string_view tag) {
  std::string sources;
  const std::string open = "<" + std::string(tag);
  const std::string close = "</" + std::string(tag);
  for (std::size_t at = ifind(text, open, 0); at != std::string_view::npos;
       at = ifind(text, open, at + 1)) {
    const std::size_t after = at + open.size();
    // `<scripts` or `<style-x` are other tags.
    if (after < text.size() && text[after] != '>' && text[after] != ' ' && text[after] != '\t' &&
        text[after] != '\n' && text[after] != '\r') {
      continue;
    }
    const std::size_t body = text.find('>', after);
    if (body == std::string_view::npos)
      fail(c, text, at, "unterminated <" + std::string(tag) + ">");
    const std::size_t end = ifind(text, close, body + 1);
    if (end == std::string_view::npos)
      fail(c, text, at, "<" + std::string(tag) + "> without " + close + ">");
    const std::string_view content = text.substr(body + 1, end - body - 1);
    if (const auto p = content.find("{{"); p != std::string_view::npos) {
      fail(c, text, body + 1 + p,
           "a placeholder inside <" + std::string(tag) +
               "> (its text is hashed into the Content-Security-Policy; pass values in "
               "data- attributes)");
    }
    if (!sources.empty()) sources += ' ';
    sources += "'sha256-" + base64(pow::sha256(content)) + "'";
    at = end;
  }
  return sources.empty() ? "'none'" : sources;
}

}  // namespace

void append_html_escaped(std::string& out, std::string_view s) {
  for (const char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
}

challenge_page::challenge_page(const config::pow_page_config& c) {
  const std::string_view text =
      c.template_path.empty() ? builtin_challenge_page() : std::string_view(c.template_text);
  append_html_escaped(title_, c.title);
  append_html_escaped(text_, c.text);
  std::array<bool, slot_names.size()> seen{};
  std::size_t from = 0;
  for (;;) {
    const std::size_t open = text.find("{{", from);
    if (open == std::string_view::npos) break;
    const std::size_t close = text.find("}}", open + 2);
    if (close == std::string_view::npos) fail(c, text, open, "'{{' without '}}'");
    const std::string_view name = core::trim(text.substr(open + 2, close - open - 2));
    const auto known = std::find(slot_names.begin(), slot_names.end(), name);
    if (known == slot_names.end()) {
      fail(c, text, open,
           "unknown placeholder {{" + std::string(name) +
               "}} (known: title, text, challenge, difficulty, ttl, expires, "
               "secure, reason)");
    }
    const auto s = static_cast<std::size_t>(known - slot_names.begin());
    seen[s] = true;
    pieces_.push_back({std::string(text.substr(from, open - from)), static_cast<slot>(s), true});
    from = close + 2;
  }
  pieces_.push_back({std::string(text.substr(from)), slot::title, false});
  if (!seen[static_cast<std::size_t>(slot::challenge)] ||
      !seen[static_cast<std::size_t>(slot::difficulty)]) {
    fail(c, text, 0, "the page must contain {{challenge}} and {{difficulty}}");
  }
  // Nothing may load from elsewhere; only the page's own scripts and styles run, its solver as
  // a Worker made from a blob: URL.
  csp_ = "default-src 'none'; script-src " + hash_sources(c, text, "script") + "; style-src " +
         hash_sources(c, text, "style") +
         "; worker-src blob:; img-src data:; base-uri 'none'; form-action 'self'; "
         "frame-ancestors 'none'";
}

void challenge_page::render(std::string& out, const challenge_values& v, std::int64_t ttl,
                            bool secure) const {
  out.clear();
  for (const piece& p : pieces_) {
    out += p.literal;
    if (!p.has_value) break;
    switch (p.value) {
      case slot::title:
        out += title_;
        break;
      case slot::text:
        out += text_;
        break;
      case slot::challenge:
        append_html_escaped(out, v.challenge);
        break;
      case slot::difficulty:
        core::append_decimal(out, v.bits);
        break;
      case slot::ttl:
        core::append_decimal(out, std::max<std::int64_t>(0, ttl));
        break;
      case slot::expires:
        core::append_decimal(out, v.expires);
        break;
      case slot::secure:
        out += secure ? '1' : '0';
        break;
      case slot::reason:
        if (v.reason != pow::proof_failure::none) out += pow::failure_name(v.reason);
        break;
    }
  }
}

}  // namespace tollgate::policy
