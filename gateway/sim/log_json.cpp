// Tollgate's access lines in `logging.format: json`: one flat JSON object a line. A small
// strict reader of flat objects (no nesting: access lines have none), so that a line is read
// without allocating and a malformed one is reported rather than half-read.

#include <array>

#include "gateway/core/text.hpp"
#include "gateway/sim/log_reader.hpp"

namespace tollgate::sim {

namespace {

/// The keys the simulator reads; the others are checked for syntax and skipped.
enum key : std::uint8_t {
  k_time,
  k_type,
  k_client,
  k_method,
  k_path,
  k_status,
  k_category,
  k_decision,
  k_limit,
  k_duration,
  k_level,
  k_message,
  k_upstream,
  k_consumer_tier,
  key_count,
  k_other = key_count
};

constexpr std::array<std::string_view, key_count> key_names = {
    "time",     "type",  "client",   "method", "path",    "status",   "category",
    "decision", "limit", "duration", "level",  "message", "upstream", "consumer_tier"};

/// One value as it appears in the line.
struct json_value {
  enum class kind : std::uint8_t { string, number, null, boolean } type = kind::null;
  std::string_view raw;     ///< a string's inside (escapes not decoded), or a number's text
  bool has_escape = false;  ///< a string with a backslash
};

/// Appends code point `cp` as UTF-8.
void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | cp >> 6);
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | cp >> 12);
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | cp >> 18);
    out += static_cast<char>(0x80 | (cp >> 12 & 0x3f));
    out += static_cast<char>(0x80 | (cp >> 6 & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

/// Four hex digits at `s[i]`; -1 when they are not.
long hex4(std::string_view s, std::size_t i) noexcept {
  if (s.size() < i + 4) return -1;
  long v = 0;
  for (std::size_t k = 0; k < 4; ++k) {
    const int d = core::hex_value(s[i + k]);
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

/// Decodes the inside of a JSON string. `\u00XX` is byte XX, as the access log writes the
/// bytes a client sent (core::append_json_escaped with ascii_only); larger code points become
/// UTF-8. False for a malformed escape or a lone surrogate.
bool decode_json_string(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '\\') {
      out += in[i];
      continue;
    }
    if (++i == in.size()) return false;
    switch (in[i]) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        long cp = hex4(in, i + 1);
        if (cp < 0) return false;
        i += 4;
        if (cp >= 0xdc00 && cp <= 0xdfff) return false;
        if (cp >= 0xd800 && cp <= 0xdbff) {
          const long low = in.substr(i + 1, 2) == "\\u" ? hex4(in, i + 3) : -1;
          if (low < 0xdc00 || low > 0xdfff) return false;
          cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          i += 6;
        }
        if (cp < 0x100) {
          out += static_cast<char>(cp);
        } else {
          append_utf8(out, static_cast<std::uint32_t>(cp));
        }
        break;
      }
      default:
        return false;
    }
  }
  return true;
}

/// A reader over one line of JSON text.
struct reader {
  std::string_view s;  ///< the line
  std::size_t i = 0;   ///< the next byte

  void spaces() noexcept {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t'))
      ++i;
  }
  bool next_is(char c) noexcept {
    spaces();
    return i < s.size() && s[i] == c;
  }
  /// A string starting at the quote at `i`: its inside, escapes checked for shape only.
  bool string(std::string_view& inside, bool& escaped) noexcept {
    if (!next_is('"')) return false;
    const std::size_t start = ++i;
    escaped = false;
    for (; i < s.size(); ++i) {
      const auto u = static_cast<unsigned char>(s[i]);
      if (u < 0x20) return false;  // control bytes must be escaped
      if (s[i] == '\\') {
        escaped = true;
        if (++i == s.size()) return false;
      } else if (s[i] == '"') {
        inside = s.substr(start, i - start);
        ++i;
        return true;
      }
    }
    return false;
  }
  /// A JSON number (RFC 8259 grammar).
  bool number(std::string_view& text) noexcept {
    const std::size_t start = i;
    auto digit = [&] { return i < s.size() && s[i] >= '0' && s[i] <= '9'; };
    if (i < s.size() && s[i] == '-') ++i;
    if (!digit()) return false;
    if (s[i] == '0') {
      ++i;
    } else {
      while (digit())
        ++i;
    }
    if (i < s.size() && s[i] == '.') {
      ++i;
      if (!digit()) return false;
      while (digit())
        ++i;
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
      if (!digit()) return false;
      while (digit())
        ++i;
    }
    text = s.substr(start, i - start);
    return true;
  }
  bool word(std::string_view w) noexcept {
    if (s.substr(i, w.size()) != w) return false;
    i += w.size();
    return true;
  }
  /// Any value but an object or an array.
  bool value(json_value& v) noexcept {
    spaces();
    if (i == s.size()) return false;
    const char c = s[i];
    if (c == '"') {
      v.type = json_value::kind::string;
      return string(v.raw, v.has_escape);
    }
    v.has_escape = false;
    if (c == 'n') return v.type = json_value::kind::null, word("null");
    if (c == 't') return v.type = json_value::kind::boolean, word("true");
    if (c == 'f') return v.type = json_value::kind::boolean, word("false");
    v.type = json_value::kind::number;
    return number(v.raw);
  }
};

key key_of(std::string_view name) noexcept {
  for (std::size_t k = 0; k < key_count; ++k) {
    if (key_names[k] == name) return static_cast<key>(k);
  }
  return k_other;
}

/// Reads the members of the object on `line` into `values` (by key); `why` on failure.
bool read_object(std::string_view line, std::array<json_value, key_count>& values,
                 std::uint32_t& seen, std::string& name_scratch, std::string_view& why) {
  reader r{line};
  seen = 0;
  if (!r.next_is('{')) return why = "invalid JSON", false;
  ++r.i;
  if (r.next_is('}')) {
    ++r.i;
  } else {
    for (;;) {
      std::string_view name;
      bool escaped = false;
      json_value v;
      if (!r.string(name, escaped) || !r.next_is(':')) return why = "invalid JSON", false;
      ++r.i;
      if (!r.value(v)) {
        why = r.i < line.size() && (line[r.i] == '{' || line[r.i] == '[') ? "a nested JSON value"
                                                                          : "invalid JSON";
        return false;
      }
      if (escaped) {
        if (!decode_json_string(name, name_scratch)) return why = "invalid JSON", false;
        name = name_scratch;
      }
      const key k = key_of(name);
      if (k != k_other) {
        if (seen & (1u << k)) return why = "a duplicate key", false;
        seen |= 1u << k;
        values[k] = v;
      }
      if (r.next_is(',')) {
        ++r.i;
        continue;
      }
      if (!r.next_is('}')) return why = "invalid JSON", false;
      ++r.i;
      break;
    }
  }
  r.spaces();
  if (r.i != line.size()) return why = "text after the JSON object", false;
  return true;
}

/// The string value `v` decoded into `scratch` when needed; false when it is not a string.
bool text_of(const json_value& v, std::string& scratch, std::string_view& out) {
  if (v.type != json_value::kind::string) return false;
  if (!v.has_escape) {
    out = v.raw;
    return true;
  }
  if (!decode_json_string(v.raw, scratch)) return false;
  out = scratch;
  return true;
}

/// A string field of an access line, decoded into `scratch` when needed; false with `why`
/// when it is missing or not a string, holds a raw byte the gateway's writer escapes
/// (0x7f and above: its access lines are ASCII), or a bad escape.
bool access_field(const json_value& v, std::string& scratch, std::string_view& out,
                  std::string_view& why) {
  if (v.type != json_value::kind::string) {
    why = "an access line with a field missing";
    return false;
  }
  for (const char c : v.raw) {
    if (static_cast<unsigned char>(c) >= 0x7f) {
      why = "a raw byte the log escapes";
      return false;
    }
  }
  if (!text_of(v, scratch, out)) {
    why = "a bad JSON escape";
    return false;
  }
  return true;
}

}  // namespace

line_kind parse_json_line(std::string_view line, log_record& out, parse_scratch& s,
                          std::string_view& why) {
  std::array<json_value, key_count> v;
  std::uint32_t seen = 0;
  if (!read_object(line, v, seen, s.other, why)) return line_kind::bad;
  auto has = [&](key k) { return (seen & (1u << k)) != 0; };
  std::string_view type, time;
  if (!has(k_type)) {
    // The gateway's own log in json: {"time":...,"level":...,"message":...}.
    if (has(k_level) && has(k_message)) return line_kind::application;
    why = "a JSON line without \"type\"";
    return line_kind::bad;
  }
  if (!text_of(v[k_type], s.other, type)) return why = "a bad \"type\"", line_kind::bad;
  if (type == "websocket_closed") return line_kind::not_request;
  if (type != "access") return why = "an unknown \"type\"", line_kind::bad;
  core::nanos logged = 0;
  if (!text_of(v[k_time], s.other, time) || !parse_utc_time(time, logged)) {
    return why = "a bad time", line_kind::bad;
  }
  std::string_view client;
  const auto& st = v[k_status];
  if (!access_field(v[k_client], s.client, client, why) ||
      !access_field(v[k_method], s.method, out.method, why) ||
      !access_field(v[k_path], s.target, out.target, why) ||
      !access_field(v[k_category], s.category, out.category, why) ||
      !access_field(v[k_decision], s.decision, out.decision, why)) {
    return line_kind::bad;
  }
  const auto a = core::address::parse(client);
  if (!a) return why = "the client is not an IP address", line_kind::bad;
  out.client = *a;
  out.limit = {};
  if (v[k_limit].type != json_value::kind::null &&
      !access_field(v[k_limit], s.limit, out.limit, why)) {
    return why = "a bad \"limit\"", line_kind::bad;
  }
  // Written only when the policy has tiers (docs/design.md §15).
  out.consumer_tier = {};
  if (v[k_consumer_tier].type != json_value::kind::null &&
      !access_field(v[k_consumer_tier], s.consumer_tier, out.consumer_tier, why)) {
    return why = "a bad \"consumer_tier\"", line_kind::bad;
  }
  out.status = 0;
  if (st.type == json_value::kind::number) {
    if (st.raw.size() > 3 || st.raw.find_first_not_of("0123456789") != std::string_view::npos) {
      return why = "a bad status", line_kind::bad;
    }
    for (const char c : st.raw)
      out.status = out.status * 10 + static_cast<unsigned>(c - '0');
  } else if (st.type != json_value::kind::null) {
    return why = "a bad status", line_kind::bad;
  }
  core::nanos duration = 0;
  const auto& d = v[k_duration];
  if ((d.type == json_value::kind::number && !parse_seconds(d.raw, duration)) ||
      (d.type != json_value::kind::number && d.type != json_value::kind::null) ||
      duration > logged) {
    return why = "a bad duration", line_kind::bad;
  }
  out.time = logged - duration;
  out.format = log_format::tollgate_json;
  out.forwarded = v[k_upstream].type == json_value::kind::string;  // null: answered here
  return line_kind::request;
}

}  // namespace tollgate::sim
