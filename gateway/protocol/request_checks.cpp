#include "gateway/protocol/request_checks.hpp"

#include <array>

namespace tollgate::protocol {

namespace {

bool is_hex(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/// unreserved / sub-delims (RFC 3986 §2.2, §2.3); '%' is checked apart. A table: every Host
/// of every request goes through this.
constexpr std::array<bool, 256> reg_name_chars = [] {
  std::array<bool, 256> t{};
  for (int c = 'a'; c <= 'z'; ++c)
    t[static_cast<unsigned char>(c)] = true;
  for (int c = 'A'; c <= 'Z'; ++c)
    t[static_cast<unsigned char>(c)] = true;
  for (int c = '0'; c <= '9'; ++c)
    t[static_cast<unsigned char>(c)] = true;
  for (char c : std::string_view("-._~!$&'()*+,;="))
    t[static_cast<unsigned char>(c)] = true;
  return t;
}();

bool is_reg_name_char(char c) noexcept {
  return reg_name_chars[static_cast<unsigned char>(c)];
}

/// An IP literal's inside: IPv6 text (hex, ':' and '.') or IPvFuture (`v` hex `.` ...).
bool valid_ip_literal(std::string_view s) noexcept {
  if (s.empty()) return false;
  for (char c : s) {
    if (!(is_hex(c) || c == ':' || c == '.' || c == 'v' || c == 'V' || is_reg_name_char(c))) {
      return false;
    }
  }
  return true;
}

bool valid_reg_name(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%') {
      if (i + 2 >= s.size() || !is_hex(s[i + 1]) || !is_hex(s[i + 2])) return false;
      i += 2;
    } else if (!is_reg_name_char(s[i])) {
      return false;
    }
  }
  return true;
}

bool valid_port(std::string_view s) noexcept {
  // RFC 3986 allows an empty port after the colon; more than five digits is no port.
  if (s.size() > 5) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

}  // namespace

bool valid_host(std::string_view value) noexcept {
  std::string_view host = value;
  std::string_view port;
  if (!value.empty() && value.front() == '[') {
    const auto close = value.find(']');
    if (close == std::string_view::npos) return false;
    if (!valid_ip_literal(value.substr(1, close - 1))) return false;
    const std::string_view rest = value.substr(close + 1);
    if (rest.empty()) return true;
    if (rest.front() != ':') return false;
    return valid_port(rest.substr(1));
  }
  if (const auto colon = value.rfind(':'); colon != std::string_view::npos) {
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
    if (!valid_port(port)) return false;
  }
  return valid_reg_name(host);
}

}  // namespace tollgate::protocol
