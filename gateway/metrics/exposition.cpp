#include "gateway/metrics/exposition.hpp"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

#include "gateway/core/levels.hpp"

namespace tollgate::metrics {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

/// Sums one counter over every worker.
template <class W, class Pick>
std::uint64_t sum(const std::vector<const W*>& workers, Pick pick) {
  std::uint64_t total = 0;
  for (const auto* w : workers)
    total += pick(*w).value();
  return total;
}

ClientMetric counter_metric(std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.counter.value = value;
  return m;
}

/// A counter sample of `labels`: `pick(worker)` summed over `workers`.
template <class W, class Pick>
ClientMetric summed(const std::vector<const W*>& workers, std::vector<ClientMetric::Label> labels,
                    Pick pick) {
  return counter_metric(std::move(labels), static_cast<double>(sum(workers, pick)));
}

template <std::size_t N, class W, class Pick>
ClientMetric histogram_metric(const std::vector<const W*>& workers,
                              const std::array<double, N>& bounds, Pick pick,
                              std::vector<ClientMetric::Label> labels) {
  ClientMetric m;
  m.label = std::move(labels);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= N; ++i) {
    cumulative += sum(workers, [&](const W& w) -> const counter& { return pick(w).buckets[i]; });
    if (i < N) m.histogram.bucket.push_back({cumulative, bounds[i]});
  }
  m.histogram.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
  m.histogram.sample_count = cumulative;
  m.histogram.sample_sum =
      static_cast<double>(
          sum(workers, [&](const W& w) -> const counter& { return pick(w).sum_ns; })) /
      1e9;
  return m;
}

MetricFamily family(std::string name, std::string help, MetricType type) {
  MetricFamily f;
  f.name = std::move(name);
  f.help = std::move(help);
  f.type = type;
  return f;
}

ClientMetric gauge_metric(std::vector<ClientMetric::Label> labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  m.gauge.value = value;
  return m;
}

/// A family of one unlabelled gauge.
MetricFamily single_gauge(std::string name, std::string help, double value) {
  auto f = family(std::move(name), std::move(help), MetricType::Gauge);
  f.metric.push_back(gauge_metric({}, value));
  return f;
}

/// The label indices of `in_force`, without repeats (names past max_names share "other").
std::vector<std::size_t> shown(const std::vector<std::uint16_t>& in_force, std::size_t all) {
  std::vector<std::size_t> out;
  for (const auto i : in_force) {
    if (i < all && std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  }
  return out;
}

/// What /proc says of this process.
struct process_stats {
  double cpu_seconds = 0, resident_bytes = 0, virtual_bytes = 0, start_time = 0;
  double open_fds = 0, max_fds = 0;
};

process_stats read_process() {
  process_stats p;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (std::ifstream stat("/proc/self/stat"); stat) {
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    // Fields after the command's closing parenthesis (the command may hold spaces): state is
    // field 3, utime 14, stime 15, starttime 22, vsize 23, rss 24.
    const auto close = text.rfind(')');
    if (close != std::string::npos) {
      std::istringstream in(text.substr(close + 2));
      std::vector<std::string> f((std::istream_iterator<std::string>(in)),
                                 std::istream_iterator<std::string>());
      auto field = [&](std::size_t n) { return n - 3 < f.size() ? std::stod(f[n - 3]) : 0.0; };
      p.cpu_seconds = (field(14) + field(15)) / ticks;
      p.virtual_bytes = field(23);
      p.resident_bytes = field(24) * page;
      double boot = 0;
      if (std::ifstream s("/proc/stat"); s) {
        std::string key;
        while (s >> key) {
          if (key == "btime") {
            s >> boot;
            break;
          }
        }
      }
      p.start_time = boot + field(22) / ticks;
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    p.open_fds += 1;
  }
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) p.max_fds = static_cast<double>(limit.rlim_cur);
  return p;
}

}  // namespace

std::string render(const std::vector<const worker_counters*>& workers, const registry& r,
                   const scrape_values& values) {
  const auto categories = r.categories.names();
  const auto limit_names = r.limits.names();
  const auto upstreams = r.upstreams.names();
  const auto listeners = r.listeners.names();
  const auto in_force = shown(values.categories, categories.size());
  std::vector<MetricFamily> out;

  auto build = family("tollgate_build_info", "The gateway's version; always 1.", MetricType::Gauge);
  build.metric.push_back(gauge_metric({{"version", values.version}}, 1));
  out.push_back(std::move(build));

  auto requests =
      family("tollgate_requests_total", "Requests by category and decision.", MetricType::Counter);
  auto limited = family("tollgate_rate_limited_total",
                        "Requests rejected by a limit, by the binding limit; mode shadow: would "
                        "have been rejected by a shadowed limit.",
                        MetricType::Counter);
  auto unkeyed = family("tollgate_unkeyed_requests_total",
                        "Requests without a limit's key, which that limit therefore left alone.",
                        MetricType::Counter);
  auto responses = family("tollgate_responses_total",
                          "Responses sent to clients, local answers included, by category and "
                          "status class.",
                          MetricType::Counter);
  auto durations_client = family("tollgate_request_duration_seconds",
                                 "Time from a request's head to the end of its response, by "
                                 "category.",
                                 MetricType::Histogram);
  for (std::size_t k = 0; k < in_force.size(); ++k) {
    const std::size_t c = in_force[k];
    for (std::size_t d = 0; d < decision_count; ++d) {
      requests.metric.push_back(
          summed(workers,
                 {{"category", categories[c]},
                  {"decision", std::string(decision_name(static_cast<decision>(d)))}},
                 [&](const worker_counters& w) -> const counter& { return w.requests[c][d]; }));
    }
    for (std::size_t cl = 0; cl < code_class_names.size(); ++cl) {
      responses.metric.push_back(summed(
          workers, {{"category", categories[c]}, {"code_class", std::string(code_class_names[cl])}},
          [&](const worker_counters& w) -> const counter& { return w.responses[c][cl]; }));
    }
    durations_client.metric.push_back(histogram_metric(
        workers, request_buckets,
        [&](const worker_counters& w) -> const auto& { return w.request_duration[c]; },
        {{"category", categories[c]}}));
    // The category's limits: enforced rejections at 0 from the start, shadow ones once they
    // happen.
    for (const std::size_t l : shown(values.category_limits[k], limit_names.size())) {
      for (std::size_t t = 0; t < 2; ++t) {
        for (std::size_t m = 0; m < limit_mode_names.size(); ++m) {
          const auto n = sum(workers, [&](const worker_counters& w) -> const counter& {
            return w.rate_limited[c][l][t][m];
          });
          if (n == 0 && m != static_cast<std::size_t>(limit_mode::enforce)) continue;
          limited.metric.push_back(
              counter_metric({{"category", categories[c]},
                              {"level", limit_names[l]},
                              {"tier", std::string(core::tier_name(static_cast<core::tier>(t)))},
                              {"mode", std::string(limit_mode_names[m])}},
                             static_cast<double>(n)));
        }
      }
      const auto n =
          sum(workers, [&](const worker_counters& w) -> const counter& { return w.unkeyed[c][l]; });
      if (n == 0) continue;
      unkeyed.metric.push_back(counter_metric(
          {{"category", categories[c]}, {"level", limit_names[l]}}, static_cast<double>(n)));
    }
  }
  out.push_back(std::move(requests));
  out.push_back(std::move(limited));
  out.push_back(std::move(unkeyed));
  out.push_back(std::move(responses));
  out.push_back(std::move(durations_client));

  auto errors = family("tollgate_upstream_errors_total", "Failed upstream exchanges by kind.",
                       MetricType::Counter);
  auto durations =
      family("tollgate_upstream_duration_seconds",
             "Time from sending a request upstream to its response head.", MetricType::Histogram);
  for (const std::size_t u : shown(values.upstreams, upstreams.size())) {
    for (std::size_t k = 0; k < upstream_error_count; ++k) {
      errors.metric.push_back(summed(
          workers,
          {{"upstream", upstreams[u]},
           {"kind", std::string(upstream_error_name(static_cast<upstream_error>(k)))}},
          [&](const worker_counters& w) -> const counter& { return w.upstream_errors[u][k]; }));
    }
    durations.metric.push_back(histogram_metric(
        workers, upstream_buckets,
        [&](const worker_counters& w) -> const auto& { return w.upstream_duration[u]; },
        {{"upstream", upstreams[u]}}));
  }
  out.push_back(std::move(errors));
  out.push_back(std::move(durations));
  auto endpoint_up = family("tollgate_upstream_endpoint_up",
                            "1 while an upstream endpoint takes requests, 0 while a worker has "
                            "ejected it after consecutive failures.",
                            MetricType::Gauge);
  for (const auto& e : values.endpoints) {
    endpoint_up.metric.push_back(
        gauge_metric({{"upstream", e.upstream}, {"endpoint", e.endpoint}}, e.up ? 1 : 0));
  }
  out.push_back(std::move(endpoint_up));

  auto check = family("tollgate_limiter_check_seconds", "Time of one limiter decision.",
                      MetricType::Histogram);
  check.metric.push_back(histogram_metric(
      workers, limiter_buckets,
      [](const worker_counters& w) -> const auto& { return w.limiter_check; }, {}));
  out.push_back(std::move(check));

  auto active = family("tollgate_connections_active", "Open client connections by listener.",
                       MetricType::Gauge);
  for (std::size_t l = 0; l < listeners.size(); ++l) {
    const auto opened = sum(workers, [&](const worker_counters& w) -> const counter& {
      return w.connections_opened[l];
    });
    const auto closed = sum(workers, [&](const worker_counters& w) -> const counter& {
      return w.connections_closed[l];
    });
    active.metric.push_back(
        gauge_metric({{"listener", listeners[l]}}, static_cast<double>(opened - closed)));
  }
  out.push_back(std::move(active));

  auto refused = family("tollgate_connections_refused_total",
                        "Connections closed as soon as accepted, by listener and reason.",
                        MetricType::Counter);
  auto idle_closed =
      family("tollgate_idle_connections_closed_total",
             "Idle keep-alive connections closed to make room for new ones at max_connections.",
             MetricType::Counter);
  auto received = family("tollgate_received_bytes_total",
                         "Bytes received from clients, by listener (TCP payload, counted when a "
                         "connection ends).",
                         MetricType::Counter);
  auto sent = family("tollgate_sent_bytes_total",
                     "Bytes sent to clients and acknowledged, by listener (TCP payload, counted "
                     "when a connection ends).",
                     MetricType::Counter);
  for (std::size_t l = 0; l < listeners.size(); ++l) {
    for (std::size_t k = 0; k < refusal_count; ++k) {
      refused.metric.push_back(summed(
          workers, {{"listener", listeners[l]}, {"reason", std::string(refusal_names[k])}},
          [&](const worker_counters& w) -> const counter& { return w.connections_refused[l][k]; }));
    }
    idle_closed.metric.push_back(
        summed(workers, {{"listener", listeners[l]}},
               [&](const worker_counters& w) -> const counter& { return w.idle_closed[l]; }));
    received.metric.push_back(
        summed(workers, {{"listener", listeners[l]}},
               [&](const worker_counters& w) -> const counter& { return w.bytes_received[l]; }));
    sent.metric.push_back(
        summed(workers, {{"listener", listeners[l]}},
               [&](const worker_counters& w) -> const counter& { return w.bytes_sent[l]; }));
  }
  out.push_back(std::move(refused));
  out.push_back(std::move(idle_closed));
  out.push_back(std::move(received));
  out.push_back(std::move(sent));

  auto tracked =
      family("tollgate_tracked_keys", "Limiter entries held, by level.", MetricType::Gauge);
  for (const auto& [level, value] : values.tracked_keys)
    tracked.metric.push_back(gauge_metric({{"level", level}}, value));
  out.push_back(std::move(tracked));
  auto entries =
      family("tollgate_table_entries", "Entries held by each bounded table.", MetricType::Gauge);
  auto capacity = family("tollgate_table_capacity", "Most entries each bounded table holds.",
                         MetricType::Gauge);
  auto evictions = family("tollgate_table_evictions_total",
                          "Live entries dropped to make room, by table (an address-rotating "
                          "flood shows here).",
                          MetricType::Counter);
  for (const auto& t : values.tables) {
    entries.metric.push_back(gauge_metric({{"table", t.name}}, t.entries));
    capacity.metric.push_back(gauge_metric({{"table", t.name}}, t.capacity));
    evictions.metric.push_back(counter_metric({{"table", t.name}}, t.evictions));
  }
  out.push_back(std::move(entries));
  out.push_back(std::move(capacity));
  out.push_back(std::move(evictions));

  auto challenges = family("tollgate_pow_challenges_total",
                           "Proof-of-work challenges issued (428).", MetricType::Counter);
  for (const std::size_t c : in_force) {
    challenges.metric.push_back(
        summed(workers, {{"category", categories[c]}},
               [&](const worker_counters& w) -> const counter& { return w.pow_challenges[c]; }));
  }
  out.push_back(std::move(challenges));

  auto verifications = family("tollgate_pow_verifications_total",
                              "Proofs of work checked, by result.", MetricType::Counter);
  for (std::size_t i = 0; i < verification_results.size(); ++i) {
    verifications.metric.push_back(
        summed(workers, {{"result", std::string(verification_results[i])}},
               [&](const worker_counters& w) -> const counter& { return w.pow_verifications[i]; }));
  }
  out.push_back(std::move(verifications));

  const auto reasons = r.reasons.names();
  auto violations =
      family("tollgate_violations_total", "Violations recorded, by reason.", MetricType::Counter);
  for (std::size_t i = 0; i < reasons.size(); ++i) {
    violations.metric.push_back(
        summed(workers, {{"reason", reasons[i]}},
               [&](const worker_counters& w) -> const counter& { return w.violations[i]; }));
  }
  out.push_back(std::move(violations));

  auto bans = family("tollgate_bans_total", "Bans imposed.", MetricType::Counter);
  bans.metric.push_back(
      summed(workers, {}, [](const worker_counters& w) -> const counter& { return w.bans; }));
  out.push_back(std::move(bans));
  out.push_back(single_gauge("tollgate_bans_active", "Bans in force.", values.active_bans));
  auto admin = family("tollgate_admin_connections_closed_total",
                      "Admin connections closed at admin.max_connections: reason room (the one "
                      "waiting longest on its peer, for a newcomer) or refused.",
                      MetricType::Counter);
  admin.metric.push_back(counter_metric({{"reason", "room"}}, values.admin_closed_for_room));
  admin.metric.push_back(counter_metric({{"reason", "refused"}}, values.admin_refused));
  out.push_back(std::move(admin));
  out.push_back(single_gauge("tollgate_active_bans",
                             "Bans in force. Deprecated: use tollgate_bans_active; removed in the "
                             "next release.",
                             values.active_bans));

  auto ws_active = family("tollgate_websocket_connections",
                          "Open WebSocket connections by category.", MetricType::Gauge);
  auto ws_messages =
      family("tollgate_websocket_messages_total",
             "WebSocket messages relayed, by category and direction.", MetricType::Counter);
  auto ws_limited = family("tollgate_websocket_messages_limited_total",
                           "WebSocket messages from clients over the message limit, by action.",
                           MetricType::Counter);
  auto ws_refused =
      family("tollgate_websocket_upgrades_refused_total",
             "WebSocket upgrades refused, by category and reason.", MetricType::Counter);
  for (const std::size_t c : in_force) {
    const auto opened =
        sum(workers, [&](const worker_counters& w) -> const counter& { return w.ws_opened[c]; });
    const auto closed =
        sum(workers, [&](const worker_counters& w) -> const counter& { return w.ws_closed[c]; });
    ws_active.metric.push_back(
        gauge_metric({{"category", categories[c]}}, static_cast<double>(opened - closed)));
    for (std::size_t d = 0; d < ws_direction_names.size(); ++d) {
      ws_messages.metric.push_back(summed(
          workers, {{"category", categories[c]}, {"direction", std::string(ws_direction_names[d])}},
          [&](const worker_counters& w) -> const counter& { return w.ws_messages[c][d]; }));
    }
    for (std::size_t a = 0; a < ws_action_names.size(); ++a) {
      ws_limited.metric.push_back(summed(
          workers, {{"category", categories[c]}, {"action", std::string(ws_action_names[a])}},
          [&](const worker_counters& w) -> const counter& { return w.ws_limited[c][a]; }));
    }
    for (std::size_t k = 0; k < upgrade_refusal_count; ++k) {
      const auto n = sum(
          workers, [&](const worker_counters& w) -> const counter& { return w.ws_refused[c][k]; });
      if (n == 0) continue;  // only reasons that happened
      ws_refused.metric.push_back(counter_metric(
          {{"category", categories[c]}, {"reason", std::string(upgrade_refusal_names[k])}},
          static_cast<double>(n)));
    }
  }
  out.push_back(std::move(ws_active));
  out.push_back(std::move(ws_messages));
  out.push_back(std::move(ws_limited));
  out.push_back(std::move(ws_refused));
  auto ws_closes = family("tollgate_websocket_closes_total",
                          "WebSocket connections ended, by close code and who closed first "
                          "(1006: ended without a close frame).",
                          MetricType::Counter);
  for (std::size_t b = 0; b < ws_closer_names.size(); ++b) {
    for (std::size_t k = 0; k < ws_close_code_count; ++k) {
      const auto n = sum(
          workers, [&](const worker_counters& w) -> const counter& { return w.ws_closes[b][k]; });
      if (n == 0) continue;
      const std::string code =
          k < ws_close_codes.size() ? std::to_string(ws_close_codes[k]) : std::string("other");
      ws_closes.metric.push_back(counter_metric(
          {{"code", code}, {"by", std::string(ws_closer_names[b])}}, static_cast<double>(n)));
    }
  }
  out.push_back(std::move(ws_closes));

  auto reloads = family("tollgate_config_reloads_total", "Configuration reloads by result.",
                        MetricType::Counter);
  reloads.metric.push_back(
      counter_metric({{"result", "success"}}, static_cast<double>(r.reloads_ok.load())));
  reloads.metric.push_back(
      counter_metric({{"result", "failure"}}, static_cast<double>(r.reloads_failed.load())));
  out.push_back(std::move(reloads));
  out.push_back(single_gauge("tollgate_config_last_reload_successful",
                             "1 when the last reload put its configuration in force (or none was "
                             "tried), 0 when it failed and the previous one still serves.",
                             r.last_reload_ok.load() ? 1 : 0));
  out.push_back(single_gauge("tollgate_config_last_reload_success_timestamp_seconds",
                             "When a configuration was last put in force (the start, or the last "
                             "successful reload), in seconds since 1970.",
                             r.last_reload_success.load()));

  const process_stats p = read_process();
  auto cpu = family("process_cpu_seconds_total", "User and system CPU time spent, in seconds.",
                    MetricType::Counter);
  cpu.metric.push_back(counter_metric({}, p.cpu_seconds));
  out.push_back(std::move(cpu));
  out.push_back(single_gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
                             p.resident_bytes));
  out.push_back(single_gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.",
                             p.virtual_bytes));
  out.push_back(single_gauge("process_open_fds", "Open file descriptors.", p.open_fds));
  out.push_back(
      single_gauge("process_max_fds", "Most open file descriptors (RLIMIT_NOFILE).", p.max_fds));
  out.push_back(single_gauge("process_start_time_seconds",
                             "Start time of the process since 1970, in seconds.", p.start_time));

  if (!values.store.empty()) {
    const auto& st = values.store;
    auto decisions = family("tollgate_store_decisions_total",
                            "Decisions of the Redis store, by source: redis, the over-limit "
                            "cache, or fail_mode (local, open, closed) while Redis could not "
                            "answer.",
                            MetricType::Counter);
    for (std::size_t k = 0; k < store_source_names.size(); ++k) {
      decisions.metric.push_back(
          summed(st, {{"source", std::string(store_source_names[k])}},
                 [&](const store_counters& w) -> const counter& { return w.decisions[k]; }));
    }
    out.push_back(std::move(decisions));
    auto errors = family("tollgate_store_errors_total",
                         "Failed or redirected Redis calls, by kind.", MetricType::Counter);
    for (std::size_t k = 0; k < store_error_names.size(); ++k) {
      errors.metric.push_back(
          summed(st, {{"kind", std::string(store_error_names[k])}},
                 [&](const store_counters& w) -> const counter& { return w.errors[k]; }));
    }
    out.push_back(std::move(errors));
    auto latency =
        family("tollgate_store_latency_seconds",
               "Time from sending a decision to Redis to its reply.", MetricType::Histogram);
    latency.metric.push_back(histogram_metric(
        st, store_buckets, [](const store_counters& w) -> const auto& { return w.latency; }, {}));
    out.push_back(std::move(latency));
    out.push_back(single_gauge("tollgate_store_degraded",
                               "1 while Redis cannot be reached and fail_mode decides, else 0.",
                               values.store_degraded ? 1 : 0));
  }

  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, out);
  return text.str();
}

}  // namespace tollgate::metrics
