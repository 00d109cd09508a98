#include "gateway/policy/client_address.hpp"

#include <algorithm>

#include "gateway/core/text.hpp"
#include "gateway/core/units.hpp"

namespace tollgate::policy {

namespace {

/// Whether `s` is a port: digits, at most 65535.
bool is_port(std::string_view s) noexcept {
  return core::parse_uint(s, 65535).has_value();
}

/// The address of one X-Forwarded-For element: `1.2.3.4`, `2001:db8::1`, and with a port as
/// some balancers write them, `1.2.3.4:5678` and `[2001:db8::1]:443` (or `[2001:db8::1]`).
std::optional<core::address> forwarded_hop(std::string_view item) noexcept {
  if (item.starts_with('[')) {
    const auto close = item.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view rest = item.substr(close + 1);
    if (!rest.empty() && !(rest.front() == ':' && is_port(rest.substr(1)))) return std::nullopt;
    const auto a = core::address::parse(item.substr(1, close - 1));
    if (!a || a->family() != core::family::v6) return std::nullopt;
    return a;
  }
  // One colon is IPv4 with a port; an IPv6 address has at least two.
  const auto colon = item.find(':');
  if (colon != std::string_view::npos && item.find(':', colon + 1) == std::string_view::npos) {
    if (!is_port(item.substr(colon + 1))) return std::nullopt;
    const auto a = core::address::parse(item.substr(0, colon));
    if (!a || a->family() != core::family::v4) return std::nullopt;
    return a;
  }
  return core::address::parse(item);
}

}  // namespace

core::address client_address(const core::address& peer, std::span<const std::string_view> forwarded,
                             std::span<const core::cidr> trusted) noexcept {
  core::address current = peer;
  if (!core::in_any(trusted, current)) return current;
  for (auto field = forwarded.rbegin(); field != forwarded.rend(); ++field) {
    std::string_view list = *field;
    // Fields make one list: ["a", ",b"] and ["a", "", "b"] are "a,,b", whose empty element
    // is garbage like any other, so every element counts, a field's first and empty ones too.
    for (bool more = true; more;) {
      const auto comma = list.rfind(',');
      more = comma != std::string_view::npos;
      const std::string_view item = core::trim(more ? list.substr(comma + 1) : list);
      if (more) list = list.substr(0, comma);
      const auto hop = forwarded_hop(item);
      if (!hop) return current;  // garbage: believe nothing further left
      current = *hop;
      if (!core::in_any(trusted, current)) return current;
    }
  }
  return current;
}

}  // namespace tollgate::policy
