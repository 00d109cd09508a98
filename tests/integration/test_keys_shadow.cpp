// Limits keyed on data (docs/design.md §3 "Limits beyond the address"), a global limit shared by
// many addresses, cost per route (§3 "Cost per route") and shadow mode (§12), through a real
// tollgate in front of a real tollgate-echo. Clients come from different loopback addresses
// (127.0.0.2, 127.0.0.3, ...) so that a limit wrongly keyed on the address would show.

#include <unistd.h>
#include <catch2/catch.hpp>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

using namespace tollgate::test;

namespace {

const std::string keyed_gateway = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
upstreams: { app: { endpoints: ["{echo}"] } }
routes:
  - { match: { path_prefix: /header }, category: by_header, upstream: app }
  - { match: { path_prefix: /query }, category: by_query, upstream: app }
  - { match: { path_prefix: /cookie }, category: by_cookie, upstream: app }
  - { match: { path_prefix: /bearer }, category: by_bearer, upstream: app }
  - { match: { path_prefix: /legacy }, category: legacy, upstream: app }
default_route: { category: open, upstream: app }
policies: ["{policy}"]
)";

// Every keyed limit: burst 2 at 1/h, so nothing refills during a test. The address level is
// wide, so that on admitted requests the keyed limit is the binding one.
const std::string keyed_policy = R"(
categories:
  open:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  by_header:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      per_api_key: { key: { header: X-Api-Key }, short: { rate: 1/h, burst: 2 } }
  by_query:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      per_tenant: { key: { query: tenant }, short: { rate: 1/h, burst: 2 } }
  by_cookie:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      per_session: { key: { cookie: sid }, short: { rate: 1/h, burst: 2 } }
  by_bearer:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      per_token: { key: { bearer: true }, short: { rate: 1/h, burst: 2 } }
  legacy:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      identity: { header: X-User, short: { rate: 1/h, burst: 2 } }
      global: { short: { rate: 1/h, burst: 3 } }
)";

// Two workers, every request in category `shared`: the global-limit tests' gateway.
const std::string shared_gateway = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
upstreams: { app: { endpoints: ["{echo}"] } }
default_route: { category: shared, upstream: app }
policies: ["{policy}"]
)";

std::string rate_limited(const std::string& category, const std::string& level,
                         const std::string& mode) {
  return R"(tollgate_rate_limited_total{category=")" + category + R"(",level=")" + level +
         R"(",tier="short",mode=")" + mode + R"("})";
}

std::string unkeyed(const std::string& category, const std::string& level) {
  return R"(tollgate_unkeyed_requests_total{category=")" + category + R"(",level=")" + level +
         R"("})";
}

std::string requests_total(const std::string& category, const std::string& decision) {
  return R"(tollgate_requests_total{category=")" + category + R"(",decision=")" + decision +
         R"("})";
}

std::string lower(std::string s) {
  for (auto& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Whether `r` carries any rate-limit header.
bool has_rate_limit_headers(const response& r) {
  for (const auto& [name, value] : r.headers) {
    if (name.rfind("x-ratelimit-", 0) == 0 || name.rfind("ratelimit", 0) == 0 ||
        name == "retry-after") {
      return true;
    }
  }
  return false;
}

/// One keyed limit named `limit`, burst 2: `same` carry one key value (possibly written three
/// ways) and come from three addresses: two pass, the third gets 429 naming the limit. `other`
/// (another value) passes on a fresh bucket; each of `keyless` passes past the spent key, limited
/// by the address level only.
void check_keyed_limit(const gateway& gw, const std::string& limit,
                       const std::vector<std::string>& same, const std::string& other,
                       const std::vector<std::string>& keyless) {
  REQUIRE(same.size() == 3);
  auto r = request(gw.port, same[0], "127.0.0.2");
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-level") == limit);
  CHECK(r.header("x-ratelimit-limit") == "2");
  CHECK(r.header("x-ratelimit-remaining") == "1");
  CHECK(r.header("ratelimit") == "\"" + limit + ".short\";r=1;t=3600");

  r = request(gw.port, same[1], "127.0.0.3");
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-level") == limit);
  CHECK(r.header("x-ratelimit-remaining") == "0");

  r = request(gw.port, same[2], "127.0.0.4");
  CHECK(r.status == 429);
  CHECK(r.header("x-ratelimit-level") == limit);
  CHECK(r.header("x-ratelimit-reason") == "burst_exhausted");
  CHECK(r.header("retry-after") == "3600");
  CHECK(r.body.find("\"level\":\"" + limit + "\",\"tier\":\"short\"") != std::string::npos);
  CHECK(r.body.find("rate limit exceeded at " + limit + " (short tier)") != std::string::npos);

  r = request(gw.port, other, "127.0.0.4");
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-level") == limit);
  CHECK(r.header("x-ratelimit-remaining") == "1");

  // More keyless requests than the burst: a bucket for "no key" would refuse the third.
  for (const auto& raw : keyless) {
    INFO(raw);
    r = request(gw.port, raw, "127.0.0.4");
    CHECK(r.status == 200);
    CHECK(r.header("x-ratelimit-level") == "ipv4_individual");
  }
}

}  // namespace

TEST_CASE("a header-keyed limit is shared by every address sending the same key",
          "[integration][keys]") {
  echo_server echo;
  gateway gw(keyed_gateway, keyed_policy, echo.port);
  check_keyed_limit(
      gw, "per_api_key",
      {get("/header", "X-Api-Key: k-1\r\n"), get("/header/a", "x-api-key: k-1\r\n"),
       get("/header/b", "X-API-KEY: k-1\r\n")},
      get("/header", "X-Api-Key: k-2\r\n"),
      {get("/header"), get("/header", "X-Api-Key-2: k-1\r\n"), get("/header", "X-Api-Key:\r\n")});
  const auto text = metrics_text(gw);
  INFO(text);
  CHECK(sample(text, rate_limited("by_header", "per_api_key", "enforce")) == 1);
  CHECK(sample(text, unkeyed("by_header", "per_api_key")) == 3);
  CHECK(sample(text, requests_total("by_header", "limited")) == 1);
  CHECK(sample(text, requests_total("by_header", "allowed")) == 6);
  // Keys are hashed: their values never become label values.
  CHECK(text.find("k-1") == std::string::npos);
}

TEST_CASE("a key header sent twice is refused with 400, and nothing is charged or forwarded",
          "[integration][keys]") {
  echo_server echo;
  gateway gw(keyed_gateway, keyed_policy, echo.port);
  // Which value would be charged, and which would the upstream read? Neither: 400.
  const std::pair<const char*, const char*> twice[] = {
      {"/header", "X-Api-Key: k-1\r\nX-Api-Key: k-2\r\n"},
      {"/header", "X-Api-Key: k-1\r\nx-api-key: k-1\r\n"},
      {"/legacy", "X-User: a\r\nX-User: b\r\n"}};
  for (const auto& [target, fields] : twice) {
    INFO(target << " " << fields);
    const auto r = request(gw.port, get(target, fields));
    CHECK(r.status == 400);
    CHECK(r.header("content-type") == "application/problem+json");
    CHECK(r.body.find("which keys a rate limit, is sent more than once") != std::string::npos);
  }
  CHECK(echo.requests() == 0);
  // A header that keys no limit of the request's category may come twice (X-User keys a limit
  // of legacy only).
  CHECK(request(gw.port, get("/header", "X-User: a\r\nX-User: b\r\n")).status == 200);
  // Once is fine, and the limit has its whole burst (2): nothing was charged above.
  CHECK(request(gw.port, get("/header", "X-Api-Key: k-1\r\n")).status == 200);
  CHECK(request(gw.port, get("/header", "X-Api-Key: k-1\r\n")).status == 200);
  CHECK(request(gw.port, get("/header", "X-Api-Key: k-1\r\n")).status == 429);
}

TEST_CASE("a query-keyed limit compares percent-decoded values, '+' as a space",
          "[integration][keys]") {
  echo_server echo;
  gateway gw(keyed_gateway, keyed_policy, echo.port);
  // "acme corp" three ways; "acme+corp" (an escaped plus) is another tenant.
  check_keyed_limit(gw, "per_tenant",
                    {get("/query?tenant=acme+corp"), get("/query/x?page=2&tenant=acme%20corp"),
                     get("/query?tenant=acme%20corp&tenant=other")},
                    get("/query?tenant=acme%2Bcorp"),
                    {get("/query"), get("/query?tenant="), get("/query?tenants=acme+corp"),
                     get("/query?x=tenant")});
  const auto text = metrics_text(gw);
  INFO(text);
  CHECK(sample(text, rate_limited("by_query", "per_tenant", "enforce")) == 1);
  CHECK(sample(text, unkeyed("by_query", "per_tenant")) == 4);
}

TEST_CASE("a cookie-keyed limit reads the named cookie among others", "[integration][keys]") {
  echo_server echo;
  gateway gw(keyed_gateway, keyed_policy, echo.port);
  check_keyed_limit(
      gw, "per_session",
      {get("/cookie", "Cookie: sid=abc\r\n"), get("/cookie", "Cookie: theme=dark; sid=abc\r\n"),
       get("/cookie", "Cookie: sid=\"abc\"; lang=en\r\n")},
      get("/cookie", "Cookie: sid=abd\r\n"),
      {get("/cookie"), get("/cookie", "Cookie: xsid=abc\r\n"),
       get("/cookie", "Cookie: theme=abc\r\n")});
  const auto text = metrics_text(gw);
  INFO(text);
  CHECK(sample(text, rate_limited("by_cookie", "per_session", "enforce")) == 1);
  CHECK(sample(text, unkeyed("by_cookie", "per_session")) == 3);
}

TEST_CASE("a bearer-keyed limit is keyed on the token of Authorization: Bearer",
          "[integration][keys]") {
  echo_server echo;
  gateway gw(keyed_gateway, keyed_policy, echo.port);
  check_keyed_limit(gw, "per_token",
                    {get("/bearer", "Authorization: Bearer tok-1\r\n"),
                     get("/bearer", "Authorization: bearer tok-1\r\n"),
                     get("/bearer", "authorization: Bearer tok-1\r\n")},
                    get("/bearer", "Authorization: Bearer tok-2\r\n"),
                    {get("/bearer"), get("/bearer", "Authorization: Basic dG9rLTE=\r\n"),
                     get("/bearer", "Authorization: Bearer\r\n")});
  const auto text = metrics_text(gw);
  INFO(text);
  CHECK(sample(text, rate_limited("by_bearer", "per_token", "enforce")) == 1);
  CHECK(sample(text, unkeyed("by_bearer", "per_token")) == 3);
  CHECK(text.find("tok-1") == std::string::npos);
}

TEST_CASE("the older spellings identity and global still limit, by those names",
          "[integration][keys]") {
  echo_server echo;
  gateway gw(keyed_gateway, keyed_policy, echo.port);
  auto as = [&](const std::string& user, const std::string& source) {
    return request(gw.port, get("/legacy", user.empty() ? "" : "X-User: " + user + "\r\n"), source);
  };
  // identity burst 2 per user, global burst 3 for everyone; the binding is the fewest remaining.
  auto r = as("alice", "127.0.0.2");
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-level") == "identity");
  CHECK(r.header("x-ratelimit-remaining") == "1");
  CHECK(r.header("ratelimit-policy").find(R"("identity.short";q=2;w=7200)") != std::string::npos);
  CHECK(r.header("ratelimit-policy").find(R"("global.short";q=3;w=10800)") != std::string::npos);
  CHECK(as("alice", "127.0.0.3").status == 200);
  r = as("alice", "127.0.0.4");
  CHECK(r.status == 429);
  CHECK(r.header("x-ratelimit-level") == "identity");
  CHECK(r.body.find(R"("level":"identity")") != std::string::npos);
  // The refusal committed nothing: the global limit still has one left, and bob takes it.
  r = as("bob", "127.0.0.5");
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-level") == "global");
  CHECK(r.header("x-ratelimit-remaining") == "0");
  r = as("carol", "127.0.0.6");
  CHECK(r.status == 429);
  CHECK(r.header("x-ratelimit-level") == "global");
  CHECK(r.body.find(R"("level":"global")") != std::string::npos);
  // Without X-User the identity limit does not apply, the global one does.
  r = as("", "127.0.0.7");
  CHECK(r.status == 429);
  CHECK(r.header("x-ratelimit-level") == "global");

  const auto text = metrics_text(gw);
  INFO(text);
  CHECK(sample(text, rate_limited("legacy", "identity", "enforce")) == 1);
  CHECK(sample(text, rate_limited("legacy", "global", "enforce")) == 2);
  CHECK(sample(text, unkeyed("legacy", "identity")) == 1);
  CHECK(echo.requests() == 3);
}

TEST_CASE("over two workers a global limit binds only when the whole of it rejects",
          "[integration][keys]") {
  const std::string policy_yaml = R"(
categories:
  shared:
    limits:
      identity: { header: X-User, short: { rate: 1/h, burst: 2 } }
      global: { short: { rate: 1/h, burst: 4 } }
)";
  echo_server echo;
  gateway gw(shared_gateway, policy_yaml, echo.port);
  // One keep-alive connection stays on one worker: alice's first two requests spend that
  // worker's slice of the global limit (2 of 4), and her third is refused by identity while
  // the other slice still holds 2 (issue 21: it was reported as global).
  const std::string as_alice = get("/a", "X-User: alice\r\n");
  const auto alice = exchange(gw.port, as_alice + as_alice + as_alice, 3, "127.0.0.2");
  CHECK(alice[0].status == 200);
  CHECK(alice[1].status == 200);
  CHECK(alice[2].status == 429);
  CHECK(alice[2].header("x-ratelimit-level") == "identity");
  CHECK(alice[2].body.find(R"("level":"identity")") != std::string::npos);
  // The other slice's two go to bob, on one connection (whichever worker it lands on); then
  // the whole global limit is spent, and it binds.
  const auto bob = exchange(gw.port, get("/b", "X-User: bob\r\n") + get("/b", "X-User: bob\r\n"), 2,
                            "127.0.0.3");
  CHECK(bob[0].status == 200);
  CHECK(bob[1].status == 200);
  const auto carol = request(gw.port, get("/c", "X-User: carol\r\n"), "127.0.0.4");
  CHECK(carol.status == 429);
  CHECK(carol.header("x-ratelimit-level") == "global");
  CHECK(echo.requests() == 4);
}

TEST_CASE("a global limit over two workers admits exactly its burst across many addresses",
          "[integration][keys]") {
  const std::string policy_yaml = R"(
categories:
  shared:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
      everyone: { key: global, short: { rate: 1/h, burst: 5 } }
)";
  echo_server echo;
  gateway gw(shared_gateway, policy_yaml, echo.port);

  // Six clients at once, each on its own address and its own connections (which the gateway
  // spreads over its workers), four requests each: 24 requests for a burst of 5.
  constexpr int clients = 6, each = 4;
  std::vector<std::vector<response>> answers(clients);
  std::vector<std::string> errors(clients);
  {
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) {
      threads.emplace_back([&, c] {
        try {
          for (int i = 0; i < each; ++i)
            answers[c].push_back(request(gw.port, get("/x"), "127.0.0." + std::to_string(c + 2)));
        } catch (const std::exception& e) {
          errors[c] = e.what();
        }
      });
    }
    for (auto& t : threads)
      t.join();
  }
  int admitted = 0, refused = 0;
  for (int c = 0; c < clients; ++c) {
    INFO("client " << c << ": " << errors[c]);
    REQUIRE(errors[c].empty());
    for (const auto& r : answers[c]) {
      if (r.status == 200) {
        ++admitted;
      } else {
        CHECK(r.status == 429);
        CHECK(r.header("x-ratelimit-level") == "everyone");
        CHECK(r.body.find(R"("level":"everyone")") != std::string::npos);
        ++refused;
      }
    }
  }
  CHECK(admitted == 5);
  CHECK(refused == clients * each - 5);
  // Afterwards, one by one from yet other addresses: still nothing left in any slice.
  for (int i = 0; i < 4; ++i) {
    const auto r = request(gw.port, get("/y"), "127.0.1." + std::to_string(i + 1));
    CHECK(r.status == 429);
    CHECK(r.header("x-ratelimit-level") == "everyone");
  }
  CHECK(echo.requests() == 5);
  const auto text = metrics_text(gw);
  INFO(text);
  CHECK(sample(text, rate_limited("shared", "everyone", "enforce")) == clients * each - 5 + 4);
  CHECK(sample(text, requests_total("shared", "allowed")) == 5);
}

TEST_CASE("a global limit over two workers lends one worker's share to the other in sequence",
          "[integration][keys]") {
  // One connection at a time: whichever worker takes them, the whole burst must be usable.
  const std::string policy_yaml = R"(
categories:
  shared:
    limits:
      everyone: { key: global, short: { rate: 1/h, burst: 3 } }
)";
  echo_server echo;
  gateway gw(shared_gateway, policy_yaml, echo.port);
  std::vector<int> statuses;
  for (int i = 0; i < 8; ++i)
    statuses.push_back(request(gw.port, get("/x"), "127.0.0." + std::to_string(i + 2)).status);
  CHECK(statuses == std::vector<int>{200, 200, 200, 429, 429, 429, 429, 429});
}

TEST_CASE("a route's cost overrides its category's cost", "[integration][cost]") {
  const std::string gateway_yaml = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
upstreams: { app: { endpoints: ["{echo}"] } }
routes:
  - { match: { path: /export }, category: general, upstream: app, cost: 5 }
default_route: { category: general, upstream: app }
policies: ["{policy}"]
)";
  const std::string policy_yaml = R"(
categories:
  general:
    cost: 2
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 20 } }
)";
  echo_server echo;
  gateway gw(gateway_yaml, policy_yaml, echo.port);
  struct step {
    const char* target;
    int status;
    const char* remaining;
  };
  // Burst 20: /export takes 5, anything else the category's 2. A refusal shows the stored
  // state (cost > 1: a 429 may honestly say 3 remain).
  const step steps[] = {{"/export", 200, "15"}, {"/other", 200, "13"}, {"/export", 200, "8"},
                        {"/export", 200, "3"},  {"/export", 429, "3"}, {"/other", 200, "1"},
                        {"/other", 429, "1"}};
  int i = 0;
  for (const auto& s : steps) {
    INFO("step " << i++ << " " << s.target);
    const auto r = request(gw.port, get(s.target));
    CHECK(r.status == s.status);
    CHECK(r.header("x-ratelimit-remaining") == s.remaining);
    CHECK(r.header("x-ratelimit-limit") == "20");
  }
  CHECK(echo.requests() == 5);
}

TEST_CASE("a route cost above a burst of its category is an error at the route's line",
          "[integration][cost]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("tollgate-cost-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "policy.yaml")
      << "categories:\n"
         "  general:\n"
         "    limits:\n"
         "      ipv4_individual: { short: { rate: 1/s, burst: 20 }, long: { rate: 100/h, burst: "
         "100 } }\n";
  auto write_gateway = [&](const std::string& export_cost, const std::string& default_cost) {
    std::ofstream(dir / "gateway.yaml")
        << "listeners: [{ name: public, address: 127.0.0.1, port: 0 }]\n"
           "upstreams: { app: { endpoints: ['127.0.0.1:1'] } }\n"
           "routes:\n"
           "  - { match: { path: /cheap }, category: general, upstream: app, cost: 3 }\n"
           "  - { match: { path: /export }, category: general, upstream: app, cost: "
        << export_cost
        << " }\n"
           "default_route: { category: general, upstream: app"
        << default_cost
        << " }\n"
           "policies: [policy.yaml]\n";
  };
  const std::string file = (dir / "gateway.yaml").string();
  auto check_config = [&](std::string& out) {
    return run_with_input({built("tollgate"), "--check-config", file}, "", out);
  };
  std::string out;

  // Equal to the smallest burst: fine.
  write_gateway("20", "");
  CHECK(check_config(out) == 0);
  INFO(out);

  write_gateway("21", "");
  CHECK(check_config(out) == 1);
  CHECK(out.find(file + ":5:") != std::string::npos);
  CHECK(out.find("cost 21 exceeds burst 20 of ipv4_individual.short") != std::string::npos);

  // The default route's cost the same way, at its own line.
  write_gateway("20", ", cost: 25");
  CHECK(check_config(out) == 1);
  CHECK(out.find(file + ":6:") != std::string::npos);
  CHECK(out.find("cost 25") != std::string::npos);
  fs::remove_all(dir);
}

namespace {

const std::string shadow_gateway = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
logging: { level: info, access_log: true }
upstreams: { app: { endpoints: ["{echo}"] } }
routes:
  - { match: { path_prefix: /trial }, category: trial, upstream: app }
  - { match: { path_prefix: /mixed }, category: mixed, upstream: app }
default_route: { category: open, upstream: app }
policies: ["{policy}"]
)";

const std::string shadow_policy = R"(
categories:
  open:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
  trial:
    mode: shadow
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 2 }, long: { rate: 1/h, burst: 10 } }
  mixed:
    limits:
      ipv4_individual: { short: { rate: 1/h, burst: 3 } }
      ipv4_network: { short: { rate: 1/h, burst: 2 }, shadow: true }
)";

const std::string shadow_announced = R"(["X-Tollgate-Shadow",)";

}  // namespace

TEST_CASE("a category in shadow mode forwards what it would refuse and tells only the upstream",
          "[integration][shadow]") {
  echo_server echo;
  gateway gw(shadow_gateway, shadow_policy, echo.port);
  for (int i = 0; i < 2; ++i) {
    const auto r = request(gw.port, get("/trial"));
    CHECK(r.status == 200);
    CHECK_FALSE(has_rate_limit_headers(r));
    CHECK(r.body.find(shadow_announced) == std::string::npos);
  }
  for (int i = 0; i < 3; ++i) {
    const auto before = echo.requests();
    const auto r = request(gw.port, get("/trial"));
    CHECK(r.status == 200);
    CHECK(echo.requests() == before + 1);
    CHECK(r.body.find(R"(["X-Tollgate-Shadow","ipv4_individual.short"])") != std::string::npos);
    CHECK_FALSE(has_rate_limit_headers(r));
    INFO(r.body);
  }
  const auto text = metrics_text(gw);
  INFO(text);
  CHECK(sample(text, requests_total("trial", "allowed")) == 2);
  CHECK(sample(text, requests_total("trial", "shadow_limited")) == 3);
  CHECK(sample(text, requests_total("trial", "limited")) <= 0);
  CHECK(sample(text, rate_limited("trial", "ipv4_individual", "shadow")) == 3);
  CHECK(sample(text, rate_limited("trial", "ipv4_individual", "enforce")) <= 0);
}

TEST_CASE("a shadowed category commits nothing for the requests it would have refused",
          "[integration][shadow]") {
  echo_server echo;
  gateway gw(shadow_gateway, shadow_policy, echo.port);
  // Two admitted (both tiers committed), then four that the short tier would refuse: the long
  // tier allows them, yet a shadow-limited request commits no tier of a shadowed limit.
  for (int i = 0; i < 6; ++i)
    CHECK(request(gw.port, get("/trial")).status == 200);
  const auto state = request(gw.admin_port, get("/admin/addresses/127.0.0.1"));
  INFO(state.body);
  CHECK(state.status == 200);
  CHECK(
      state.body.find(
          R"({"category":"trial","level":"ipv4_individual","tier":"long","limit":10,"remaining":8,)") !=
      std::string::npos);

  // Enforced, with a short tier that no longer binds: the long tier has 2 spent, not 6.
  std::string enforced = shadow_policy;
  enforced.replace(enforced.find("    mode: shadow\n"), 17, "");
  enforced.replace(enforced.find("burst: 2 }, long"), 8, "burst: 100");
  REQUIRE(enforced.find("mode: shadow") == std::string::npos);
  CHECK(gw.reload(shadow_gateway, enforced).find("in force") != std::string::npos);
  const auto r = request(gw.port, get("/trial"));
  CHECK(r.status == 200);
  CHECK(r.header("x-ratelimit-level") == "ipv4_individual");
  CHECK(r.header("x-ratelimit-remaining") == "7");
  CHECK(r.header("ratelimit").rfind(R"("ipv4_individual.long";r=7;)", 0) == 0);
  CHECK(r.body.find(shadow_announced) == std::string::npos);
}

TEST_CASE("one shadowed limit beside an enforced one: headers and state of the enforced only",
          "[integration][shadow]") {
  echo_server echo;
  gateway gw(shadow_gateway, shadow_policy, echo.port);
  const std::string policy = R"("ipv4_individual.short";q=3;w=10800)";
  // 1 and 2: both limits allow. The shadowed one has fewer left, yet the enforced one binds.
  for (const char* remaining : {"2", "1"}) {
    const auto r = request(gw.port, get("/mixed"));
    CHECK(r.status == 200);
    CHECK(r.header("x-ratelimit-level") == "ipv4_individual");
    CHECK(r.header("x-ratelimit-limit") == "3");
    CHECK(r.header("x-ratelimit-remaining") == remaining);
    CHECK(r.header("ratelimit-policy") == policy);
    CHECK(r.body.find(shadow_announced) == std::string::npos);
  }
  // 3: the shadowed network limit would refuse; forwarded, announced upstream only.
  auto before = echo.requests();
  auto r = request(gw.port, get("/mixed"));
  CHECK(r.status == 200);
  CHECK(echo.requests() == before + 1);
  CHECK(r.body.find(R"(["X-Tollgate-Shadow","ipv4_network.short"])") != std::string::npos);
  CHECK(r.header("x-ratelimit-level") == "ipv4_individual");
  CHECK(r.header("x-ratelimit-remaining") == "0");
  CHECK(r.header("ratelimit") == R"("ipv4_individual.short";r=0;t=10800)");
  CHECK(r.header("ratelimit-policy") == policy);
  CHECK(r.header("retry-after").empty());
  // 4: the enforced limit was committed by request 3, so it refuses now.
  before = echo.requests();
  r = request(gw.port, get("/mixed"));
  CHECK(r.status == 429);
  CHECK(echo.requests() == before);
  CHECK(r.header("x-ratelimit-level") == "ipv4_individual");
  CHECK(r.header("ratelimit-policy") == policy);
  CHECK(r.body.find(R"("level":"ipv4_individual")") != std::string::npos);

  const auto text = metrics_text(gw);
  INFO(text);
  CHECK(sample(text, requests_total("mixed", "allowed")) == 2);
  CHECK(sample(text, requests_total("mixed", "shadow_limited")) == 1);
  CHECK(sample(text, requests_total("mixed", "limited")) == 1);
  CHECK(sample(text, rate_limited("mixed", "ipv4_network", "shadow")) == 1);
  CHECK(sample(text, rate_limited("mixed", "ipv4_individual", "enforce")) == 1);
  CHECK(sample(text, rate_limited("mixed", "ipv4_network", "enforce")) <= 0);
}

TEST_CASE("a client's X-Tollgate-Shadow never reaches the upstream", "[integration][shadow]") {
  echo_server echo;
  gateway gw(shadow_gateway, shadow_policy, echo.port);
  // Admitted normally: the forged announcement is dropped, whatever its spelling.
  for (const char* name : {"X-Tollgate-Shadow", "x-tollgate-shadow"}) {
    const auto r = request(gw.port, get("/open", std::string(name) + ": forged.short\r\n"));
    CHECK(r.status == 200);
    CHECK(lower(r.body).find("x-tollgate-shadow") == std::string::npos);
    CHECK(r.body.find("forged") == std::string::npos);
  }
  // Shadow-limited: the upstream sees the gateway's announcement, once, and not the client's.
  for (int i = 0; i < 2; ++i)
    request(gw.port, get("/trial"));
  const auto r = request(gw.port, get("/trial", "X-Tollgate-Shadow: forged.short\r\n"));
  CHECK(r.status == 200);
  INFO(r.body);
  CHECK(r.body.find("forged") == std::string::npos);
  const auto first = lower(r.body).find("x-tollgate-shadow");
  CHECK(first != std::string::npos);
  CHECK(lower(r.body).find("x-tollgate-shadow", first + 1) == std::string::npos);
}

TEST_CASE("the access log names shadow-limited requests", "[integration][shadow]") {
  echo_server echo;
  gateway gw(shadow_gateway, shadow_policy, echo.port);
  for (const char* decision : {"allowed", "allowed", "shadow_limited"}) {
    CHECK(request(gw.port, get("/trial/log")).status == 200);
    const auto line = gw.process->wait_for_line("access ");
    INFO(line);
    CHECK(line.find("\"GET /trial/log HTTP/1.1\" 200") != std::string::npos);
    CHECK(line.find("category=trial decision=" + std::string(decision) + " ") != std::string::npos);
  }
}
