/// Fuzz target: the entries replicas share a client's standing through (gateway/policy/
/// standing_entry.*), read back from a Redis stream that anything with access to Redis may
/// write to.
///
/// Input: the bytes of one entry. Checked: parse() reads it or refuses it with a reason, never
/// throws or reads out of bounds; an entry it reads has a known kind, printable text, a block
/// with no host bits set and levels in range, and written again by the encoder of its kind it
/// reads back to the same fields.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/policy/standing_entry.hpp"

namespace {

using namespace tollgate;
namespace entry = policy::standing_entry;

[[noreturn]] void fail(const char* what, std::string_view input) {
  std::fprintf(stderr, "fuzz_standing: %s for entry '%.*s'\n", what, static_cast<int>(input.size()),
               input.data());
  std::abort();
}

std::string encode(const entry::entry& e) {
  switch (e.kind) {
    case 'v':
      return entry::violation(e.origin, e.who, e.reason, e.rule, e.at);
    case 'b':
      return entry::ban(e.origin, bans::manual_ban{e.block, e.at, e.until, e.reason});
    case 'u':
      return entry::lift(e.origin, e.block, e.at);
    case 'p':
      return entry::points(e.origin, e.at, e.points);
    case 'k':
      return entry::clear_client(e.origin, e.who.individual, e.at);
    case 't':
      return entry::tiers(e.origin, e.at, e.tiers);
    case 'a':
      return entry::attack(e.origin, e.reason, e.level, e.until, e.at);
    default:
      return entry::reset(e.origin, e.block, e.at);
  }
}

bool same(const entry::entry& a, const entry::entry& b) {
  return a.kind == b.kind && a.origin == b.origin && a.at == b.at && a.until == b.until &&
         a.who.individual.key == b.who.individual.key &&
         a.who.individual.level == b.who.individual.level &&
         a.who.network.key == b.who.network.key && a.who.network.level == b.who.network.level &&
         a.rule.individual == b.rule.individual && a.rule.network == b.rule.network &&
         a.rule.ban_threshold == b.rule.ban_threshold &&
         a.rule.ban_duration == b.rule.ban_duration &&
         a.rule.ban_max_duration == b.rule.ban_max_duration && a.reason == b.reason &&
         a.block.family == b.block.family && a.block.prefix == b.block.prefix &&
         a.block.net == b.block.net && a.level == b.level && a.points.size() == b.points.size() &&
         std::equal(a.points.begin(), a.points.end(), b.points.begin(),
                    [](const entry::point_record& x, const entry::point_record& y) {
                      return x.who == y.who && x.points == y.points && x.name == y.name;
                    }) &&
         a.tiers.size() == b.tiers.size() &&
         std::equal(a.tiers.begin(), a.tiers.end(), b.tiers.begin(),
                    [](const entry::tier_record& x, const entry::tier_record& y) {
                      return x.who == y.who && x.until == y.until && x.tier == y.tier;
                    });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string error;
  const auto e = entry::parse(input, error);
  if (!e) {
    if (error.empty()) fail("refused without a reason", input);
    return 0;
  }
  if (std::string_view("vburpkta").find(e->kind) == std::string_view::npos) {
    fail("unknown kind", input);
  }
  if (e->kind == 'p' && (e->points.empty() || e->points.size() > entry::max_point_records)) {
    fail("a points entry of no clients or too many", input);
  }
  std::string texts = e->origin + e->reason;
  for (const auto& p : e->points)
    texts += p.name;
  for (const auto& t : e->tiers)
    texts += t.tier;
  for (const char c : texts) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) fail("control character read", input);
  }
  if (e->kind != 'v' && (e->block.net & ~e->block.mask(e->block.prefix)) != 0) {
    fail("a block with host bits", input);
  }
  const auto level_ok = [](std::uint8_t l) { return l < 4 || l == 0xfe; };
  if (!level_ok(e->who.individual.level) || e->who.network.level > 3) {
    fail("a level out of range", input);
  }
  for (const auto& p : e->points) {
    if (!level_ok(p.who.level)) fail("a ladder client's level out of range", input);
  }
  for (const auto& t : e->tiers) {
    if (!level_ok(t.who.level)) fail("a tier client's level out of range", input);
  }
  std::string again_error;
  const auto again = entry::parse(encode(*e), again_error);
  if (!again) fail("its own encoding is refused", input);
  if (!same(*e, *again)) fail("its own encoding reads back otherwise", input);
  return 0;
}
