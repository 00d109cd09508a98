// What the state file of store: memory costs (docs/configuration.md, "The state file"): tables
// filled as an attack from N rotating addresses would fill them (each with a violation, one in
// ten banned, each on the penalty ladder, one in ten with a tier an upstream set, each an API
// key with a daily quota's count, 100 000 spent proofs), then saved as the gateway saves it
// (encode, write, fsync, rename) and read back into fresh tables as a start reads it.
//   usage: tollgate_state_bench [clients, default 1000000] [file, default /tmp/tollgate-state.bin]
//          [keep: leave the file (the fuzz target's seeds)]

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gateway/app/state_file.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/limit/memory_store.hpp"

using namespace tollgate;

namespace {

constexpr core::nanos second = 1'000'000'000;
constexpr core::nanos now = 1'764'300'000 * second;

config::pow_counters_config sized(std::size_t n) {
  config::pow_counters_config c;
  c.max_individual_entries = n;
  c.max_network_entries = n / 4;
  return c;
}

constexpr std::uint32_t daily = 0x5eed;  ///< the quota's scope

struct tables {
  explicit tables(std::size_t n)
      : counters(sized(n)), limits({1, 1, 1, 1, std::max<std::size_t>(n + n / 4, 1)}, 1) {}
  config::pow_settings settings;
  config::pow_counters_config counters;
  policy::pow_state pow{"bench-secret", settings, counters};
  policy::tier_memory tiers{1'000'000};
  policy::override_book overrides;
  limit::memory_store limits;
  app::state_parts parts() {
    app::state_parts p{pow, tiers, overrides};
    p.limits = &limits;
    p.quotas = {{limit::keyed_table, daily}};
    return p;
  }
};

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1'000'000;
  const std::string file = argc > 2 ? argv[2] : "/tmp/tollgate-state.bin";
  tables t(n);
  const std::size_t abuse = t.pow.slot("abuse");
  const pow::reason_rule rule{true, true, 1, 60 * second, 3600 * second};
  const pow::reason_rule mark{true, true, 0, 0, 0};
  pow::penalty_rules ladder;
  ladder.decay_interval = 60 * second;
  ladder.steps.push_back({10, pow::penalty_action::warn, 1, 0});
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint64_t a = 0x0a000000 + i;  // 10.0.0.0/8 onwards: each a new /32
    const pow::subject who{a, static_cast<std::uint8_t>(core::level::ipv4_individual)};
    const pow::subject net{a & 0xffffff00, static_cast<std::uint8_t>(core::level::ipv4_network)};
    t.pow.violations().record(who, net, abuse, i % 10 == 0 ? rule : mark, now);
    t.pow.penalties().add(who, 3, now, ladder);
    if (i % 10 == 0) t.tiers.set(who, "free", now + 3600 * second);
    const core::nanos count[2] = {static_cast<core::nanos>(i % 1000), now + 3600 * second};
    t.limits.table(limit::keyed_table).restore(0x9e3779b97f4a7c15ULL * (i + 1), daily, count, now);
  }
  for (std::size_t i = 0; i < std::min<std::size_t>(n, 100'000); ++i)
    t.pow.replays().spend("challenge-" + std::to_string(i), now / second + 60, now / second);
  auto parts = t.parts();
  std::size_t bytes = 0;
  auto started = std::chrono::steady_clock::now();
  const std::string error = app::save_state_file(file, parts, now, bytes);
  const double save_ms = ms_since(started);
  if (!error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  tables back(n);
  auto into = back.parts();
  started = std::chrono::steady_clock::now();
  std::ifstream in(file, std::ios::binary);
  const std::string data{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const app::state_read r = app::decode_state(data, into, now);
  const double load_ms = ms_since(started);
  std::printf(
      "clients %zu: violation entries %zu + %zu network, bans %zu, ladder %zu, tiers %zu, "
      "spent proofs %zu, quota counts %zu\n",
      n, t.pow.violations().individual_entries(), t.pow.violations().network_entries(),
      t.pow.violations().bans(now).size(), t.pow.penalties().size(), t.tiers.size(),
      t.pow.replays().size(), t.limits.tracked(limit::keyed_table));
  std::printf("state file: %zu bytes (%.1f MB, %.1f bytes per client)\n", bytes, bytes / 1e6,
              static_cast<double>(bytes) / static_cast<double>(n));
  std::printf("save (encode, write, fsync, rename): %.0f ms\n", save_ms);
  std::printf("load (read, check, decode into fresh tables): %.0f ms%s%s\n", load_ms,
              r.error.empty() ? "" : ", error: ", r.error.c_str());
  std::printf(
      "read back: violation entries %zu, bans %zu, ladder %zu, tiers %zu, proofs %zu, quota "
      "counts %zu\n",
      back.pow.violations().individual_entries(), back.pow.violations().bans(now).size(),
      back.pow.penalties().size(), back.tiers.size(), back.pow.replays().size(),
      back.limits.tracked(limit::keyed_table));
  if (argc <= 3) std::filesystem::remove(file);
  return r.error.empty() ? 0 : 1;
}
