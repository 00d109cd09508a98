// The access log's lines: every field of docs/design.md §9, in text and JSON, and hostile bytes
// that must neither break a line nor the JSON.

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "gateway/net/access_line.hpp"

using namespace tollgate;
using namespace tollgate::net;

namespace {

const auto at = std::chrono::system_clock::time_point(std::chrono::milliseconds(1'795'000'000'123));

access_entry sample() {
  access_entry e;
  e.client = "192.0.2.7";
  e.method = "GET";
  e.target = "/a?b=1";
  e.status = 200;
  e.category = "general";
  e.decision = "allowed";
  e.upstream = "app";
  e.upstream_seconds = 0.000812;
  e.bytes = 245;
  e.seconds = 0.0015;
  return e;
}

}  // namespace

TEST_CASE("an access line in text has every field", "[access_log]") {
  std::string out;
  append_access_line(out, false, at, sample());
  CHECK(out ==
        "2026-11-18T11:06:40.123000Z access 192.0.2.7 \"GET /a?b=1 HTTP/1.1\" 200 category=general "
        "decision=allowed limit=- upstream=app upstream_time=0.000812 bytes=245 0.001500s\n");
}

TEST_CASE("an access line's time has microseconds", "[access_log]") {
  std::string out;
  append_access_line(out, false, at + std::chrono::microseconds(456), sample());
  CHECK(out.starts_with("2026-11-18T11:06:40.123456Z access "));
  out.clear();
  append_access_line(out, true, at + std::chrono::microseconds(999) + std::chrono::nanoseconds(999),
                     sample());
  CHECK(out.starts_with(R"({"time":"2026-11-18T11:06:40.123999Z",)"));
}

TEST_CASE("an access line in json has every field, null where absent", "[access_log]") {
  access_entry e = sample();
  e.upstream = "";
  e.upstream_seconds = -1;
  e.limit = "ipv4_individual.short";
  e.decision = "limited";
  e.status = 429;
  e.version = 10;
  std::string out;
  append_access_line(out, true, at, e);
  CHECK(out == R"({"time":"2026-11-18T11:06:40.123000Z","type":"access","client":"192.0.2.7",)"
               R"("method":"GET","path":"/a?b=1","protocol":"HTTP/1.0","status":429,)"
               R"("category":"general","decision":"limited","limit":"ipv4_individual.short",)"
               R"("upstream":null,"upstream_time":null,"bytes":245,"duration":0.001500})"
               "\n");
}

TEST_CASE("hostile bytes cannot end an access line or break its JSON", "[access_log]") {
  access_entry e = sample();
  const std::string target("/x\"\n{\"forged\":1}\r\\\x01\x7f\xff\xc3\xa9", 23);
  e.target = target;
  std::string text;
  append_access_line(text, false, at, e);
  CHECK(text.find('\n') == text.size() - 1);
  CHECK(text.find('\r') == std::string::npos);
  CHECK(text.find(R"("GET /x\x22\x0a{\x22forged\x22:1}\x0d\x5c\x01\x7f\xff\xc3\xa9 HTTP/1.1")") !=
        std::string::npos);
  std::string json;
  append_access_line(json, true, at, e);
  CHECK(json.find('\n') == json.size() - 1);
  // Every byte of the line is printable ASCII: valid UTF-8 whatever the client sent.
  for (const char c : json.substr(0, json.size() - 1)) {
    CHECK((c >= 0x20 && c < 0x7f));
  }
  CHECK(json.find(R"("path":"/x\"\u000a{\"forged\":1}\u000d\\\u0001\u007f\u00ff\u00c3\u00a9")") !=
        std::string::npos);
}

TEST_CASE("a tunnel's end is logged in both formats", "[access_log]") {
  tunnel_entry e{"2001:db8::1", "GET", "/ws/bus", "websocket", 4001, "upstream", 4, 3, 1.25};
  std::string text;
  append_tunnel_line(text, false, at, e);
  CHECK(text ==
        "2026-11-18T11:06:40.123000Z access 2001:db8::1 \"GET /ws/bus\" category=websocket "
        "websocket closed code=4001 by=upstream messages_from_client=4 messages_from_upstream=3 "
        "1.250000s\n");
  std::string json;
  append_tunnel_line(json, true, at, e);
  CHECK(json ==
        R"({"time":"2026-11-18T11:06:40.123000Z","type":"websocket_closed","client":"2001:db8::1",)"
        R"("method":"GET","path":"/ws/bus","category":"websocket","code":4001,)"
        R"("closed_by":"upstream","messages_from_client":4,"messages_from_upstream":3,)"
        R"("duration":1.250000})"
        "\n");
}
