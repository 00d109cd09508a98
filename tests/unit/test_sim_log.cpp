// The simulator (DESIGN §13): its three line parsers on good lines and on hostile bytes, and a
// replay whose outcome is computed by hand from the policy's GCRA parameters.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/sim/log_reader.hpp"
#include "gateway/sim/log_set.hpp"
#include "gateway/sim/replay.hpp"
#include "gateway/sim/report.hpp"

using namespace tollgate;
using namespace tollgate::sim;

namespace {

constexpr core::nanos ms = core::ns_per_ms;
constexpr core::nanos sec = core::ns_per_s;
/// 2026-11-23T09:24:23Z.
constexpr core::nanos t0 = 1'795'425'863 * sec;

const std::string text_line =
    "2026-11-23T09:24:23.123Z access 192.0.2.7 \"GET /a?b=1 HTTP/1.1\" 200 category=general "
    "decision=allowed limit=- upstream=app upstream_time=0.000812 bytes=245 0.001500s";
const std::string json_line =
    R"({"time":"2026-11-23T09:24:23.123Z","type":"access","client":"192.0.2.7","method":"GET",)"
    R"("path":"/a?b=1","protocol":"HTTP/1.1","status":429,"category":"general",)"
    R"("decision":"limited","limit":"ipv4_individual.short","upstream":null,)"
    R"("upstream_time":null,"bytes":245,"duration":0.001500})";
const std::string nginx_line =
    "203.0.113.9 - - [23/Nov/2026:02:24:23 -0700] \"GET /x?y=%20 HTTP/1.1\" 200 612 \"-\" "
    "\"curl/8\"";

struct parsed {
  line_kind kind;
  log_record r;
  parse_scratch s;
  std::string_view why;
};

parsed parse(const std::string& line) {
  parsed p;
  p.kind = parse_line(line, p.r, p.s, p.why);
  return p;
}

line_kind kind_of(const std::string& line) {
  return parse(line).kind;
}

/// `line` with the first `from` replaced by `to`.
std::string with(std::string line, const std::string& from, const std::string& to) {
  const auto at = line.find(from);
  REQUIRE(at != std::string::npos);
  return line.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("sim log: a Tollgate text line, replayed at its time less its duration", "[sim]") {
  const parsed p = parse(text_line);
  REQUIRE(p.kind == line_kind::request);
  CHECK(p.r.format == log_format::tollgate_text);
  CHECK(p.r.time == t0 + 123 * ms - 1'500'000);
  CHECK(p.r.client.to_string() == "192.0.2.7");
  CHECK((p.r.method == "GET" && p.r.target == "/a?b=1" && p.r.status == 200));
  CHECK((p.r.category == "general" && p.r.decision == "allowed" && p.r.limit.empty()));
  // Microseconds (and nanoseconds) read as well as milliseconds; CRLF as LF.
  CHECK(parse(with(text_line, ".123Z", ".123456Z")).r.time == t0 + 123'456'000 - 1'500'000);
  CHECK(parse(with(text_line, ".123Z", "Z")).r.time == t0 - 1'500'000);
  const parsed crlf = parse(text_line + "\r");
  CHECK((crlf.kind == line_kind::request && crlf.r.time == p.r.time));
  const parsed limited = parse(with(text_line, "limit=-", "limit=ipv4_individual.short"));
  CHECK(limited.r.limit == "ipv4_individual.short");
}

TEST_CASE("sim log: the quick read of a text line's time agrees with the whole parse", "[sim]") {
  log_record r;
  parse_scratch s;
  std::string_view why;
  core::nanos time = 0;
  for (const std::string& line :
       {text_line, with(text_line, ".123Z", ".123456Z"), json_line, nginx_line, text_line + "\r"}) {
    INFO(line);
    REQUIRE(parse_time(line, time, r, s, why) == line_kind::request);
    CHECK(time == parse(line).r.time);
  }
  // What lies between the two ends is left to the whole parse.
  const std::string raw_quote = with(text_line, "/a?b=1", "/a\"b");
  CHECK(parse_time(raw_quote, time, r, s, why) == line_kind::request);
  CHECK(kind_of(raw_quote) == line_kind::bad);
  CHECK(parse_time(with(text_line, "0.001500s", "0.001500"), time, r, s, why) == line_kind::bad);
  CHECK(parse_time(with(text_line, "0.001500s", "x.001500s"), time, r, s, why) == line_kind::bad);
  CHECK(parse_time("2026-11-23T09:24:23.123Z x 1s", time, r, s, why) == line_kind::request);
}

TEST_CASE("sim log: \\xHH escapes decode back to the bytes sent", "[sim]") {
  const parsed p = parse(with(text_line, "/a?b=1", "/x\\x22y\\x20z\\xff\\x00\\x5c"));
  REQUIRE(p.kind == line_kind::request);
  CHECK(p.r.target == std::string("/x\"y z\xff\0\\", 9));
  // An escape cut short, at the end of the field or of the line; a raw quote, space, NUL or
  // non-ASCII byte, which the writer would have escaped.
  for (const std::string& bad :
       std::vector<std::string>{"/x\\x2", "/x\\x", "/x\\", "/x\\q41", "/x\\xg1", "/x\"y",
                                std::string("/x\0y", 4), "/caf\xc3\xa9"}) {
    INFO(bad);
    CHECK(kind_of(with(text_line, "/a?b=1", bad)) == line_kind::bad);
  }
  CHECK(kind_of(text_line.substr(0, text_line.size() - 1) + "\\x") == line_kind::bad);
}

TEST_CASE("sim log: every cut of a good line is a bad line, never half a request", "[sim]") {
  for (const std::string* line : {&text_line, &json_line, &nginx_line}) {
    for (std::size_t n = 1; n < line->size(); ++n) {
      const std::string cut = line->substr(0, n);
      INFO(cut);
      CHECK(kind_of(cut) == line_kind::bad);
    }
    CHECK(kind_of(*line) == line_kind::request);
  }
}

TEST_CASE("sim log: bad dates, huge numbers and bad statuses are bad lines", "[sim]") {
  for (const auto& [from, to] :
       std::vector<std::pair<std::string, std::string>>{{"2026-11-23", "2026-02-30"},
                                                        {"2026-11-23", "2026-13-01"},
                                                        {"2026-11-23", "1969-12-31"},
                                                        {"2026-11-23", "2262-01-01"},
                                                        {"2026-11-23", "9999-12-31"},
                                                        {"T09:", "T24:"},
                                                        {":24:23", ":60:23"},
                                                        {".123Z", ".1234567890Z"},
                                                        {".123Z", ".12aZ"},
                                                        {"0.001500s", "99999999999.0s"},
                                                        {"0.001500s", "0.0015000000000s"},
                                                        {"0.001500s", "-1s"},
                                                        {"0.001500s", "0.001500"},
                                                        {" 200 ", " 1000 "},
                                                        {" 200 ", " 2x0 "},
                                                        {"192.0.2.7", "192.0.2.256"},
                                                        {"HTTP/1.1", "HTTX/1.1"}}) {
    INFO(from << " -> " << to);
    CHECK(kind_of(with(text_line, from, to)) == line_kind::bad);
  }
  CHECK(parse(with(text_line, "2026-11-23", "2261-12-31")).kind == line_kind::request);
  CHECK(parse(with(nginx_line, "2026", "9999")).kind == line_kind::bad);
  // A duration longer than the time since 1970 cannot be.
  CHECK(kind_of(with(text_line, "2026-11-23T09:24:23.123Z", "1970-01-01T00:00:00.001Z")) ==
        line_kind::bad);
}

TEST_CASE("sim log: json lines, escapes, duplicates and what is not JSON", "[sim]") {
  const parsed p = parse(json_line);
  REQUIRE(p.kind == line_kind::request);
  CHECK(p.r.format == log_format::tollgate_json);
  CHECK(p.r.time == t0 + 123 * ms - 1'500'000);
  CHECK((p.r.status == 429 && p.r.decision == "limited" && p.r.limit == "ipv4_individual.short"));
  // \u00XX is the byte XX, as the writer escapes raw bytes; larger code points are UTF-8.
  const parsed e = parse(with(json_line, "/a?b=1", R"(/\u00e9\"\\\u20ac\ud83d\ude00\/\n)"));
  REQUIRE(e.kind == line_kind::request);
  CHECK(e.r.target == "/\xe9\"\\\xe2\x82\xac\xf0\x9f\x98\x80/\n");
  // Raw UTF-8 is valid JSON.
  CHECK(parse(with(json_line, "/a?b=1", "/caf\xc3\xa9")).r.target == "/caf\xc3\xa9");
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"\"status\":429", "\"status\":429,\"status\":200"},
           {"\"path\":", "\"pa\\u0074h\":\"/b\",\"path\":"},
           {"/a?b=1", "/\\q"},
           {"/a?b=1", "/\\ud83d"},
           {"/a?b=1", "/\\u12"},
           {"/a?b=1", std::string("/\0", 2)},
           {"/a?b=1", "/\t"},
           {"\"bytes\":245", "\"bytes\":{\"a\":1}"},
           {"\"bytes\":245", "\"bytes\":[1]"},
           {"\"bytes\":245", "\"bytes\":01"},
           {"\"status\":429", "\"status\":4290"},
           {"\"status\":429", "\"status\":\"429\""},
           {"\"duration\":0.001500", "\"duration\":1e-3"},
           {"\"type\":\"access\"", "\"type\":\"other\""},
           {"\"client\":\"192.0.2.7\"", "\"client\":7"},
           {"}", "} x"},
           {"}", "},"}}) {
    INFO(from << " -> " << to);
    CHECK(kind_of(with(json_line, from, to)) == line_kind::bad);
  }
  CHECK(parse(with(json_line, "\"status\":429", "\"status\":429,\"status\":200")).why ==
        "a duplicate key");
  // Keys the simulator does not read may repeat or be added; a missing one it reads may not.
  CHECK(kind_of(with(json_line, "\"bytes\":245", "\"bytes\":245,\"extra\":[]")) == line_kind::bad);
  CHECK(kind_of(with(json_line, "\"bytes\":245", "\"x\":true,\"x\":null")) == line_kind::request);
  CHECK(kind_of(with(json_line, "\"client\":\"192.0.2.7\",", "")) == line_kind::bad);
}

TEST_CASE("sim log: tunnel ends and the gateway's own lines are skipped, not bad", "[sim]") {
  CHECK(kind_of("2026-11-18T11:06:40.123Z access 2001:db8::1 \"GET /ws/bus\" category=websocket "
                "websocket closed code=4001 by=upstream messages_from_client=4 "
                "messages_from_upstream=3 1.250000s") == line_kind::not_request);
  CHECK(kind_of(R"({"time":"2026-11-18T11:06:40.123Z","type":"websocket_closed","client":"::1",)"
                R"("method":"GET","path":"/ws","category":"websocket","code":1000,)"
                R"("closed_by":"client","messages_from_client":0,"messages_from_upstream":0,)"
                R"("duration":1.25})") == line_kind::not_request);
  CHECK(kind_of("[2026-11-23 14:10:29.123] [info] listening on public 127.0.0.1:8080") ==
        line_kind::application);
  CHECK(kind_of(R"({"time":"2026-11-23T14:10:29.123Z","level":"info","message":"hi"})") ==
        line_kind::application);
  CHECK(kind_of("") == line_kind::blank);
  CHECK(kind_of("   \r") == line_kind::blank);
  CHECK(kind_of("hello world") == line_kind::bad);
  CHECK(kind_of(std::string("\0\0\0", 3)) == line_kind::bad);
}

TEST_CASE("sim log: nginx combined, its time zone and its escapes", "[sim]") {
  const parsed p = parse(nginx_line);
  REQUIRE(p.kind == line_kind::request);
  CHECK(p.r.format == log_format::nginx_combined);
  CHECK(p.r.time == t0);  // 02:24:23 at -0700 is 09:24:23 UTC
  CHECK((p.r.client.to_string() == "203.0.113.9" && p.r.target == "/x?y=%20"));
  CHECK((!p.r.has_decision() && p.r.decision.empty()));
  CHECK(parse(with(nginx_line, "-0700", "+0130")).r.time == t0 - 9 * 3600 * sec + 1800 * sec);
  CHECK(parse(with(nginx_line, "/x?y=%20", "/q\\x22\\x5c")).r.target == "/q\"\\");
  CHECK(parse(with(nginx_line, " HTTP/1.1\"", "\"")).r.target == "/x?y=%20");  // HTTP/0.9
  CHECK(parse(with(nginx_line, "203.0.113.9", "2001:db8::9")).r.client.to_string() ==
        "2001:db8::9");
  CHECK(parse(with(nginx_line, "\"curl/8\"", "\"a \\x22quoted\\x22 agent\"")).kind ==
        line_kind::request);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"Nov", "Foo"},
           {"23/Nov", "31/Nov"},
           {"-0700", "-2500"},
           {"-0700", "0700"},
           {"\"GET /x?y=%20 HTTP/1.1\"", "\"-\""},
           {"\"GET /x?y=%20 HTTP/1.1\"", "\"\\x16\\x03\\x01\""},
           {"GET /x?y=%20 HTTP/1.1", "GET /x?y=%20 junk"},
           {"203.0.113.9", "unix:"},
           {" 612 ", " 6x2 "},
           {"\"curl/8\"", "\"curl/8\" extra"},
           {"/x?y=%20", "/x\"y"}}) {
    INFO(from << " -> " << to);
    CHECK(kind_of(with(nginx_line, from, to)) == line_kind::bad);
  }
}

namespace {

/// A temporary directory with the files of one test; removed at the end.
struct temp_dir {
  std::string path;
  temp_dir() {
    char name[] = "/tmp/tollgate-sim-XXXXXX";
    path = ::mkdtemp(name);
  }
  ~temp_dir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string write(const std::string& name, const std::string& text) const {
    const std::string p = path + "/" + name;
    std::ofstream(p) << text;
    return p;
  }
};

const char* const replay_gateway = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 8080 }]
upstreams: { app: { endpoints: ["127.0.0.1:9000"] } }
routes:
  - { match: { path_prefix: /t/ }, category: tenant, upstream: app }
  - { match: { path_prefix: /p/ }, category: paid, upstream: app }
  - { match: { path_prefix: /d/ }, category: dry, upstream: app }
  - { match: { path_prefix: /ws/, header: { Upgrade: websocket } }, category: sockets, upstream: app }
default_route: { category: general, upstream: app }
policies: [policy.yaml]
access: { allow: [10.9.0.0/16], deny: [192.0.2.0/24] }
)";

/// T = 1 s everywhere; bursts 2 (general), 1 (the others).
const char* const replay_policy = R"(
categories:
  general:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 2 } }
  tenant:
    limits:
      per_tenant: { key: { query: tenant }, short: { rate: 1/s, burst: 1 } }
      per_key: { key: { header: X-Api-Key }, short: { rate: 1/s, burst: 1 } }
  paid:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
    pow: { on_limit: true, on_limit_bits: 4 }
  dry:
    mode: shadow
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
  sockets:
    limits:
      ipv4_individual: { short: { rate: 1/s, burst: 1 } }
)";

/// A text access line decided at t0 + `at`, logged `took` later.
std::string line(core::nanos at, const std::string& client, const std::string& target,
                 const std::string& decision, const std::string& limit = "-", unsigned status = 200,
                 core::nanos took = 2 * ms) {
  const core::nanos logged = t0 + at + took;
  std::string time = format_time(logged);  // microseconds
  char duration[32];
  std::snprintf(duration, sizeof duration, "%.6f", static_cast<double>(took) / sec);
  // The category the gateway logged: the route's (an upgrade's when under /ws/).
  const std::string category = target.starts_with("/t/")    ? "tenant"
                               : target.starts_with("/p/")  ? "paid"
                               : target.starts_with("/d/")  ? "dry"
                               : target.starts_with("/ws/") ? "sockets"
                                                            : "general";
  return time + " access " + client + " \"GET " + target + " HTTP/1.1\" " + std::to_string(status) +
         " category=" + category + " decision=" + decision + " limit=" + limit +
         " upstream=- upstream_time=- bytes=1 " + duration + "s\n";
}

const category_summary& category(const run_summary& r, const std::string& name) {
  for (const auto& c : r.categories) {
    if (c.name == name) return c;
  }
  FAIL("no category " << name);
  throw 0;
}

std::uint64_t count_of(const std::vector<std::pair<std::string, std::uint64_t>>& v,
                       const std::string& k) {
  for (const auto& [name, n] : v) {
    if (name == k) return n;
  }
  return 0;
}

}  // namespace

TEST_CASE("sim replay: a table of requests, counted by hand", "[sim]") {
  temp_dir dir;
  dir.write("policy.yaml", replay_policy);
  simulator sim(config::load_gateway(dir.write("gateway.yaml", replay_gateway)));
  const std::string S = "ipv4_individual.short";
  // Written out of time order (each line at its decision time + 2 ms, one at + 900 ms), so the
  // replay must sort them back. Hand count, T = 1 s, tau = T * (burst - 1):
  std::string log;
  // general, 10.0.0.1, burst 2: 0 and 0.1 pass (tat 2 s), 0.2 and 0.3 need now >= tat - tau =
  // 1 s: limited; 1.5 passes.
  log += line(1500 * ms, "10.0.0.1", "/g", "allowed");
  log += line(0, "10.0.0.1", "/g", "allowed", "-", 200, 900 * ms);
  log += line(100 * ms, "10.0.0.1", "/g", "allowed");
  log += line(200 * ms, "10.0.0.1", "/g", "limited", S, 429);
  log += line(300 * ms, "10.0.0.1", "/g", "limited", S, 429);
  // Another address has its own bucket; the allow list and the deny list come first.
  log += line(0, "10.0.0.2", "/g", "allowed");
  log += line(50 * ms, "10.0.0.2", "/g", "allowed");
  for (int i = 0; i < 4; ++i)
    log += line(i * ms, "10.9.0.1", "/g", "allowed");
  log += line(0, "192.0.2.1", "/g", "denied", "-", 403);
  // tenant: the query key limits; the header key never applies (a log has no headers).
  log += line(0, "10.0.1.1", "/t/x?tenant=a", "allowed");
  log += line(100 * ms, "10.0.1.2", "/t/x?tenant=a", "limited", "per_tenant.short", 429);
  log += line(100 * ms, "10.0.1.3", "/t/x?tenant=b", "allowed");
  log += line(200 * ms, "10.0.1.4", "/t/x", "allowed");
  // paid: pay to pass answers 428 instead of 429.
  log += line(0, "10.0.2.1", "/p/", "allowed");
  log += line(100 * ms, "10.0.2.1", "/p/", "challenged", S, 428);
  // dry: shadow mode forwards and commits nothing for the shadowed limit.
  log += line(0, "10.0.3.1", "/d/", "allowed");
  log += line(100 * ms, "10.0.3.1", "/d/", "shadow_limited", S);
  log += line(200 * ms, "10.0.3.1", "/d/", "shadow_limited", S);
  // sockets: a 101 is an upgrade; a 429 logged in category sockets was a refused one. The log
  // is wrong on purpose about the last: it says allowed.
  log += line(0, "10.0.4.1", "/ws/a", "allowed", "-", 101);
  log += line(10 * ms, "10.0.4.1", "/ws/a", "limited", S, 429);
  log += line(20 * ms, "10.0.4.1", "/ws/a", "allowed", "-", 429);
  // Bad lines: one that only the whole parse finds (a raw quote: found during the replay, in
  // time order), and one the first read finds.
  log += with(line(0, "10.0.0.9", "/g", "allowed"), "/g", "/g\"");
  log += "2026-11-23T09:24:24.000Z nonsense\n";
  log_set logs({dir.write("access.log", log)});
  logs.index({});
  CHECK(logs.counts().reordered > 0);
  const replay_result r = replay(logs, sim, nullptr, {});
  REQUIRE(logs.counts().requests == 24);
  CHECK(logs.counts().bad == 2);
  REQUIRE(logs.bad_lines().size() == 2);
  CHECK(logs.bad_lines()[0].line == 25);
  CHECK(logs.bad_lines()[1].line == 26);
  const run_summary s = summarise(r.runs[0], sim, 10);

  const auto& g = category(s, "general");
  CHECK(g.requests == 12);
  CHECK(g.admitted == 9);
  CHECK(g.exempt == 4);
  CHECK(g.decisions[static_cast<int>(decision::limited)] == 2);
  CHECK(g.decisions[static_cast<int>(decision::denied)] == 1);
  CHECK(g.limited_by == decltype(g.limited_by){{S, 2}});
  CHECK(g.top_addresses == decltype(g.top_addresses){{"10.0.0.1", 2}});
  CHECK(g.top_networks == decltype(g.top_networks){{"10.0.0.0/24", 2}});

  const auto& t = category(s, "tenant");
  CHECK((t.requests == 4 && t.admitted == 3));
  CHECK(count_of(t.limited_by, "per_tenant.short") == 1);
  CHECK(count_of(t.unkeyed, "per_tenant") == 1);
  CHECK(count_of(t.unkeyed, "per_key") == 4);

  const auto& p = category(s, "paid");
  CHECK((p.requests == 2 && p.admitted == 1));
  CHECK(p.decisions[static_cast<int>(decision::challenged)] == 1);
  CHECK(count_of(p.limited_by, S) == 1);

  const auto& d = category(s, "dry");
  CHECK((d.requests == 3 && d.admitted == 3));
  CHECK(d.decisions[static_cast<int>(decision::shadow_limited)] == 2);
  CHECK(count_of(d.shadow_by, S) == 2);
  CHECK(d.limited_by.empty());

  const auto& w = category(s, "sockets");
  CHECK((w.requests == 3 && w.admitted == 1));
  CHECK(r.upgrades == 3);
  // Every logged decision but the wrong one agrees.
  CHECK(r.agreement.compared == 24);
  CHECK(r.agreement.differ == 1);
  REQUIRE(r.agreement.first.size() == 1);
  CHECK(r.agreement.first[0].line == 24);
  CHECK(r.agreement.first[0].decision[1] == "limited");
}

TEST_CASE("sim replay: --compare lists exactly the requests decided otherwise", "[sim]") {
  temp_dir dir;
  dir.write("policy.yaml", replay_policy);
  simulator a(config::load_gateway(dir.write("gateway.yaml", replay_gateway)));
  std::string strict = replay_policy;
  strict.replace(strict.find("burst: 2"), 8, "burst: 1");
  dir.write("strict.yaml", strict);
  std::string gw = replay_gateway;
  gw.replace(gw.find("[policy.yaml]"), 13, "[strict.yaml]");
  simulator b(config::load_gateway(dir.write("strict_gateway.yaml", gw)));
  std::string log;
  // Burst 2 admits 0 and 0.1 s; burst 1 only 0 s. At 1.05 s: burst 2 has tat 2 s, tau 1 s:
  // passes; burst 1 has tat 1 s, tau 0: passes too. At 1.1 s only burst 2 (tat 3 s, tau 1 s)
  // still rejects, burst 1 (tat 2.05 s) too: both limited.
  log += line(0, "10.0.0.1", "/g", "allowed");
  log += line(100 * ms, "10.0.0.1", "/g", "allowed");
  log += line(1050 * ms, "10.0.0.1", "/g", "allowed");
  log += line(1100 * ms, "10.0.0.1", "/g", "limited", "ipv4_individual.short", 429);
  log_set logs({dir.write("access.log", log)});
  logs.index({});
  const replay_result r = replay(logs, a, &b, {});
  REQUIRE(r.differences_total == 1);
  REQUIRE(r.differences.size() == 1);
  CHECK(r.differences[0].line == 2);
  CHECK((r.differences[0].decision[0] == "allowed" && r.differences[0].decision[1] == "limited"));
  CHECK(r.differences[0].limit[1] == "ipv4_individual.short");
}
