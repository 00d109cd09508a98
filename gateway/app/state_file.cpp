#include "gateway/app/state_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>
#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gateway/app/override_json.hpp"
#include "gateway/core/siphash.hpp"
#include "gateway/core/state_codec.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/policy/attack.hpp"

namespace tollgate::app {

namespace {

constexpr std::string_view magic{"TOLLGATE STATE\n\0", 16};
constexpr std::uint32_t version = 1;
constexpr core::siphash_key checksum_key{0x746f6c6c67617465ULL, 0x2d73746174652d31ULL};
/// magic, version, written at, payload bytes; then the checksum after the payload.
constexpr std::size_t header_bytes = 16 + 4 + 8 + 8;
/// The largest file read (1 GiB): far past what the bounded tables can write.
constexpr std::size_t max_file = std::size_t{1} << 30;

enum section : std::uint8_t {
  violations = 1,
  penalties = 2,
  proofs = 3,
  manual_bans = 4,
  tiers = 5,
  overrides = 6,
  identity = 7,
  quotas = 8,
  attack = 9,
};

constexpr const char* section_name(std::uint8_t tag) {
  switch (tag) {
    case violations:
      return "violation counters and bans";
    case penalties:
      return "penalty ladder";
    case proofs:
      return "spent proofs";
    case manual_bans:
      return "manual bans";
    case tiers:
      return "tiers set by upstreams";
    case overrides:
      return "overrides";
    case identity:
      return "identity key";
    case quotas:
      return "quotas";
    case attack:
      return "forced attack levels";
    default:
      return "unknown";
  }
}

template <class F>
void add_section(core::state_writer& w, std::uint8_t tag, F&& write) {
  std::string body;
  core::state_writer b(body);
  write(b);
  w.u8(tag);
  w.u64(body.size());
  w.out() += body;
}

void save_manual_bans(core::state_writer& w, const policy::pow_state& pow, core::nanos now) {
  const auto list = pow.manual_bans().list(now);
  w.u32(static_cast<std::uint32_t>(list.size()));
  for (const auto& b : list) {
    w.u8(b.block.family == core::family::v4 ? 4 : 6);
    w.u8(b.block.prefix);
    w.u64(b.block.net);
    w.i64(b.since);
    w.i64(b.until);
    w.text(b.reason);
  }
}

bool load_manual_bans(core::state_reader& r, policy::pow_state& pow, core::nanos now) {
  for (std::uint32_t i = 0, n = r.count(1 + 1 + 8 + 8 + 8 + 4); i < n && r.ok(); ++i) {
    bans::manual_ban b;
    const std::uint8_t family = r.u8();
    b.block.prefix = r.u8();
    b.block.net = r.u64();
    b.since = r.i64();
    b.until = r.i64();
    b.reason = std::string(r.text(256));
    if (family != 4 && family != 6) r.fail();
    b.block.family = family == 4 ? core::family::v4 : core::family::v6;
    if (b.block.prefix > (family == 4 ? 32 : 64) ||
        (b.block.net & ~b.block.mask(b.block.prefix)) != 0) {
      r.fail();
    }
    if (!r.ok()) break;
    if (b.until > now) pow.manual_bans().place(b, now);
  }
  return r.ok();
}

void save_overrides(core::state_writer& w, const policy::override_book& book, core::nanos now) {
  const auto list = book.list(now);
  w.u32(static_cast<std::uint32_t>(list.size()));
  for (const auto& rule : list)
    w.text(boost::json::serialize(override_json(rule)));
}

bool load_overrides(core::state_reader& r, policy::override_book& book, core::nanos now) {
  for (std::uint32_t i = 0, n = r.count(4); i < n && r.ok(); ++i) {
    const std::string_view text = r.text(64 * 1024);
    if (!r.ok()) break;
    std::string error;
    auto rule = override_from_json(text, now, true, error);
    if (!rule) {
      spdlog::warn("state: an override is unreadable ({}); skipped", error);
      continue;
    }
    if (rule->live(now)) book.put(std::move(*rule));
  }
  return r.ok();
}

bool quota_kept(const state_parts& parts, std::uint8_t table, std::uint32_t scope) {
  return std::find(parts.quotas.begin(), parts.quotas.end(), quota_place{table, scope}) !=
         parts.quotas.end();
}

/// Every count of a quota of the configuration whose window has not ended.
void save_quotas(core::state_writer& w, const state_parts& parts, core::nanos now) {
  core::write_counted(
      w,
      [&](auto&& visit) {
        if (parts.limits == nullptr) return;
        for (std::uint8_t t = 0; t < limit::table_count; ++t) {
          const bool any = std::any_of(parts.quotas.begin(), parts.quotas.end(),
                                       [t](const quota_place& q) { return q.table == t; });
          if (!any) continue;
          parts.limits->table(t).for_each([&](const limit::state_entry& e) {
            if (e.tat[1] > now && quota_kept(parts, t, e.scope)) visit(t, e);
          });
        }
      },
      [](core::state_writer& b, std::uint8_t t, const limit::state_entry& e) {
        b.u8(t);
        b.u32(e.scope);
        b.u64(e.key);
        b.i64(e.tat[0]);
        b.i64(e.tat[1]);
      });
}

/// Counts of quotas the configuration still has (same state name), in windows not ended.
bool load_quotas(core::state_reader& r, state_parts& parts, core::nanos now) {
  for (std::uint32_t i = 0, n = r.count(1 + 4 + 8 + 8 + 8); i < n && r.ok(); ++i) {
    const std::uint8_t t = r.u8();
    const std::uint32_t scope = r.u32();
    const std::uint64_t key = r.u64();
    const core::nanos tat[2] = {r.i64(), r.i64()};
    if (t >= limit::table_count || scope == 0 || tat[0] < 0) r.fail();
    if (!r.ok()) break;
    if (parts.limits != nullptr && tat[1] > now && quota_kept(parts, t, scope))
      parts.limits->table(t).restore(key, scope, tat, now);
  }
  return r.ok();
}

void save_attack(core::state_writer& w, const state_parts& parts) {
  w.u32(static_cast<std::uint32_t>(parts.forced.size()));
  for (const forced_attack& f : parts.forced) {
    w.text(f.category);
    w.u8(f.level);
    w.i64(f.until);
  }
}

bool load_attack(core::state_reader& r, state_parts& parts, core::nanos now) {
  for (std::uint32_t i = 0, n = r.count(4 + 1 + 8); i < n && r.ok(); ++i) {
    forced_attack f;
    f.category = std::string(r.text(1024));
    f.level = r.u8();
    f.until = r.i64();
    if (f.level == 0 || f.level >= policy::attack_levels || f.until < 0) r.fail();
    if (!r.ok()) break;
    if (f.until == 0 || f.until > now) parts.forced.push_back(std::move(f));
  }
  return r.ok();
}

/// The payload of `bytes` when its header, length and checksum are right; else "" and `error`.
std::string_view verified_payload(std::string_view bytes, state_read& out) {
  if (bytes.size() < header_bytes + 8 || bytes.substr(0, magic.size()) != magic) {
    out.error = "not a Tollgate state file";
    return {};
  }
  core::state_reader head(bytes.substr(magic.size(), header_bytes - magic.size()));
  const std::uint32_t v = head.u32();
  out.written = head.i64();
  const std::uint64_t length = head.u64();
  if (v != version) {
    out.error =
        "format version " + std::to_string(v) + ", this build reads " + std::to_string(version);
    return {};
  }
  if (length != bytes.size() - header_bytes - 8) {
    out.error = "truncated or padded: " + std::to_string(bytes.size()) +
                " bytes for a payload of " + std::to_string(length);
    return {};
  }
  core::state_reader tail(bytes.substr(header_bytes + length));
  if (tail.u64() != core::siphash13(bytes.substr(0, header_bytes + length), checksum_key)) {
    out.error = "checksum mismatch (a damaged file)";
    return {};
  }
  return bytes.substr(header_bytes, length);
}

std::string errno_text(int e) {
  return std::strerror(e);
}

}  // namespace

std::string encode_state(state_parts& parts, core::nanos now) {
  std::string payload;
  core::state_writer w(payload);
  add_section(w, violations, [&](core::state_writer& b) { parts.pow.save_violations(b); });
  add_section(w, penalties, [&](core::state_writer& b) { parts.pow.penalties().save(b); });
  add_section(w, proofs, [&](core::state_writer& b) { parts.pow.replays().save(b); });
  add_section(w, manual_bans, [&](core::state_writer& b) { save_manual_bans(b, parts.pow, now); });
  add_section(w, tiers, [&](core::state_writer& b) { parts.tiers.save(b); });
  add_section(w, overrides,
              [&](core::state_writer& b) { save_overrides(b, parts.overrides, now); });
  add_section(w, identity, [&](core::state_writer& b) {
    b.u64(parts.identity_key.k0);
    b.u64(parts.identity_key.k1);
  });
  add_section(w, quotas, [&](core::state_writer& b) { save_quotas(b, parts, now); });
  add_section(w, attack, [&](core::state_writer& b) { save_attack(b, parts); });
  std::string out;
  core::state_writer f(out);
  out += magic;
  f.u32(version);
  f.i64(now);
  f.u64(payload.size());
  out += payload;
  f.u64(core::siphash13(out, checksum_key));
  return out;
}

state_read decode_state(std::string_view bytes, state_parts& parts, core::nanos now) {
  state_read out;
  const std::string_view payload = verified_payload(bytes, out);
  if (!out.error.empty()) return out;
  const std::int64_t now_s = now / core::ns_per_s;
  core::state_reader r(payload);
  while (!r.done()) {
    const std::uint8_t tag = r.u8();
    const std::uint64_t size = r.u64();
    const std::string_view body = r.bytes(size);
    if (!r.ok()) {
      out.error = "a section's length runs past the payload";
      return out;
    }
    core::state_reader s(body);
    bool read = true;
    switch (tag) {
      case violations:
        read = parts.pow.load_violations(s);
        break;
      case penalties:
        read = parts.pow.penalties().load(s);
        break;
      case proofs:
        read = parts.pow.replays().load(s, now_s);
        break;
      case manual_bans:
        read = load_manual_bans(s, parts.pow, now);
        break;
      case tiers:
        read = parts.tiers.load(s, now);
        break;
      case overrides:
        read = load_overrides(s, parts.overrides, now);
        break;
      case identity:
        s.u64();  // read before the configuration was compiled (state_identity_key)
        s.u64();
        read = s.ok();
        break;
      case quotas:
        read = load_quotas(s, parts, now);
        break;
      case attack:
        read = load_attack(s, parts, now);
        break;
      default:
        continue;  // a later version's: skipped
    }
    if (!read || !s.done()) {
      out.error = std::string("section ") + section_name(tag) +
                  " is malformed (entries before the fault kept)";
      return out;
    }
    ++out.sections;
  }
  return out;
}

std::optional<core::siphash_key> state_identity_key(std::string_view bytes) {
  state_read out;
  core::state_reader r(verified_payload(bytes, out));
  if (!out.error.empty()) return std::nullopt;
  while (!r.done()) {
    const std::uint8_t tag = r.u8();
    core::state_reader s(r.bytes(r.u64()));
    if (!r.ok()) return std::nullopt;
    if (tag != identity) continue;
    const core::siphash_key k{s.u64(), s.u64()};
    if (!s.ok() || !s.done()) return std::nullopt;
    return k;
  }
  return std::nullopt;
}

std::string save_state_file(const std::string& path, state_parts& parts, core::nanos now,
                            std::size_t& bytes) {
  const std::string data = encode_state(parts, now);
  bytes = data.size();
  const std::filesystem::path target(path);
  const std::filesystem::path folder =
      target.has_parent_path() ? target.parent_path() : std::filesystem::path(".");
  const std::string temp = path + ".tmp";
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return "cannot create " + temp + ": " + errno_text(errno);
  std::size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = errno_text(errno);
      ::close(fd);
      ::unlink(temp.c_str());
      return "cannot write " + temp + ": " + why;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = errno_text(errno);
    ::unlink(temp.c_str());
    return "cannot sync " + temp + ": " + why;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string why = errno_text(errno);
    ::unlink(temp.c_str());
    return "cannot rename " + temp + " to " + path + ": " + why;
  }
  // The rename itself reaches the disk with the folder's entry.
  if (const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return {};
}

std::optional<std::string> read_state_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) && !ec) {
    spdlog::info("state: {} does not exist yet: starting with no state", path);
    return std::nullopt;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in || std::filesystem::is_directory(path, ec)) {
    spdlog::warn("state: {} cannot be read: starting with no state", path);
    return std::nullopt;
  }
  std::string bytes;
  char chunk[65536];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    bytes.append(chunk, static_cast<std::size_t>(in.gcount()));
    if (bytes.size() > max_file) {
      spdlog::warn("state: {} is larger than 1 GiB: ignored, starting with no state", path);
      return std::nullopt;
    }
  }
  return bytes;
}

void load_state(const std::string& path, std::string_view bytes, state_parts& parts,
                core::nanos now) {
  const auto started = std::chrono::steady_clock::now();
  const state_read r = decode_state(bytes, parts, now);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  if (!r.error.empty()) {
    spdlog::warn("state: {} ignored: {}; starting with {}", path, r.error,
                 r.sections == 0 ? "no state" : "what was read before");
    return;
  }
  spdlog::info(
      "state: read {} ({} bytes, written {} s ago) in {:.1f} ms: {} violation entries, {} bans, "
      "{} manual bans, {} spent proofs, {} clients on the ladder, {} tiers, {} overrides, {} "
      "forced attack levels",
      path, bytes.size(), std::max<core::nanos>(0, now - r.written) / core::ns_per_s, ms,
      parts.pow.violations().individual_entries() + parts.pow.violations().network_entries(),
      parts.pow.violations().bans(now).size(), parts.pow.manual_bans().list(now).size(),
      parts.pow.replays().size(), parts.pow.penalties().size(), parts.tiers.size(),
      parts.overrides.list(now).size(), parts.forced.size());
}

}  // namespace tollgate::app
