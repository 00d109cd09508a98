// The metric families of the exposition (docs/design.md §10), one row each, in the order written.
// A family's series are the product of its label axes (family_table.hpp); a count_of row
// reads one worker's counter, summed over the workers.

#include <cmath>

#include "gateway/metrics/family_table.hpp"

namespace tollgate::metrics {

namespace {

using prometheus::MetricType;

const family_row rows[] = {
    {.name = "tollgate_build_info",
     .help = "The gateway's version; always 1.",
     .type = MetricType::Gauge,
     .labels = {axis::version},
     .read = [](const scrape&, const series_index&) { return 1.0; }},
    {.name = "tollgate_requests_total",
     .help = "Requests by category and decision.",
     .labels = {axis::category, axis::decision},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.requests[i[0]][i[1]].value(); }},
    {.name = "tollgate_rate_limited_total",
     .help = "Requests rejected by a limit, by the binding limit (and the request's consumer "
             "tier when a policy has tiers); mode shadow: would have been rejected by a shadowed "
             "limit.",
     .labels = {axis::category, axis::category_limit, axis::tier, axis::limit_mode,
                axis::category_tier},
     .read = [](const worker_counters& w, const series_index& i) -> std::uint64_t {
       if (i[4] == no_consumer_tier) return w.rate_limited[i[0]][i[1]][i[2]][i[3]].value();
       const tiered_rejections* tiered = w.rate_limited_tiered.get();
       return tiered == nullptr ? 0 : (*tiered)[i[0]][i[1]][i[4]][i[2]][i[3]].value();
     }},
    {.name = "tollgate_unkeyed_requests_total",
     .help = "Requests without a limit's key, which that limit therefore left alone.",
     .labels = {axis::category, axis::category_limit},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.unkeyed[i[0]][i[1]].value(); },
     .only_counted = true},
    {.name = "tollgate_delayed_requests_total",
     .help = "Requests a limit's on_excess held for their wait, then admitted, by category.",
     .labels = {axis::category},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.delayed[i[0]].value(); },
     .only_counted = true},
    {.name = "tollgate_delayed_requests",
     .help = "Requests held now by a limit's on_excess, by category.",
     .type = MetricType::Gauge,
     .labels = {axis::category},
     .read =
         [](const worker_counters& w, const series_index& i) {
           // Summed over workers modulo 2^64: the difference of the sums.
           return w.delayed[i[0]].value() - w.delayed_done[i[0]].value();
         }},
    {.name = "tollgate_responses_total",
     .help = "Responses sent to clients, local answers included, by category and status class.",
     .labels = {axis::category, axis::code_class},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.responses[i[0]][i[1]].value(); }},
    {.name = "tollgate_request_duration_seconds",
     .help = "Time from a request's head to the end of its response, by category.",
     .type = MetricType::Histogram,
     .labels = {axis::category},
     .read = [](const worker_counters& w,
                const series_index& i) { return view(w.request_duration[i[0]], request_buckets); }},
    {.name = "tollgate_upstream_errors_total",
     .help = "Failed upstream exchanges by kind.",
     .labels = {axis::upstream, axis::upstream_error},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.upstream_errors[i[0]][i[1]].value(); }},
    {.name = "tollgate_upstream_duration_seconds",
     .help = "Time from sending a request upstream to its response head.",
     .type = MetricType::Histogram,
     .labels = {axis::upstream},
     .read =
         [](const worker_counters& w, const series_index& i) {
           return view(w.upstream_duration[i[0]], upstream_buckets);
         }},
    {.name = "tollgate_upstream_endpoint_up",
     .help = "1 while an upstream endpoint takes requests, 0 while a worker has ejected it after "
             "consecutive failures.",
     .type = MetricType::Gauge,
     .labels = {axis::endpoint},
     .read = [](const scrape& s,
                const series_index& i) { return s.values.endpoints[i[0]].up ? 1.0 : 0.0; }},
    {.name = "tollgate_limiter_check_seconds",
     .help = "Time of one limiter decision.",
     .type = MetricType::Histogram,
     .read = [](const worker_counters& w,
                const series_index&) { return view(w.limiter_check, limiter_buckets); }},
    {.name = "tollgate_connections_active",
     .help = "Open client connections by listener.",
     .type = MetricType::Gauge,
     .labels = {axis::listener},
     .read =
         [](const worker_counters& w, const series_index& i) {
           // Summed over workers modulo 2^64: the difference of the sums.
           return w.connections_opened[i[0]].value() - w.connections_closed[i[0]].value();
         }},
    {.name = "tollgate_connections_refused_total",
     .help = "Connections closed as soon as accepted, by listener and reason.",
     .labels = {axis::listener, axis::refusal},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.connections_refused[i[0]][i[1]].value(); }},
    {.name = "tollgate_http2_connections_total",
     .help = "Client connections that spoke HTTP/2, by listener.",
     .labels = {axis::listener},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.h2_connections[i[0]].value(); }},
    {.name = "tollgate_http2_streams_total",
     .help = "HTTP/2 streams clients opened, by listener (each one a request).",
     .labels = {axis::listener},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.h2_streams[i[0]].value(); }},
    {.name = "tollgate_http2_goaways_total",
     .help = "HTTP/2 connections ended with GOAWAY for abuse (ENHANCE_YOUR_CALM) or a protocol "
             "error, by listener and reason.",
     .labels = {axis::listener, axis::h2_goaway},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.h2_goaways[i[0]][i[1]].value(); }},
    {.name = "tollgate_idle_connections_closed_total",
     .help = "Idle keep-alive connections closed to make room for new ones at max_connections.",
     .labels = {axis::listener},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.idle_closed[i[0]].value(); }},
    {.name = "tollgate_received_bytes_total",
     .help = "Bytes received from clients, by listener (TCP payload, counted when a connection "
             "ends).",
     .labels = {axis::listener},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.bytes_received[i[0]].value(); }},
    {.name = "tollgate_sent_bytes_total",
     .help = "Bytes sent to clients and acknowledged, by listener (TCP payload, counted when a "
             "connection ends).",
     .labels = {axis::listener},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.bytes_sent[i[0]].value(); }},
    {.name = "tollgate_tracked_keys",
     .help = "Limiter entries held, by level.",
     .type = MetricType::Gauge,
     .labels = {axis::tracked_level},
     .read = [](const scrape& s,
                const series_index& i) { return s.values.tracked_keys[i[0]].second; }},
    {.name = "tollgate_table_entries",
     .help = "Entries held by each bounded table.",
     .type = MetricType::Gauge,
     .labels = {axis::table},
     .read = [](const scrape& s, const series_index& i) { return s.values.tables[i[0]].entries; }},
    {.name = "tollgate_table_capacity",
     .help = "Most entries each bounded table holds.",
     .type = MetricType::Gauge,
     .labels = {axis::table},
     .read = [](const scrape& s, const series_index& i) { return s.values.tables[i[0]].capacity; }},
    {.name = "tollgate_table_evictions_total",
     .help = "Live entries dropped to make room, by table (an address-rotating flood shows "
             "here).",
     .labels = {axis::table},
     .read = [](const scrape& s,
                const series_index& i) { return s.values.tables[i[0]].evictions; }},
    {.name = "tollgate_certificate_expiry_timestamp_seconds",
     .help = "When each certificate obtained by ACME expires (its notAfter), in seconds since "
             "1970, by name (its first domain).",
     .type = MetricType::Gauge,
     .labels = {axis::certificate},
     .read = [](const scrape& s,
                const series_index& i) { return s.values.certificates[i[0]].second; }},
    {.name = "tollgate_pow_challenges_total",
     .help = "Proof-of-work challenges issued (428).",
     .labels = {axis::category},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.pow_challenges[i[0]].value(); }},
    {.name = "tollgate_pow_verifications_total",
     .help = "Proofs of work checked, by result.",
     .labels = {axis::verification},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.pow_verifications[i[0]].value(); }},
    {.name = "tollgate_pow_clearances_total",
     .help = "Clearances (docs/design.md §16): issued, earned by a valid proof; accepted, in place "
             "of the proof a client's violations required.",
     .labels = {axis::clearance_result},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.pow_clearances[i[0]].value(); }},
    {.name = "tollgate_attack_level",
     .help = "The attack mode level of each category that sets attack_mode (docs/design.md "
             "§16): 0 normal, 1 elevated, 2 high, 3 severe.",
     .type = MetricType::Gauge,
     .labels = {axis::category},
     .read =
         [](const scrape& s, const series_index& i) {
           return i[0] < s.values.attack.size() && s.values.attack[i[0]].on
                      ? s.values.attack[i[0]].level
                      : std::nan("");
         }},
    {.name = "tollgate_attack_transitions_total",
     .help = "Attack mode level changes, by category, from and to (automatic, forced or "
             "released).",
     .labels = {axis::category, axis::attack_from, axis::attack_to},
     .read =
         [](const scrape& s, const series_index& i) {
           if (i[0] >= s.values.attack.size()) return std::nan("");
           const double n = s.values.attack[i[0]].transitions[i[1] * 4 + i[2]];
           return n > 0 ? n : std::nan("");
         }},
    {.name = "tollgate_penalty_clients",
     .help = "Clients on each step of the penalty ladder (docs/design.md §16), as their scores "
             "and timed steps stand now.",
     .type = MetricType::Gauge,
     .labels = {axis::penalty_step},
     .read = [](const scrape& s, const series_index& i) { return s.values.penalty_clients[i[0]]; }},
    {.name = "tollgate_penalty_transitions_total",
     .help = "Clients put on a higher step of the penalty ladder by their points, by the step "
             "entered (the way down is the decay's, seen in tollgate_penalty_clients).",
     .labels = {axis::penalty_step},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.penalty_transitions[i[0]].value(); }},
    {.name = "tollgate_token_checks_total",
     .help = "Tokens checked (docs/design.md §15): cached, answered from a worker's memory of "
             "verified tokens; otherwise the signature was checked, and verified or why not.",
     .labels = {axis::token_result},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.token_checks[i[0]].value(); },
     .only_counted = true},
    {.name = "tollgate_violations_total",
     .help = "Violations recorded, by reason.",
     .labels = {axis::reason},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.violations[i[0]].value(); }},
    {.name = "tollgate_bans_total",
     .help = "Bans imposed.",
     .read = [](const worker_counters& w, const series_index&) { return w.bans.value(); }},
    {.name = "tollgate_bans_active",
     .help = "Bans in force.",
     .type = MetricType::Gauge,
     .read = [](const scrape& s, const series_index&) { return s.values.active_bans; }},
    {.name = "tollgate_admin_connections_closed_total",
     .help = "Admin connections closed at admin.max_connections: reason room (the one waiting "
             "longest on its peer, for a newcomer) or refused.",
     .labels = {axis::admin_closed},
     .read =
         [](const scrape& s, const series_index& i) {
           return i[0] == 0 ? s.values.admin_closed_for_room : s.values.admin_refused;
         }},
    {.name = "tollgate_active_bans",
     .help = "Bans in force. Deprecated: use tollgate_bans_active; removed in the next release.",
     .type = MetricType::Gauge,
     .read = [](const scrape& s, const series_index&) { return s.values.active_bans; }},
    {.name = "tollgate_websocket_connections",
     .help = "Open WebSocket connections by category.",
     .type = MetricType::Gauge,
     .labels = {axis::category},
     .read =
         [](const worker_counters& w, const series_index& i) {
           // Summed over workers modulo 2^64: the difference of the sums.
           return w.ws_opened[i[0]].value() - w.ws_closed[i[0]].value();
         }},
    {.name = "tollgate_websocket_messages_total",
     .help = "WebSocket messages relayed, by category and direction.",
     .labels = {axis::category, axis::ws_direction},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.ws_messages[i[0]][i[1]].value(); }},
    {.name = "tollgate_websocket_messages_limited_total",
     .help = "WebSocket messages from clients over the message limit, by action.",
     .labels = {axis::category, axis::ws_action},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.ws_limited[i[0]][i[1]].value(); }},
    {.name = "tollgate_websocket_upgrades_refused_total",
     .help = "WebSocket upgrades refused, by category and reason.",
     .labels = {axis::category, axis::upgrade_refusal},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.ws_refused[i[0]][i[1]].value(); },
     .only_counted = true},
    {.name = "tollgate_websocket_closes_total",
     .help = "WebSocket connections ended, by close code and who closed first (1006: ended "
             "without a close frame).",
     .labels = {axis::ws_closer, axis::ws_close_code},
     .read = [](const worker_counters& w,
                const series_index& i) { return w.ws_closes[i[0]][i[1]].value(); },
     .only_counted = true,
     .code_first = true},
    {.name = "tollgate_config_reloads_total",
     .help = "Configuration reloads by result.",
     .labels = {axis::reload_result},
     .read =
         [](const scrape& s, const series_index& i) {
           return static_cast<double>(i[0] == 0 ? s.r.reloads_ok.load()
                                                : s.r.reloads_failed.load());
         }},
    {.name = "tollgate_config_last_reload_successful",
     .help = "1 when the last reload put its configuration in force (or none was tried), 0 when "
             "it failed and the previous one still serves.",
     .type = MetricType::Gauge,
     .read = [](const scrape& s,
                const series_index&) { return s.r.last_reload_ok.load() ? 1.0 : 0.0; }},
    {.name = "tollgate_config_last_reload_success_timestamp_seconds",
     .help = "When a configuration was last put in force (the start, or the last successful "
             "reload), in seconds since 1970.",
     .type = MetricType::Gauge,
     .read = [](const scrape& s, const series_index&) { return s.r.last_reload_success.load(); }},
    {.name = "process_cpu_seconds_total",
     .help = "User and system CPU time spent, in seconds.",
     .read = [](const scrape& s, const series_index&) { return s.process.cpu_seconds; }},
    {.name = "process_resident_memory_bytes",
     .help = "Resident memory size in bytes.",
     .type = MetricType::Gauge,
     .read = [](const scrape& s, const series_index&) { return s.process.resident_bytes; }},
    {.name = "process_virtual_memory_bytes",
     .help = "Virtual memory size in bytes.",
     .type = MetricType::Gauge,
     .read = [](const scrape& s, const series_index&) { return s.process.virtual_bytes; }},
    {.name = "process_open_fds",
     .help = "Open file descriptors.",
     .type = MetricType::Gauge,
     .read = [](const scrape& s, const series_index&) { return s.process.open_fds; }},
    {.name = "process_max_fds",
     .help = "Most open file descriptors (RLIMIT_NOFILE).",
     .type = MetricType::Gauge,
     .read = [](const scrape& s, const series_index&) { return s.process.max_fds; }},
    {.name = "process_start_time_seconds",
     .help = "Start time of the process since 1970, in seconds.",
     .type = MetricType::Gauge,
     .read = [](const scrape& s, const series_index&) { return s.process.start_time; }},
    {.name = "tollgate_store_decisions_total",
     .help = "Decisions of the Redis store, by source: redis, the over-limit cache, or fail_mode "
             "(local, open, closed) while Redis could not answer.",
     .labels = {axis::store_source},
     .read = [](const store_counters& w,
                const series_index& i) { return w.decisions[i[0]].value(); },
     .store_only = true},
    {.name = "tollgate_store_errors_total",
     .help = "Failed or redirected Redis calls, by kind.",
     .labels = {axis::store_error},
     .read = [](const store_counters& w, const series_index& i) { return w.errors[i[0]].value(); },
     .store_only = true},
    {.name = "tollgate_store_latency_seconds",
     .help = "Time from sending a decision to Redis to its reply.",
     .type = MetricType::Histogram,
     .read = [](const store_counters& w,
                const series_index&) { return view(w.latency, store_buckets); },
     .store_only = true},
    {.name = "tollgate_store_degraded",
     .help = "1 while Redis cannot be reached and fail_mode decides, else 0.",
     .type = MetricType::Gauge,
     .read = [](const scrape& s,
                const series_index&) { return s.values.store_degraded ? 1.0 : 0.0; },
     .store_only = true},
};

}  // namespace

const std::span<const family_row> families = rows;

}  // namespace tollgate::metrics
