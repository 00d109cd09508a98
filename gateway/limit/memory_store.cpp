#include "gateway/limit/memory_store.hpp"

#include <algorithm>
#include <mutex>
#include <utility>

#include "gateway/limit/quota.hpp"

namespace tollgate::limit {

namespace {

/// Where one group of a request lives, found before any lock is taken.
struct located {
  state_table* table;
  state_location at;
  std::uint32_t lock_rank;  ///< (table, shard): the global lock order
  std::uint64_t key;        ///< the key stored (a global limit's: its slice)
};

/// Whether `s` is split into slices: a global limit's GCRA tiers are; a global quota is one
/// count (slices of a count would refuse a cost that only their sum could hold).
bool is_sliced(const limit_spec& s) noexcept {
  return s.source == key_source::global && !s.is_quota();
}

/// Writes outcome `o` of limit `spec` into entry `e`. A quota's entry holds its count in the
/// short tier's place and its window's end in the long tier's: an entry is idle, so free to
/// evict or reuse, exactly when its window has ended (the count, a small number, always lies
/// "in the past").
void commit(state_entry& e, const limit_spec& spec, const limit_outcome& o) noexcept {
  if (spec.is_quota()) {
    e.tat[0] = o.used;
    e.tat[1] = o.tat;
    return;
  }
  e.tat[static_cast<int>(o.tier)] = o.tat;
}

/// Whether an enforced tier of a sliced global limit rejected `d`: another slice may still
/// have room, and then the request is either admitted there or the global limit is not what
/// binds it.
bool a_slice_rejected(const limit_request& req, const decision& d) noexcept {
  for (std::uint8_t i = 0; i < d.count; ++i) {
    const limit_outcome& o = d.limits[i];
    const limit_spec& s = *req.groups[o.group].spec;
    if (o.wait > 0 && !s.shadow && is_sliced(s)) return true;
  }
  return false;
}

}  // namespace

memory_store::memory_store(const store_capacity& c, std::uint64_t seed, std::uint32_t slices)
    : slices_(slices == 0 ? 1 : slices) {
  const std::array<std::size_t, table_count> sizes = {c.ipv4_individual, c.ipv4_network,
                                                      c.ipv6_subnet, c.ipv6_provider, c.keyed};
  for (std::size_t i = 0; i < table_count; ++i) {
    tables_[i] = std::make_unique<state_table>(sizes[i], seed + 0x9e3779b97f4a7c15ULL * (i + 1));
  }
}

gcra_params memory_store::slice_params(const gcra_params& p, std::uint32_t slice) const noexcept {
  if (slices_ == 1 || p.burst == 0) return p;
  // Rate / slices each (T * slices), the burst shared out so the slices' bursts sum to it: the
  // slices together never admit more than the whole limit would.
  const std::uint32_t burst = p.burst / slices_ + (slice < p.burst % slices_ ? 1 : 0);
  if (burst == 0) return {p.emission * slices_, 0, 0};
  const nanos t = p.emission * static_cast<nanos>(slices_);
  return {t, t * static_cast<nanos>(burst - 1), burst};
}

void memory_store::prepare(const limit_request& req) noexcept {
  const std::uint32_t slice = req.home < slices_ ? req.home : req.home % slices_;
  for (std::uint8_t g = 0; g < req.group_count; ++g) {
    const limit_group& group = req.groups[g];
    state_table& table = *tables_[group.spec->table(req.v6)];
    const std::uint64_t key = is_sliced(*group.spec) ? slice : group.key;
    table.prefetch(table.locate(key, group.spec->scope));
  }
}

decision memory_store::decide(const limit_request& req) noexcept {
  // A worker's index is below the slice count: no division on the way.
  const std::uint32_t home = req.home < slices_ ? req.home : req.home % slices_;
  const decision d = decide_once(req, home);
  if (slices_ == 1 || d.admitted || !a_slice_rejected(req, d)) return d;
  // This worker's slice of a global limit is spent: the others may have room. Each attempt is
  // atomic on its own and a rejected one commits nothing, so trying them in turn is safe. A
  // slice with room either admits the request, or leaves its rejection to the other limits,
  // which then bind: a global limit binds only when the whole of it rejects.
  for (std::uint32_t k = 1; k < slices_; ++k) {
    const decision other = decide_once(req, (home + k) % slices_);
    if (other.admitted || !a_slice_rejected(req, other)) return other;
  }
  return d;
}

decision memory_store::decide_once(const limit_request& req, std::uint32_t slice) noexcept {
  const std::uint8_t n = req.group_count;
  std::array<located, max_groups> at;
  bool sliced = false;  // a global limit is among the groups (its outcomes are told whole below)
  for (std::uint8_t g = 0; g < n; ++g) {
    const limit_group& group = req.groups[g];
    const std::uint8_t t = group.spec->table(req.v6);
    state_table& table = *tables_[t];
    const bool global = is_sliced(*group.spec);
    sliced |= global;
    const std::uint64_t key = global ? slice : group.key;
    const state_location where = table.locate(key, group.spec->scope);
    table.prefetch(where);
    at[g] = {&table, where, (std::uint32_t{t} << 24) | where.rank, key};
  }

  // Take every lock involved once, in (table, stripe) order: no two requests wait on each other
  // in a cycle, and the whole check-then-commit below is atomic for every key it touches.
  std::array<std::uint8_t, max_groups> order;
  for (std::uint8_t g = 0; g < n; ++g) {
    std::uint8_t k = g;
    for (; k > 0 && at[order[k - 1]].lock_rank > at[g].lock_rank; --k)
      order[k] = order[k - 1];
    order[k] = g;
  }
  for (std::uint8_t k = 0; k < n; ++k) {
    if (k == 0 || at[order[k]].lock_rank != at[order[k - 1]].lock_rank) {
      at[order[k]].at.lock->lock();
    }
  }

  decision d;
  bool enforced_allow = true, shadow_allow = true;
  std::array<state_entry*, max_groups> entries;
  for (std::uint8_t g = 0; g < n; ++g) {
    const limit_spec& spec = *req.groups[g].spec;
    entries[g] = at[g].table->find(at[g].at, at[g].key, spec.scope);
    bool& allow = spec.shadow ? shadow_allow : enforced_allow;
    if (spec.is_quota()) {
      const state_entry* e = entries[g];
      const quota_result r = e != nullptr ? quota_check(static_cast<std::uint64_t>(e->tat[0]),
                                                        e->tat[1], req.now, req.cost, spec.quota)
                                          : quota_check(0, 0, req.now, req.cost, spec.quota);
      d.limits[d.count++] = {r.end, r.wait, g, tier::short_term, r.used};
      allow &= r.allowed;
      continue;
    }
    const bool global = is_sliced(spec);
    const nanos delay = delay_of(req, g);
    for (std::uint8_t t = 0; t < 2; ++t) {
      if (spec.tiers[t].burst == 0) continue;
      const gcra_params p = global ? slice_params(spec.tiers[t], slice) : spec.tiers[t];
      const nanos stored = entries[g] != nullptr ? entries[g]->tat[t] : req.now;
      // A slice without burst of its own (a burst smaller than the slice count) admits nothing.
      const gcra_result r = p.burst == 0 ? gcra_result{false, req.now, p.emission}
                                         : gcra_check(stored, req.now, req.cost, p, delay);
      d.limits[d.count++] = {r.tat, r.allowed ? 0 : r.wait, g, static_cast<tier>(t), 0};
      allow &= r.allowed;
      // Held (docs/design.md §16): the request waits for its slowest enforced tier. A shadowed
      // limit never holds, as it never refuses.
      if (r.allowed && r.wait > 0 && !spec.shadow) {
        d.hold = std::max(d.hold, r.wait);
        d.held |= static_cast<std::uint16_t>(1u << g);
      }
    }
  }
  d.admitted = enforced_allow;
  d.shadow_limited = enforced_allow && !shadow_allow;
  if (!d.admitted) {  // refused as a whole: nothing is held
    d.hold = 0;
    d.held = 0;
  }

  // Rejected: nothing is written, not even an entry for a new key. Admitted past a shadowed
  // limit's rejection: that limit is left as a rejection would leave it.
  if (d.admitted) {
    auto commits = [&](std::uint8_t g) { return shadow_allow || !req.groups[g].spec->shadow; };
    // Existing entries first: inserting may move entries of the same shard, so pointers found
    // above are used before any insert happens.
    for (std::uint8_t i = 0; i < d.count; ++i) {
      const limit_outcome& o = d.limits[i];
      if (entries[o.group] != nullptr && commits(o.group)) {
        commit(*entries[o.group], *req.groups[o.group].spec, o);
      }
    }
    for (std::uint8_t g = 0; g < n; ++g) {
      if (entries[g] != nullptr || !commits(g)) continue;
      state_entry* e = at[g].table->insert(at[g].at, at[g].key, req.groups[g].spec->scope, req.now);
      for (std::uint8_t i = 0; i < d.count; ++i) {
        if (d.limits[i].group == g) commit(*e, *req.groups[g].spec, d.limits[i]);
      }
    }
  }

  for (std::uint8_t k = n; k-- > 0;) {
    if (k == 0 || at[order[k]].lock_rank != at[order[k - 1]].lock_rank) {
      at[order[k]].at.lock->unlock();
    }
  }
  if (sliced && slices_ > 1) {
    // A slice's tat, told as the whole limit's: the debt this slice carries (tat - now, in its
    // longer emission interval) is the debt of the whole limit divided by the slice count.
    for (std::uint8_t i = 0; i < d.count; ++i) {
      limit_outcome& o = d.limits[i];
      if (!is_sliced(*req.groups[o.group].spec) || o.tat <= req.now) continue;
      o.tat = req.now + (o.tat - req.now) / static_cast<nanos>(slices_);
    }
  }
  choose_binding(req, d);
  return d;
}

std::size_t memory_store::forget(const core::key_block& block,
                                 const core::level_prefixes& prefixes) noexcept {
  const std::uint8_t bits[level_count] = {prefixes.ipv4_individual, prefixes.ipv4_network,
                                          prefixes.ipv6_subnet, prefixes.ipv6_provider};
  std::size_t n = 0;
  // Tables 0..3 hold the address levels' keys of every category, and nothing else.
  for (std::size_t t = 0; t < level_count; ++t) {
    const auto l = static_cast<level>(t);
    if (core::is_v4(l) != (block.family == core::family::v4)) continue;
    n += tables_[t]->erase_if([&](std::uint64_t key) { return block.overlaps(l, key, bits[t]); });
  }
  return n;
}

std::optional<state_entry> memory_store::lookup(const limit_spec& spec, std::uint64_t key,
                                                bool v6) noexcept {
  return tables_[spec.table(v6)]->lookup(key, spec.scope);
}

}  // namespace tollgate::limit
