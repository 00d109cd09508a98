#pragma once
/// The in-process limiter: one bounded state table per address level plus one for keyed
/// extras, shared by every worker thread.

#include <array>
#include <cstdint>
#include <memory>
#include <optional>

#include "gateway/limit/limiter.hpp"
#include "gateway/limit/state_table.hpp"

namespace tollgate::limit {

/// Most entries per table (DESIGN §3: each level's table has a capacity).
struct store_capacity {
  std::size_t ipv4_individual = 1'000'000;  ///< /32 keys
  std::size_t ipv4_network = 250'000;       ///< /24 keys
  std::size_t ipv6_subnet = 1'000'000;      ///< /64 keys
  std::size_t ipv6_provider = 250'000;      ///< /48 keys
  std::size_t keyed = 100'000;              ///< global and identity keys
};

/// Evaluates a request under the locks of the shards its keys live in, taken in one global
/// order, so each decision is atomic over all its limits and no race over-admits.
/// Thread safety: decide, lookup and the counters are safe from any thread.
class memory_store final : public limiter {
 public:
  /// Tables of the given sizes; `seed` keys the hash (random per process in production).
  explicit memory_store(const store_capacity& capacity, std::uint64_t seed);

  /// Decides at once; always returns true.
  bool decide(const limit_request& req, decision& out, completion done) override;
  /// Prefetches the shards and slots of `req`'s keys.
  void prepare(const limit_request& req) noexcept override;
  /// Decides `req` and returns the decision (the synchronous core of `decide`).
  decision decide_now(const limit_request& req) noexcept;

  /// The stored entry of one key, if any (admin API, tests).
  std::optional<state_entry> lookup(level l, std::uint64_t key, std::uint32_t scope) noexcept;
  /// The table that holds keys of level `l`.
  state_table& table_for(level l) noexcept;
  /// Entries held by the table of level `l` (the tracked-keys gauge).
  std::size_t tracked(level l) const noexcept;

 private:
  static constexpr std::size_t table_count = 5;
  static constexpr std::uint8_t table_index(level l) noexcept {
    return l < level::global ? static_cast<std::uint8_t>(l) : 4;
  }
  std::array<std::unique_ptr<state_table>, table_count> tables_;  ///< by table_index
};

}  // namespace tollgate::limit
