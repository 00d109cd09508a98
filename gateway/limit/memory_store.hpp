#pragma once
/// The in-process limiter: one bounded state table per address level plus one for every other
/// key, shared by every worker thread. No I/O: store/ adapts it to the asynchronous seam.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "gateway/core/key_block.hpp"
#include "gateway/limit/request.hpp"
#include "gateway/limit/state_table.hpp"

namespace tollgate::limit {

/// Most entries per table (docs/design.md §3: each level's table has a capacity).
struct store_capacity {
  std::size_t ipv4_individual = 1'000'000;  ///< /32 keys
  std::size_t ipv4_network = 250'000;       ///< /24 keys
  std::size_t ipv6_subnet = 1'000'000;      ///< /64 keys
  std::size_t ipv6_provider = 250'000;      ///< /48 keys
  std::size_t keyed = 100'000;              ///< header, query, cookie, bearer and global keys
};

/// Evaluates a request under the locks of the shards its keys live in, taken in one global
/// order, so each decision is atomic over all its limits and no race over-admits.
/// Limits in shadow mode are evaluated with the others; when only they reject, the enforced
/// limits are committed and the shadowed ones are not (docs/design.md §12).
///
/// A global limit is split into `slices` slices (one per worker), each with the rate / slices
/// and a share of the burst, so that workers do not take one lock per request (docs/design.md §3).
/// A worker decides against its own slice (limit_request::home) first and, when only slices
/// rejected, against the others in turn: the slices together never admit more than the whole limit
/// would, and a worker may use every slice's room. A request dearer than any one slice's burst is
/// refused although the whole might hold it (docs/policies.md, "How limits behave", says so). Its
/// headers tell the whole limit's burst and estimate its remaining from this slice. Thread safety:
/// decide, lookup and the counters are safe from any thread.
class memory_store {
 public:
  /// Tables of the given sizes; `seed` keys the hash (random per process in production);
  /// global limits split into `slices` (the number of worker threads).
  memory_store(const store_capacity& capacity, std::uint64_t seed, std::uint32_t slices = 1);

  /// Prefetches the shards and slots of `req`'s keys.
  void prepare(const limit_request& req) noexcept;
  /// Decides `req`, commits what it admits, and returns the decision.
  decision decide(const limit_request& req) noexcept;

  /// The stored entry of one key of limit `spec`, if any (admin API, tests); `v6`: the
  /// client's family, for a limit keyed on `individual` or `network`. A quota's entry holds its
  /// count in tat[0] and its window's end in tat[1].
  std::optional<state_entry> lookup(const limit_spec& spec, std::uint64_t key,
                                    bool v6 = false) noexcept;
  /// Forgets the state of every address-level key that overlaps `block` (keys masked to
  /// `prefixes`), in every category; returns the entries removed (the admin API's reset).
  std::size_t forget(const core::key_block& block, const core::level_prefixes& prefixes) noexcept;
  /// Table `t` (limit_spec::table()).
  state_table& table(std::uint8_t t) noexcept { return *tables_[t]; }
  /// Entries held by table `t` (the tracked-keys gauge).
  std::size_t tracked(std::uint8_t t) const noexcept { return tables_[t]->size(); }
  /// Most entries of table `t`.
  std::size_t capacity(std::uint8_t t) const noexcept { return tables_[t]->capacity(); }
  /// Live entries table `t` dropped for room.
  std::uint64_t evictions(std::uint8_t t) const noexcept { return tables_[t]->evictions(); }

 private:
  decision decide_once(const limit_request& req, std::uint32_t slice) noexcept;
  gcra_params slice_params(const gcra_params& p, std::uint32_t slice) const noexcept;

  std::array<std::unique_ptr<state_table>, table_count> tables_;  ///< by limit_spec::table()
  std::uint32_t slices_ = 1;                                      ///< slices of every global limit
};

}  // namespace tollgate::limit
