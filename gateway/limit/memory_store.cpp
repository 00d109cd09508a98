#include "gateway/limit/memory_store.hpp"

#include <mutex>
#include <utility>

namespace tollgate::limit {

namespace {

/// Where one group of a request lives, found before any lock is taken.
struct located {
  state_table* table;
  state_location at;
  std::uint32_t lock_rank;  ///< (table, shard): the global lock order
};

}  // namespace

memory_store::memory_store(const store_capacity& c, std::uint64_t seed) {
  const std::array<std::size_t, table_count> sizes = {c.ipv4_individual, c.ipv4_network,
                                                      c.ipv6_subnet, c.ipv6_provider, c.keyed};
  for (std::size_t i = 0; i < table_count; ++i) {
    tables_[i] = std::make_unique<state_table>(sizes[i], seed + 0x9e3779b97f4a7c15ULL * (i + 1));
  }
}

bool memory_store::decide(const limit_request& req, decision& out, completion) {
  out = decide_now(req);
  return true;
}

void memory_store::prepare(const limit_request& req) noexcept {
  for (std::uint8_t g = 0; g < req.group_count; ++g) {
    const limit_group& group = req.groups[g];
    state_table& table = *tables_[table_index(group.lvl)];
    table.prefetch(table.locate(group.key, group.params->scope));
  }
}

decision memory_store::decide_now(const limit_request& req) noexcept {
  const std::uint8_t n = req.group_count;
  std::array<located, max_groups> at;
  for (std::uint8_t g = 0; g < n; ++g) {
    const limit_group& group = req.groups[g];
    const std::uint8_t t = table_index(group.lvl);
    state_table& table = *tables_[t];
    const state_location where = table.locate(group.key, group.params->scope);
    table.prefetch(where);
    at[g] = {&table, where, (std::uint32_t{t} << 24) | where.rank};
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
  d.admitted = true;
  std::array<state_entry*, max_groups> entries;
  for (std::uint8_t g = 0; g < n; ++g) {
    const limit_group& group = req.groups[g];
    entries[g] = at[g].table->find(at[g].at, group.key, group.params->scope);
    for (std::uint8_t t = 0; t < 2; ++t) {
      const gcra_params& p = group.params->tiers[t];
      if (p.burst == 0) continue;
      const nanos stored = entries[g] != nullptr ? entries[g]->tat[t] : req.now;
      const gcra_result r = gcra_check(stored, req.now, req.cost, p);
      d.limits[d.count++] = {r.tat, r.wait, g, static_cast<tier>(t)};
      d.admitted &= r.allowed;
    }
  }

  // Rejected: nothing is written, not even an entry for a new key.
  if (d.admitted) {
    // Existing entries first: inserting may move entries of the same shard, so pointers found
    // above are used before any insert happens.
    for (std::uint8_t i = 0; i < d.count; ++i) {
      const limit_outcome& o = d.limits[i];
      if (entries[o.group] != nullptr) entries[o.group]->tat[static_cast<int>(o.tier)] = o.tat;
    }
    for (std::uint8_t g = 0; g < n; ++g) {
      if (entries[g] != nullptr) continue;
      const limit_group& group = req.groups[g];
      state_entry* e = at[g].table->insert(at[g].at, group.key, group.params->scope, req.now);
      for (std::uint8_t i = 0; i < d.count; ++i) {
        if (d.limits[i].group == g) e->tat[static_cast<int>(d.limits[i].tier)] = d.limits[i].tat;
      }
    }
  }

  for (std::uint8_t k = n; k-- > 0;) {
    if (k == 0 || at[order[k]].lock_rank != at[order[k - 1]].lock_rank) {
      at[order[k]].at.lock->unlock();
    }
  }
  choose_binding(req, d);
  return d;
}

std::optional<state_entry> memory_store::lookup(level l, std::uint64_t key,
                                                std::uint32_t scope) noexcept {
  return tables_[table_index(l)]->lookup(key, scope);
}

state_table& memory_store::table_for(level l) noexcept {
  return *tables_[table_index(l)];
}

std::size_t memory_store::tracked(level l) const noexcept {
  return tables_[table_index(l)]->size();
}

}  // namespace tollgate::limit
