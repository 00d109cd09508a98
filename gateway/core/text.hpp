#pragma once
/// Small ASCII helpers for protocol text (header names and values, tokens).

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace tollgate::core {

/// `c` in lower case if it is an ASCII letter.
constexpr char ascii_lower(char c) noexcept {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c;
}

/// Equal ignoring ASCII case.
constexpr bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return ascii_lower(x) == ascii_lower(y);
         });
}

/// The credentials of an `Authorization` value in the Bearer scheme, or "" for another scheme.
/// The scheme matches in any case (RFC 9110 §11.1: "bearer", "BEARER") and one or more spaces
/// may follow it (§11.4); the token comes back exactly as sent, for an exact comparison.
constexpr std::string_view bearer_token(std::string_view authorization) noexcept {
  constexpr std::string_view scheme = "bearer";
  if (authorization.size() <= scheme.size() ||
      !iequals(authorization.substr(0, scheme.size()), scheme) ||
      authorization[scheme.size()] != ' ') {
    return {};
  }
  authorization.remove_prefix(scheme.size());
  while (!authorization.empty() && authorization.front() == ' ')
    authorization.remove_prefix(1);
  return authorization;
}

/// Appends `v` in decimal, without the allocation of std::to_string.
inline void append_decimal(std::string& out, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

/// Appends `s` as the inside of a JSON string: quotes, backslashes and control bytes escaped.
/// With `ascii_only`, bytes from 0x80 are escaped too (as \u0080..\u00ff), so that a line
/// stays valid JSON whatever bytes a client sent (log lines); otherwise they pass as they are.
inline void append_json_escaped(std::string& out, std::string_view s, bool ascii_only = false) {
  static constexpr char hex[] = "0123456789abcdef";
  // Runs of characters that need no escape are appended whole: most text has none to escape
  // (a 429's body escapes about 80 characters per request).
  std::size_t run = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    const bool quote = c == '"' || c == '\\';
    const bool control = u < 0x20 || u == 0x7f || (ascii_only && u >= 0x80);
    if (!quote && !control) continue;
    out.append(s.data() + run, i - run);
    run = i + 1;
    if (quote) {
      out += '\\';
      out += c;
    } else {
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  out.append(s.data() + run, s.size() - run);
}

/// The value of hex digit `c`, or -1.
constexpr int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Appends `in` with every `%XX` decoded (and `+` as a space when `plus_is_space`, as in a
/// form-encoded query) to `out`. False for a `%` not followed by two hex digits. The one
/// percent-decoder of the project.
inline bool percent_decode(std::string_view in, std::string& out, bool plus_is_space = false) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    const char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = hex_value(in[i + 1]), lo = hex_value(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      out += plus_is_space && c == '+' ? ' ' : c;
    }
  }
  return true;
}

/// `s` without leading and trailing spaces and tabs.
constexpr std::string_view trim(std::string_view s) noexcept {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

/// A hash of names for unordered maps keyed by std::string and looked up with a string_view
/// (with std::equal_to<>): no string is made for a look-up.
struct name_hash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    return std::hash<std::string_view>{}(s);
  }
};

}  // namespace tollgate::core
