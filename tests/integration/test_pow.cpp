// Proof of work, violations and bans through HTTP (docs/design.md §5): a real tollgate in front of
// a tollgate-echo that reports violations, the solver CLI, and the admin API.

#include <catch2/catch.hpp>

#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>

#include "gateway/pow/challenge.hpp"
#include "gateway/pow/crypto.hpp"
#include "harness.hpp"

using namespace tollgate::test;

namespace {

const std::string gateway_yaml = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
upstreams: { app: { endpoints: ["{echo}"] } }
routes:
  - { match: { path_prefix: /guarded }, category: guarded, upstream: app }
  - { match: { path_prefix: /paid_global }, category: paid_global, upstream: app }
  - { match: { path_prefix: /paid }, category: paid, upstream: app }
  - { match: { path_prefix: /both }, category: both, upstream: app }
default_route: { category: open, upstream: app }
policies: ["{policy}"]
pow: { challenge_ttl: 2s }
)";

const std::string policy_yaml = R"(
categories:
  guarded:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
    pow: { enabled: true, base_bits: 4, step_bits: 1, max_bits: 10 }
  paid:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 2 } }
    pow: { on_limit: true, on_limit_bits: 6 }
  paid_global:
    limits:
      global: { short: { rate: 1/h, burst: 1 } }
    pow: { on_limit: true, on_limit_bits: 4 }
  both:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 1 } }
    pow: { enabled: true, base_bits: 4, step_bits: 0, max_bits: 4, on_limit: true, on_limit_bits: 4 }
  open:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
    status_violations: { 401: failed_auth }
violations:
  abuse:       { levels: [individual] }
  failed_auth: { levels: [individual], ban: { threshold: 3, duration: 30s, max_duration: 1h } }
  pow_failed:  { levels: [network] }
)";

struct fixture {
  echo_server echo;
  gateway gw{gateway_yaml, policy_yaml, echo.port};
};

/// A nonce found by the solver CLI, as a client author would run it.
std::string solve_with_cli(const std::string& challenge, const std::string& bits) {
  std::string out;
  REQUIRE(run_with_input({built("tollgate"), "pow", "solve", challenge, bits}, "", out) == 0);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r'))
    out.pop_back();
  return out;
}

/// A nonce that does NOT reach `bits` for `challenge`.
std::string weak_nonce(const std::string& challenge, unsigned bits) {
  for (int i = 0;; ++i) {
    const std::string nonce = "w" + std::to_string(i);
    if (tollgate::pow::leading_zero_bits(tollgate::pow::sha256(challenge + ":" + nonce)) < bits)
      return nonce;
  }
}

std::string with_proof(const std::string& target, const std::string& challenge,
                       const std::string& nonce) {
  return get(target, "X-PoW-Solution: " + challenge + ":" + nonce + "\r\n");
}

}  // namespace

TEST_CASE("an upstream's violation leads to a 428, the solved challenge passes once",
          "[integration][pow]") {
  fixture f;
  const std::string from = "127.0.0.11";
  auto r = request(f.gw.port, get("/guarded/x?violation=abuse"), from);
  CHECK(r.status == 200);
  CHECK(r.header("x-tollgate-violation").empty());  // the client never sees the report

  const auto before = f.echo.requests();
  r = request(f.gw.port, get("/guarded/x"), from);
  REQUIRE(r.status == 428);
  CHECK(r.header("content-type") == "application/problem+json");
  CHECK(r.header("x-pow-difficulty") == "4");  // base_bits at one violation
  CHECK(r.header("x-pow-algorithm") == "sha256");
  CHECK(r.header("x-ratelimit-limit").empty());  // refused before the limits
  const std::string challenge = r.header("x-pow-challenge");
  REQUIRE(challenge.size() == tollgate::pow::challenge_length);
  CHECK(r.body.find(R"("code":"pow_required")") != std::string::npos);
  CHECK(r.body.find(R"("challenge":")" + challenge + "\"") != std::string::npos);
  CHECK(r.body.find(R"("difficulty":4)") != std::string::npos);
  CHECK(r.body.find(R"("reason")") == std::string::npos);
  CHECK(f.echo.requests() == before);  // nothing reached the upstream

  const std::string nonce = solve_with_cli(challenge, "4");
  r = request(f.gw.port, with_proof("/guarded/x", challenge, nonce), from);
  CHECK(r.status == 200);
  CHECK(r.body.find("X-PoW-Solution") == std::string::npos);  // removed before forwarding
  CHECK(!r.header("x-ratelimit-limit").empty());

  r = request(f.gw.port, with_proof("/guarded/x", challenge, nonce), from);
  CHECK(r.status == 428);
  CHECK(r.body.find(R"("reason":"replayed")") != std::string::npos);

  // Another category without PoW, and another client, are not affected.
  CHECK(request(f.gw.port, get("/x"), from).status == 200);
  CHECK(request(f.gw.port, get("/guarded/x"), "127.0.9.99").status == 200);

  const auto m = metrics_text(f.gw);
  CHECK(m.find(R"(tollgate_violations_total{reason="abuse"} 1)") != std::string::npos);
  CHECK(m.find(R"(tollgate_pow_challenges_total{category="guarded"} 2)") != std::string::npos);
  CHECK(m.find(R"(tollgate_pow_verifications_total{result="valid"} 1)") != std::string::npos);
  CHECK(m.find(R"(tollgate_pow_verifications_total{result="replayed"} 1)") != std::string::npos);
  CHECK(m.find(R"(tollgate_requests_total{category="guarded",decision="challenged"} 2)") !=
        std::string::npos);
}

TEST_CASE("each failed proof gets its reason, and failures count against the network",
          "[integration][pow]") {
  fixture f;
  const std::string a = "127.0.1.5", b = "127.0.2.6";
  for (const auto& who : {a, b})
    request(f.gw.port, get("/guarded/x?violation=abuse"), who);
  auto challenge_for = [&](const std::string& who) {
    const auto r = request(f.gw.port, get("/guarded/x"), who);
    REQUIRE(r.status == 428);
    return r.header("x-pow-challenge");
  };
  auto reason_of = [&](const std::string& solution, const std::string& who) {
    const auto r =
        request(f.gw.port, get("/guarded/x", "X-PoW-Solution: " + solution + "\r\n"), who);
    CHECK(r.status == 428);
    CHECK(!r.header("x-pow-challenge").empty());  // a fresh challenge with every refusal
    const auto at = r.body.find(R"("reason":")");
    return at == std::string::npos ? std::string("none")
                                   : r.body.substr(at + 10, r.body.find('"', at + 10) - at - 10);
  };
  const std::string ch = challenge_for(a);
  const std::string good = tollgate::pow::solve(ch, 4, 1);
  std::string tampered = ch;
  tampered[40] = tampered[40] == 'A' ? 'B' : 'A';
  CHECK(reason_of(tampered + ":" + good, a) == "bad_signature");
  CHECK(reason_of(ch + ":bad nonce", a) == "malformed");
  CHECK(reason_of("no-colon", a) == "malformed");
  CHECK(reason_of(ch + ":" + weak_nonce(ch, 4), a) == "insufficient_work");
  CHECK(reason_of(ch + ":" + good, b) == "wrong_client");  // a's challenge from b

  // Five failures of a alone do not raise its network's counter (network_min_sources is 3):
  // a neighbour with no violation of its own needs no proof.
  CHECK(request(f.gw.port, get("/guarded/x"), "127.0.1.77").status == 200);
  // Two more addresses of a's /24 fail a proof each: three sources, the counter rises, and
  // the neighbour now needs a proof too; b's network does not.
  for (const std::string who : {"127.0.1.6", "127.0.1.7"}) {
    request(f.gw.port, get("/guarded/x?violation=abuse"), who);
    const std::string theirs = challenge_for(who);
    CHECK(reason_of(theirs + ":" + weak_nonce(theirs, 4), who) == "insufficient_work");
  }
  CHECK(request(f.gw.port, get("/guarded/x"), "127.0.1.77").status == 428);
  CHECK(request(f.gw.port, get("/guarded/x"), "127.0.3.77").status == 200);
  const auto m = metrics_text(f.gw);
  CHECK(m.find(R"(tollgate_violations_total{reason="pow_failed"} 7)") != std::string::npos);
  CHECK(m.find(R"(tollgate_pow_verifications_total{result="bad_signature"} 1)") !=
        std::string::npos);

  // Expired: the challenge lives 2 s; sent after its "expires" second has passed. An expired
  // proof is not a pow_failed violation.
  const auto r = request(f.gw.port, get("/guarded/x"), b);
  REQUIRE(r.status == 428);
  const std::string late = r.header("x-pow-challenge");
  const auto at = r.body.find(R"("expires":)");
  REQUIRE(at != std::string::npos);
  const long long expires = std::stoll(r.body.substr(at + 10));
  const std::string late_nonce = tollgate::pow::solve(late, 4, 1);
  while (std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
             .count() <= expires) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(reason_of(late + ":" + late_nonce, b) == "expired");
  CHECK(metrics_text(f.gw).find(R"(tollgate_violations_total{reason="pow_failed"} 7)") !=
        std::string::npos);
}

TEST_CASE("pay to pass: past the limit a proof admits one request", "[integration][pow]") {
  fixture f;
  const std::string from = "127.0.0.21";
  CHECK(request(f.gw.port, get("/paid"), from).status == 200);
  CHECK(request(f.gw.port, get("/paid"), from).status == 200);
  auto r = request(f.gw.port, get("/paid"), from);
  REQUIRE(r.status == 428);  // instead of 429
  CHECK(r.header("x-pow-difficulty") == "6");
  CHECK(r.header("x-ratelimit-remaining") == "0");  // it went through the limits
  CHECK(r.header("retry-after").size() > 0);
  const std::string ch = r.header("x-pow-challenge");
  const auto before = f.echo.requests();
  r = request(f.gw.port, with_proof("/paid", ch, solve_with_cli(ch, "6")), from);
  CHECK(r.status == 200);
  CHECK(f.echo.requests() == before + 1);
  // One proof, one request.
  r = request(f.gw.port, with_proof("/paid", ch, tollgate::pow::solve(ch, 6, 1)), from);
  CHECK(r.status == 428);
  // A proof of less than on_limit_bits does not pay.
  const std::string ch2 = r.header("x-pow-challenge");
  r = request(f.gw.port, with_proof("/paid", ch2, weak_nonce(ch2, 6)), from);
  CHECK(r.status == 428);
  CHECK(r.body.find(R"("reason":"insufficient_work")") != std::string::npos);
  CHECK(metrics_text(f.gw).find(
            R"(tollgate_requests_total{category="paid",decision="pow_passed"} 1)") !=
        std::string::npos);
}

TEST_CASE("repeated violations ban an address: 403, nothing upstream, lifted by the admin API",
          "[integration][pow]") {
  setenv("TOLLGATE_ADMIN_TOKEN", "s3cret-token", 1);
  fixture f;
  unsetenv("TOLLGATE_ADMIN_TOKEN");
  const std::string from = "127.0.0.31";
  for (int i = 0; i < 3; ++i)
    CHECK(request(f.gw.port, get("/login?status=401"), from).status == 401);
  const auto before = f.echo.requests();
  auto r = request(f.gw.port, get("/x"), from);
  REQUIRE(r.status == 403);
  CHECK(r.header("content-type") == "application/problem+json");
  CHECK(r.body.find(R"("code":"banned")") != std::string::npos);
  const int retry = std::stoi(r.header("retry-after"));
  CHECK(retry >= 29);
  CHECK(retry <= 30);
  CHECK(r.header("x-ratelimit-limit").empty());
  CHECK(request(f.gw.port, get("/guarded/x"), from).status == 403);  // every category
  CHECK(f.echo.requests() == before);
  CHECK(request(f.gw.port, get("/x"), "127.0.0.32").status == 200);  // only that address

  const std::string auth = "Authorization: Bearer s3cret-token\r\n";
  CHECK(request(f.gw.admin_port, get("/admin/bans")).status == 401);
  CHECK(request(f.gw.admin_port, get("/admin/bans", "Authorization: Bearer wrong\r\n")).status ==
        401);
  r = request(f.gw.admin_port, get("/admin/bans", auth));
  CHECK(r.status == 200);
  CHECK(r.header("content-type") == "application/json");
  CHECK(r.body.find(R"("address":"127.0.0.31/32")") != std::string::npos);
  CHECK(r.body.find(R"("bans":1)") != std::string::npos);

  r = request(f.gw.admin_port, get("/admin/addresses/127.0.0.31", auth));
  CHECK(r.status == 200);
  CHECK(r.body.find(R"("individual":3)") != std::string::npos);
  CHECK(r.body.find(R"("failed_auth":0)") != std::string::npos);  // reset by the ban
  CHECK(r.body.find(R"("retry_after":)") != std::string::npos);
  CHECK(r.body.find(R"("category":"open","level":"ipv4_individual","tier":"short","limit":1000)") !=
        std::string::npos);

  r = request(f.gw.admin_port,
              "DELETE /admin/bans/127.0.0.31 HTTP/1.1\r\nHost: a\r\n" + auth + "\r\n");
  CHECK(r.status == 200);
  CHECK(r.body.find(R"("lifted":true)") != std::string::npos);
  CHECK(request(f.gw.port, get("/x"), from).status == 200);
  CHECK(request(f.gw.admin_port,
                "DELETE /admin/bans/127.0.0.31 HTTP/1.1\r\nHost: a\r\n" + auth + "\r\n")
            .status == 404);
  CHECK(request(f.gw.admin_port, get("/admin/addresses/not-an-ip", auth)).status == 400);
  const auto m = metrics_text(f.gw);
  CHECK(m.find("tollgate_bans_total 1") != std::string::npos);
  CHECK(m.find("tollgate_active_bans 0") != std::string::npos);
  CHECK(m.find(R"(tollgate_requests_total{category="open",decision="banned"} 1)") !=
        std::string::npos);
}

TEST_CASE("a proof pays once and never past a global limit", "[integration][pow]") {
  fixture f;
  // A global limit is not for sale: past it, 429 even where pay-to-pass is on.
  CHECK(request(f.gw.port, get("/paid_global"), "127.0.0.41").status == 200);
  CHECK(request(f.gw.port, get("/paid_global"), "127.0.0.42").status == 429);

  // A client with a violation, in a category with PoW and pay-to-pass: its proof pays for the
  // violation; past its limit it is asked for a second one, without a reason and without a
  // pow_failed violation (the first proof was honest).
  const std::string from = "127.0.0.43";
  request(f.gw.port, get("/guarded/x?violation=abuse"), from);
  auto r = request(f.gw.port, get("/both"), from);
  REQUIRE(r.status == 428);
  std::string ch = r.header("x-pow-challenge");
  r = request(f.gw.port, with_proof("/both", ch, tollgate::pow::solve(ch, 4, 1)), from);
  CHECK(r.status == 200);  // the burst of 1
  r = request(f.gw.port, get("/both"), from);
  REQUIRE(r.status == 428);
  ch = r.header("x-pow-challenge");
  r = request(f.gw.port, with_proof("/both", ch, tollgate::pow::solve(ch, 4, 1)), from);
  CHECK(r.status == 428);  // paid for the violation; the limit wants another
  CHECK(r.body.find(R"("reason")") == std::string::npos);
  CHECK(metrics_text(f.gw).find(R"(tollgate_violations_total{reason="pow_failed"} 0)") !=
        std::string::npos);
}
