// The Prometheus exposition of a populated counter set, compared byte for byte with a golden
// text (tests/unit/golden/exposition.txt): every family's name, help, type, labels and the
// field it reads, the label sets in force only, the series left out while at 0.

#include <catch2/catch.hpp>

#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>

#include "gateway/metrics/exposition.hpp"

using namespace tollgate;

namespace {

/// Gives every counter it visits its own value: the n-th counter of a block gets n times
/// `scale`, except every third, left at 0 (series shown only once they happen must be tried
/// both ways).
struct filler {
  std::uint64_t scale = 1;  ///< the block's factor
  std::uint64_t n = 0;      ///< counters visited

  void operator()(metrics::counter& c) {
    ++n;
    if (n % 3 != 0) c.add(n * scale);
  }
  template <class T, std::size_t N>
  void operator()(std::array<T, N>& a) {
    for (auto& x : a)
      (*this)(x);
  }
  template <std::size_t N>
  void operator()(metrics::histogram<N>& h) {
    (*this)(h.buckets);
    (*this)(h.sum_ns);
  }
};

/// A worker's counters, every field filled by `f`; closes half the connections opened.
std::unique_ptr<metrics::worker_counters> worker(std::uint64_t scale) {
  auto w = std::make_unique<metrics::worker_counters>();
  filler f{scale};
  f(w->requests);
  f(w->rate_limited);
  f(w->unkeyed);
  f(w->upstream_errors);
  f(w->upstream_duration);
  f(w->limiter_check);
  f(w->connections_opened);
  f(w->connections_refused);
  f(w->idle_closed);
  f(w->responses);
  f(w->request_duration);
  f(w->bytes_received);
  f(w->bytes_sent);
  f(w->pow_challenges);
  f(w->pow_verifications);
  f(w->pow_clearances);
  f(w->violations);
  f(w->token_checks);
  f(w->bans);
  f(w->ws_opened);
  f(w->ws_messages);
  f(w->ws_limited);
  f(w->ws_closes);
  f(w->ws_refused);
  f(w->delayed);
  // Gauges are opened - closed: never below 0.
  for (std::size_t i = 0; i < metrics::max_names; ++i) {
    w->connections_closed[i].add(w->connections_opened[i].value() / 2);
    w->ws_closed[i].add(w->ws_opened[i].value() / 2);
    w->delayed_done[i].add(w->delayed[i].value() / 2);
  }
  return w;
}

std::unique_ptr<metrics::store_counters> store_worker(std::uint64_t scale) {
  auto s = std::make_unique<metrics::store_counters>();
  filler f{scale};
  f(s->decisions);
  f(s->errors);
  f(s->latency);
  return s;
}

/// `text` with the values of the process_* samples (CPU time, memory, descriptors) replaced by
/// "X": they are this process's, not the counters'.
std::string without_process_values(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  while (std::getline(in, line)) {
    if (line.starts_with("process_")) line = line.substr(0, line.rfind(' ')) + " X";
    out += line + "\n";
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path);
  REQUIRE(f);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

}  // namespace

TEST_CASE("the exposition of a populated counter set is the golden text", "[metrics]") {
  metrics::registry r;
  for (const char* c : {"api", "static", "retired"})
    r.categories.index(c);
  for (const char* l : {"per_address", "per_key"})
    r.limits.index(l);
  for (const char* u : {"backend", "retired"})
    r.upstreams.index(u);
  for (const char* l : {"public", "internal"})
    r.listeners.index(l);
  for (const char* v : {"bad_proof", "replay"})
    r.reasons.index(v);
  r.reloads_ok = 3;
  r.reloads_failed = 1;
  r.last_reload_ok = false;
  r.last_reload_success = 1700000000.5;

  metrics::scrape_values values;
  values.tracked_keys = {{"ipv4_individual", 12}, {"keyed", 3}};
  values.tables = {{"limiter_ipv4_individual", 12, 1000, 4}, {"violations", 2, 100, 0}};
  values.active_bans = 2;
  // "retired" (category 2, upstream 1) is no longer in force: no series.
  values.categories = {0, 1};
  values.category_limits = {{0, 1}, {1}};
  values.upstreams = {0};
  values.endpoints = {{"backend", "127.0.0.1:8080", true}, {"backend", "[::1]:8081", false}};
  values.version = "0.1.0-test";
  const auto s1 = store_worker(1), s2 = store_worker(10);
  values.store = {s1.get(), s2.get()};
  values.store_degraded = true;
  values.admin_closed_for_room = 5;
  values.admin_refused = 7;
  values.certificates = {{"api.example.com", 1800000000}};

  const auto w1 = worker(1), w2 = worker(10);
  const std::string text = metrics::render({w1.get(), w2.get()}, r, values);
  const std::string golden = std::string(TOLLGATE_SOURCE_DIR) + "/tests/unit/golden/exposition.txt";
  // TOLLGATE_UPDATE_GOLDEN=1 writes the text as the new golden one (review its diff).
  if (std::getenv("TOLLGATE_UPDATE_GOLDEN") != nullptr) {
    std::ofstream(golden, std::ios::binary) << without_process_values(text);
  }
  CHECK(without_process_values(text) == read_file(golden));
}

TEST_CASE("without the Redis store there are no store families", "[metrics]") {
  metrics::registry r;
  metrics::scrape_values values;
  const auto w = worker(1);
  const std::string text = metrics::render({w.get()}, r, values);
  CHECK(text.find("tollgate_store_") == std::string::npos);
  CHECK(text.find("tollgate_requests_total") != std::string::npos);
}

TEST_CASE("consumer tiers label tollgate_rate_limited_total by the tier names in force",
          "[metrics]") {
  metrics::registry r;
  for (const char* c : {"api", "static"})
    r.categories.index(c);
  r.limits.index("per_key");
  for (const char* t : {"free", "premium", "gold"})
    r.consumer_tiers.index(t);
  metrics::scrape_values values;
  values.categories = {0, 1};
  values.category_limits = {{0}, {0}};
  // api's policy has free and premium ("gold" was removed by a reload); static's has no tiers.
  values.category_tiers = {{0, 1}, {}};

  auto w = std::make_unique<metrics::worker_counters>();
  w->rate_limited_tiered.make();
  auto& tiered = *w->rate_limited_tiered.get();
  tiered[0][0][0][0][0].add(2);        // api, per_key, free, short, enforce
  tiered[0][0][1][0][0].add(5);        // premium
  tiered[0][0][1][0][1].add(4);        // premium, shadow
  tiered[0][0][2][0][0].add(9);        // gold, no longer in force
  w->rate_limited[1][0][0][0].add(3);  // static, without a tier
  const std::string text = metrics::render({w.get()}, r, values);
  const std::string family = "tollgate_rate_limited_total";
  auto line = [&](const char* category, const char* tier, const char* mode, const char* consumer,
                  int n) {
    return family + "{category=\"" + category + "\",level=\"per_key\",tier=\"" + tier +
           "\",mode=\"" + mode + "\",consumer_tier=\"" + consumer + "\"} " + std::to_string(n) +
           "\n";
  };
  CHECK(text.find(line("api", "short", "enforce", "free", 2)) != std::string::npos);
  CHECK(text.find(line("api", "short", "enforce", "premium", 5)) != std::string::npos);
  CHECK(text.find(line("api", "short", "shadow", "premium", 4)) != std::string::npos);
  // Every tier in force has its series from the start, at 0.
  CHECK(text.find(line("api", "long", "enforce", "premium", 0)) != std::string::npos);
  // A category without tiers counts under "" (as `host` does for the top level).
  CHECK(text.find(line("static", "short", "enforce", "", 3)) != std::string::npos);
  CHECK(text.find(line("static", "long", "enforce", "", 0)) != std::string::npos);
  CHECK(text.find("gold") == std::string::npos);
  // "" of a tiered category only once something counted there.
  CHECK(text.find("category=\"api\",level=\"per_key\",tier=\"short\",mode=\"enforce\","
                  "consumer_tier=\"\"") == std::string::npos);
  // No other family has the label.
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) {
    if (l.find("consumer_tier=") != std::string::npos) CHECK(l.starts_with(family + "{"));
  }

  SECTION("no policy in force has tiers: no series has the label") {
    values.category_tiers = {{}, {}};
    const std::string untiered = metrics::render({w.get()}, r, values);
    CHECK(untiered.find("consumer_tier") == std::string::npos);
    CHECK(untiered.find(
              family +
              "{category=\"static\",level=\"per_key\",tier=\"short\",mode=\"enforce\"} 3\n") !=
          std::string::npos);
  }
}
