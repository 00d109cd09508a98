/// Fuzz target: the WebSocket message type scanner (gateway/protocol/json_type.*), fed the text
/// messages any client may send, in pieces however reads cut them.
///
/// Input: byte 0 chooses the mode, byte 1 the pointer and byte 2 where the message is cut.
///  - Even: the rest is the message, raw. Checked: the scan ends or goes on without reading
///    out of bounds, and gives the same outcome fed whole, fed in two pieces at the cut, and
///    fed a byte at a time; a value found is at most max_value bytes.
///  - Odd: the rest drives a generator of JSON documents (objects and arrays whose keys come
///    from a small set that includes the pointers' tokens, strings with every kind of escape
///    Boost.JSON writes), serialized by Boost.JSON. Checked besides: the scanner finds exactly
///    the string Boost.JSON's find_pointer finds there (a valid document with unique keys), or
///    nothing when that is not a string.

#include <boost/json.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/protocol/json_type.hpp"

namespace {

using namespace tollgate::protocol::ws;
namespace json = boost::json;

constexpr const char* pointers[] = {"/type", "/method",    "/params/0/method", "/a~1b/c~0d",
                                    "/0",    "/data/type", "/1/type",          "/"};

const json_pointer& compiled(std::size_t i) {
  static const auto all = [] {
    std::vector<json_pointer> v;
    for (const char* p : pointers) {
      std::string error;
      v.push_back(*json_pointer::parse(p, error));
    }
    return v;
  }();
  return all[i];
}

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

/// "<none>" or the value found.
std::string outcome(type_scanner& s) {
  if (s.finish() != type_scanner::state::found) return "<none>";
  if (s.value().size() > type_scanner::max_value) std::abort();
  return std::string(s.value());
}

[[noreturn]] void fail(const char* what, std::string_view doc, const std::string& a,
                       const std::string& b) {
  std::fprintf(stderr, "fuzz_message_type: %s: '%s' vs '%s' for '%.*s'\n", what, a.c_str(),
               b.c_str(), static_cast<int>(doc.size()), doc.data());
  std::abort();
}

/// Draws from the input's bytes (zeros once they run out).
struct source {
  std::string_view in;
  std::uint8_t next() {
    if (in.empty()) return 0;
    const auto b = static_cast<std::uint8_t>(in[0]);
    in.remove_prefix(1);
    return b;
  }
};

json::value generate(source& s, int depth) {
  static constexpr const char* keys[] = {"type", "method", "params", "a/b", "c~d",
                                         "data", "",       "x",      "typ", "types"};
  static constexpr const char* texts[] = {"chat",
                                          "typing",
                                          "é\"\\/\n\t",
                                          "\x01\x1f",
                                          "\xF0\x9F\x98\x80",
                                          "",
                                          "a very long type name that "
                                          "runs past the sixty-four bytes the scanner keeps"};
  const std::uint8_t b = s.next();
  switch (depth > 6 ? b % 5 : b % 7) {
    case 0:
      return json::value(texts[s.next() % 7]);
    case 1:
      return json::value(static_cast<std::int64_t>(s.next()) - 100);
    case 2:
      return json::value(s.next() / 7.0);
    case 3:
      return json::value(s.next() % 2 == 0);
    case 4:
      return json::value(nullptr);
    case 5: {
      json::object o;
      for (int n = s.next() % 5; n > 0; --n)
        o[keys[s.next() % 10]] = generate(s, depth + 1);
      return o;
    }
    default: {
      json::array a;
      for (int n = s.next() % 5; n > 0; --n)
        a.push_back(generate(s, depth + 1));
      return a;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const std::size_t which = data[1] % std::size(pointers);
  const json_pointer& p = compiled(which);
  const std::string_view rest(reinterpret_cast<const char*>(data) + 3, size - 3);
  std::string doc;
  std::string expected;
  bool differential = false;
  if ((data[0] & 1) != 0) {
    source s{rest};
    const json::value v = generate(s, 0);
    doc = json::serialize(v);
    json::error_code ec;
    const json::value* at = v.find_pointer(pointers[which], ec);
    expected = at != nullptr && at->is_string()
                   ? (at->as_string().size() > type_scanner::max_value
                          ? std::string()
                          : std::string(at->as_string().data(), at->as_string().size()))
                   : "<none>";
    differential = true;
  } else {
    doc = std::string(rest);
  }
  type_scanner s(p);
  s.reset();
  s.feed(bytes_of(doc));
  const std::string whole = outcome(s);
  const std::size_t cut = doc.empty() ? 0 : data[2] % (doc.size() + 1);
  s.reset();
  s.feed(bytes_of(std::string_view(doc).substr(0, cut)));
  s.feed(bytes_of(std::string_view(doc).substr(cut)));
  if (const std::string split = outcome(s); split != whole) fail("cut", doc, whole, split);
  s.reset();
  for (const char c : doc)
    s.feed(bytes_of(std::string_view(&c, 1)));
  if (const std::string bytewise = outcome(s); bytewise != whole) {
    fail("byte by byte", doc, whole, bytewise);
  }
  if (differential && whole != expected) fail("Boost.JSON", doc, expected, whole);
  return 0;
}
