#pragma once
/// A client's standing across replicas (docs/design.md §18). With `store: redis`, every change
/// of what a client's standing depends on goes into one Redis stream (store::redis_journal)
/// and every replica, the one that saw it included, applies the stream's entries in its
/// order to its own tables: violations (and so the counters, the PoW requirement and the
/// automatic bans with their doubling), manual bans, lifts and resets. The request path reads
/// only this process's tables, as without Redis; a replica that starts rebuilds them from the
/// stream. Spent proofs are keys beside the stream, set once (SET NX) across replicas.
///
/// The entries are policy/standing_entry.hpp's.

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gateway/bans/manual_bans.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/core/clock.hpp"
#include "gateway/core/key_block.hpp"
#include "gateway/limit/spec.hpp"
#include "gateway/net/snapshot.hpp"
#include "gateway/net/standing_share.hpp"
#include "gateway/policy/pow_gate.hpp"
#include "gateway/policy/standing_entry.hpp"
#include "gateway/policy/tier_memory.hpp"
#include "gateway/store/decision_store.hpp"
#include "gateway/store/redis_journal.hpp"

namespace tollgate::app {

/// Thread safety: the standing_share members from any worker; the admin members from the
/// control thread; entries are applied on the journal's thread.
class standing_keeper final : public net::standing_share {
 public:
  /// Over `pow`; shared through Redis when `store` is the Redis store.
  standing_keeper(policy::pow_state& pow, policy::tier_memory& tiers, store::decision_store& store,
                  const config::pow_counters_config& counters,
                  std::shared_ptr<const net::snapshot> current);
  ~standing_keeper() override;

  /// What this replica counts of what it applies: a ban its violation caused, a step of the
  /// penalty ladder its points made a client enter (each on the thread that owns the counter).
  struct counting {
    std::function<void()> ban;
    std::function<void(pow::penalty_action)> transition;
  };
  /// Starts following the stream, with `workers` workers sending points.
  void start(unsigned workers, counting count);
  /// Whether the standing is shared with other replicas.
  bool shared() const noexcept { return journal_ != nullptr; }
  /// This replica's name in entries and audit lines: `<host>/<pid>`.
  const std::string& replica() const noexcept { return replica_; }
  /// The configuration in force (after a reload): its address levels and penalty ladder.
  void set_snapshot(std::shared_ptr<const net::snapshot> s);

  bool violation(const policy::client_subjects& who, std::string_view reason,
                 const pow::reason_rule& rule, core::nanos now) override;
  void spend(std::string_view challenge, std::int64_t expires, store::claim_handler done) override;
  bool points(std::uint32_t worker, const pow::subject& client, std::uint32_t points,
              std::string_view identity, const core::address& address, core::nanos now) override;
  bool tier(std::uint32_t worker, const pow::subject& client, std::string_view tier,
            core::nanos until) override;
  bool closed() const noexcept override;

  /// Sends an admin change (already made here) to every replica: "" when Redis took it (or
  /// nothing is shared), else why not: it then holds on this replica only.
  std::string share_ban(const bans::manual_ban& b);
  std::string share_lift(const core::key_block& block, core::nanos now);
  std::string share_reset(const core::key_block& block, core::nanos now);
  std::string share_clear_client(const pow::subject& who, core::nanos now);
  /// Attack mode forced on `category` (level; policy::standing_entry::released: back to
  /// automatic) until `until` (0: until released).
  std::string share_attack(const std::string& category, std::uint8_t level, core::nanos until,
                           core::nanos now);
  /// What applies another replica's forcing here (on the journal's thread: the callee takes
  /// it to attack mode's). Before start().
  void on_attack(std::function<void(std::string, std::uint8_t, core::nanos)> f) {
    on_attack_ = std::move(f);
  }
  /// What reset_limits() did in Redis.
  struct limits_reset {
    long long deleted = 0;  ///< keys deleted
    bool whole = true;      ///< every key of the block was named (false: a block too wide)
    std::string error;      ///< Redis did not take it: why
  };
  /// Deletes the Redis keys of the address limits `specs` (state names) for every client in
  /// `block` under `p`: every individual key of the block and the network keys overlapping
  /// it, when they are at most 4096 per network and 16 networks; nothing when not shared.
  limits_reset reset_limits(const core::key_block& block, const core::level_prefixes& p,
                            const std::vector<const limit::limit_spec*>& specs);

 private:
  /// Points a worker gathered since the last poll, per client.
  struct pending_points {
    std::uint32_t points = 0;
    std::string name;
    core::nanos at = 0;  ///< the latest
  };
  struct point_buffer {
    std::mutex mutex;  ///< the worker's and, once a poll, the journal's
    std::unordered_map<pow::subject, pending_points, pow::subject_hash> clients;
    /// Tiers set, the latest per client: its name and end.
    std::unordered_map<pow::subject, std::pair<std::string, core::nanos>, pow::subject_hash> tiers;
  };
  /// Most clients one worker gathers points for between two polls (past it, added here only).
  static constexpr std::size_t max_pending = 65'536;

  /// Applies one entry of the stream.
  void apply(std::string_view text);
  /// Sends the points gathered since the last poll (on the journal's thread).
  void flush_points();
  std::shared_ptr<const net::snapshot> snapshot() const;

  policy::pow_state& pow_;
  policy::tier_memory& tiers_;
  store::decision_store& store_;
  std::string replica_;
  std::unique_ptr<store::redis_journal> journal_;
  bool closed_ = false;  ///< fail_mode closed
  counting count_;
  std::function<void(std::string, std::uint8_t, core::nanos)> on_attack_;
  mutable std::mutex snapshot_mutex_;
  std::shared_ptr<const net::snapshot> snapshot_;
  std::vector<std::unique_ptr<point_buffer>> buffers_;  ///< by worker
  std::uint64_t skipped_ = 0;                           ///< malformed entries (journal thread)
};

}  // namespace tollgate::app
