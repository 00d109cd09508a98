#pragma once
/// The gateway's metrics as plain counters, one block per worker thread. A worker is the only
/// writer of its block, so counting is a relaxed load and store (no locked instruction, no
/// cache line shared between cores); a scrape sums the blocks. Labels are indices fixed when a
/// configuration is loaded, never looked up per request, and never a client address.

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/core/outcome.hpp"
#include "gateway/core/proof_failure.hpp"
#include "gateway/core/token_failure.hpp"

namespace tollgate::metrics {

/// Label `mode` of tollgate_rate_limited_total: an enforced rejection, or one a shadowed limit
/// would have made (docs/design.md §12).
enum class limit_mode : std::uint8_t { enforce, shadow };
inline constexpr std::array<std::string_view, 2> limit_mode_names = {"enforce", "shadow"};

/// Label `tier` of tollgate_rate_limited_total: a limit's short or long tier (core::tier), or
/// its calendar quota (docs/design.md §3, "Quotas").
inline constexpr std::array<std::string_view, 3> limit_tier_names = {"short", "long", "quota"};
/// The index of "quota" in limit_tier_names.
inline constexpr std::size_t quota_tier = 2;

/// Why an upstream exchange failed (label `kind` of tollgate_upstream_errors_total).
enum class upstream_error : std::uint8_t { connect, timeout, reset };
inline constexpr std::size_t upstream_error_count = 3;
/// Label values of `kind`.
std::string_view upstream_error_name(upstream_error e) noexcept;

/// Why a connection was refused (label `reason` of tollgate_connections_refused_total).
enum class refusal : std::uint8_t { per_address, max_connections, per_network };
inline constexpr std::size_t refusal_count = 3;
/// Label values of `reason`.
inline constexpr std::array<std::string_view, refusal_count> refusal_names = {
    "per_address", "max_connections", "per_network"};

/// Why an HTTP/2 connection was ended with GOAWAY (label `reason` of tollgate_http2_goaways_total,
/// docs/design.md §17): abuse gets ENHANCE_YOUR_CALM, a malformed frame PROTOCOL_ERROR.
enum class h2_goaway : std::uint8_t {
  rapid_reset,   ///< streams cancelled faster than honest ones were opened
  flood,         ///< SETTINGS, PING, PRIORITY or empty DATA frames past their budget
  header_block,  ///< a header block past max_header_bytes on the wire or in CONTINUATION frames
  protocol       ///< a frame nghttp2 refused (malformed, or against the protocol)
};
inline constexpr std::size_t h2_goaway_count = 4;
inline constexpr std::array<std::string_view, h2_goaway_count> h2_goaway_names = {
    "rapid_reset", "flood", "header_block", "protocol"};

/// Why a WebSocket upgrade was refused (label `reason` of
/// tollgate_websocket_upgrades_refused_total).
enum class upgrade_refusal : std::uint8_t {
  limited,               ///< 429 from the limits
  challenged,            ///< 428
  banned,                ///< 403
  too_many_connections,  ///< 429: max_connections_per_address
  upstream_refused,      ///< the upstream answered something else than 101 (relayed)
  upstream_failed        ///< the upstream could not be reached or failed (502/504)
};
inline constexpr std::size_t upgrade_refusal_count = 6;
inline constexpr std::array<std::string_view, upgrade_refusal_count> upgrade_refusal_names = {
    "limited",          "challenged",     "banned", "too_many_connections",
    "upstream_refused", "upstream_failed"};
/// Label `direction` of tollgate_websocket_messages_total.
inline constexpr std::array<std::string_view, 2> ws_direction_names = {"from_client",
                                                                       "from_upstream"};
/// Label `action` of tollgate_websocket_messages_limited_total (config::excess_action order).
inline constexpr std::array<std::string_view, 2> ws_action_names = {"close", "drop"};
/// Label `by` of tollgate_websocket_closes_total: who sent the first close frame (or, for
/// 1006, whose connection ended first without one).
inline constexpr std::array<std::string_view, 3> ws_closer_names = {"client", "upstream",
                                                                    "gateway"};
/// Label `code` of tollgate_websocket_closes_total: the codes of RFC 6455 §7.4.1 a relay
/// sees, the rest as "other" (application codes would make the label unbounded).
inline constexpr std::array<std::uint16_t, 10> ws_close_codes = {1000, 1001, 1002, 1003, 1006,
                                                                 1007, 1008, 1009, 1010, 1011};
inline constexpr std::size_t ws_close_code_count = ws_close_codes.size() + 1;
/// The label index of close code `code`.
constexpr std::size_t ws_close_slot(std::uint16_t code) noexcept {
  for (std::size_t i = 0; i < ws_close_codes.size(); ++i) {
    if (ws_close_codes[i] == code) return i;
  }
  return ws_close_codes.size();
}

/// Label values of `result` of tollgate_pow_verifications_total, in the order of
/// core::proof_failure (valid first): one list for the 428 body and the metric.
inline constexpr auto verification_results = core::proof_failure_names;
/// Label values of `result` of tollgate_pow_clearances_total (docs/design.md §16): earned by a
/// proof, or accepted in place of one.
inline constexpr std::array<std::string_view, 2> clearance_results = {"issued", "accepted"};
/// Label values of `step` of the penalty ladder's families (docs/design.md §16): its actions
/// from warn up, in pow::penalty_action order less `none`.
/// Label values of `from` and `to` of tollgate_attack_transitions_total (docs/design.md §16).
inline constexpr std::array<std::string_view, 4> attack_levels = {"normal", "elevated", "high",
                                                                  "severe"};
inline constexpr std::array<std::string_view, 5> penalty_steps = {"warn", "throttle", "read_only",
                                                                  "pow", "ban"};

/// Label values of `result` of tollgate_token_checks_total: "cached" (found in a worker's
/// memory of verified tokens, no signature checked), then core::token_failure's names.
inline constexpr std::size_t token_result_count = 1 + core::token_failure_count;

/// Most distinct names a label may take (categories, upstreams, listeners); more share "other".
inline constexpr std::size_t max_names = 64;
/// Most distinct limit names (label `level`); more share "other".
inline constexpr std::size_t max_limit_names = 16;
/// Most distinct consumer tier names (label `consumer_tier` of tollgate_rate_limited_total,
/// docs/design.md §15): a policy's most tiers, and "other" for the names past them.
inline constexpr std::size_t max_consumer_tiers = 17;
/// The label index of a request without a consumer tier (its policy has none): written
/// `consumer_tier=""`, or without the label when no policy in force has tiers.
inline constexpr std::size_t no_consumer_tier = max_consumer_tiers;
/// Upper bounds of the histogram buckets, in seconds.
/// Of tollgate_limiter_check_seconds: the in-process store decides in about a microsecond,
/// Redis in a round trip (a quarter to a few milliseconds).
inline constexpr std::array<double, 16> limiter_buckets = {1e-7, 2.5e-7, 5e-7, 1e-6, 2.5e-6, 5e-6,
                                                           1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4,
                                                           1e-3, 2.5e-3, 5e-3, 1e-2};
inline constexpr std::array<double, 12> upstream_buckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5};
/// Of tollgate_request_duration_seconds: a request's whole time as its client sees it.
inline constexpr std::array<double, 13> request_buckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10};
/// Label `code_class` of tollgate_responses_total.
inline constexpr std::array<std::string_view, 5> code_class_names = {"1xx", "2xx", "3xx", "4xx",
                                                                     "5xx"};
/// The label index of status `status` (out of range: counted as 5xx).
constexpr std::size_t code_class_of(unsigned status) noexcept {
  return status >= 100 && status < 600 ? status / 100 - 1 : 4;
}

/// Where a decision of the Redis store came from (label `source` of
/// tollgate_store_decisions_total): Redis, the over-limit cache, or `fail_mode` while Redis
/// could not answer (local: the in-process store; open: admitted; closed: 503).
enum class store_source : std::uint8_t { redis, cache, local, open, closed };
inline constexpr std::array<std::string_view, 5> store_source_names = {"redis", "cache", "local",
                                                                       "open", "closed"};
/// Why a Redis call failed (label `kind` of tollgate_store_errors_total).
enum class store_error : std::uint8_t {
  timeout,   ///< no reply within store.timeout
  connect,   ///< a connection (or its AUTH / SCRIPT LOAD) failed
  io,        ///< a connection broke with calls in flight
  script,    ///< an error reply (or a reply of the wrong shape)
  oom,       ///< Redis is out of memory (maxmemory)
  overload,  ///< too many calls in flight on one connection: not sent
  redirect   ///< a Cluster redirection (MOVED, ASK) followed
};
inline constexpr std::array<std::string_view, 7> store_error_names = {
    "timeout", "connect", "io", "script", "oom", "overload", "redirect"};
/// Upper bounds of the buckets of tollgate_store_latency_seconds.
inline constexpr std::array<double, 12> store_buckets = {5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3,
                                                         5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,  1};

/// A counter with one writer.
/// Thread safety: add() from the owning worker only; value() from anywhere.
class counter {
 public:
  void add(std::uint64_t n = 1) noexcept {
    v_.store(v_.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  std::uint64_t value() const noexcept { return v_.load(std::memory_order_relaxed); }

 private:
  std::atomic<std::uint64_t> v_{0};  ///< the count
};

/// A histogram with one writer; `Bounds` are the buckets' upper bounds in seconds.
template <std::size_t N>
struct histogram {
  /// Counts one observation of `seconds`.
  void observe(double seconds, const std::array<double, N>& bounds) noexcept {
    std::size_t i = 0;
    while (i < N && seconds > bounds[i])
      ++i;
    buckets[i].add();
    // Sum kept in nanoseconds, an integer a single writer can add to safely.
    sum_ns.add(static_cast<std::uint64_t>(seconds * 1e9));
  }
  std::array<counter, N + 1> buckets;  ///< per bucket (not cumulative); last is +Inf
  counter sum_ns;                      ///< sum of observations, nanoseconds
};

/// Counters that only some configurations need, made by their one writer when it adopts such a
/// configuration (never per request) and kept for the life of the process.
/// Thread safety: make() from the owning worker only; get() from anywhere.
template <class T>
class made_on_demand {
 public:
  made_on_demand() = default;
  made_on_demand(const made_on_demand&) = delete;
  made_on_demand& operator=(const made_on_demand&) = delete;
  ~made_on_demand() { delete p_.load(std::memory_order_relaxed); }

  /// Makes the block, unless it is made already.
  void make() {
    if (p_.load(std::memory_order_relaxed) == nullptr) p_.store(new T(), std::memory_order_release);
  }
  /// The block, or null until make().
  T* get() const noexcept { return p_.load(std::memory_order_acquire); }

 private:
  std::atomic<T*> p_{nullptr};  ///< the block, owned
};

/// [tier][mode] rejections by one limit of one category (label `tier`: limit_tier_names).
using limit_rejections =
    std::array<std::array<counter, limit_mode_names.size()>, limit_tier_names.size()>;
/// [category][limit name][consumer tier][tier][mode] rejections of requests that had a consumer
/// tier: about 0.8 MiB, so a worker makes it only once it adopts a configuration with tiers.
using tiered_rejections =
    std::array<std::array<std::array<limit_rejections, max_consumer_tiers>, max_limit_names>,
               max_names>;

/// One worker's counters.
struct worker_counters {
  std::array<std::array<counter, core::outcome_count>, max_names>
      requests;  ///< [category][outcome]
  /// [category][limit name][tier][mode] rejections by the binding limit of requests without a
  /// consumer tier
  std::array<std::array<limit_rejections, max_limit_names>, max_names> rate_limited;
  /// The same, of requests with a consumer tier: made while adopting a configuration with tiers.
  made_on_demand<tiered_rejections> rate_limited_tiered;
  /// [category][limit name] requests without the limit's key, so not limited by it
  std::array<std::array<counter, max_limit_names>, max_names> unkeyed;
  std::array<std::array<counter, upstream_error_count>, max_names>
      upstream_errors;  ///< [upstream][kind]
  std::array<histogram<upstream_buckets.size()>, max_names> upstream_duration;  ///< [upstream]
  histogram<limiter_buckets.size()> limiter_check;    ///< time of one limiter decision
  std::array<counter, max_names> connections_opened;  ///< [listener]
  std::array<counter, max_names> connections_closed;  ///< [listener]
  /// [listener][refusal] connections closed as soon as accepted
  std::array<std::array<counter, refusal_count>, max_names> connections_refused;
  /// [listener] idle keep-alive connections closed to make room for new ones
  std::array<counter, max_names> idle_closed;
  /// [listener] HTTP/2 connections, and the streams they opened (docs/design.md §17)
  std::array<counter, max_names> h2_connections;
  std::array<counter, max_names> h2_streams;  ///< see h2_connections
  /// [listener][reason] HTTP/2 connections ended with GOAWAY for abuse or a protocol error
  std::array<std::array<counter, h2_goaway_count>, max_names> h2_goaways;
  /// [category][code class] responses sent, local answers included
  std::array<std::array<counter, code_class_names.size()>, max_names> responses;
  /// [category] from the request's head to the end of its response
  std::array<histogram<request_buckets.size()>, max_names> request_duration;
  std::array<counter, max_names> bytes_received;  ///< [listener] from clients (TCP, at close)
  std::array<counter, max_names> bytes_sent;      ///< [listener] to clients, acknowledged
  /// [category] requests held by a limit's on_excess before they went on (docs/design.md §16)
  std::array<counter, max_names> delayed;
  std::array<counter, max_names> delayed_done;    ///< [category] of those, no longer held
  std::array<counter, max_names> pow_challenges;  ///< [category] 428s issued
  std::array<counter, verification_results.size()> pow_verifications;  ///< [result]
  std::array<counter, clearance_results.size()> pow_clearances;        ///< [result]
  std::array<counter, penalty_steps.size()> penalty_transitions;       ///< [step]
  std::array<counter, max_names> violations;                           ///< [reason]
  std::array<counter, token_result_count> token_checks;                ///< [result] tokens checked
  counter bans;                                                        ///< bans imposed
  std::array<counter, max_names> ws_opened;  ///< [category] WebSocket connections relayed
  std::array<counter, max_names> ws_closed;  ///< [category] of those, ended
  std::array<std::array<counter, 2>, max_names> ws_messages;  ///< [category][direction]
  std::array<std::array<counter, 2>, max_names> ws_limited;   ///< [category][action]
  /// [by][code] WebSocket connections ended
  std::array<std::array<counter, ws_close_code_count>, 3> ws_closes;
  /// [category][reason] upgrades refused
  std::array<std::array<counter, upgrade_refusal_count>, max_names> ws_refused;
};

/// One worker's counters of the Redis store (written by that worker only).
struct store_counters {
  std::array<counter, store_source_names.size()> decisions;  ///< [source]
  std::array<counter, store_error_names.size()> errors;      ///< [kind]
  histogram<store_buckets.size()> latency;                   ///< send to reply, Redis decisions
};

/// Label values by index, assigned once per name for the life of the process.
/// Thread safety: all members lock; used at load and scrape time only.
class name_table {
 public:
  /// A table of at most `capacity` names (the last one "other").
  explicit name_table(std::size_t capacity = max_names) : capacity_(capacity) {}
  /// The index of `name` (new names get the next one; past max_names - 1, "other").
  std::uint16_t index(std::string_view name);
  /// Every name so far, by index.
  std::vector<std::string> names() const;

 private:
  std::size_t capacity_;            ///< most names, "other" included
  mutable std::mutex mutex_;        ///< guards names_
  std::vector<std::string> names_;  ///< by index
};

}  // namespace tollgate::metrics
