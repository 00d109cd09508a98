#include "gateway/policy/client_address.hpp"

#include <algorithm>

#include "gateway/core/text.hpp"

namespace tollgate::policy {

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
      const auto hop = core::address::parse(item);
      if (!hop) return current;  // garbage: believe nothing further left
      current = *hop;
      if (!core::in_any(trusted, current)) return current;
    }
  }
  return current;
}

}  // namespace tollgate::policy
