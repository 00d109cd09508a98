#include "gateway/policy/browser.hpp"

#include <algorithm>

#include "gateway/core/text.hpp"

namespace tollgate::policy {

namespace {

/// A qvalue (RFC 9110 §12.4.2: `0`, `0.5`, `1.000`) in thousandths, or -1 when malformed.
int parse_q(std::string_view v) noexcept {
  if (v.empty() || (v[0] != '0' && v[0] != '1')) return -1;
  int q = (v[0] - '0') * 1000;
  if (v.size() == 1) return q;
  if (v[1] != '.' || v.size() > 5) return -1;
  int scale = 100;
  for (const char c : v.substr(2)) {
    if (c < '0' || c > '9') return -1;
    q += (c - '0') * scale;
    scale /= 10;
  }
  return q > 1000 ? -1 : q;
}

/// The q of one Accept item's parameters (`;q=0.9;level=1`), 1000 when it has none.
int q_of(std::string_view params) noexcept {
  while (!params.empty()) {
    const auto semi = params.find(';');
    const std::string_view param = core::trim(params.substr(0, semi));
    params = semi == std::string_view::npos ? std::string_view() : params.substr(semi + 1);
    if (param.size() >= 2 && core::ascii_lower(param[0]) == 'q' && param[1] == '=') {
      return parse_q(core::trim(param.substr(2)));
    }
  }
  return 1000;
}

}  // namespace

bool prefers_html(std::string_view accept) noexcept {
  int html = -1;
  int json = -1;
  while (!accept.empty()) {
    const auto comma = accept.find(',');
    const std::string_view item = accept.substr(0, comma);
    accept = comma == std::string_view::npos ? std::string_view() : accept.substr(comma + 1);
    const auto semi = item.find(';');
    const std::string_view media = core::trim(item.substr(0, semi));
    const int q = semi == std::string_view::npos ? 1000 : q_of(item.substr(semi + 1));
    if (core::iequals(media, "text/html")) {
      html = std::max(html, q);
    } else if (core::iequals(media, "application/json") ||
               core::iequals(media, "application/problem+json")) {
      json = std::max(json, q);
    }
  }
  return html > 0 && html >= json;
}

bool strip_cookie(std::string_view cookies, std::string_view name, std::string& out) {
  out.clear();
  bool found = false;
  std::size_t kept = 0;  // the bytes from here on are not copied yet
  for (std::size_t at = 0; at <= cookies.size();) {
    const std::size_t semi = std::min(cookies.find(';', at), cookies.size());
    const std::string_view pair = core::trim(cookies.substr(at, semi - at));
    if (!pair.empty() && core::trim(pair.substr(0, pair.find('='))) == name) {
      // The bytes before the pair go as they came; the pair goes with its ';'.
      found = true;
      out.append(cookies.substr(kept, at - kept));
      kept = semi + 1;
    }
    at = semi + 1;
  }
  if (!found) {
    out.assign(cookies);
    return false;
  }
  if (kept < cookies.size()) out.append(cookies.substr(kept));
  // Separators left at the ends by a pair taken from there.
  const auto separator = [](char c) { return c == ';' || c == ' ' || c == '\t'; };
  std::size_t b = 0;
  std::size_t e = out.size();
  while (b < e && separator(out[b]))
    ++b;
  while (e > b && separator(out[e - 1]))
    --e;
  out.erase(e);
  out.erase(0, b);
  return true;
}

}  // namespace tollgate::policy
