// Attack mode in the simulator (docs/design.md §16, docs/simulator.md): a log of steady traffic
// and a burst from many addresses, replayed through a policy with attack_mode; the levels
// follow the log's own times, as the gateway's control thread would have set them.

#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include "gateway/config/gateway.hpp"
#include "gateway/sim/log_set.hpp"
#include "gateway/sim/replay.hpp"
#include "gateway/sim/report.hpp"
#include "temp_dir.hpp"

using namespace tollgate;
using namespace tollgate::sim;

namespace {

constexpr core::nanos ms = core::ns_per_ms;
constexpr core::nanos sec = core::ns_per_s;
/// 2026-11-23T09:24:23Z, a whole second.
constexpr core::nanos t0 = 1'795'425'863 * sec;

const char* const attack_gateway = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 8080 }]
upstreams: { app: { endpoints: ["127.0.0.1:9000"] } }
default_route: { category: general, upstream: app }
policies: [policy.yaml]
)";

/// Limits far above the traffic: every refusal below is attack mode's.
const char* const attack_policy = R"(
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
    attack_mode:
      baseline: { window: 60s, floor: 10/s }
      sustain: 3s
      levels:
        elevated: { above: 3x }
        severe:   { above: 10x, admit: [allowed] }
      cool_down: 8s
)";

/// A Tollgate text line of a request decided at t0 + `at` (logged 1 ms later).
std::string line(core::nanos at, const std::string& client) {
  return format_time(t0 + at + ms) + " access " + client +
         " \"GET /x HTTP/1.1\" 200 category=general decision=allowed limit=- upstream=app "
         "upstream_time=0.001 bytes=1 0.001000s\n";
}

/// 10 requests a second from ten addresses for 120 s; then 200 a second more from 4000
/// addresses for 20 s; then the steady 10 a second for 60 s more.
std::string attack_log() {
  std::string log;
  for (int s = 0; s < 200; ++s) {
    for (int i = 0; i < 10; ++i)
      log += line(s * sec + 50 * ms + i * 100 * ms, "10.0.0." + std::to_string(i + 1));
    if (s < 120 || s >= 140) continue;
    for (int j = 0; j < 200; ++j) {
      const int n = (s - 120) * 200 + j;
      log += line(s * sec + 2'500'000 + j * 5 * ms,
                  "10.1." + std::to_string(n / 250) + "." + std::to_string(n % 250 + 1));
    }
  }
  return log;
}

/// Replays `log` under the attack policy: the summary, and both reports.
struct outcome {
  run_summary summary;
  std::string text, json, html;
};

/// Replays `log` in `dir` (the same paths each time, as the reports name them).
outcome replay_log(const test::temp_dir& dir, const std::string& log) {
  dir.write("policy.yaml", attack_policy);
  simulator sim(config::load_gateway(dir.write("gateway.yaml", attack_gateway)));
  log_set logs({dir.write("access.log", log)});
  logs.index({});
  const replay_result r = replay(logs, sim, nullptr, {});
  report_input in{logs, r, {summarise(r.runs[0], sim, 10)}, 0, 50};
  return {in.runs[0], text_report(in), json_report(in), html_report(in)};
}

}  // namespace

TEST_CASE("sim attack: levels entered after sustain and left after cool_down, at log times",
          "[sim][attack]") {
  const test::temp_dir dir;
  const outcome o = replay_log(dir, attack_log());
  const run_summary& s = o.summary;
  REQUIRE(s.categories.size() == 1);
  const category_summary& g = s.categories[0];
  CHECK(g.attack);
  CHECK(g.requests == 200 * 10 + 20 * 200);
  // The burst starts at 120 s: the tick at 121 sees 210/s, 21x the baseline of 10/s; above
  // both levels for `sustain` (3 s) at 124: severe. It ends at 140: calm from the tick at 141,
  // one cool_down (8 s) later severe steps down to elevated (149), and 8 s after that to normal.
  REQUIRE(s.changes.size() == 3);
  CHECK(s.changes[0].time == t0 + 124 * sec);
  CHECK((s.changes[0].from == 0 && s.changes[0].to == 3));
  CHECK(s.changes[0].why.find("the baseline 10/s") != std::string::npos);
  CHECK(s.changes[1].time == t0 + 149 * sec);
  CHECK((s.changes[1].from == 3 && s.changes[1].to == 1));
  CHECK(s.changes[2].time == t0 + 157 * sec);
  CHECK((s.changes[2].from == 1 && s.changes[2].to == 0));
  for (const auto& c : s.changes)
    CHECK(c.category == "general");
  // Severe, from 124 s to 149 s, admits only the allow list: every request then is a 503,
  // 210 a second during the burst (124..140) and 10 a second after it (140..149).
  CHECK(g.outcomes[static_cast<int>(core::outcome::under_attack)] == 16 * 210 + 9 * 10);
  CHECK(g.admitted == g.requests - (16 * 210 + 9 * 10));

  // The series: one-second buckets from t0; the level and the baseline the ticks left.
  CHECK(s.series_origin * sec == t0);
  CHECK(s.series_width == 1);
  REQUIRE(g.series.size() == 200);
  CHECK(g.series[10].requests == 10);
  CHECK(g.series[130].requests == 210);
  CHECK(g.series[130].peak == 210);
  CHECK(g.series[123].level == 0);
  CHECK(g.series[124].level == 3);
  CHECK(g.series[148].level == 3);
  CHECK(g.series[149].level == 1);
  CHECK(g.series[157].level == 0);
  CHECK(g.series[130].outcomes[static_cast<int>(core::outcome::under_attack)] == 210);
  CHECK(g.series[130].baseline() == Approx(10.0));
  // The text and JSON reports carry the changes and the series.
  CHECK(o.text.find("normal -> severe: rate 210/s") != std::string::npos);
  CHECK(o.json.find("\"attack_changes\":[{\"time\":\"2026-11-23T09:26:27.000000Z\"") !=
        std::string::npos);
  CHECK(o.json.find("\"under_attack\":[0,") != std::string::npos);

  // The same log gives the same reports, every time.
  const outcome again = replay_log(dir, attack_log());
  CHECK(again.text == o.text);
  CHECK(again.json == o.json);
  CHECK(again.html == o.html);
}

TEST_CASE("sim attack: a gap of ten years is ticked in bounded time and buckets", "[sim][attack]") {
  std::string log = attack_log();
  // Ten years on, the burst's addresses come back slowly: the levels were left long ago.
  const core::nanos later = 3650LL * 86400 * sec;
  for (int i = 0; i < 5; ++i)
    log += line(later + i * sec, "10.1.0.1");
  const test::temp_dir dir;
  const outcome o = replay_log(dir, log);
  const run_summary& s = o.summary;
  const category_summary& g = s.categories[0];
  CHECK(s.changes.size() == 3);
  CHECK(g.outcomes[static_cast<int>(core::outcome::under_attack)] == 16 * 210 + 9 * 10);
  CHECK(g.series.size() <= timeline::max_buckets);
  CHECK(g.series.size() > timeline::max_buckets / 2);
  CHECK((s.series_width & (s.series_width - 1)) == 0);  // a power of two
  CHECK(g.series.back().requests == 5);
  CHECK(g.series.back().level == 0);
  std::uint64_t total = 0;
  for (const auto& b : g.series)
    total += b.requests;
  CHECK(total == g.requests);
}
