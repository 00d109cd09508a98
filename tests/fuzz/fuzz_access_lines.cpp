/// Fuzz target: the access log's lines (gateway/net/access_line.*), which carry bytes a client
/// chose (the method and the target) into files that log shippers parse.
///
/// Input: the method, the target and the limit's name, separated by NUL bytes. Checked, in
/// both formats and for the tunnel line too: the line ends with its only '\n' and holds no
/// other control byte; in json every byte is printable ASCII, every string's escapes are
/// well formed, and the "path" and "method" strings decode back to exactly the bytes given
/// (\u00XX being byte XX); in text, the target comes back from its \xHH escapes.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/core/text.hpp"
#include "gateway/net/access_line.hpp"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_access_lines: %s\n", what);
  std::abort();
}

/// The one line in `line`: '\n' last and nowhere else, no other byte below 0x20 or 0x7f.
void one_line(std::string_view line, bool ascii) {
  require(!line.empty() && line.back() == '\n', "the line does not end with a newline");
  for (std::size_t i = 0; i + 1 < line.size(); ++i) {
    const auto u = static_cast<unsigned char>(line[i]);
    require(u >= 0x20 && u != 0x7f, "a control byte in the line");
    if (ascii) require(u < 0x80, "a byte past ASCII in a json line");
  }
}

/// Decodes the JSON string that starts after `"name":"` in `json`; checks its escapes.
std::string json_string(std::string_view json, std::string_view name) {
  const std::string key = "\"" + std::string(name) + "\":\"";
  const auto at = json.find(key);
  require(at != std::string_view::npos, "a field is missing");
  std::string out;
  for (std::size_t i = at + key.size();; ++i) {
    require(i < json.size(), "a string does not end");
    const char c = json[i];
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    require(++i < json.size(), "an escape at the end");
    const char e = json[i];
    if (e == '"' || e == '\\' || e == '/') {
      out += e;
    } else if (e == 'u') {
      require(i + 4 < json.size(), "a short \\u escape");
      int v = 0;
      for (int k = 1; k <= 4; ++k) {
        const int d = tollgate::core::hex_value(json[i + k]);
        require(d >= 0, "a \\u escape without four hex digits");
        v = v * 16 + d;
      }
      require(v < 0x100, "a \\u escape past one byte");
      out += static_cast<char>(v);
      i += 4;
    } else {
      require(false, "an unknown escape");
    }
  }
}

/// The target of a text line, its \xHH escapes decoded: what lies between `"METHOD ` and the
/// last ` HTTP/1.` of the quoted request line.
std::string text_target(std::string_view line, std::string_view method_escaped) {
  const auto open = line.find(" access ");
  require(open != std::string_view::npos, "no ' access ' in a text line");
  const auto quote = line.find('"', open);
  require(quote != std::string_view::npos, "no request line");
  const auto start = quote + 1 + method_escaped.size() + 1;
  const auto end = line.find(" HTTP/1.", start);
  require(end != std::string_view::npos, "no protocol");
  std::string out;
  for (std::size_t i = start; i < end; ++i) {
    if (line[i] == '\\') {
      require(i + 3 < end + 1 && line[i + 1] == 'x', "a bad \\x escape");
      const int hi = tollgate::core::hex_value(line[i + 2]);
      const int lo = tollgate::core::hex_value(line[i + 3]);
      require(hi >= 0 && lo >= 0, "a bad \\x escape");
      out += static_cast<char>(hi * 16 + lo);
      i += 3;
    } else {
      require(line[i] != '"', "an unescaped quote in a text line");
      out += line[i];
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto first = in.find('\0');
  const std::string_view method = in.substr(0, first);
  std::string_view rest =
      first == std::string_view::npos ? std::string_view() : in.substr(first + 1);
  const auto second = rest.find('\0');
  const std::string_view target = rest.substr(0, second);
  const std::string_view limit =
      second == std::string_view::npos ? std::string_view() : rest.substr(second + 1);

  using namespace tollgate::net;
  access_entry e;
  e.client = "192.0.2.1";
  e.method = method;
  e.target = target;
  e.status = 200;
  e.category = "general";
  e.decision = "allowed";
  e.limit = limit;
  e.upstream = "app";
  e.upstream_seconds = static_cast<double>(size) / 1e6;
  e.bytes = size;
  e.seconds = static_cast<double>(size) / 1e5;
  const auto now = std::chrono::system_clock::time_point(std::chrono::seconds(size));

  std::string json;
  append_access_line(json, true, now, e);
  one_line(json, true);
  require(json.front() == '{' && json[json.size() - 2] == '}', "a json line is not an object");
  require(json_string(json, "path") == target, "the json path is not the target sent");
  require(json_string(json, "method") == method, "the json method is not the method sent");
  if (!limit.empty()) require(json_string(json, "limit") == limit, "the json limit differs");

  std::string text;
  append_access_line(text, false, now, e);
  one_line(text, false);
  std::string method_escaped;
  {
    std::string probe;
    access_entry m;
    m.method = method;
    append_access_line(probe, false, now, m);
    const auto q = probe.find('"');
    method_escaped = probe.substr(q + 1, probe.find(' ', q + 1) - q - 1);
  }
  require(text_target(text, method_escaped) == target, "the text target is not the target sent");

  std::string tunnel;
  append_tunnel_line(tunnel, true, now,
                     {"192.0.2.1", method, target, "websocket", 1000, "client", 1, 2, 0.5});
  one_line(tunnel, true);
  require(json_string(tunnel, "path") == target, "the tunnel's path is not the target sent");
  tunnel.clear();
  append_tunnel_line(tunnel, false, now,
                     {"192.0.2.1", method, target, "websocket", 1000, "client", 1, 2, 0.5});
  one_line(tunnel, false);
  return 0;
}
