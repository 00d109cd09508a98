// The simulator's three line parsers (docs/design.md §13) on good lines and on hostile bytes
// (the replay: test_sim_replay.cpp).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gateway/net/access_line.hpp"
#include "gateway/sim/log_reader.hpp"

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
  // Whether it went upstream: "-" when the gateway answered it.
  CHECK(p.r.forwarded);
  CHECK_FALSE(parse(with(text_line, "upstream=app", "upstream=-")).r.forwarded);
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
  // Parsed again at the time read, a line gives the record parse_line gives.
  for (const std::string& line : {text_line, json_line, nginx_line}) {
    const parsed whole = parse(line);
    REQUIRE(parse_time(line, time, r, s, why) == line_kind::request);
    REQUIRE(parse_again(line, time, r, s, why) == line_kind::request);
    CHECK((r.time == whole.r.time && r.target == whole.r.target && r.status == whole.r.status &&
           r.decision == whole.r.decision && r.client == whole.r.client));
  }
  const std::string two_durations = with(text_line, "0.001500s", "0.5s 0.001500s");
  REQUIRE(parse_time(two_durations, time, r, s, why) == line_kind::request);
  CHECK(parse_again(two_durations, time, r, s, why) == line_kind::bad);
  CHECK(kind_of(two_durations) == line_kind::bad);
  // What lies between the two ends is left to the whole parse.
  const std::string raw_quote = with(text_line, "/a?b=1", "/a\"b");
  CHECK(parse_time(raw_quote, time, r, s, why) == line_kind::request);
  CHECK(kind_of(raw_quote) == line_kind::bad);
  CHECK(parse_time(with(text_line, "0.001500s", "0.001500"), time, r, s, why) == line_kind::bad);
  CHECK(parse_time(with(text_line, "0.001500s", "x.001500s"), time, r, s, why) == line_kind::bad);
  CHECK(parse_time("2026-11-23T09:24:23.123Z x 1s", time, r, s, why) == line_kind::request);
}

TEST_CASE("sim log: hex escapes decode back to the bytes sent", "[sim]") {
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
  // Raw bytes from 0x7f are valid JSON, but the gateway's writer escapes them (its access
  // lines are ASCII): such a line was not written by it as it stands.
  CHECK(parse(with(json_line, "/a?b=1", "/caf\xc3\xa9")).why == "a raw byte the log escapes");
  CHECK(parse(with(json_line, "/a?b=1", "/\x7f")).why == "a raw byte the log escapes");
  CHECK(parse(with(json_line, "/a?b=1", "/j\\xff")).why == "a bad JSON escape");
  CHECK(parse(with(json_line, "\"method\":\"GET\"", "\"method\":1")).why ==
        "an access line with a field missing");
  // Whether it went upstream: the upstream named, or null.
  CHECK_FALSE(p.r.forwarded);
  CHECK(parse(with(json_line, "\"upstream\":null", "\"upstream\":\"app\"")).r.forwarded);
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
  // A connection that sent no request (nginx: "-" 400 0, or 408): skipped, not bad.
  CHECK(kind_of(with(with(nginx_line, "\"GET /x?y=%20 HTTP/1.1\" 200 612", "\"-\" 400 0"),
                     "\"curl/8\"", "\"-\"")) == line_kind::no_request);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {"Nov", "Foo"},
           {"23/Nov", "31/Nov"},
           {"-0700", "-2500"},
           {"-0700", "0700"},
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

TEST_CASE("an access line with a consumer tier is read with its tier", "[sim]") {
  std::string text, json;
  net::access_entry e;
  e.client = "192.0.2.7";
  e.method = "GET";
  e.target = "/a";
  e.status = 429;
  e.category = "general";
  e.decision = "limited";
  e.limit = "per_key.short";
  e.consumer_tier = "premium";
  e.seconds = 0.0015;
  const auto at = std::chrono::system_clock::time_point(std::chrono::seconds(1795000000));
  net::append_access_line(text, false, at, e);
  net::append_access_line(json, true, at, e);
  CHECK(text.find(" limit=per_key.short consumer_tier=premium upstream=-") != std::string::npos);
  CHECK(json.find(R"("limit":"per_key.short","consumer_tier":"premium","upstream":null)") !=
        std::string::npos);
  for (const std::string& line : {text, json}) {
    INFO(line);
    const parsed p = parse(line.substr(0, line.size() - 1));
    REQUIRE(p.kind == line_kind::request);
    CHECK(p.r.status == 429);
    CHECK(p.r.decision == "limited");
    CHECK(p.r.target == "/a");
    CHECK(p.r.consumer_tier == "premium");
  }
  // Lines without one, and nginx's, name none.
  for (const std::string& line : {text_line, json_line, nginx_line}) {
    INFO(line);
    const parsed p = parse(line);
    REQUIRE(p.kind == line_kind::request);
    CHECK(p.r.consumer_tier.empty());
  }
  // Escapes decode; a tier that is not a string, or written twice, makes the line bad.
  CHECK(parse(with(text_line, "limit=- ", "limit=- consumer_tier=pr\\x65mium ")).r.consumer_tier ==
        "premium");
  CHECK(parse(with(json_line, "\"upstream\"", "\"consumer_tier\":\"pr\\u0065mium\",\"upstream\""))
            .r.consumer_tier == "premium");
  CHECK(parse(with(json_line, "\"upstream\"", "\"consumer_tier\":null,\"upstream\""))
            .r.consumer_tier == "");
  CHECK(kind_of(with(json_line, "\"upstream\"", "\"consumer_tier\":3,\"upstream\"")) ==
        line_kind::bad);
  CHECK(kind_of(with(json_line, "\"upstream\"",
                     "\"consumer_tier\":\"a\",\"consumer_tier\":\"b\",\"upstream\"")) ==
        line_kind::bad);
  CHECK(kind_of(with(text_line, "limit=- ", "limit=- consumer_tier=a\"b ")) == line_kind::bad);
}
