#pragma once
/// The in-process store: limit::memory_store behind the decision seam. It always answers at
/// once, so the request path never suspends for it.

#include "gateway/limit/memory_store.hpp"
#include "gateway/store/decision_store.hpp"

namespace tollgate::store {

/// Thread safety: as memory_store, any thread.
class local_store final : public decision_store {
 public:
  /// Tables of `capacity`, hashed under `seed`, global limits in `slices` (one per worker).
  local_store(const limit::store_capacity& capacity, std::uint64_t seed, std::uint32_t slices = 1)
      : memory_(capacity, seed, slices) {}

  /// Always at once.
  bool try_decide(const limit::limit_request& req, limit::decision& out) override {
    out = memory_.decide(req);
    return true;
  }
  /// Decides at once and completes through the handler's executor (never needed by callers
  /// that try first; there for callers written only against the asynchronous form).
  void start_decide(const limit::limit_request& req, limit::decision& out,
                    decide_handler done) override;
  std::vector<table_size> tracked() const override;
  std::optional<limit_state> state_of(const limit::limit_spec& spec, std::uint64_t key) override;
  std::size_t forget(const core::key_block& block, const core::level_prefixes& prefixes) override {
    return memory_.forget(block, prefixes);
  }

  /// The tables themselves (tests, benchmarks).
  limit::memory_store& memory() noexcept { return memory_; }

 private:
  limit::memory_store memory_;  ///< the tables
};

}  // namespace tollgate::store
