#include "gateway/core/key_block.hpp"

namespace tollgate::core {

namespace {

std::optional<unsigned> prefix_digits(std::string_view digits) noexcept {
  if (digits.empty() || digits.size() > 3) return std::nullopt;
  unsigned n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<unsigned>(c - '0');
  }
  return n;
}

}  // namespace

std::optional<key_block> key_block::parse(std::string_view text, const level_prefixes& p,
                                          std::string& error) {
  const auto slash = text.find('/');
  const std::string_view address_text = text.substr(0, slash);
  const auto a = address::parse(address_text);
  if (!a) {
    error = "not an IP address or CIDR block: \"" + std::string(text.substr(0, 64)) + "\"";
    return std::nullopt;
  }
  key_block b;
  b.family = a->family();
  const bool v4 = b.family == family::v4;
  const unsigned individual = v4 ? p.ipv4_individual : p.ipv6_subnet;
  const std::uint64_t key = v4 ? a->v4() : a->v6_high();
  if (slash == std::string_view::npos) {
    // A bare address names its client as every table knows it: the individual level's key.
    b.prefix = static_cast<std::uint8_t>(individual);
    b.net = key & b.mask(b.prefix);
    return b;
  }
  auto prefix = prefix_digits(text.substr(slash + 1));
  // ::ffff:10.0.0.0/104 is the IPv4 block 10.0.0.0/8.
  if (prefix && v4 && address_text.find(':') != std::string_view::npos) {
    prefix = *prefix >= 96 ? std::optional<unsigned>(*prefix - 96) : std::nullopt;
  }
  if (!prefix || *prefix > (v4 ? 32u : 128u)) {
    error = "bad prefix length in \"" + std::string(text.substr(0, 64)) + "\"";
    return std::nullopt;
  }
  if (*prefix > individual) {
    error = "/" + std::to_string(*prefix) + " is narrower than the " +
            std::string(level_name(v4 ? level::ipv4_individual : level::ipv6_subnet)) +
            " level (/" + std::to_string(individual) +
            "), which the gateway counts as one client: name the address, or a block of /" +
            std::to_string(individual) + " or wider";
    return std::nullopt;
  }
  b.prefix = static_cast<std::uint8_t>(*prefix);
  b.net = key & b.mask(b.prefix);
  if (b.net != key || (!v4 && a->v6_low() != 0)) {
    error = "host bits are set below the prefix in \"" + std::string(text) + "\"; the block is " +
            b.to_string();
    return std::nullopt;
  }
  return b;
}

bool key_block::overlaps(core::family key_family, std::uint64_t key,
                         unsigned key_prefix) const noexcept {
  if (key_family != family) return false;
  // One of two blocks lies inside the other iff they agree on the shorter prefix.
  const std::uint64_t m = mask(key_prefix < prefix ? key_prefix : prefix);
  return (key & m) == (net & m);
}

std::string key_block::to_string() const {
  const address a = family == core::family::v4 ? address::from_v4(static_cast<std::uint32_t>(net))
                                               : address::from_v6(net, 0);
  return a.to_string() + "/" + std::to_string(prefix);
}

}  // namespace tollgate::core
