#include "gateway/sim/log_reader.hpp"

#include <algorithm>
#include <array>

#include "gateway/core/text.hpp"

namespace tollgate::sim {

namespace {

/// A cursor over one line: each step consumes what it matched, or fails and leaves the line.
/// Fields are short: plain loops beat calls to memchr and memcmp here (bench/README.md).
struct cursor {
  std::string_view rest;  ///< what is left

  /// Consumes `literal` if the rest starts with it.
  bool skip(std::string_view literal) noexcept {
    if (rest.size() < literal.size()) return false;
    for (std::size_t i = 0; i < literal.size(); ++i) {
      if (rest[i] != literal[i]) return false;
    }
    rest.remove_prefix(literal.size());
    return true;
  }
  /// The text up to (not including) `stop`, which is consumed too; false when absent.
  bool until(char stop, std::string_view& field) noexcept {
    for (std::size_t n = 0; n < rest.size(); ++n) {
      if (rest[n] != stop) continue;
      field = rest.substr(0, n);
      rest.remove_prefix(n + 1);
      return true;
    }
    return false;
  }
};

/// Where `a` or `b` first occurs in `s` (npos: neither): a plain loop, for distances of a few
/// bytes, where a call to memchr costs more than it saves.
std::size_t find_either(std::string_view s, char a, char b) noexcept {
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == a || s[i] == b) return i;
  }
  return std::string_view::npos;
}

/// `n` decimal digits at the start of `s` as a number; -1 when they are not all digits.
int digits(std::string_view s, std::size_t n) noexcept {
  if (s.size() < n) return -1;
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = s[i];
    if (c < '0' || c > '9') return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

/// A status code: 1 to 3 digits (Tollgate writes 0 when no response was sent).
bool parse_status(std::string_view s, unsigned& out) noexcept {
  if (s.empty() || s.size() > 3) return false;
  const int v = digits(s, s.size());
  if (v < 0) return false;
  out = static_cast<unsigned>(v);
  return true;
}

/// A dotted quad in the strict form inet_pton accepts (1 to 3 digits a part, no leading zero,
/// at most 255): the common case, read without copying the text. False for anything else,
/// which core::address::parse then judges.
bool fast_ipv4(std::string_view s, core::address& out) noexcept {
  std::uint32_t bits = 0;
  std::size_t i = 0;
  for (int part = 0; part < 4; ++part) {
    if (part > 0 && (i >= s.size() || s[i++] != '.')) return false;
    const std::size_t start = i;
    unsigned v = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i - start < 3) {
      v = v * 10 + static_cast<unsigned>(s[i++] - '0');
    }
    if (i == start || v > 255 || (s[start] == '0' && i - start > 1)) return false;
    bits = bits << 8 | v;
  }
  if (i != s.size()) return false;
  out = core::address::from_v4(bits);
  return true;
}

/// The client address of a field (escapes decoded first: an address has none, but the text
/// format would write them).
bool parse_client(std::string_view field, std::string& scratch, core::address& out) noexcept {
  if (fast_ipv4(field, out)) return true;
  std::string_view text;
  if (!unescape_field(field, scratch, text)) return false;
  const auto a = core::address::parse(text);
  if (!a) return false;
  out = *a;
  return true;
}

/// Whether the line is one of the gateway's own log lines in text: `[2026-11-23 14:10:29.123]
/// [info] ...` (spdlog's pattern in gateway/app/logging.cpp).
bool is_application_text(std::string_view line) noexcept {
  return line.size() > 26 && line[0] == '[' && digits(line.substr(1), 4) >= 0 && line[5] == '-' &&
         line[11] == ' ' && line.find("] [") != std::string_view::npos;
}

/// A Tollgate text line, after its time: ` access CLIENT "METHOD TARGET PROTO" STATUS ...`.
/// A Tollgate text line after its time, which said `logged`. `known` >= 0: the line's decision
/// instant, read by parse_time from the same two fields, which are then not read again.
line_kind parse_text_rest(cursor c, core::nanos logged, core::nanos known, log_record& out,
                          parse_scratch& s, std::string_view& why) {
  std::string_view client, method, target, field;
  if (!c.skip(" access ") || !c.until(' ', client) || !c.skip("\"") || !c.until(' ', method)) {
    why = "not an access line";
    return line_kind::bad;
  }
  if (!parse_client(client, s.client, out.client)) {
    why = "the client is not an IP address";
    return line_kind::bad;
  }
  // A tunnel's end: `"GET /ws/bus" category=websocket websocket closed ...`.
  const auto quote = find_either(c.rest, ' ', '"');
  if (quote != std::string_view::npos && c.rest[quote] == '"') {
    if (c.rest.find(" websocket closed ", quote) != std::string_view::npos)
      return line_kind::not_request;
    why = "a request line without a protocol";
    return line_kind::bad;
  }
  std::string_view protocol, status, category, decision, limit, tier, upstream;
  if (!c.until(' ', target) || !c.until('"', protocol) || !c.skip(" ") || !c.until(' ', status) ||
      !c.skip("category=") || !c.until(' ', category) || !c.skip("decision=") ||
      !c.until(' ', decision) || !c.skip("limit=") || !c.until(' ', limit) ||
      (c.rest.starts_with("consumer_tier=") &&
       (!c.skip("consumer_tier=") || !c.until(' ', tier))) ||
      (c.rest.starts_with("step=") && (!c.skip("step=") || !c.until(' ', field))) ||
      !c.skip("upstream=") || !c.until(' ', upstream) || !c.skip("upstream_time=") ||
      !c.until(' ', field) || !c.skip("bytes=") || !c.until(' ', field)) {
    why = "an access line with a field missing";
    return line_kind::bad;
  }
  if (protocol.substr(0, 5) != "HTTP/" || !parse_status(status, out.status)) {
    why = "a bad protocol or status";
    return line_kind::bad;
  }
  core::nanos duration = 0;
  if (known >= 0) {
    // parse_time read the text after the last space: the same field when there is no other.
    if (find_either(c.rest, ' ', ' ') != std::string_view::npos) {
      why = "a bad duration";
      return line_kind::bad;
    }
    duration = logged - known;
  } else if (c.rest.size() < 2 || c.rest.back() != 's' ||
             !parse_seconds(c.rest.substr(0, c.rest.size() - 1), duration) || duration > logged) {
    why = "a bad duration";
    return line_kind::bad;
  }
  if (limit == "-") limit = {};
  if (!unescape_field(method, s.method, out.method) ||
      !unescape_field(target, s.target, out.target) ||
      !unescape_field(category, s.category, out.category) ||
      !unescape_field(decision, s.decision, out.decision) ||
      !unescape_field(limit, s.limit, out.limit) ||
      !unescape_field(tier, s.consumer_tier, out.consumer_tier)) {
    why = "a bad \\x escape or a raw byte the log escapes";
    return line_kind::bad;
  }
  out.time = logged - duration;
  out.format = log_format::tollgate_text;
  out.forwarded = upstream != "-";
  return line_kind::request;
}

constexpr std::string_view months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

/// nginx's $time_local: `10/Oct/2026:13:55:36 -0700`.
bool parse_nginx_time(std::string_view t, core::nanos& out) noexcept {
  if (t.size() != 26 || t[2] != '/' || t[6] != '/' || t[11] != ':' || t[14] != ':' ||
      t[17] != ':' || t[20] != ' ' || (t[21] != '+' && t[21] != '-')) {
    return false;
  }
  int month = 0;
  for (int m = 0; m < 12; ++m) {
    if (t.substr(3, 3) == months[m]) month = m + 1;
  }
  const int day = digits(t, 2), year = digits(t.substr(7), 4), hour = digits(t.substr(12), 2);
  const int minute = digits(t.substr(15), 2), second = digits(t.substr(18), 2);
  const int zh = digits(t.substr(22), 2), zm = digits(t.substr(24), 2);
  if (month == 0 || zh < 0 || zh > 23 || zm < 0 || zm > 59 ||
      !civil_to_nanos(year, month, day, hour, minute, second, out)) {
    return false;
  }
  // Local time = UTC + offset: UTC = local - offset.
  const core::nanos offset = (zh * 3600 + zm * 60) * core::ns_per_s;
  out += t[21] == '+' ? -offset : offset;
  return out >= 0;
}

/// `ADDR - USER [TIME] "METHOD TARGET PROTO" STATUS BYTES "REFERER" "AGENT"`.
line_kind parse_nginx(std::string_view line, log_record& out, parse_scratch& s,
                      std::string_view& why) {
  cursor c{line};
  std::string_view client, user, time, request, status;
  if (!c.until(' ', client) || !c.skip("- ") || !c.until('[', user) || !c.until(']', time) ||
      !c.skip(" \"")) {
    why = "none of the formats (Tollgate text or json, nginx combined)";
    return line_kind::bad;
  }
  if (!parse_client(client, s.client, out.client)) {
    why = "the client is not an IP address";
    return line_kind::bad;
  }
  if (!parse_nginx_time(time, out.time)) {
    why = "a bad time";
    return line_kind::bad;
  }
  // nginx writes `"` inside a field as \x22: the request ends at the next quote.
  std::string_view bytes, referer, agent;
  if (!c.until('"', request) || !c.skip(" ") || !c.until(' ', status) ||
      !parse_status(status, out.status) || !c.until(' ', bytes) || bytes.empty() ||
      bytes.find_first_not_of("0123456789") != std::string_view::npos || !c.skip("\"") ||
      !c.until('"', referer) || !c.skip(" \"") || !c.until('"', agent) || !c.rest.empty()) {
    why = "a bad request, status, size, referer or user agent";
    return line_kind::bad;
  }
  // nginx logs a connection that closed before sending a request as `"-" 400 0` (408 when
  // it timed out): no request to replay, and not a bad line either.
  if (request == "-") return line_kind::no_request;
  cursor r{request};
  std::string_view method, target;
  if (!r.until(' ', method) || method.empty()) {
    why = "a request that is not METHOD TARGET PROTOCOL";
    return line_kind::bad;
  }
  // HTTP/0.9 requests have no protocol; a target never holds a raw space (nginx logs the
  // request line as received, and a space ends the target).
  const auto space = r.rest.find(' ');
  target = r.rest.substr(0, space);
  if (target.empty() ||
      (space != std::string_view::npos && r.rest.substr(space + 1, 5) != "HTTP/")) {
    why = "a request that is not METHOD TARGET PROTOCOL";
    return line_kind::bad;
  }
  if (!unescape_field(method, s.method, out.method) ||
      !unescape_field(target, s.target, out.target)) {
    why = "a bad \\x escape or a raw byte nginx escapes";
    return line_kind::bad;
  }
  out.category = out.decision = out.limit = out.consumer_tier = {};
  out.format = log_format::nginx_combined;
  out.forwarded = true;
  return line_kind::request;
}

}  // namespace

bool civil_to_nanos(int year, int month, int day, int hour, int minute, int second,
                    core::nanos& out) {
  static constexpr int month_days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  // Nanoseconds since 1970 in 64 bits end in April 2262.
  if (year < 1970 || year > 2261 || month < 1 || month > 12 || hour < 0 || hour > 23 ||
      minute < 0 || minute > 59 || second < 0 || second > 60) {
    return false;
  }
  const bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  const int last = month_days[month - 1] + (month == 2 && leap ? 1 : 0);
  if (day < 1 || day > last) return false;
  // Days from 1970-01-01 (H. Hinnant's days_from_civil).
  const int y = year - (month <= 2 ? 1 : 0);
  const int era = y / 400;
  const int yoe = y - era * 400;
  const int doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1;
  const int doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const std::int64_t days = std::int64_t{era} * 146097 + doe - 719468;
  out = ((days * 24 + hour) * 60 + minute) * 60 * core::ns_per_s + second * core::ns_per_s;
  return true;
}

bool decode_hex_escapes(std::string_view in, std::string& out) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\') {
      out += in[i];
      continue;
    }
    if (in.size() - i < 4 || in[i + 1] != 'x') return false;
    const int hi = core::hex_value(in[i + 2]), lo = core::hex_value(in[i + 3]);
    if (hi < 0 || lo < 0) return false;
    out += static_cast<char>(hi * 16 + lo);
    i += 3;
  }
  return true;
}

bool unescape_field(std::string_view in, std::string& out, std::string_view& field) {
  // Both writers escape every byte that is not printable ASCII, and quotes and backslashes:
  // such a byte raw means the line was not written by them (or was damaged).
  // 0: written as it is, 1: a backslash, 2: never written raw.
  static constexpr auto kinds = [] {
    std::array<std::uint8_t, 256> k{};
    for (int c = 0; c < 256; ++c)
      k[c] = c <= 0x20 || c >= 0x7f || c == '"' ? 2 : 0;
    k['\\'] = 1;
    return k;
  }();
  std::uint8_t seen = 0;
  for (const char c : in)
    seen |= kinds[static_cast<unsigned char>(c)];
  if (seen & 2) return false;
  const bool escaped = seen != 0;
  if (!escaped) {
    field = in;
    return true;
  }
  out.clear();
  if (!decode_hex_escapes(in, out)) return false;
  field = out;
  return true;
}

bool parse_seconds(std::string_view text, core::nanos& out) noexcept {
  const auto dot = text.find('.');
  const std::string_view whole = text.substr(0, dot);
  const std::string_view fraction =
      dot == std::string_view::npos ? std::string_view() : text.substr(dot + 1);
  if (whole.empty() || whole.size() > 9 || fraction.size() > 9 ||
      (dot != std::string_view::npos && fraction.empty())) {
    return false;
  }
  const int w = digits(whole, whole.size());
  if (w < 0) return false;
  core::nanos ns = 0, scale = core::ns_per_s;
  for (const char c : fraction) {
    if (c < '0' || c > '9') return false;
    scale /= 10;
    ns += (c - '0') * scale;
  }
  out = w * core::ns_per_s + ns;
  return true;
}

bool parse_utc_time(std::string_view t, core::nanos& out) noexcept {
  // 2026-11-23T09:24:23[.123]Z
  if (t.size() < 20 || t[4] != '-' || t[7] != '-' || t[10] != 'T' || t[13] != ':' || t[16] != ':' ||
      t.back() != 'Z') {
    return false;
  }
  // Consecutive lines share their second: the last one's value is kept (per thread, so this
  // stays a function of its argument).
  thread_local char last[19] = {};
  thread_local core::nanos last_value = -1;
  if (last_value >= 0 && std::equal(last, last + 19, t.data())) {
    out = last_value;
  } else {
    const int year = digits(t, 4), month = digits(t.substr(5), 2), day = digits(t.substr(8), 2);
    const int hour = digits(t.substr(11), 2), minute = digits(t.substr(14), 2);
    const int second = digits(t.substr(17), 2);
    if (!civil_to_nanos(year, month, day, hour, minute, second, out)) return false;
    std::copy(t.data(), t.data() + 19, last);
    last_value = out;
  }
  const std::string_view fraction = t.substr(19, t.size() - 20);
  if (fraction.empty()) return true;
  if (fraction[0] != '.' || fraction.size() < 2 || fraction.size() > 10) return false;
  core::nanos scale = core::ns_per_s;
  for (const char c : fraction.substr(1)) {
    if (c < '0' || c > '9') return false;
    scale /= 10;
    out += (c - '0') * scale;
  }
  return true;
}

line_kind parse_time(std::string_view line, core::nanos& time, log_record& out,
                     parse_scratch& scratch, std::string_view& why) {
  std::string_view bare = line;
  if (!bare.empty() && bare.back() == '\r') bare.remove_suffix(1);
  const auto first = find_either(bare, ' ', ' '), last = bare.rfind(' ');
  core::nanos logged = 0, duration = 0;
  if (bare.size() > 20 && bare[4] == '-' && bare[10] == 'T' && first != last &&
      bare.back() == 's' && parse_utc_time(bare.substr(0, first), logged) &&
      parse_seconds(bare.substr(last + 1, bare.size() - last - 2), duration) &&
      duration <= logged) {
    time = logged - duration;
    return line_kind::request;
  }
  const line_kind k = parse_line(line, out, scratch, why);
  time = out.time;
  return k;
}

namespace {

/// parse_line, with a text line's decision instant `known` when parse_time read it (else -1).
line_kind parse_any(std::string_view line, core::nanos known, log_record& out,
                    parse_scratch& scratch, std::string_view& why) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (core::trim(line).empty()) return line_kind::blank;
  if (line.front() == '{') return parse_json_line(line, out, scratch, why);
  if (line.size() > 20 && line[4] == '-' && line[10] == 'T') {
    // Tollgate text: the time is the first field.
    const auto space = find_either(line, ' ', ' ');
    core::nanos logged = 0;
    if (space == std::string_view::npos ||
        (known < 0 && !parse_utc_time(line.substr(0, space), logged))) {
      why = "a bad time";
      return line_kind::bad;
    }
    return parse_text_rest(cursor{line.substr(space)}, known < 0 ? logged : known, known, out,
                           scratch, why);
  }
  if (is_application_text(line)) return line_kind::application;
  return parse_nginx(line, out, scratch, why);
}

}  // namespace

line_kind parse_line(std::string_view line, log_record& out, parse_scratch& scratch,
                     std::string_view& why) {
  return parse_any(line, -1, out, scratch, why);
}

line_kind parse_again(std::string_view line, core::nanos time, log_record& out,
                      parse_scratch& scratch, std::string_view& why) {
  return parse_any(line, time, out, scratch, why);
}

}  // namespace tollgate::sim
