#include "gateway/policy/keys.hpp"

#include "gateway/core/text.hpp"

namespace tollgate::policy {

bool query_value(std::string_view target, std::string_view name, std::string& out) {
  out.clear();
  const auto q = target.find('?');
  if (q == std::string_view::npos) return false;
  std::string_view query = target.substr(q + 1);
  query = query.substr(0, query.find('#'));
  std::string decoded_name;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const auto eq = pair.find('=');
    const std::string_view raw_name = pair.substr(0, eq);
    // Names compare decoded, so that `t%65nant` is `tenant` (no way around the key by escaping).
    decoded_name.clear();
    if (!core::percent_decode(raw_name, decoded_name, true) || decoded_name != name) continue;
    if (eq == std::string_view::npos) return false;
    if (!core::percent_decode(pair.substr(eq + 1), out, true)) {
      out.clear();
      return false;
    }
    return !out.empty();
  }
  return false;
}

bool next_cookie(std::string_view& cookies, std::string_view name,
                 std::string_view& value) noexcept {
  while (!cookies.empty()) {
    const auto semi = cookies.find(';');
    const std::string_view pair = core::trim(cookies.substr(0, semi));
    cookies = semi == std::string_view::npos ? std::string_view() : cookies.substr(semi + 1);
    const auto eq = pair.find('=');
    if (eq == std::string_view::npos || core::trim(pair.substr(0, eq)) != name) continue;
    value = core::trim(pair.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    return true;
  }
  return false;
}

std::string_view cookie_value(std::string_view cookies, std::string_view name) noexcept {
  std::string_view value;
  return next_cookie(cookies, name, value) ? value : std::string_view();
}

}  // namespace tollgate::policy
