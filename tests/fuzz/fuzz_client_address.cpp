/// Fuzz target: address and CIDR text (gateway/core/address.*) and the X-Forwarded-For walk
/// (gateway/policy/client_address.*).
///
/// Input, one item a line: the socket peer (10.0.0.1 when it does not parse); the trusted
/// proxies, CIDRs separated by spaces (those that do not parse are left out); then one
/// X-Forwarded-For field value a line.
///
/// Checked: every line, and every space- or comma-separated piece of one, that parses as an
/// address or a CIDR prints canonical text that parses back to the same value and prints the
/// same again; a block contains its own first address; and client_address agrees with a
/// reference walk (right to left over all fields, past trusted hops, stopping at garbage).

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/core/text.hpp"
#include "gateway/policy/client_address.hpp"

namespace {

using namespace tollgate;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_client_address: %s\n", what);
  std::abort();
}

std::vector<std::string_view> split(std::string_view s, char by) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto at = s.find(by);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

void check_round_trips(std::string_view text) {
  if (const auto a = core::address::parse(text)) {
    const std::string printed = a->to_string();
    const auto again = core::address::parse(printed);
    require(again.has_value(), "an address prints text that does not parse");
    require(*again == *a, "an address prints text that parses to another address");
    require(again->to_string() == printed, "an address's canonical text is not stable");
    const auto one = core::cidr::parse(printed);
    require(one && one->contains(*a), "an address is not in its own block of one");
  }
  if (const auto c = core::cidr::parse(text)) {
    const std::string printed = c->to_string();
    const auto again = core::cidr::parse(printed);
    require(again.has_value(), "a CIDR prints text that does not parse");
    require(again->to_string() == printed, "a CIDR's canonical text is not stable");
    const auto network = core::address::parse(printed.substr(0, printed.find('/')));
    require(network && c->contains(*network) && again->contains(*network),
            "a CIDR does not contain its own network address");
  }
}

bool trusted_by(const core::address& a, const std::vector<core::cidr>& trusted) {
  for (const auto& c : trusted) {
    if (c.contains(a)) return true;
  }
  return false;
}

/// One element's address, written differently from the gateway's: a bare address; `[v6]`
/// with an optional `:port`; or v4 `:port` (a port: 1 to 5 digits, at most 65535).
std::optional<core::address> ref_hop(std::string_view item) {
  auto digits = [](std::string_view s) {
    if (s.empty() || s.size() > 5) return false;
    long value = 0;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
      value = value * 10 + (c - '0');
    }
    return value <= 65535;
  };
  if (const auto bare = core::address::parse(item)) return bare;
  if (!item.empty() && item.front() == '[') {
    const std::size_t close = item.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view after = item.substr(close + 1);
    const bool port_ok = after.empty() || (after[0] == ':' && digits(after.substr(1)));
    const auto a = core::address::parse(item.substr(1, close - 1));
    if (!port_ok || !a || a->family() != core::family::v6) return std::nullopt;
    return a;
  }
  // v4 `:port`: dotted text before the colon, not an IPv6 form (`::ffff:10.0.2.1:6407`, whose
  // address would parse as v4-mapped, is no address with a port: IPv6 takes brackets).
  const std::size_t colon = item.rfind(':');
  if (colon == std::string_view::npos || !digits(item.substr(colon + 1))) return std::nullopt;
  if (item.substr(0, colon).find(':') != std::string_view::npos) return std::nullopt;
  const auto a = core::address::parse(item.substr(0, colon));
  if (!a || a->family() != core::family::v4) return std::nullopt;
  return a;
}

/// docs/design.md §7 as a plain loop: from the peer leftwards while the current hop is trusted,
/// over the one list the fields make (an empty field is an empty element, garbage like any other).
core::address ref_client(const core::address& peer, const std::vector<std::string_view>& fields,
                         const std::vector<core::cidr>& trusted) {
  core::address current = peer;
  if (!trusted_by(current, trusted)) return current;
  for (auto field = fields.rbegin(); field != fields.rend(); ++field) {
    const auto items = split(*field, ',');
    for (auto item = items.rbegin(); item != items.rend(); ++item) {
      const auto hop = ref_hop(core::trim(*item));
      if (!hop) return current;
      current = *hop;
      if (!trusted_by(current, trusted)) return current;
    }
  }
  return current;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto lines = split({reinterpret_cast<const char*>(data), size}, '\n');
  for (const auto line : lines) {
    check_round_trips(line);
    for (const auto piece : split(line, ' '))
      check_round_trips(piece);
    for (const auto piece : split(line, ','))
      check_round_trips(core::trim(piece));
  }

  const auto peer = core::address::parse(lines[0]).value_or(core::address::from_v4(0x0a000001));
  std::vector<core::cidr> trusted;
  if (lines.size() > 1) {
    for (const auto piece : split(lines[1], ' ')) {
      if (const auto c = core::cidr::parse(piece)) trusted.push_back(*c);
    }
  }
  const std::vector<std::string_view> fields(lines.begin() + std::min<std::size_t>(2, lines.size()),
                                             lines.end());
  const core::address got = policy::client_address(peer, fields, trusted);
  require(got == ref_client(peer, fields, trusted), "client_address differs from the reference");
  return 0;
}
