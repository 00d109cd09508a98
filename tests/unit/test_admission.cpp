// Admission as tables from strings, without a socket: a request head written as text, the
// configuration as YAML, and the step, the answer and the effects admission returns. One table
// per concern: upgrade rules, path and route, the client's address, the access lists (deny
// first), preflights, the proof (header or cookie), the gate's two steps around the store, the
// gateway's own fields.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gateway/admission/admission.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/core/text.hpp"
#include "gateway/limit/memory_store.hpp"
#include "gateway/pow/challenge.hpp"

using namespace tollgate;
using admission::step;
using core::outcome;

namespace {

namespace fs = std::filesystem;

const core::nanos now = 1'735'000'000 * core::ns_per_s;

const char* const policy_text = R"(categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 2 } }
  keyed:
    limits:
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/s, burst: 1 } }
  guarded:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
    pow: { on_limit: true, on_limit_bits: 4 }
  scripts:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
    cors: { allow_origins: ["https://app.example"] }
)";

const char* const gateway_text = R"(listeners: [{ name: public, address: 127.0.0.1, port: 8080 }]
trusted_proxies: [10.0.0.0/8]
upstreams: { app: { endpoints: ["127.0.0.1:9000"] } }
routes:
  - { match: { path_prefix: /keyed/ }, category: keyed, upstream: app }
  - { match: { path_prefix: /pay/ }, category: guarded, upstream: app }
  - { match: { path_prefix: /cors/, method: GET }, category: scripts, upstream: app }
default_route: { category: general, upstream: app }
policies: [policy.yaml]
access: { allow: [192.0.2.0/28], deny: [198.51.100.0/24] }
)";

/// Fields parsed from "Name: value" lines, looked up case-insensitively.
class string_headers final : public admission::header_source {
 public:
  explicit string_headers(std::string_view text) {
    while (!text.empty()) {
      const auto end = text.find('\n');
      const std::string_view line = text.substr(0, end);
      text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
      const auto colon = line.find(':');
      if (colon == std::string_view::npos) continue;
      fields_.emplace_back(std::string(line.substr(0, colon)),
                           std::string(core::trim(line.substr(colon + 1))));
    }
  }
  std::string_view value(std::string_view name) const override {
    for (const auto& [n, v] : fields_) {
      if (core::iequals(n, name)) return v;
    }
    return {};
  }
  std::size_t count(std::string_view name) const override {
    std::size_t n = 0;
    for (const auto& f : fields_)
      n += core::iequals(f.first, name) ? 1 : 0;
    return n;
  }
  void each(std::string_view name, void (*f)(void*, std::string_view),
            void* context) const override {
    for (const auto& [n, v] : fields_) {
      if (core::iequals(n, name)) f(context, v);
    }
  }

 private:
  std::vector<std::pair<std::string, std::string>> fields_;
};

/// The configuration, loaded from files as the gateway loads it.
config::gateway_config load(const char* policy = policy_text) {
  const fs::path dir =
      fs::temp_directory_path() / ("tollgate-admission-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "policy.yaml") << policy;
  std::ofstream(dir / "gateway.yaml") << gateway_text;
  auto c = config::load_gateway((dir / "gateway.yaml").string());
  fs::remove_all(dir);
  return c;
}

/// One gateway's admission: configuration, PoW state, a store that answers at once.
struct world {
  explicit world(const char* policy = policy_text) : cfg(load(policy)) {}

  config::gateway_config cfg;
  policy::compiled_policy compiled{cfg.policy, {1, 2}};
  policy::router router{cfg, compiled};
  policy::challenge_page page{cfg.pow.page};
  policy::pow_state pow{"admission-test-secret", cfg.pow, cfg.policy.pow_counters};
  policy::gate gate{pow};
  limit::memory_store store{{}, 3};
  admission::setting setting{cfg, compiled, router, &page, gate, pow};
  admission::record r;
  int asked = 0;         ///< times the store was asked
  core::nanos at = now;  ///< the instant requests come

  /// Admits `method target` with `fields` from `peer`, the store deciding when asked.
  step run(std::string_view method, std::string_view target, std::string_view fields = "",
           std::string_view peer = "203.0.113.7", bool upgrade = false, bool body = false) {
    headers = std::make_unique<string_headers>(fields);
    const admission::request_view v{
        method, target,  headers.get(), core::address::parse(peer).value(),
        false,  upgrade, body,          !body,
        true,   at};
    step s = admission::spend_claimed(pow, setting, admission::admit(setting, v, r), r);
    if (s != step::ask_store) return s;
    ++asked;
    r.decision = store.decide(r.limits);
    return admission::spend_claimed(pow, setting, admission::after_store(setting, r), r);
  }
  /// A proof for category `name` at `bits` bound to `peer`.
  std::string proof(const char* name, unsigned bits, std::string_view peer) const {
    const auto who = policy::subjects_of(core::address::parse(peer).value(), compiled.prefixes());
    const std::string challenge =
        pow.challenger().issue({now / core::ns_per_s + 60, static_cast<std::uint8_t>(bits),
                                compiled.find(name)->pow.tag, who.tag});
    return challenge + ":" + pow::solve(challenge, bits, 1);
  }
  std::string category() const { return r.route == nullptr ? "" : r.category().name; }

  std::unique_ptr<string_headers> headers;
};

bool has(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

}  // namespace

TEST_CASE("admission: upgrade rules and the path are checked before the route") {
  struct row {
    const char* target;
    bool upgrade;
    bool body;
    step want;
    std::uint16_t status;
    const char* detail;
  };
  const row rows[] = {
      {"/a", true, true, step::answer, 400, "a WebSocket upgrade carries no body"},
      {"/a", true, false, step::forward, 200, ""},
      {"/a", false, true, step::forward, 200, ""},
      {"/a/%zz", false, false, step::answer, 400, "malformed request target"},
      {"/../x", false, false, step::answer, 400, "malformed request target"},
      {"*", false, false, step::answer, 400, "malformed request target"},
  };
  for (const auto& x : rows) {
    world w;
    INFO(x.target << " upgrade " << x.upgrade << " body " << x.body);
    CHECK(w.run("GET", x.target, "", "203.0.113.7", x.upgrade, x.body) == x.want);
    if (x.want != step::answer) continue;
    CHECK(w.r.reply.status == x.status);
    CHECK(has(w.r.reply.body, x.detail));
    CHECK_FALSE(w.r.reply.keep_open);
    CHECK(w.r.route == nullptr);
  }
}

TEST_CASE("admission: routes by the normalised path, a preflight by the method it announces") {
  struct row {
    const char* method;
    const char* target;
    const char* fields;
    const char* category;
  };
  const row rows[] = {
      {"GET", "/keyed/a", "", "keyed"},
      {"GET", "/x/../keyed//a", "", "keyed"},
      {"GET", "/%6Beyed/a", "", "keyed"},
      {"POST", "/cors/a", "", "general"},  // the scripts route is GET only
      {"GET", "/cors/a", "", "scripts"},
      {"OPTIONS", "/cors/a", "Origin: https://app.example\nAccess-Control-Request-Method: GET\n",
       "scripts"},
      {"OPTIONS", "/cors/a", "Origin: https://app.example\n", "general"},  // not a preflight
  };
  for (const auto& x : rows) {
    world w;
    INFO(x.method << " " << x.target);
    w.run(x.method, x.target, x.fields);
    CHECK(w.category() == x.category);
  }
}

TEST_CASE("admission: the client is the peer, or past trusted proxies the hop they name") {
  struct row {
    const char* peer;
    const char* fields;
    const char* client;
  };
  const row rows[] = {
      {"203.0.113.7", "", "203.0.113.7"},
      {"203.0.113.7", "X-Forwarded-For: 192.0.2.200\n", "203.0.113.7"},  // peer not trusted
      {"10.1.2.3", "X-Forwarded-For: 192.0.2.200\n", "192.0.2.200"},
      {"10.1.2.3", "X-Forwarded-For: 192.0.2.200, 10.9.9.9\n", "192.0.2.200"},
      {"10.1.2.3", "X-Forwarded-For: 192.0.2.200\nX-Forwarded-For: 10.9.9.9\n", "192.0.2.200"},
      {"10.1.2.3", "X-Forwarded-For: 192.0.2.200:4711\n", "192.0.2.200"},
  };
  for (const auto& x : rows) {
    world w;
    INFO(x.peer << " with " << x.fields);
    w.run("GET", "/a", x.fields, x.peer);
    CHECK(w.r.client.to_string() == x.client);
  }
}

TEST_CASE("admission: the deny list answers before anything else, the allow list passes all") {
  world w;
  // A denied client's proof is not looked at: no verification, no violation, no charge.
  const std::string proof = w.proof("guarded", 4, "198.51.100.9");
  CHECK(w.run("GET", "/pay/", "X-PoW-Solution: " + proof + "\nCookie: tollgate_pow=x:y\n",
              "198.51.100.9") == step::answer);
  CHECK(w.r.reply.status == 403);
  CHECK(has(w.r.reply.body, R"("code":"denied")"));
  CHECK(w.r.fx.outcome == outcome::denied);
  CHECK(w.r.route != nullptr);  // counted by category
  CHECK_FALSE(w.r.fx.gate.verification.has_value());
  CHECK_FALSE(w.r.pow_cookie);
  CHECK(w.asked == 0);
  // Deny wins over a trusted proxy's word too: the client it names is denied.
  CHECK(w.run("GET", "/a", "X-Forwarded-For: 198.51.100.1\n", "10.0.0.1") == step::answer);
  CHECK(w.r.fx.outcome == outcome::denied);
  // The allow list: never limited (the burst is 2), counted allowed, marked exempt.
  for (int i = 0; i < 5; ++i) {
    CHECK(w.run("GET", "/a", "", "192.0.2.3") == step::forward);
    CHECK(w.r.exempt);
    CHECK(w.r.fx.outcome == outcome::allowed);
  }
  CHECK(w.asked == 0);
}

TEST_CASE(
    "admission: a header that keys a limit, sent twice, is refused before a route counts it") {
  world w;
  CHECK(w.run("GET", "/keyed/a", "X-Api-Key: a\nX-Api-Key: b\n") == step::answer);
  CHECK(w.r.reply.status == 400);
  CHECK(has(w.r.reply.body, "which keys a rate limit, is sent more than once"));
  CHECK(w.r.route == nullptr);  // not counted by category
  CHECK(w.asked == 0);
  // Once is charged; another category does not care.
  CHECK(w.run("GET", "/keyed/a", "X-Api-Key: a\n") == step::forward);
  CHECK(w.asked == 1);
  CHECK(w.run("GET", "/a", "X-Api-Key: a\nX-Api-Key: b\n") == step::forward);
}

TEST_CASE("admission: a preflight is answered, charged nothing, but a ban holds") {
  world w;
  const char* preflight =
      "Origin: https://app.example\nAccess-Control-Request-Method: GET\n"
      "Access-Control-Request-Headers: x-trace\n";
  for (int i = 0; i < 3; ++i) {
    REQUIRE(w.run("OPTIONS", "/cors/a", preflight) == step::answer);
    CHECK(w.r.reply.status == 200);
    CHECK(w.r.reply.body.empty());
    CHECK(has(w.r.reply.fields, "Access-Control-Allow-Origin: https://app.example"));
    CHECK(w.r.fx.outcome == outcome::allowed);
  }
  CHECK(w.asked == 0);
  // An origin the category does not allow: still answered, without the CORS fields.
  CHECK(w.run("OPTIONS", "/cors/a",
              "Origin: https://evil.example\nAccess-Control-Request-Method: GET\n") ==
        step::answer);
  CHECK_FALSE(has(w.r.reply.fields, "Access-Control-Allow-Origin"));
  // The limit (burst 1) is whole for the script's request; the next is limited, with CORS.
  CHECK(w.run("GET", "/cors/a", "Origin: https://app.example\n") == step::forward);
  CHECK(w.run("GET", "/cors/a", "Origin: https://app.example\n") == step::answer);
  CHECK(w.r.reply.status == 429);
  CHECK(has(w.r.reply.fields, "Access-Control-Allow-Origin: https://app.example"));
  // A banned client's preflight is refused.
  const auto who =
      policy::subjects_of(core::address::parse("203.0.113.7").value(), w.compiled.prefixes());
  const auto& rules = w.compiled.violations();
  pow::reason_rule rule = rules.rules[rules.pow_failed];
  rule.individual = true;
  rule.ban_threshold = 1;
  rule.ban_duration = 3600 * core::ns_per_s;
  rule.ban_max_duration = rule.ban_duration;
  w.pow.violations().record(who.individual, who.network, 0, rule, now);
  CHECK(w.run("OPTIONS", "/cors/a", preflight) == step::answer);
  CHECK(w.r.reply.status == 403);
  CHECK(w.r.fx.outcome == outcome::banned);
}

TEST_CASE(
    "admission: a proof comes from the header first, else from the cookie, which is cleared") {
  world w;
  const std::string good = w.proof("guarded", 4, "203.0.113.7");
  const std::string other = w.proof("guarded", 4, "203.0.113.99");  // another client's
  // The limit (burst 1) is spent; pay to pass asks a proof of 4 bits.
  CHECK(w.run("GET", "/pay/") == step::forward);
  CHECK(w.run("GET", "/pay/") == step::answer);
  CHECK(w.r.reply.status == 428);
  CHECK(w.r.fx.outcome == outcome::challenged);
  CHECK(has(w.r.reply.fields, "X-PoW-Challenge: "));
  // In the header: spent, forwarded, no cookie to clear.
  CHECK(w.run("GET", "/pay/", "X-PoW-Solution: " + good + "\n") == step::forward);
  CHECK(w.r.fx.outcome == outcome::pow_passed);
  CHECK_FALSE(w.r.pow_cookie);
  // The same proof again: replayed, a new challenge.
  CHECK(w.run("GET", "/pay/", "X-PoW-Solution: " + good + "\n") == step::answer);
  CHECK(w.r.reply.status == 428);
  REQUIRE(w.r.fx.gate.verification.has_value());
  CHECK(*w.r.fx.gate.verification == pow::proof_failure::replayed);
  // Claimed by admission, spent by its caller: two requests with one proof at the same
  // instant, the second's claim lost when the first spent it.
  const std::string twice = w.proof("guarded", 4, "203.0.113.7");
  const string_headers with("X-PoW-Solution: " + twice + "\n");
  const admission::request_view v{
      "GET", "/pay/", &with, core::address::parse("203.0.113.7").value(), false, false, false,
      true,  true,    now};
  admission::record a, b;
  REQUIRE(admission::admit(w.setting, v, a) == step::ask_store);
  a.decision = w.store.decide(a.limits);
  REQUIRE(admission::after_store(w.setting, a) == step::forward);
  REQUIRE(admission::admit(w.setting, v, b) == step::ask_store);
  b.decision = w.store.decide(b.limits);
  REQUIRE(admission::after_store(w.setting, b) == step::forward);
  CHECK(admission::proof_claimed(a));
  CHECK(admission::proof_claimed(b));
  CHECK(admission::spend_claimed(w.pow, w.setting, step::forward, a) == step::forward);
  CHECK(admission::spend_claimed(w.pow, w.setting, step::forward, b) == step::answer);
  CHECK(b.reply.status == 428);
  CHECK(b.fx.outcome == outcome::challenged);
  CHECK(b.fx.gate.pow_failed);
  // In the cookie, after another client's: the one that checks out is taken, and the answer
  // tells the browser to drop the cookie.
  const std::string fresh = w.proof("guarded", 5, "203.0.113.7");
  CHECK(w.run("GET", "/pay/",
              "Cookie: a=1; tollgate_pow=" + other + "; tollgate_pow=" + fresh + "\n") ==
        step::forward);
  CHECK(w.r.fx.outcome == outcome::pow_passed);
  CHECK(w.r.pow_cookie);
  std::string own;
  admission::append_own_fields(w.r, own);
  CHECK(has(own, "Set-Cookie: tollgate_pow=; Path=/; Max-Age=0"));
  // A header proof wins over a cookie.
  CHECK(w.run("GET", "/pay/", "X-PoW-Solution: junk\nCookie: tollgate_pow=" + fresh + "\n") ==
        step::answer);
  CHECK_FALSE(w.r.pow_cookie);
  REQUIRE(w.r.fx.gate.verification.has_value());
  CHECK(*w.r.fx.gate.verification == pow::proof_failure::malformed);
  // A category without proof of work does not read the cookie.
  CHECK(w.run("GET", "/a", "Cookie: tollgate_pow=" + fresh + "\n") == step::forward);
  CHECK_FALSE(w.r.pow_cookie);
}

TEST_CASE("admission: a 428 is the page for a browser, JSON for an API client") {
  struct row {
    const char* accept;
    bool page;
  };
  const row rows[] = {{"", false},
                      {"application/json", false},
                      {"text/html,application/xhtml+xml;q=0.9,*/*;q=0.8", true}};
  for (const auto& x : rows) {
    world w;
    INFO(x.accept);
    w.run("GET", "/pay/");
    const std::string fields = std::string("Accept: ") + x.accept + "\n";
    REQUIRE(w.run("GET", "/pay/", fields) == step::answer);
    CHECK(w.r.reply.status == 428);
    CHECK(has(w.r.reply.fields, "X-PoW-Challenge: "));
    CHECK(w.r.reply.content_type == (x.page ? "text/html; charset=utf-8" : ""));
    CHECK(has(w.r.reply.fields, "Content-Security-Policy: ") == x.page);
    CHECK(has(w.r.reply.body, "<html") == x.page);
  }
}

TEST_CASE("admission: the store's decision, a store that fails, and a full tunnel table") {
  world w;
  CHECK(w.run("GET", "/a") == step::forward);
  CHECK(w.r.rate.present);
  CHECK(w.run("GET", "/a") == step::forward);
  CHECK(w.run("GET", "/a") == step::answer);
  CHECK(w.r.reply.status == 429);
  CHECK(w.r.reply.rate_fields);
  CHECK(w.r.reply.keep_open);
  CHECK(w.r.fx.outcome == outcome::limited);
  CHECK(w.r.verdict.limits_checked);
  CHECK(has(w.r.reply.body, "ipv4_individual"));
  CHECK(w.asked == 3);
  // A refused request whose body is still unread closes the connection.
  CHECK(w.run("POST", "/a", "", "203.0.113.7", false, true) == step::answer);
  CHECK_FALSE(w.r.reply.keep_open);
  // The store did not answer: 503, none of the gate's effects.
  world f;
  const string_headers none("");
  const admission::request_view v{"GET", "/a",  &none, core::address::parse("203.0.113.8").value(),
                                  false, false, false, true,
                                  true,  now};
  REQUIRE(admission::admit(f.setting, v, f.r) == step::ask_store);
  CHECK(admission::store_failed(f.r) == step::answer);
  CHECK(f.r.reply.status == 503);
  CHECK(f.r.fx.outcome == outcome::error);
  CHECK(has(f.r.reply.body, "store_unavailable"));
  // An admitted upgrade whose client holds its connections already: 429, its own reason.
  world t;
  REQUIRE(t.run("GET", "/a", "", "203.0.113.9", true) == step::forward);
  CHECK(admission::tunnels_full(t.r) == step::answer);
  CHECK(t.r.reply.status == 429);
  CHECK(t.r.fx.outcome == outcome::limited);
  CHECK(has(t.r.reply.fields, "X-RateLimit-Reason: too_many_connections"));
}

TEST_CASE("admission: the gateway's own fields on its answers and the upstream's") {
  world w;
  w.run("GET", "/cors/a", "Origin: https://app.example\n");
  std::string own;
  admission::append_own_fields(w.r, own);
  CHECK(has(own, "Access-Control-Allow-Origin: https://app.example"));
  CHECK_FALSE(has(own, "Set-Cookie"));
  // A category whose CORS the upstream owns gets none.
  w.run("GET", "/a", "Origin: https://app.example\n");
  own.clear();
  admission::append_own_fields(w.r, own);
  CHECK(own.empty());
}

namespace {

/// The categories of policy_text, with a ladder whose steps come quickly (docs/design.md §16).
const char* const ladder_policy = R"(categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 4 } }
  keyed:
    limits:
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/s, burst: 1 } }
  guarded:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 4 } }
    pow: { enabled: true, base_bits: 4, step_bits: 1, max_bits: 8 }
  scripts:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
penalties:
  points: { rate_limited: 1 }
  decay: 1/10m
  steps:
    - { at: 2, action: warn }
    - { at: 4, action: throttle, factor: 0.5, for: 5m }
    - { at: 6, action: read_only, for: 1h }
    - { at: 8, action: pow }
    - { at: 10, action: ban, for: 1h }
)";

/// Puts the client at `peer` at `score` on the ladder of `w`, at `now`.
void score(world& w, std::uint32_t points, std::string_view peer = "203.0.113.7") {
  const auto who = policy::subjects_of(core::address::parse(peer).value(), w.compiled.prefixes());
  w.pow.penalties().add(who.individual, points, now, *w.compiled.penalties());
}

std::string own_fields(const admission::record& r) {
  std::string out;
  admission::append_own_fields(r, out);
  return out;
}

}  // namespace

TEST_CASE("admission: each step of the penalty ladder, its header and its answer") {
  struct row {
    std::uint32_t points;
    const char* method;
    const char* target;
    step want;
    std::uint16_t status;  ///< of an answer
    const char* warning;   ///< X-RateLimit-Warning, or "" for none
    const char* body;      ///< part of the answer's body
  };
  const row rows[] = {
      {0, "GET", "/a", step::forward, 0, "", ""},
      {1, "GET", "/a", step::forward, 0, "", ""},
      {2, "GET", "/a", step::forward, 0, "warn", ""},
      {4, "GET", "/a", step::forward, 0, "throttle", ""},
      {6, "GET", "/a", step::forward, 0, "read_only", ""},
      {6, "HEAD", "/a", step::forward, 0, "read_only", ""},
      {6, "POST", "/a", step::answer, 403, "read_only", R"("code":"read_only","step":"read_only")"},
      {6, "DELETE", "/a", step::answer, 403, "read_only", R"("step":"read_only")"},
      {8, "POST", "/a", step::forward, 0, "pow", ""},  // no proof of work in general
      {8, "GET", "/pay/", step::answer, 428, "pow", R"("code":"pow_required")"},
      {10, "GET", "/a", step::answer, 403, "ban", R"("retry_after":3600,"step":"ban")"},
  };
  for (const auto& x : rows) {
    world w(ladder_policy);
    INFO(x.points << " points: " << x.method << " " << x.target);
    score(w, x.points);
    CHECK(w.run(x.method, x.target) == x.want);
    const std::string own = own_fields(w.r);
    if (*x.warning != 0) {
      CHECK(has(own, std::string("X-RateLimit-Warning: ") + x.warning + "\r\n"));
    } else {
      CHECK_FALSE(has(own, "X-RateLimit-Warning"));
    }
    if (x.want != step::answer) continue;
    CHECK(w.r.reply.status == x.status);
    CHECK(has(w.r.reply.body, x.body));
    CHECK(has(w.r.reply.fields, std::string("X-RateLimit-Warning: ") + x.warning));
    if (x.status == 403 && x.points == 10) CHECK(has(w.r.reply.fields, "Retry-After: 3600\r\n"));
    if (x.status != 428) CHECK(w.asked == 0);  // refused before the limits: nothing charged
  }
}

TEST_CASE("admission: a throttled client's limits are scaled, and its 429 names the step") {
  world w(ladder_policy);
  score(w, 4);  // burst 4 x 0.5
  CHECK(w.run("GET", "/a") == step::forward);
  CHECK(w.r.limits.overridden);  // RateLimit-Policy written from the scaled limits
  CHECK(w.r.limits.groups[0].spec->tiers[0].burst == 2);
  CHECK(w.run("GET", "/a") == step::forward);
  CHECK(w.run("GET", "/a") == step::answer);
  CHECK(w.r.reply.status == 429);
  CHECK(has(w.r.reply.body, R"("step":"throttle")"));
  CHECK(w.r.fx.outcome == outcome::limited);
  // Its neighbour, on no step, has the whole burst (its own key, the configured numbers).
  for (int i = 0; i < 4; ++i)
    CHECK(w.run("GET", "/a", "", "203.0.113.8") == step::forward);
  CHECK(w.r.limits.groups[0].spec->tiers[0].burst == 4);
  CHECK_FALSE(w.r.limits.overridden);
}

TEST_CASE("admission: the ladder's pow step takes a proof, a timed step ends with its `for`") {
  world w(ladder_policy);
  score(w, 8);
  CHECK(w.run("GET", "/pay/") == step::answer);
  CHECK(w.r.reply.status == 428);
  const std::string proof = w.proof("guarded", 4, "203.0.113.7");
  CHECK(w.run("GET", "/pay/", "X-PoW-Solution: " + proof + "\n") == step::forward);
  CHECK(w.r.verdict.paid);

  world t(ladder_policy);
  score(t, 6);  // read_only for 1 h; the score decays by one per 10 min
  t.at = now + 59 * 60 * core::ns_per_s;
  CHECK(t.run("POST", "/a") == step::answer);
  CHECK(has(t.r.reply.body, R"("step":"read_only")"));
  t.at = now + 60 * 60 * core::ns_per_s;  // the step ended; the score is 0
  CHECK(t.run("POST", "/a") == step::forward);
  CHECK_FALSE(has(own_fields(t.r), "X-RateLimit-Warning"));
}

TEST_CASE("admission: the allow list is never on the ladder") {
  world w(ladder_policy);
  score(w, 10, "192.0.2.3");
  CHECK(w.run("POST", "/a", "", "192.0.2.3") == step::forward);
  CHECK_FALSE(has(own_fields(w.r), "X-RateLimit-Warning"));
}

namespace {

/// The categories of policy_text; `general` asks proofs and has attack mode, `guarded` has a
/// severe level that challenges rather than refuses.
const char* const attack_policy = R"(categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 4 } }
    pow: { enabled: true, base_bits: 4, step_bits: 1, max_bits: 8 }
    attack_mode:
      cool_down: 8s
      levels:
        elevated: { above: 2x, limits: 0.75 }
        high:     { above: 5x, limits: 0.5, pow: uncleared }
        severe:   { above: 10x, admit: [allowed, cleared] }
  keyed:
    limits:
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/s, burst: 1 } }
  guarded:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 4 } }
    pow: { enabled: true, base_bits: 4, step_bits: 1, max_bits: 8 }
    attack_mode:
      levels:
        severe: { above: 10x, admit: [cleared], pow: uncleared }
  scripts:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
)";

/// A world whose categories' attack mode reads `board`.
struct attacked : world {
  policy::attack_board board{8};
  attacked() : world(attack_policy) { setting.attack = &board; }
  void level(const char* category, std::uint8_t l, float factor) {
    board.set(compiled.find(category)->index, {l, false, factor});
  }
  /// A clearance for `peer` in this policy, earned with `bits`.
  std::string clearance(std::string_view peer, unsigned bits = 8) const {
    const auto who = policy::subjects_of(core::address::parse(peer).value(), compiled.prefixes());
    return pow.clearances().issue({now - core::ns_per_s, now + 600 * core::ns_per_s,
                                   static_cast<std::uint8_t>(bits), who.tag,
                                   compiled.find("general")->pow.scope});
  }
};

}  // namespace

TEST_CASE("admission: attack mode's levels, their header and their answers") {
  struct row {
    std::uint8_t level;
    float factor;
    const char* peer;
    bool cleared;
    step want;
    std::uint16_t status;
    const char* body;
  };
  const row rows[] = {
      {0, 1, "203.0.113.7", false, step::forward, 0, ""},
      {1, 0.75f, "203.0.113.7", false, step::forward, 0, ""},
      {2, 0.5f, "203.0.113.7", false, step::answer, 428, R"("code":"pow_required")"},
      {2, 0.5f, "203.0.113.7", true, step::forward, 0, ""},
      {3, 0.5f, "203.0.113.7", false, step::answer, 503, R"("code":"under_attack")"},
      {3, 0.5f, "203.0.113.7", true, step::forward, 0, ""},
      {3, 0.5f, "192.0.2.3", false, step::forward, 0, ""},  // the allow list
  };
  for (const auto& x : rows) {
    attacked w;
    INFO("level " << int(x.level) << " from " << x.peer << (x.cleared ? " cleared" : ""));
    w.level("general", x.level, x.factor);
    const std::string fields =
        x.cleared ? "X-PoW-Clearance: " + w.clearance(x.peer) + "\n" : std::string();
    CHECK(w.run("GET", "/a", fields, x.peer) == x.want);
    std::string own;
    admission::append_own_fields(w.r, own);
    if (x.level > 0) {
      CHECK(has(own, std::string("X-Tollgate-Mode: ") +
                         std::string(policy::attack_level_names[x.level]) + "\r\n"));
    } else {
      CHECK_FALSE(has(own, "X-Tollgate-Mode"));
    }
    if (x.want == step::answer) {
      CHECK(w.r.reply.status == x.status);
      CHECK(has(w.r.reply.body, x.body));
      if (x.status == 503) {
        CHECK(w.r.fx.outcome == outcome::under_attack);
        CHECK(has(w.r.reply.fields, "Retry-After: 2\r\n"));  // 8 s x 25%
        CHECK(w.asked == 0);
      }
    }
  }
}

TEST_CASE("admission: attack mode scales the limits, restoring ones too, and only its category") {
  attacked w;
  w.level("general", 1, 0.75f);  // burst 4 x 0.75 = 3
  for (int i = 0; i < 3; ++i)
    CHECK(w.run("GET", "/a") == step::forward);
  CHECK(w.r.limits.groups[0].spec->tiers[0].burst == 3);
  CHECK(w.r.limits.overridden);
  CHECK(w.run("GET", "/a") == step::answer);
  CHECK(w.r.reply.status == 429);
  CHECK(has(w.r.rate.policy, "q=3;"));
  // A worker's cache: the same numbers from one scaled set per factor, its field made once.
  attacked c;
  policy::scaled_cache cache;
  c.setting.scaled = &cache;
  c.level("general", 1, 0.75f);
  CHECK(c.run("GET", "/a") == step::forward);
  REQUIRE(c.r.scaled != nullptr);
  const auto* set = c.r.scaled.get();
  CHECK(c.r.limits.groups[0].spec == &set->limits[0]);
  CHECK(c.r.limits.groups[0].spec->tiers[0].burst == 3);
  CHECK_FALSE(c.r.limits.overridden);
  CHECK(c.r.rate.policy.data() == set->policy_field[0].data());
  CHECK(has(c.r.rate.policy, "q=3;"));
  CHECK(c.run("GET", "/a", "", "203.0.113.9") == step::forward);
  CHECK(c.r.scaled.get() == set);
  c.level("general", 0, 0.875f);  // restoring: another set
  CHECK(c.run("GET", "/a", "", "203.0.113.10") == step::forward);
  CHECK(c.r.scaled.get() != set);
  CHECK(c.r.limits.groups[0].spec->tiers[0].burst == 4);  // 4 x 0.875 rounded up
  // Restoring at level 0: scaled, no header.
  attacked r;
  r.level("general", 0, 0.5f);
  CHECK(r.run("GET", "/a") == step::forward);
  CHECK(r.r.limits.groups[0].spec->tiers[0].burst == 2);
  std::string own;
  admission::append_own_fields(r.r, own);
  CHECK_FALSE(has(own, "X-Tollgate-Mode"));
  // A category without attack mode reads nothing, whatever the board says of its index.
  attacked k;
  k.board.set(k.compiled.find("keyed")->index, {3, false, 0.1f});
  CHECK(k.run("GET", "/keyed/a", "X-Api-Key: a\n") == step::forward);
  CHECK(k.r.attack.level == 0);
}

TEST_CASE("admission: a severe level that asks proofs challenges the uncleared") {
  attacked w;
  w.level("guarded", 3, 1);
  CHECK(w.run("GET", "/pay/") == step::answer);
  CHECK(w.r.reply.status == 428);
  const std::string proof = w.proof("guarded", 4, "203.0.113.7");
  CHECK(w.run("GET", "/pay/", "X-PoW-Solution: " + proof + "\n") == step::forward);
  CHECK_FALSE(w.r.clearance.empty());  // the clearance that admits it next time
  // The allow list is not admitted by a level that does not name it.
  CHECK(w.run("GET", "/pay/", "", "192.0.2.3") == step::answer);
  CHECK(w.r.reply.status == 503);
}
