#include "gateway/protocol/proxy_header.hpp"

#include <algorithm>
#include <array>
#include <cstring>

namespace tollgate::protocol {

namespace {

constexpr std::string_view v1_prefix = "PROXY ";
constexpr std::string_view v2_signature{"\r\n\r\n\0\r\nQUIT\n", 12};
constexpr std::size_t v1_max = 107;

/// Whether `data` could still become `whole` (it is a prefix of it, or starts with it).
bool prefix_of(std::string_view data, std::string_view whole) {
  const auto n = std::min(data.size(), whole.size());
  return data.substr(0, n) == whole.substr(0, n);
}

/// A decimal port 0-65535 without leading zeros (v1 grammar).
bool valid_port(std::string_view s) {
  if (s.empty() || s.size() > 5 || (s.size() > 1 && s[0] == '0')) return false;
  unsigned v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + static_cast<unsigned>(c - '0');
  }
  return v <= 65535;
}

proxy_parse parse_v1(std::string_view data, proxy_header& out) {
  const auto end = data.find("\r\n");
  if (end == std::string_view::npos) {
    return data.size() >= v1_max ? proxy_parse::invalid : proxy_parse::need_more;
  }
  if (end + 2 > v1_max) return proxy_parse::invalid;
  std::string_view line = data.substr(v1_prefix.size(), end - v1_prefix.size());
  std::array<std::string_view, 5> words;
  std::size_t n = 0;
  while (!line.empty() && n < words.size()) {
    const auto space = line.find(' ');
    words[n++] = line.substr(0, space);
    line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  }
  out.length = end + 2;
  out.source.reset();
  if (n >= 1 && words[0] == "UNKNOWN") return proxy_parse::done;  // the rest is ignored
  if (n != 5 || !line.empty() || (words[0] != "TCP4" && words[0] != "TCP6")) {
    return proxy_parse::invalid;
  }
  const auto source = core::address::parse(words[1]);
  const auto destination = core::address::parse(words[2]);
  // Judged by the text: an IPv4-mapped IPv6 address is a TCP6 address that counts as IPv4.
  const bool six = words[0] == "TCP6";
  const auto of_family = [six](std::string_view text) {
    return (text.find(':') != std::string_view::npos) == six;
  };
  if (!source || !destination || !of_family(words[1]) || !of_family(words[2]) ||
      !valid_port(words[3]) || !valid_port(words[4])) {
    return proxy_parse::invalid;
  }
  out.source = *source;
  return proxy_parse::done;
}

proxy_parse parse_v2(std::string_view data, proxy_header& out) {
  if (data.size() < 16) return proxy_parse::need_more;
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(data[i]); };
  const unsigned version = byte(12) >> 4, command = byte(12) & 0x0f;
  const unsigned family = byte(13) >> 4, transport = byte(13) & 0x0f;
  const std::size_t length = (std::size_t{byte(14)} << 8) | byte(15);
  // Families UNSPEC, INET, INET6, UNIX and transports UNSPEC, STREAM, DGRAM are all there is.
  if (version != 2 || command > 1 || family > 3 || transport > 2 ||
      16 + length > max_proxy_header) {
    return proxy_parse::invalid;
  }
  if (data.size() < 16 + length) return proxy_parse::need_more;
  out.length = 16 + length;
  out.source.reset();
  // LOCAL (a health check of the balancer itself), or a family/transport we do not route
  // (UNSPEC, UNIX, UDP): the connection's own peer stands.
  if (command == 0 || transport != 1) return proxy_parse::done;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data() + 16);
  if (family == 1) {  // AF_INET: src 4, dst 4, ports 2 + 2
    if (length < 12) return proxy_parse::invalid;
    out.source = core::address::from_v4((std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
                                        (std::uint32_t{p[2]} << 8) | p[3]);
  } else if (family == 2) {  // AF_INET6: src 16, dst 16, ports 2 + 2
    if (length < 36) return proxy_parse::invalid;
    unsigned char bytes[16];
    std::memcpy(bytes, p, sizeof bytes);
    out.source = core::address::from_v6(bytes);
  }
  return proxy_parse::done;
}

}  // namespace

proxy_parse parse_proxy_header(std::string_view data, proxy_header& out) {
  if (data.empty()) return proxy_parse::need_more;
  if (data[0] == 'P') {
    if (!prefix_of(data, v1_prefix)) return proxy_parse::invalid;
    return data.size() < v1_prefix.size() ? proxy_parse::need_more : parse_v1(data, out);
  }
  if (!prefix_of(data, v2_signature)) return proxy_parse::invalid;
  return data.size() < v2_signature.size() ? proxy_parse::need_more : parse_v2(data, out);
}

}  // namespace tollgate::protocol
