#pragma once
/// Violation counters per individual address and per network prefix, and the bans they lead
/// to (docs/design.md §5). Counters rise by one per violation up to a maximum and fall by one per
/// full decay interval without a new one, computed when read; tables are bounded (LRU).

#include <cstdint>
#include <optional>
#include <vector>

#include "gateway/core/key_block.hpp"
#include "gateway/core/state_codec.hpp"
#include "gateway/pow/lru_map.hpp"

namespace tollgate::pow {

/// Counter settings (the policy's pow_counters). Times in nanoseconds.
struct counter_settings {
  unsigned max_counter = 10;                       ///< counters saturate here
  std::int64_t decay_interval = 3600'000'000'000;  ///< one down per interval
  std::size_t max_individual = 50'000;             ///< individual entries kept
  std::size_t max_network = 10'000;                ///< network entries kept
  /// Distinct individual addresses whose violations within one decay interval a network
  /// counter needs before it rises (1: every violation raises it).
  unsigned network_min_sources = 3;
};

/// What one violation reason does.
struct reason_rule {
  bool individual = false;            ///< raises the individual counter
  bool network = false;               ///< raises the network counter
  unsigned ban_threshold = 0;         ///< violations of this reason that ban; 0: never
  std::int64_t ban_duration = 0;      ///< first ban (ns)
  std::int64_t ban_max_duration = 0;  ///< cap of the doubling (ns)
};

/// A counter that decays lazily.
struct decaying_counter {
  std::uint32_t count = 0;  ///< value at `last`
  std::int64_t last = 0;    ///< time of the last rise (ns)
  /// The value at `now`.
  unsigned value(std::int64_t now, std::int64_t interval) const noexcept;
  /// One more at `now`, up to `max`; returns the new value.
  unsigned raise(std::int64_t now, std::int64_t interval, unsigned max) noexcept;
};

/// Counters and bans of every client.
/// Thread safety: every member function may be called from any thread.
class violation_tables {
 public:
  /// Tables for `reasons` reasons (indices 0..reasons-1) under `s`.
  violation_tables(const counter_settings& s, std::size_t reasons);

  /// Records a violation of reason `reason` (a slot below `reasons`; others raise the
  /// counters only) under `rule` by the client whose keys are
  /// `individual` and `network`, at `now`. The network counter rises only once the network
  /// has violations from `network_min_sources` distinct individual addresses (IPv6: distinct
  /// /56s) within one decay interval. Returns the end of the ban it caused, if any.
  std::optional<std::int64_t> record(const subject& individual, const subject& network,
                                     std::size_t reason, const reason_rule& rule, std::int64_t now);

  /// N = max(individual counter, network counter) at `now`.
  unsigned requirement(const subject& individual, const subject& network, std::int64_t now) const;

  /// When `individual` last violated (ns; 0: never, or forgotten): a clearance earned before
  /// it is void (docs/design.md §16).
  std::int64_t last_violation(const subject& individual) const;

  /// The end of the ban on `individual`, if it is banned at `now`.
  std::optional<std::int64_t> banned_until(const subject& individual, std::int64_t now) const;

  /// Lifts the ban on `individual` (its history of bans stays); whether it was banned.
  bool lift(const subject& individual, std::int64_t now);

  /// What forget() removed.
  struct forgotten {
    std::size_t individual = 0;  ///< individual entries (counter, reason counts)
    std::size_t network = 0;     ///< network counters
    std::size_t bans = 0;        ///< automatic bans in force, lifted (their history goes too)
  };
  /// Forgets every counter and automatic ban whose key overlaps `block` (keys masked to the
  /// prefixes `p`): the admin API's reset.
  forgotten forget(const core::key_block& block, const core::level_prefixes& p, std::int64_t now);

  /// One ban, as listed by the admin API.
  struct ban_view {
    subject who;         ///< the individual key
    std::int64_t until;  ///< end (ns)
    unsigned bans;       ///< bans so far, this one included
  };
  /// Bans in force at `now`.
  std::vector<ban_view> bans(std::int64_t now) const;

  /// What is known of one client, for the admin API.
  struct client_view {
    unsigned individual = 0;                   ///< individual counter now
    unsigned network = 0;                      ///< network counter now
    std::vector<unsigned> reasons;             ///< per reason, now
    std::optional<std::int64_t> banned_until;  ///< if banned now
    unsigned bans = 0;                         ///< bans so far
  };
  client_view describe(const subject& individual, const subject& network, std::int64_t now) const;

  /// Writes every counter and ban (the state file, docs/design.md §18); reason counts by slot.
  void save(core::state_writer& w) const;
  /// Reads what save() wrote into these tables, each saved reason slot `s` counted in slot
  /// `slots[s]` (max_reason_slots and past: dropped). False when it is malformed (what was read
  /// before stays).
  bool load(core::state_reader& r, const std::vector<std::size_t>& slots);

  /// Entries held (individual, network), for metrics.
  std::size_t individual_entries() const noexcept { return individual_.size(); }
  std::size_t network_entries() const noexcept { return network_.size(); }
  /// The counter tables (individual, network) and bans: name, entries, capacity, evictions.
  template <class F>
  void for_each_table(F&& f) const {
    f("violations_individual", individual_.size(), individual_.capacity(), individual_.evictions());
    f("violations_network", network_.size(), network_.capacity(), network_.evictions());
    f("bans", bans_.size(), bans_.capacity(), bans_.evictions());
  }

 private:
  struct individual_entry {
    decaying_counter counter;               ///< the individual level's counter
    std::vector<decaying_counter> reasons;  ///< per reason, toward its ban threshold
  };
  /// An individual address that violated in a network, and when it last did.
  struct source_seen {
    std::uint64_t key = 0;  ///< the individual key
    std::int64_t last = 0;  ///< its latest violation (ns)
  };
  struct network_entry {
    decaying_counter counter;          ///< the network level's counter
    std::vector<source_seen> sources;  ///< at most network_min_sources, the most recent
  };
  /// Notes `source`'s violation at `now` in `e`; whether the network has had violations from
  /// network_min_sources distinct addresses within the decay interval, this one included.
  bool enough_sources(network_entry& e, std::uint64_t source, std::int64_t now) const;
  struct ban_entry {
    std::int64_t until = 0;  ///< end of the current or last ban
    unsigned bans = 0;       ///< bans so far (each doubles the next)
  };
  counter_settings settings_;
  std::size_t reasons_;
  lru_map<individual_entry> individual_;
  lru_map<network_entry> network_;
  lru_map<ban_entry> bans_;
};

}  // namespace tollgate::pow
