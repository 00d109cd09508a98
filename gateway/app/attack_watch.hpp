#pragma once
/// Attack mode in the running gateway (docs/design.md §16): one policy::attack_monitor per
/// category that sets attack_mode, ticked each second on the control thread with the
/// category's requests counted by every worker so far, its outcome written to the board of the
/// snapshot in force for the workers to read. Levels forced and released through the admin
/// API, each transition logged with its reason and counted. Monitors are kept by category
/// (host entry and name), so a reload keeps a category's baseline and level.

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/core/clock.hpp"
#include "gateway/metrics/exposition.hpp"
#include "gateway/net/server.hpp"
#include "gateway/net/snapshot.hpp"
#include "gateway/policy/attack.hpp"

namespace tollgate::app {

/// Thread safety: the control thread only (which also swaps `current` and answers the admin
/// API).
class attack_watch {
 public:
  attack_watch(boost::asio::io_context& control,
               const std::shared_ptr<const net::snapshot>& current, const net::server& server,
               const core::clock& clock);

  /// Ticks every second from now on.
  void start();
  /// No more ticks.
  void stop();

  /// One category's attack mode, for the admin API.
  struct view {
    std::string category;  ///< its name; a host entry's: "<host>/<name>"
    policy::attack_status status;
    double baseline = 0;           ///< requests per second
    double rate = 0;               ///< the last tick's
    core::nanos forced_until = 0;  ///< 0: until released (when forced)
  };
  std::vector<view> list() const;
  /// Forces `level` on `category` until `until` (0: until released); "" or why not.
  std::string force(const std::string& category, std::uint8_t level, core::nanos until);
  /// Returns `category` to automatic; "" or why not.
  std::string release(const std::string& category);

  /// Its metrics: levels and transitions, by the categories' label indices.
  void describe(metrics::scrape_values& values) const;

  /// One tick at the clock's now (the timer's work; tests may call it).
  void tick();
  /// Writes every category's status to the board of the snapshot now in force: a reload's new
  /// snapshot starts with its categories' levels rather than a second of normal.
  void refresh();

 private:
  struct entry {
    policy::attack_monitor monitor;
    /// Transitions so far, [from * 4 + to].
    std::array<std::uint64_t, policy::attack_levels * policy::attack_levels> transitions{};
  };
  /// A category of the snapshot in force with attack mode: its name, rules, index and label.
  struct place {
    std::string name;
    const policy::attack_rules* rules;
    std::size_t index;
    std::uint16_t metric;
  };
  std::vector<place> places() const;
  void apply(entry& e, const place& p, const std::optional<policy::attack_monitor::transition>& t);
  void schedule();

  boost::asio::steady_timer timer_;
  const std::shared_ptr<const net::snapshot>& current_;
  const net::server& server_;
  const core::clock& clock_;
  std::map<std::string, entry, std::less<>> monitors_;
  bool running_ = false;
};

}  // namespace tollgate::app
