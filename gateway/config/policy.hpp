#pragma once
/// Policy files (policies/*.yaml, docs/design.md §9): categories, their limits, PoW settings and
/// violation reasons, read into plain immutable structs.

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gateway/core/address.hpp"
#include "gateway/core/calendar.hpp"
#include "gateway/core/clock.hpp"
#include "gateway/core/levels.hpp"
#include "gateway/core/units.hpp"

namespace tollgate::config {

/// One tier of one limit: `rate` with `burst`.
struct tier_config {
  core::rate rate;          ///< e.g. 2/s
  std::uint32_t burst = 0;  ///< requests admitted at once, 1..1000000
};

/// One part of a limit's key: where it comes from and the header, parameter, cookie or claim
/// path it names ("" for bearer, individual and network).
struct key_part_config {
  core::key_source source = core::key_source::header;
  std::string name;
};

/// A calendar quota (docs/design.md §3, "Quotas"): `limit` of cost per window of `period`.
struct quota_config {
  std::uint32_t limit = 0;                  ///< 1..4294967295
  core::period period = core::period::day;  ///< day, week or month
  bool tiered = false;  ///< scaled by the consumer's tier (docs/design.md §15); kept for tiers
};

/// `on_excess` of a limit (docs/design.md §16 "Delay instead of reject"): a request its tiers
/// would admit within `delay` is held until then rather than refused.
struct on_excess_config {
  core::duration delay{};             ///< the longest hold, 1ms..1m
  std::uint32_t max_delayed = 1'000;  ///< most requests held at once per worker, 1..1000000
};

/// One limit of a category: a name, a key and either tiers (either may be left out) or a quota.
struct limit_config {
  std::string name;                                  ///< an address level's name, or the operator's
  core::key_source key = core::key_source::address;  ///< where its key comes from
  core::level address_level = core::level::ipv4_individual;  ///< key address: which level
  std::string key_name;                ///< header, query parameter, cookie or claim name
  std::vector<key_part_config> parts;  ///< key composite: its parts, in order
  /// key address: the limit's own level, or `key: individual` / `key: network`
  core::address_part part = core::address_part::level;
  std::optional<tier_config> tiers[2];        ///< indexed by core::tier
  std::optional<quota_config> quota;          ///< a quota instead of tiers
  std::uint32_t concurrency = 0;              ///< requests in flight instead of tiers (0: none)
  bool shadow = false;                        ///< evaluated but not enforced (docs/design.md §12)
  std::optional<on_excess_config> on_excess;  ///< hold instead of refuse (rate tiers only)
  int line = 0;                               ///< where it was written
};

/// Proof-of-work settings of a category (docs/design.md §5).
struct pow_config {
  bool enabled = false;              ///< require proofs from clients with violations
  std::uint32_t base_bits = 16;      ///< difficulty at one violation
  std::uint32_t step_bits = 2;       ///< added per further violation
  std::uint32_t max_bits = 28;       ///< cap
  bool on_limit = false;             ///< pay to pass: 428 instead of 429
  std::uint32_t on_limit_bits = 20;  ///< difficulty of a pay-to-pass proof
};

/// How WebSocket messages are charged against a connection's message limit.
enum class message_cost { per_message, per_kib };
/// What happens to a message over the limit.
enum class excess_action { close, drop };

/// WebSocket options of a category (docs/design.md §6).
struct websocket_config {
  std::uint64_t max_message_size = 1 << 20;  ///< larger: close 1009
  /// Per-connection message limit: every tunnel is metered, so a category without its own
  /// gets 50/s, burst 100 (docs/design.md §6).
  std::optional<tier_config> messages = tier_config{core::rate{50, core::ns_per_s}, 100};
  message_cost cost = message_cost::per_message;           ///< how messages are charged
  excess_action on_excess = excess_action::close;          ///< close 1008 or drop
  core::duration max_lifetime = std::chrono::hours(24);    ///< then close 1001
  core::duration idle_timeout = std::chrono::seconds(60);  ///< without traffic or pings
  std::uint32_t max_connections_per_address = 10;          ///< excess upgrades get 429
  /// Control frames from the client (ping, pong) per connection: past it, close 1008.
  tier_config pings = tier_config{core::rate{10, core::ns_per_s}, 20};
};

/// A category: what each of its requests costs and what limits it.
/// CORS for scripts on other origins (docs/design.md §5, issue 13): with it the gateway owns CORS
/// for the category: it answers preflights itself and labels every answer to an allowed origin.
struct cors_config {
  std::vector<std::string> allow_origins;  ///< exact origins (`https://app.example.org`) or "*"
  bool allow_credentials = false;          ///< Access-Control-Allow-Credentials: true
  /// Access-Control-Allow-Methods of a preflight's answer.
  std::vector<std::string> allow_methods = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"};
  /// Access-Control-Allow-Headers; empty: those the preflight asks for (X-PoW-Solution always).
  std::vector<std::string> allow_headers;
  /// Access-Control-Expose-Headers beyond the gateway's own (X-PoW-*, rate limits): the
  /// upstream's fields its scripts read (Location, ETag, ...), since the gateway's list
  /// replaces the upstream's.
  std::vector<std::string> expose_headers;
  core::duration max_age = std::chrono::minutes(10);  ///< Access-Control-Max-Age
};

/// One level of a category's attack mode (docs/design.md §16).
struct attack_level_config {
  bool set = false;   ///< configured
  double above = 0;   ///< entered above this many times the baseline
  double limits = 1;  ///< the category's limits times this; 1 when not given
  bool limits_given = false;
  bool pow = false;            ///< `pow: uncleared`: clients without a clearance show a proof
  bool admit_only = false;     ///< `admit`: only these pass; the others 503 under_attack
  bool admit_allowed = false;  ///< ... the access allow list
  bool admit_cleared = false;  ///< ... clients with a clearance
  int line = 0;
};

/// `attack_mode` of a category (docs/design.md §16).
struct attack_mode_config {
  core::duration window = std::chrono::hours(1);  ///< the baseline's averaging time
  double floor = 50;  ///< requests per second the baseline never goes below
  core::duration sustain = std::chrono::seconds(30);    ///< above a level this long enters it
  core::duration cool_down = std::chrono::minutes(10);  ///< below it this long steps down
  double restore = 0.25;  ///< the share of the way limits come back per cool_down x restore
  /// elevated, high, severe.
  std::array<attack_level_config, 3> levels;
  int line = 0;
};

struct category_config {
  std::string name;                  ///< [a-z0-9_-], used as a metric label
  std::uint32_t cost = 1;            ///< charged per request (a route may set its own)
  bool shadow = false;               ///< mode: shadow: every limit evaluated, none enforced
  std::vector<limit_config> limits;  ///< in file order, address levels among them
  std::string file;                  ///< the policy file that defines it
  int line = 0;                      ///< where in it
  /// `unlimited: true`: the operator means the requests its limits leave out (a family of
  /// addresses, or every request) to go unlimited; see coverage_warnings.
  bool unlimited = false;
  pow_config pow;                                 ///< proof-of-work settings
  std::map<int, std::string> status_violations;   ///< upstream status -> reason
  std::optional<websocket_config> websocket;      ///< WebSocket options
  std::optional<cors_config> cors;                ///< CORS, when the gateway owns it
  std::optional<attack_mode_config> attack_mode;  ///< attack mode (docs/design.md §16)
};

/// Ban settings of a violation reason.
struct ban_config {
  std::uint32_t threshold = 0;                           ///< violations that ban
  core::duration duration = std::chrono::hours(1);       ///< first ban
  core::duration max_duration = std::chrono::hours(24);  ///< cap of doubling
};

/// A violation reason and the counters it raises.
struct violation_config {
  std::string name;               ///< e.g. failed_auth
  bool individual = false;        ///< raises the individual counter
  bool network = false;           ///< raises the network counter
  std::optional<ban_config> ban;  ///< bans after a threshold
};

/// Violation counter settings (docs/design.md §5).
struct pow_counters_config {
  std::uint32_t max_counter = 10;                         ///< counters saturate here
  core::duration decay_interval = std::chrono::hours(1);  ///< one down per interval
  std::uint32_t max_individual_entries = 50'000;          ///< LRU bound
  std::uint32_t max_network_entries = 10'000;             ///< LRU bound
  /// Distinct individual addresses of a network whose violations within one decay interval
  /// it takes before the network counter rises: one address alone never raises its
  /// neighbours' requirement (docs/design.md §5).
  std::uint32_t network_min_sources = 3;
};

/// Where a request's consumer tier comes from (docs/design.md §15, "Tiers"), one source of the
/// ordered `tiers.from` list.
struct tier_source_config {
  enum class kind : std::uint8_t {
    jwt_claim,
    key_file,
    network,
    upstream,
    overrides  ///< `override`: the admin API's (docs/design.md §15)
  } source = kind::jwt_claim;
  std::string claim;    ///< jwt_claim: the claim path whose value names the tier
  key_part_config key;  ///< key_file: the request's key (a header, query, cookie...)
  std::string file;     ///< key_file and network: the file (resolved path)
  /// key_file: key value, or "sha256:<64 lower-case hex>" of it, -> tier name.
  std::vector<std::pair<std::string, std::string>> keys;
  bool reject_unknown = false;       ///< key_file: a key not in the file gets 401 unknown_key
  std::vector<core::cidr> networks;  ///< network: its CIDRs
  std::string tier;                  ///< network: the tier of its addresses
  int line = 0;                      ///< where it was written
};

/// `tiers` of a policy: named multipliers of every limit (docs/design.md §15).
struct tiers_config {
  std::vector<std::pair<std::string, double>> multipliers;  ///< in file order
  std::string default_tier;                                 ///< when no source names one
  std::vector<tier_source_config> from;                     ///< tried in order
  std::map<std::string, int> pow_bits;                      ///< added to required difficulty
  core::duration tier_ttl = std::chrono::hours(1);          ///< how long an upstream's tier holds
  std::string file;                                         ///< where it was written
  int line = 0;
};

/// One step of the penalty ladder (docs/design.md §16).
struct penalty_step_config {
  enum class kind : std::uint8_t { warn, throttle, read_only, pow, ban } action = kind::warn;
  std::uint32_t at = 0;                          ///< the score that reaches it
  double factor = 1;                             ///< throttle: the client's limits times this
  core::duration hold = core::duration::zero();  ///< `for`: how long it lasts once entered; 0:
                                                 ///< while the score holds
  int line = 0;                                  ///< where it was written
};

/// `penalties` of the gateway's policies: the penalty ladder (docs/design.md §16).
struct penalties_config {
  /// Points per event: `rate_limited` (the gateway's own 429s) or a violation reason.
  std::vector<std::pair<std::string, std::uint32_t>> points;
  core::duration decay = std::chrono::minutes(10);  ///< one point off per this long
  std::uint32_t decay_points = 1;                   ///< ... so many points
  std::vector<penalty_step_config> steps;           ///< by ascending `at`
  std::string file;                                 ///< where it was written
  int line = 0;
};

/// Prefix lengths of the address levels.
using prefixes_config = core::level_prefixes;

/// Everything read from one or more policy files.
struct policy_config {
  prefixes_config prefixes;                  ///< address level prefixes
  std::vector<category_config> categories;   ///< in file order
  std::vector<violation_config> violations;  ///< in file order; pow_failed always present
  pow_counters_config pow_counters;          ///< counter settings
  std::vector<std::string> files;            ///< the files read
  std::optional<tiers_config> tiers;         ///< consumer tiers, when a file sets them
  /// The penalty ladder, when a file sets one (the gateway's: a host entry carries it too).
  std::optional<penalties_config> penalties;

  /// The category called `name`, or nullptr.
  const category_config* category(const std::string& name) const;
  /// The violation reason called `name`, or nullptr.
  const violation_config* violation(const std::string& name) const;
};

/// Why requests of `cost` could never pass category `c` ("cost 10 exceeds burst 5 of
/// ipv4_individual.short; ..."), or "" when every tier's burst holds it.
std::string cost_fault(const category_config& c, std::uint32_t cost);

/// The silent traps of `policy`, one line each, "file:line: categories.NAME: ...": a
/// category that limits only one address family (the other's clients are unlimited) or no
/// request at all (keyed limits bind only requests that carry their key), unless it says
/// `unlimited: true` or is in shadow mode. Loading succeeds; --check-config, the start and
/// every reload print these.
std::vector<std::string> coverage_warnings(const policy_config& policy);
/// The most categories coverage_warnings names; a last line counts the others.
inline constexpr std::size_t max_coverage_warnings = 20;

/// Reads and validates the policy files `paths`, merged in order (a category or violation
/// defined twice is an error; `levels` and `pow_counters` may appear in one file only).
/// Throws config::error naming file, line and key.
policy_config load_policies(const std::vector<std::string>& paths);

/// Reads the policy files of one `hosts` entry (docs/design.md §15, "Tenants (per Host)"):
/// categories and tiers; `levels`, `violations`, `pow_counters` and `penalties` are refused, and
/// the result carries `gateway`'s, whose reasons its status_violations may name.
policy_config load_host_policies(const std::vector<std::string>& paths,
                                 const policy_config& gateway);

/// Reads one policy from YAML `text` as if from file `name` (tests).
policy_config load_policy_text(const std::string& text, const std::string& name);

}  // namespace tollgate::config
