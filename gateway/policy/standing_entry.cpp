#include "gateway/policy/standing_entry.hpp"

#include <limits>

#include "gateway/core/units.hpp"

namespace tollgate::policy::standing_entry {

namespace {

constexpr std::string_view version = "1";
/// Longest origin, reason or note read (longer entries are malformed).
constexpr std::size_t max_text = 512;

void number(std::string& out, std::uint64_t v) {
  out += ' ';
  out += std::to_string(v);
}

void signed_number(std::string& out, std::int64_t v) {
  out += ' ';
  out += std::to_string(v);
}

void block_text(std::string& out, const core::key_block& b) {
  out += ' ';
  out += b.family == core::family::v4 ? '4' : '6';
  out += '/';
  out += std::to_string(b.prefix);
  out += '/';
  out += std::to_string(b.net);
}

/// An entry's first fields: version, kind, origin and its time.
std::string head(char kind, std::string_view origin, core::nanos at) {
  std::string out(version);
  out += ' ';
  out += kind;
  out += ' ';
  out += origin;
  signed_number(out, at);
  return out;
}

/// Reads the fields of one entry, left to right.
class fields {
 public:
  explicit fields(std::string_view text) : rest_(text) {}
  /// The next field (up to a space); empty when there is none.
  std::string_view next() {
    const auto space = rest_.find(' ');
    const std::string_view f = rest_.substr(0, space);
    rest_ = space == std::string_view::npos ? std::string_view() : rest_.substr(space + 1);
    return f;
  }
  /// Whatever is left (the note of a ban may hold spaces).
  std::string_view rest() const { return rest_; }
  bool done() const { return rest_.empty(); }

  bool unsigned_field(std::uint64_t& out, std::uint64_t max) {
    const auto v = core::parse_uint(next(), max);
    if (v) out = *v;
    return v.has_value();
  }
  /// A time in nanoseconds: never negative in an entry.
  bool time(core::nanos& out) {
    std::uint64_t v = 0;
    if (!unsigned_field(v, static_cast<std::uint64_t>(std::numeric_limits<core::nanos>::max()))) {
      return false;
    }
    out = static_cast<core::nanos>(v);
    return true;
  }
  bool flag(bool& out) {
    const std::string_view f = next();
    if (f != "0" && f != "1") return false;
    out = f == "1";
    return true;
  }
  bool subject(pow::subject& out) {
    std::uint64_t l = 0;
    if (!unsigned_field(l, core::level_count - 1)) return false;
    out.level = static_cast<std::uint8_t>(l);
    return unsigned_field(out.key, std::numeric_limits<std::uint64_t>::max());
  }
  bool block(core::key_block& out) {
    const std::string_view f = next();
    if (f.size() < 5 || (f[0] != '4' && f[0] != '6') || f[1] != '/') return false;
    out.family = f[0] == '4' ? core::family::v4 : core::family::v6;
    const std::string_view tail = f.substr(2);
    const auto slash = tail.find('/');
    if (slash == std::string_view::npos) return false;
    const unsigned width = out.family == core::family::v4 ? 32 : 64;
    const auto prefix = core::parse_uint(tail.substr(0, slash), width);
    const auto net =
        core::parse_uint(tail.substr(slash + 1), std::numeric_limits<std::uint64_t>::max());
    if (!prefix || !net) return false;
    out.prefix = static_cast<std::uint8_t>(*prefix);
    out.net = *net;
    // A block's host bits are clear: anything else was not written by a replica.
    return (out.net & ~out.mask(out.prefix)) == 0;
  }

 private:
  std::string_view rest_;
};

bool printable(std::string_view s) {
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

}  // namespace

std::string violation(std::string_view origin, const policy::client_subjects& who,
                      std::string_view reason, const pow::reason_rule& rule, core::nanos now) {
  std::string out = head('v', origin, now);
  number(out, who.individual.level);
  number(out, who.individual.key);
  number(out, who.network.level);
  number(out, who.network.key);
  number(out, rule.individual ? 1 : 0);
  number(out, rule.network ? 1 : 0);
  number(out, rule.ban_threshold);
  signed_number(out, rule.ban_duration);
  signed_number(out, rule.ban_max_duration);
  out += ' ';
  out += reason;
  return out;
}

std::string ban(std::string_view origin, const bans::manual_ban& b) {
  std::string out = head('b', origin, b.since);
  signed_number(out, b.until);
  block_text(out, b.block);
  out += ' ';
  out += b.reason;
  return out;
}

std::string lift(std::string_view origin, const core::key_block& block, core::nanos now) {
  std::string out = head('u', origin, now);
  block_text(out, block);
  return out;
}

std::string reset(std::string_view origin, const core::key_block& block, core::nanos now) {
  std::string out = head('r', origin, now);
  block_text(out, block);
  return out;
}

std::string points(std::string_view origin, core::nanos now,
                   const std::vector<point_record>& records) {
  std::string out = head('p', origin, now);
  for (const auto& r : records) {
    out += '\n';
    out += std::to_string(r.who.level);
    number(out, r.who.key);
    number(out, r.points);
    out += ' ';
    // A name is for the log: anything unprintable (an identity may hold it) becomes '?'.
    for (const char c : r.name.substr(0, max_text))
      out += static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c;
  }
  return out;
}

std::string tiers(std::string_view origin, core::nanos now,
                  const std::vector<tier_record>& records) {
  std::string out = head('t', origin, now);
  for (const auto& r : records) {
    out += '\n';
    out += std::to_string(r.who.level);
    number(out, r.who.key);
    signed_number(out, r.until);
    out += ' ';
    out += r.tier;
  }
  return out;
}

std::string attack(std::string_view origin, std::string_view category, std::uint8_t level,
                   core::nanos until, core::nanos now) {
  std::string out = head('a', origin, now);
  number(out, level);
  signed_number(out, until);
  out += ' ';
  out += category;
  return out;
}

std::string clear_client(std::string_view origin, const pow::subject& who, core::nanos now) {
  std::string out = head('k', origin, now);
  number(out, who.level);
  number(out, who.key);
  return out;
}

namespace {

/// A ladder's client: an address level, or an identity (0xfe).
bool ladder_subject(fields& f, pow::subject& out) {
  std::uint64_t level = 0;
  if (!f.unsigned_field(level, 0xfe) || (level >= core::level_count && level != 0xfe)) return false;
  out.level = static_cast<std::uint8_t>(level);
  return f.unsigned_field(out.key, std::numeric_limits<std::uint64_t>::max());
}

/// Reads each line of `lines` into a record of `out` with `read(fields, record)`: at least one
/// line, at most max_point_records, every one read.
template <class Record, class Read>
bool each_line(std::string_view lines, std::vector<Record>& out, Read&& read) {
  while (!lines.empty()) {
    const auto nl = lines.find('\n');
    fields f(lines.substr(0, nl));
    lines = nl == std::string_view::npos ? std::string_view() : lines.substr(nl + 1);
    if (out.size() == max_point_records) return false;
    Record r;
    if (!read(f, r)) return false;
    out.push_back(std::move(r));
  }
  return !out.empty();
}

/// The lines after a points entry's first.
bool point_lines(std::string_view lines, std::vector<point_record>& out) {
  return each_line(lines, out, [](fields& f, point_record& r) {
    std::uint64_t points = 0;
    if (!ladder_subject(f, r.who) || !f.unsigned_field(points, 1'000'000)) return false;
    r.points = static_cast<std::uint32_t>(points);
    const std::string_view name = f.rest();
    if (name.size() > max_text || !printable(name)) return false;
    r.name = std::string(name);
    return true;
  });
}

/// The lines after a tiers entry's first.
bool tier_lines(std::string_view lines, std::vector<tier_record>& out) {
  return each_line(lines, out, [](fields& f, tier_record& r) {
    if (!ladder_subject(f, r.who) || !f.time(r.until)) return false;
    const std::string_view tier = f.rest();
    if (tier.empty() || tier.size() > 256 || !printable(tier) ||
        tier.find(' ') != std::string_view::npos) {
      return false;
    }
    r.tier = std::string(tier);
    return true;
  });
}

}  // namespace

std::optional<entry> parse(std::string_view text, std::string& error) {
  std::string_view lines;
  if (const auto nl = text.find('\n'); nl != std::string_view::npos) {
    lines = text.substr(nl + 1);
    text = text.substr(0, nl);
    if (lines.empty()) {
      error = "an entry with an empty line";
      return std::nullopt;
    }
  }
  fields f(text);
  if (f.next() != version) {
    error = "not an entry of version " + std::string(version);
    return std::nullopt;
  }
  entry e;
  const std::string_view kind = f.next();
  const std::string_view origin = f.next();
  if (kind.size() != 1 || origin.empty() || origin.size() > max_text || !printable(origin)) {
    error = "malformed kind or origin";
    return std::nullopt;
  }
  e.kind = kind[0];
  e.origin = std::string(origin);
  bool ok = f.time(e.at);
  switch (e.kind) {
    case 'v': {
      std::uint64_t threshold = 0;
      ok = ok && f.subject(e.who.individual) && f.subject(e.who.network) &&
           f.flag(e.rule.individual) && f.flag(e.rule.network) &&
           f.unsigned_field(threshold, std::numeric_limits<unsigned>::max()) &&
           f.time(e.rule.ban_duration) && f.time(e.rule.ban_max_duration);
      e.rule.ban_threshold = static_cast<unsigned>(threshold);
      const std::string_view reason = f.rest();
      ok = ok && !reason.empty() && reason.size() <= max_text && printable(reason) &&
           reason.find(' ') == std::string_view::npos;
      if (ok) e.reason = std::string(reason);
      break;
    }
    case 'b': {
      ok = ok && f.time(e.until) && f.block(e.block);
      const std::string_view note = f.rest();
      ok = ok && note.size() <= max_text && printable(note);
      if (ok) e.reason = std::string(note);
      break;
    }
    case 'u':
    case 'r':
      ok = ok && f.block(e.block) && f.done();
      break;
    case 'p':
      ok = ok && f.done() && point_lines(lines, e.points);
      break;
    case 'k':
      ok = ok && ladder_subject(f, e.who.individual) && f.done();
      break;
    case 't':
      ok = ok && f.done() && tier_lines(lines, e.tiers);
      break;
    case 'a': {
      std::uint64_t level = 0;
      ok = ok && f.unsigned_field(level, released) && (level < 4 || level == released) &&
           f.time(e.until);
      e.level = static_cast<std::uint8_t>(level);
      const std::string_view category = f.rest();
      ok = ok && !category.empty() && category.size() <= max_text && printable(category) &&
           category.find(' ') == std::string_view::npos;
      if (ok) e.reason = std::string(category);
      break;
    }
    default:
      ok = false;
  }
  if (e.kind != 'p' && e.kind != 't' && !lines.empty()) ok = false;
  if (!ok) {
    error = "malformed entry of kind '" + std::string(kind) + "'";
    return std::nullopt;
  }
  return e;
}

}  // namespace tollgate::policy::standing_entry
