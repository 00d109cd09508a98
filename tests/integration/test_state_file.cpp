// The state file of store: memory (docs/design.md §18): a real tollgate stopped by SIGTERM and
// started again on the same file keeps a client's standing (a ban and its history, violation
// counters, a manual ban, an override, a spent proof, a quota's count, a forced attack level); a
// truncated file, one of another version, and random bytes are each ignored with a log line,
// and the gateway serves.

#include <catch2/catch.hpp>

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>

#include "gateway/pow/challenge.hpp"
#include "harness.hpp"

using namespace tollgate::test;

namespace {

std::string gateway_yaml(const std::string& state) {
  return R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
upstreams: { app: { endpoints: ["{echo}"] } }
routes:
  - { match: { path_prefix: /guarded }, category: guarded, upstream: app }
default_route: { category: general, upstream: app }
policies: ["{policy}"]
store: { type: memory, state_file: ")" +
         state + R"(", save_interval: 1s }
shutdown: { delay: 0s, drain_timeout: 1s }
)";
}

const std::string policy = R"(
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/h, burst: 1 } }
  guarded:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
    pow: { enabled: true, base_bits: 4, step_bits: 0, max_bits: 4 }
violations:
  abuse:      { levels: [individual], ban: { threshold: 2, duration: 1h, max_duration: 4h } }
  marked:     { levels: [individual] }
  pow_failed: { levels: [network] }
)";

/// A folder of the test's own, removed at the end.
struct scratch {
  scratch() {
    static int n = 0;
    path = std::filesystem::temp_directory_path() /
           ("tollgate-state-" + std::to_string(getpid()) + "-" + std::to_string(n++));
    std::filesystem::create_directories(path);
  }
  ~scratch() { std::filesystem::remove_all(path); }
  std::string file() const { return (path / "state.bin").string(); }
  std::filesystem::path path;
};

response admin(const gateway& gw, const std::string& method, const std::string& target,
               const std::string& body = "") {
  return request(gw.admin_port, method + " " + target +
                                    " HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                                    "Content-Length: " +
                                    std::to_string(body.size()) + "\r\n\r\n" + body);
}

int status(const gateway& gw, const std::string& ip, const std::string& extra = "",
           const std::string& path = "/x") {
  return request(gw.port, get(path, extra), ip).status;
}

/// Stops `gw` as systemd or Kubernetes would, and waits for it.
void terminate(gateway& gw) {
  gw.process->signal(SIGTERM);
  CHECK(gw.process->wait_for_line("state: saved").find("bytes") != std::string::npos);
  CHECK(gw.process->wait() == 0);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

/// A state file written by a real gateway that banned 127.0.30.1.
std::string written_state(const echo_server& echo, const scratch& dir) {
  gateway gw(gateway_yaml(dir.file()), policy, echo.port);
  for (int i = 0; i < 2; ++i)
    request(gw.port, get("/x?violation=abuse"), "127.0.30.1");
  CHECK(status(gw, "127.0.30.1") == 403);
  terminate(gw);
  return read_file(dir.file());
}

}  // namespace

TEST_CASE("a stop and a start on the same state file keep each client's standing",
          "[integration][state]") {
  // The challenge's MAC must verify after the restart: both runs have the same secret.
  setenv("TOLLGATE_POW_SECRET", "state-file-test-secret-0123456789abcdef", 1);
  echo_server echo;
  scratch dir;
  const std::string banned = "127.0.31.1", marked = "127.0.31.2";
  std::string proof;
  {
    gateway gw(gateway_yaml(dir.file()), policy, echo.port);
    CHECK(gw.process->output().find("does not exist yet") != std::string::npos);
    for (int i = 0; i < 2; ++i)
      request(gw.port, get("/x?violation=abuse"), banned);
    CHECK(status(gw, banned) == 403);
    request(gw.port, get("/x?violation=marked"), marked);
    CHECK(admin(gw, "PUT", "/admin/bans/127.0.32.0/24?duration=1h").status == 201);
    const auto o = admin(gw, "PUT", "/admin/overrides",
                         R"({"limit":"per_key","key":"k-kept","short":{"rate":"1/h","burst":3}})");
    INFO(o.body);
    CHECK(o.status == 200);
    // A proof spent before the stop.
    const auto r = request(gw.port, get("/guarded/x"), marked);
    REQUIRE(r.status == 428);
    const std::string challenge = r.header("x-pow-challenge");
    proof = "X-PoW-Solution: " + challenge + ":" + tollgate::pow::solve(challenge, 4, 1) + "\r\n";
    CHECK(status(gw, marked, proof, "/guarded/x") == 200);
    terminate(gw);
  }
  REQUIRE(std::filesystem::exists(dir.file()));
  CHECK(!std::filesystem::exists(dir.file() + ".tmp"));

  gateway gw(gateway_yaml(dir.file()), policy, echo.port);
  const std::string log = gw.process->output();
  INFO(log);
  CHECK(log.find("state: read") != std::string::npos);
  CHECK(status(gw, banned) == 403);                    // the automatic ban
  CHECK(status(gw, "127.0.32.7") == 403);              // the manual ban
  CHECK(status(gw, marked, "", "/guarded/x") == 428);  // its counter: a proof is required
  const auto again = request(gw.port, get("/guarded/x", proof), marked);
  CHECK(again.status == 428);
  CHECK(again.body.find(R"("reason":"replayed")") != std::string::npos);
  const auto addresses = admin(gw, "GET", "/admin/addresses/" + banned).body;
  CHECK(addresses.find(R"("bans":1)") != std::string::npos);  // its history: the next doubles
  CHECK(admin(gw, "GET", "/admin/overrides").body.find("k-kept") != std::string::npos);
  // The override's burst of 3 applies to its key.
  for (int i = 0; i < 3; ++i)
    CHECK(status(gw, "127.0.33." + std::to_string(i + 1), "X-Api-Key: k-kept\r\n") == 200);
  CHECK(status(gw, "127.0.33.9", "X-Api-Key: k-kept\r\n") == 429);
}

TEST_CASE("a truncated, foreign or random state file is ignored with a log line",
          "[integration][state]") {
  echo_server echo;
  scratch dir;
  const std::string good = written_state(echo, dir);
  REQUIRE(good.size() > 64);
  std::string foreign = good;
  foreign[16] = 2;  // the format version
  std::string random(4096, '\0');
  std::mt19937 gen(7);
  for (char& c : random)
    c = static_cast<char>(gen());
  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x20;
  const struct {
    std::string bytes, says;
  } cases[] = {
      {good.substr(0, good.size() - 9), "truncated"},
      {foreign, "format version 2"},
      {random, "not a Tollgate state file"},
      {flipped, "checksum mismatch"},
      {"", "not a Tollgate state file"},
  };
  for (const auto& c : cases) {
    INFO(c.says);
    write_file(dir.file(), c.bytes);
    gateway gw(gateway_yaml(dir.file()), policy, echo.port);
    const std::string log = gw.process->output();
    INFO(log);
    CHECK(log.find("state: " + dir.file() + " ignored: " + c.says) != std::string::npos);
    CHECK(status(gw, "127.0.30.1") == 200);  // nothing of it was applied: not banned
  }
}

TEST_CASE("a quota's count and a forced attack level survive a stop and a start",
          "[integration][state]") {
  // Not across midnight UTC, when the daily window ends anyway.
  constexpr std::int64_t day = 86'400;
  if (const std::int64_t left = day - ::time(nullptr) % day; left < 20)
    std::this_thread::sleep_for(std::chrono::seconds(left + 1));
  const std::string quota_policy = R"(
categories:
  guarded:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
  general:
    limits:
      ipv4_individual: { short: { rate: 100/s, burst: 100 } }
      daily: { key: { header: X-Api-Key }, quota: { limit: 3, period: day } }
    attack_mode:
      baseline: { window: 10s, floor: 1000/s }
      levels:
        high: { above: 5x, limits: 0.5 }
)";
  echo_server echo;
  scratch dir;
  const std::string key = "X-Api-Key: k-daily\r\n";
  {
    gateway gw(gateway_yaml(dir.file()), quota_policy, echo.port);
    CHECK(status(gw, "127.0.34.1", key) == 200);
    CHECK(status(gw, "127.0.34.2", key) == 200);
    const auto put = admin(gw, "PUT", "/admin/attack-mode",
                           R"({"category":"general","level":"high","for":"30m"})");
    INFO(put.body);
    CHECK(put.status == 200);
    terminate(gw);
  }
  gateway gw(gateway_yaml(dir.file()), quota_policy, echo.port);
  CHECK(gw.process->wait_for_line("forced to high again").find("general") != std::string::npos);
  // Two of the day's three were spent before the stop: one is left, for any address.
  CHECK(status(gw, "127.0.34.3", key) == 200);
  const auto over = request(gw.port, get("/x", key), "127.0.34.4");
  CHECK(over.status == 429);
  CHECK(over.body.find("quota") != std::string::npos);
  CHECK(status(gw, "127.0.34.4", "X-Api-Key: k-other\r\n") == 200);
  const auto level = admin(gw, "GET", "/admin/attack-mode").body;
  INFO(level);
  CHECK(level.find(R"("level":"high","forced":true)") != std::string::npos);
}
