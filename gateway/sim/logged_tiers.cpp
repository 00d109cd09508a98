#include "gateway/sim/logged_tiers.hpp"

#include <utility>
#include <vector>

namespace tollgate::sim {

namespace {

/// Whether a log line holds what `s` reads: the address, or a query parameter of the target.
bool replayable(const config::tier_source_config& s) noexcept {
  using kind = config::tier_source_config::kind;
  return s.source == kind::network ||
         (s.source == kind::key_file && s.key.source == core::key_source::query);
}

/// The source that reads the logged tier: a key file keyed on logged_tier_field holding each
/// of `t`'s names as its own tier. A name it does not hold names no tier (unknown: default).
config::tier_source_config logged_source(const config::tiers_config& t, int line) {
  config::tier_source_config s;
  s.source = config::tier_source_config::kind::key_file;
  s.key = {core::key_source::header, std::string(logged_tier_field)};
  s.file = "the access log";
  for (const auto& [name, multiplier] : t.multipliers)
    s.keys.emplace_back(name, name);
  s.line = line;
  return s;
}

}  // namespace

config::policy_config with_logged_tiers(config::policy_config p) {
  if (!p.tiers) return p;
  config::tiers_config& t = *p.tiers;
  std::vector<config::tier_source_config> from;
  bool logged = false;
  for (auto& s : t.from) {
    if (replayable(s)) {
      from.push_back(std::move(s));
    } else if (!logged) {
      // One is enough: the next would read the same logged tier.
      from.push_back(logged_source(t, s.line));
      logged = true;
    }
  }
  t.from = std::move(from);
  return p;
}

}  // namespace tollgate::sim
