#include "gateway/policy/overrides.hpp"

#include <algorithm>

#include "gateway/core/siphash.hpp"

namespace tollgate::policy {

namespace {

using limit::key_source;

/// The part of `spec`'s key an override's key is matched against: its only part, or of a
/// composite key the one part that is not an address; null when it has none or several.
const limit::key_part* matched_part(const limit::limit_spec& spec) {
  const limit::key_part* found = nullptr;
  for (const limit::key_part& p : spec.parts) {
    if (p.source == key_source::individual || p.source == key_source::network) continue;
    if (found != nullptr) return nullptr;
    found = &p;
  }
  return found;
}

/// Why limit `spec` cannot take numbers-or-key override `r`, or "".
std::string unfit(const override_rule& r, const limit::limit_spec& spec) {
  if (r.by != override_rule::target::address) {
    if (spec.source == key_source::address || spec.source == key_source::global) {
      return "limit '" + spec.name + "' is keyed on " +
             (spec.source == key_source::global ? "nothing (global)" : "the address") +
             ": override it by \"address\"";
    }
    if (matched_part(spec) == nullptr) {
      return "limit '" + spec.name + "' has a composite key of several values";
    }
  }
  if (r.tier.empty()) {
    if (spec.concurrency != 0 || spec.is_quota()) {
      return "limit '" + spec.name + "' is a " +
             (spec.concurrency != 0 ? "concurrency limit" : "quota") +
             ": explicit numbers set rates (give a tier)";
    }
    if (r.short_term && spec.tiers[0].burst == 0) {
      return "limit '" + spec.name + "' has no short tier";
    }
    if (r.long_term && spec.tiers[1].burst == 0) {
      return "limit '" + spec.name + "' has no long tier";
    }
  }
  return {};
}

/// `spec` with `r`'s numbers: the same slot and state, other rates and bursts.
limit::limit_spec with_numbers(const limit::limit_spec& spec, const override_rule& r) {
  // Only the tiers the limit has (an address override's numbers meet limits of one tier).
  limit::limit_spec out = spec;
  if (r.short_term && spec.tiers[0].burst != 0) {
    out.tiers[0] = limit::make_params(r.short_term->rate, r.short_term->burst);
  }
  if (r.long_term && spec.tiers[1].burst != 0) {
    out.tiers[1] = limit::make_params(r.long_term->rate, r.long_term->burst);
  }
  return out;
}

/// Whether `spec` takes an address override's numbers: a rate limit on a key (global ones
/// and quotas and concurrency limits keep theirs).
bool takes_numbers(const limit::limit_spec& spec) {
  return spec.source != key_source::global && spec.concurrency == 0 && !spec.is_quota();
}

}  // namespace

std::string override_rule::target_text() const {
  switch (by) {
    case target::key:
      return "limit " + limit + " key " + key;
    case target::key_prefix:
      return "limit " + limit + " key_prefix " + key;
    case target::address:
      break;
  }
  return "address " + address.to_string();
}

std::string override_id(std::string_view target_text) {
  // A fixed key: every replica names the same target alike.
  const std::uint64_t h =
      core::siphash13(target_text, {0x6f76657272696465ULL, 0x746f6c6c67617465ULL});
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 0; i < 16; ++i)
    out[static_cast<std::size_t>(i)] = hex[(h >> (60 - 4 * i)) & 15];
  return out;
}

std::string check_rule(const override_rule& r, std::span<const compiled_policy* const> policies) {
  bool tier_known = r.tier.empty();
  bool limit_found = r.by == override_rule::target::address;
  for (const compiled_policy* p : policies) {
    const bool has_tier =
        !r.tier.empty() && p->tiers() != nullptr && p->tiers()->find(r.tier) != no_tier;
    if (r.by == override_rule::target::address) {
      tier_known |= has_tier;
      continue;
    }
    for (const category_limits& c : p->categories()) {
      for (const limit::limit_spec& s : c.limits) {
        if (s.name != r.limit) continue;
        limit_found = true;
        if (std::string why = unfit(r, s); !why.empty()) return why;
        if (!r.tier.empty() && !has_tier) {
          return "the policy of limit '" + r.limit + "' has no tier '" + r.tier + "'";
        }
        tier_known = true;
      }
    }
  }
  if (!limit_found) return "no category has a limit named '" + r.limit + "'";
  if (!tier_known) return "no policy has a tier named '" + r.tier + "'";
  return {};
}

override_set::override_set(const std::vector<override_rule>& rules,
                           std::span<const compiled_policy* const> policies) {
  std::size_t categories = 0;
  for (const compiled_policy* p : policies) {
    for (const category_limits& c : p->categories())
      categories = std::max<std::size_t>(categories, c.index + 1u);
  }
  by_category_.resize(categories);
  for (const compiled_policy* p : policies) {
    for (const category_limits& c : p->categories()) {
      category_rules& cr = by_category_[c.index];
      for (const override_rule& r : rules) {
        const std::uint8_t tier =
            r.tier.empty() || p->tiers() == nullptr ? no_tier : p->tiers()->find(r.tier);
        if (!r.tier.empty() && tier == no_tier) continue;  // not a tier of this policy
        entry e;
        e.expires = r.expires;
        e.tier = tier;
        if (r.by == override_rule::target::address) {
          if (r.tier.empty()) {
            e.specs = c.limits;
            for (limit::limit_spec& s : e.specs) {
              if (!takes_numbers(s)) continue;
              s = with_numbers(s, r);
              e.replaced |= 1u << s.slot;
            }
            if (e.replaced == 0) continue;
          }
          cr.addresses.emplace_back(r.address, static_cast<std::uint32_t>(cr.entries.size()));
          cr.entries.push_back(std::move(e));
          continue;
        }
        for (const limit::limit_spec& s : c.limits) {
          if (s.name != r.limit || !unfit(r, s).empty()) continue;
          if (r.tier.empty()) {
            e.specs.resize(c.limits.size());
            e.specs[s.slot] = with_numbers(s, r);
            e.replaced = 1u << s.slot;
          }
          auto at = std::find_if(cr.slots.begin(), cr.slots.end(),
                                 [&](const slot_rules& sr) { return sr.slot == s.slot; });
          if (at == cr.slots.end()) {
            at = cr.slots.insert(cr.slots.end(), slot_rules{});
            at->slot = s.slot;
          }
          const auto index = static_cast<std::uint32_t>(cr.entries.size());
          if (r.by == override_rule::target::key) {
            at->exact.emplace(r.key, index);
          } else {
            at->prefixes.emplace_back(r.key, index);
          }
          cr.entries.push_back(std::move(e));
          break;
        }
      }
      std::stable_sort(cr.addresses.begin(), cr.addresses.end(), [](const auto& a, const auto& b) {
        return a.first.prefix() > b.first.prefix();
      });
      for (slot_rules& sr : cr.slots) {
        std::stable_sort(sr.prefixes.begin(), sr.prefixes.end(), [](const auto& a, const auto& b) {
          return a.first.size() > b.first.size();
        });
      }
      std::sort(cr.slots.begin(), cr.slots.end(),
                [](const slot_rules& a, const slot_rules& b) { return a.slot < b.slot; });
      empty_ &= cr.entries.empty();
    }
  }
}

bool override_set::find(const compiled_policy& p, const category_limits& c,
                        const core::address& client, const key_sources& keys, core::nanos now,
                        override_match& out) const {
  (void)p;
  if (c.index >= by_category_.size()) return false;
  const category_rules& cr = by_category_[c.index];
  if (cr.entries.empty()) return false;
  bool found = false;
  auto apply = [&](const entry& e) {
    if (e.expires != 0 && now >= e.expires) return;
    found = true;
    if (out.tier == no_tier) out.tier = e.tier;
    for (std::uint32_t m = e.replaced; m != 0; m &= m - 1) {
      const auto slot = static_cast<std::size_t>(__builtin_ctz(m));
      if (out.specs[slot] == nullptr) {
        out.specs[slot] = &e.specs[slot];
        out.any_spec = true;
      }
    }
  };
  std::string query;
  for (const slot_rules& sr : cr.slots) {
    const limit::key_part* part = matched_part(c.limits[sr.slot]);
    const std::string_view value = part != nullptr ? value_of(*part, keys, query) : "";
    if (value.empty()) continue;
    if (const auto it = sr.exact.find(value); it != sr.exact.end()) {
      const entry& e = cr.entries[it->second];
      if (e.expires == 0 || now < e.expires) {
        apply(e);
        continue;
      }
    }
    for (const auto& [prefix, index] : sr.prefixes) {
      const entry& e = cr.entries[index];
      if (value.starts_with(prefix) && (e.expires == 0 || now < e.expires)) {
        apply(e);
        break;
      }
    }
  }
  for (const auto& [net, index] : cr.addresses) {
    const entry& e = cr.entries[index];
    if (net.contains(client) && (e.expires == 0 || now < e.expires)) {
      apply(e);
      break;
    }
  }
  return found;
}

override_book::placed override_book::put(override_rule r) {
  std::lock_guard lock(mu_);
  const auto at = std::find_if(rules_.begin(), rules_.end(),
                               [&](const override_rule& x) { return x.id == r.id; });
  placed how = placed::replaced;
  if (at != rules_.end()) {
    *at = std::move(r);
  } else {
    // Expired ones make room first.
    std::erase_if(rules_, [&](const override_rule& x) { return !x.live(r.created); });
    if (rules_.size() >= capacity) return placed::full;
    rules_.push_back(std::move(r));
    std::sort(rules_.begin(), rules_.end(),
              [](const override_rule& a, const override_rule& b) { return a.id < b.id; });
    how = placed::added;
  }
  recompile();
  return how;
}

bool override_book::remove(std::string_view id) {
  std::lock_guard lock(mu_);
  const auto at = std::find_if(rules_.begin(), rules_.end(),
                               [&](const override_rule& x) { return x.id == id; });
  if (at == rules_.end()) return false;
  rules_.erase(at);
  recompile();
  return true;
}

bool override_book::replace_all(std::vector<override_rule> rules) {
  std::sort(rules.begin(), rules.end(),
            [](const override_rule& a, const override_rule& b) { return a.id < b.id; });
  if (rules.size() > capacity) rules.resize(capacity);
  std::lock_guard lock(mu_);
  if (rules == rules_) return false;
  rules_ = std::move(rules);
  recompile();
  return true;
}

std::vector<override_rule> override_book::list(core::nanos now) const {
  std::lock_guard lock(mu_);
  std::vector<override_rule> out;
  for (const override_rule& r : rules_) {
    if (r.live(now)) out.push_back(r);
  }
  return out;
}

std::optional<override_rule> override_book::get(std::string_view id) const {
  std::lock_guard lock(mu_);
  for (const override_rule& r : rules_) {
    if (r.id == id) return r;
  }
  return std::nullopt;
}

void override_book::attach(std::uint64_t generation, std::vector<const compiled_policy*> policies,
                           std::weak_ptr<const void> owner) {
  std::lock_guard lock(mu_);
  attached_.push_back({generation, std::move(policies), std::move(owner), nullptr});
  recompile();
}

std::shared_ptr<const override_set> override_book::compiled(std::uint64_t generation) const {
  std::lock_guard lock(mu_);
  for (const attached& a : attached_) {
    if (a.generation == generation) return a.set;
  }
  return nullptr;
}

void override_book::recompile() {
  std::erase_if(attached_, [](const attached& a) { return a.owner.expired(); });
  for (attached& a : attached_) {
    auto set = std::make_shared<const override_set>(rules_, a.policies);
    a.set = set->empty() ? nullptr : std::move(set);
  }
  version_.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace tollgate::policy
