/// Fuzz target: the simulator's log parsers (gateway/sim/log_reader.*, log_json.cpp), which read
/// files whose bytes clients chose in part.
///
/// Input: any bytes, read as log lines: none may crash the parsers, and a line read as a
/// request has a time after 1970 and a status below 1000. Then, when the input holds a NUL, the
/// bytes before it are a method and those after it a target: an access line the gateway writes
/// for them (gateway/net/access_line.cpp, text and json), and an nginx line escaped as nginx
/// escapes, must each read back to exactly that method and target, at the time written less
/// the duration.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/net/access_line.hpp"
#include "gateway/sim/log_reader.hpp"

namespace {

using namespace tollgate;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_sim_log: %s\n", what);
  std::abort();
}

/// Every line of `in` through the parsers.
void read_lines(std::string_view in) {
  sim::log_record r;
  sim::parse_scratch s;
  while (!in.empty()) {
    const auto nl = in.find('\n');
    const std::string_view line = in.substr(0, nl);
    in = nl == std::string_view::npos ? std::string_view() : in.substr(nl + 1);
    std::string_view why;
    const sim::line_kind k = sim::parse_line(line, r, s, why);
    if (k == sim::line_kind::request) {
      require(r.time >= 0, "a request before 1970");
      require(r.status < 1000, "a status of four digits");
    } else if (k == sim::line_kind::bad) {
      require(!why.empty(), "a bad line without a reason");
    }
  }
}

/// `s` escaped as nginx escapes a logged variable: `"`, `\` and bytes outside 0x20..0x7e.
std::string nginx_escaped(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u >= 0x7f || c == '"' || c == '\\') {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

/// Reads `line` back and checks it is `method`, `target` at `time`.
void read_back(const std::string& line, std::string_view method, std::string_view target,
               core::nanos time, const char* what) {
  sim::log_record r;
  sim::parse_scratch s;
  std::string_view why;
  const std::string_view bare(line.data(), line.size() - (line.back() == '\n' ? 1 : 0));
  if (sim::parse_line(bare, r, s, why) != sim::line_kind::request) {
    std::fprintf(stderr, "%s: %.*s (%.*s)\n", what, static_cast<int>(bare.size()), bare.data(),
                 static_cast<int>(why.size()), why.data());
    require(false, "a written line does not read back as a request");
  }
  require(r.method == method, "the method does not read back");
  require(r.target == target, "the target does not read back");
  require(r.time == time, "the time does not read back");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  read_lines(in);
  const auto nul = in.find('\0');
  if (nul == std::string_view::npos) return 0;
  const std::string_view method = in.substr(0, nul), target = in.substr(nul + 1);
  // The gateway's parser gives a method and a target of at least one byte each; an nginx
  // target never holds a space (it ends the target on the request line).
  if (method.empty() || target.empty()) return 0;
  const auto written = std::chrono::system_clock::time_point(
      std::chrono::milliseconds(1'795'000'000'000 + static_cast<std::int64_t>(size)));
  net::access_entry e;
  e.client = "2001:db8::7";
  e.method = method;
  e.target = target;
  e.status = 429;
  e.category = "general";
  e.decision = "limited";
  e.limit = "ipv4_individual.short";
  e.seconds = 0.25;
  const core::nanos at =
      std::chrono::duration_cast<std::chrono::nanoseconds>(written.time_since_epoch()).count() -
      250'000'000;
  for (const bool json : {false, true}) {
    std::string line;
    net::append_access_line(line, json, written, e);
    read_back(line, method, target, at, json ? "json" : "text");
  }
  if (target.find(' ') == std::string_view::npos && method.find(' ') == std::string_view::npos) {
    const std::string line = "192.0.2.1 - - [23/Nov/2026:09:24:23 +0000] \"" +
                             nginx_escaped(method) + " " + nginx_escaped(target) +
                             " HTTP/1.1\" 200 5 \"-\" \"" + nginx_escaped(in) + "\"";
    read_back(line, method, target, 1'795'425'863LL * 1'000'000'000, "nginx");
  }
  return 0;
}
