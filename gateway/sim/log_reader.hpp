#pragma once
/// The request logs the simulator replays (docs/design.md §13), one line at a time: Tollgate's own
/// access log in text and in json, and nginx's `combined` format, recognised per line. Pure
/// functions of bytes (no I/O, no clock), so they can be fuzzed: a line either becomes a
/// log_record, or is classified as not a request, or is bad with a reason.

#include <cstdint>
#include <string>
#include <string_view>

#include "gateway/core/address.hpp"
#include "gateway/core/clock.hpp"

namespace tollgate::sim {

/// Which format a line was written in.
enum class log_format : std::uint8_t {
  tollgate_text,  ///< gateway/net/access_line.cpp, text
  tollgate_json,  ///< gateway/net/access_line.cpp, `logging.format: json`
  nginx_combined  ///< nginx's predefined `combined` log_format
};

/// What a line is.
enum class line_kind : std::uint8_t {
  request,      ///< a request: the record is filled
  not_request,  ///< a line that is no request: a WebSocket tunnel's end
  no_request,   ///< a connection that sent no request: nginx's `"-" 400` (or 408) lines
  application,  ///< a line of the gateway's own log mixed into the same stream
  blank,        ///< empty, or only spaces
  bad           ///< none of the formats: `why` says what is wrong
};

/// One request as a log line tells it. Views point into the line, or into the parse_scratch
/// when a field had escapes to decode: valid until the next parse with the same scratch.
struct log_record {
  core::nanos time = 0;       ///< the instant of the decision (see parse_line)
  core::address client;       ///< the address the request was charged to
  std::string_view method;    ///< decoded
  std::string_view target;    ///< decoded: the path and query as sent
  unsigned status = 0;        ///< of the response; 0: none was sent (Tollgate: the client left)
  std::string_view category;  ///< logged category; "" for nginx
  std::string_view decision;  ///< logged decision (allowed, limited, ...); "" for nginx
  std::string_view limit;     ///< logged binding limit "name.tier"; "" for none (and nginx)
  /// The consumer tier the gateway gave it (docs/design.md §15): from a token's claim, a key
  /// file, a network file, an upstream or the default; "" for none (no tiers, and nginx).
  std::string_view consumer_tier;
  log_format format = log_format::tollgate_text;  ///< where it came from
  /// It was sent upstream (Tollgate's logs name the upstream); nginx's lines are taken so.
  bool forwarded = true;

  /// Whether the log carries the gateway's decision (Tollgate's own formats).
  bool has_decision() const noexcept { return format != log_format::nginx_combined; }
};

/// Strings reused from line to line for fields that need decoding, so that parsing allocates
/// nothing once they have grown.
struct parse_scratch {
  std::string method;         ///< decoded method
  std::string target;         ///< decoded target
  std::string category;       ///< decoded category
  std::string decision;       ///< decoded decision
  std::string limit;          ///< decoded limit
  std::string consumer_tier;  ///< decoded consumer tier
  std::string client;         ///< decoded client
  std::string other;          ///< any other decoded string
};

/// Parses one line (without its '\n'; a trailing '\r' is ignored) of any of the three formats.
/// Times: a Tollgate line's time is written when the response ends, so the decision was made
/// `duration` before it: the record's time is `time - duration`. nginx's time has whole
/// seconds only: the record's time is that second. Fractions of up to nine digits are read,
/// so millisecond and microsecond Tollgate times both work. `why` is set for a bad line.
line_kind parse_line(std::string_view line, log_record& out, parse_scratch& scratch,
                     std::string_view& why);

/// The instant of `line` for ordering, read cheaply: for a Tollgate text line from its two
/// ends only (its time less the duration that ends it), `request` meaning "a request unless
/// the whole parse finds otherwise" (a tunnel's end, a bad field in between); any other line is
/// parsed whole by parse_line. The replay parses every request line whole again.
line_kind parse_time(std::string_view line, core::nanos& time, log_record& out,
                     parse_scratch& scratch, std::string_view& why);

/// parse_line for a line parse_time found to be a request at `time`: a text line's time fields,
/// read there, are not read again (the record's time is `time`).
line_kind parse_again(std::string_view line, core::nanos time, log_record& out,
                      parse_scratch& scratch, std::string_view& why);

/// Nanoseconds since 1970 of a proleptic Gregorian UTC date and time; false when a field is out
/// of range (month 13, February 30, hour 24, a year before 1970 or after 2261: 64-bit
/// nanoseconds end in 2262).
bool civil_to_nanos(int year, int month, int day, int hour, int minute, int second,
                    core::nanos& out);

/// Appends `in` with every `\xHH` decoded (the escapes of Tollgate's text lines and of nginx);
/// false when a backslash is not followed by `x` and two hex digits.
bool decode_hex_escapes(std::string_view in, std::string& out);

/// A field of `in` decoded into `out` when it has escapes, else `in` itself; false when an
/// escape is malformed.
bool unescape_field(std::string_view in, std::string& out, std::string_view& field);

/// Parses a Tollgate json line: `{"time":..., "type":"access", ...}`. See parse_line.
line_kind parse_json_line(std::string_view line, log_record& out, parse_scratch& scratch,
                          std::string_view& why);

/// Parses decimal seconds (`0.001500`, `12`, up to nine fraction digits, at most 10^9 s) into
/// nanoseconds; false for anything else.
bool parse_seconds(std::string_view text, core::nanos& out) noexcept;

/// Parses an RFC 3339 UTC time as Tollgate writes it, `2026-11-23T09:24:23.123Z` (fraction of
/// 0 to 9 digits), into nanoseconds since 1970.
bool parse_utc_time(std::string_view text, core::nanos& out) noexcept;

}  // namespace tollgate::sim
