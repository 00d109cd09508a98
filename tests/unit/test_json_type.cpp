// The message type scanner (gateway/protocol/json_type.*): a string at a JSON pointer found in a
// message fed in pieces, whatever the pieces; everything that is not a string there, or not JSON
// before it, found as nothing (the `default` type).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "gateway/protocol/json_type.hpp"

using namespace tollgate::protocol::ws;
using state = type_scanner::state;

namespace {

json_pointer pointer(std::string_view text) {
  std::string error;
  auto p = json_pointer::parse(text, error);
  INFO(error);
  REQUIRE(p);
  return *p;
}

std::span<const std::uint8_t> bytes_of(std::string_view s) {
  return {reinterpret_cast<const std::uint8_t*>(s.data()), s.size()};
}

/// The type `doc` has under `ptr`, fed whole; "<none>" when it has none. Fed again split at
/// every position (and one byte at a time), it must come out the same.
std::string type_of(std::string_view ptr, std::string_view doc) {
  const json_pointer p = pointer(ptr);
  type_scanner s(p);
  s.reset();
  s.feed(bytes_of(doc));
  const std::string whole = s.finish() == state::found ? std::string(s.value()) : "<none>";
  for (std::size_t cut = 0; cut <= doc.size(); ++cut) {
    s.reset();
    s.feed(bytes_of(doc.substr(0, cut)));
    s.feed(bytes_of(doc.substr(cut)));
    const std::string split = s.finish() == state::found ? std::string(s.value()) : "<none>";
    INFO("cut at " << cut);
    REQUIRE(split == whole);
  }
  s.reset();
  for (const char c : doc)
    s.feed(bytes_of(std::string_view(&c, 1)));
  CHECK((s.finish() == state::found ? std::string(s.value()) : "<none>") == whole);
  return whole;
}

}  // namespace

TEST_CASE("pointers: tokens unescaped, and what is refused", "[json_type]") {
  CHECK(pointer("/type").tokens == std::vector<std::string>{"type"});
  CHECK(pointer("/params/0/method").tokens == std::vector<std::string>{"params", "0", "method"});
  CHECK(pointer("/a~1b/c~0d/~01").tokens == std::vector<std::string>{"a/b", "c~d", "~1"});
  CHECK(pointer("/").tokens == std::vector<std::string>{""});
  std::string error;
  for (const char* bad :
       {"", "type", "/a~2", "/a~", "/1/2/3/4/5/6/7/8/9/10/11/12/13/14/15/16/17"}) {
    CAPTURE(bad);
    CHECK_FALSE(json_pointer::parse(bad, error));
    CHECK_FALSE(error.empty());
  }
}

TEST_CASE("a type found at its pointer, however the message is cut", "[json_type]") {
  CHECK(type_of("/type", R"({"type":"chat","text":"hi"})") == "chat");
  CHECK(type_of("/type", R"(  { "text" : "a \"type\": \"x\" }" , "type" : "typing" } )") ==
        "typing");
  // JSON-RPC: the method after the params, whatever they hold.
  CHECK(type_of("/method",
                R"({"jsonrpc":"2.0","params":[{"a":[1,-2.5e+3,true,false,null]},"}]"],"id":7,)"
                R"("method":"eth_call"})") == "eth_call");
  CHECK(type_of("/params/1/kind", R"({"params":[{"kind":"no"},{"kind":"yes"}]})") == "yes");
  CHECK(type_of("/1", R"(["zero","one","two"])") == "one");
  CHECK(type_of("/0/0", R"([["in"],"out"])") == "in");
  CHECK(type_of("/a~1b/c~0d", R"({"a/b":{"c~d":"escaped"}})") == "escaped");
  CHECK(type_of("/type", R"({"ty\u0070e":"by \u0065scape"})") == "by escape");
  CHECK(type_of("/type", R"({"type":"\ud83d\ude00\n\t\"\\\/"})") == "\xF0\x9F\x98\x80\n\t\"\\/");
  CHECK(type_of("/type", R"({"type":"caf\u00e9"})") == "caf\xC3\xA9");
  CHECK(type_of("/type", "{\"type\":\"raw \xC3\xA9\"}") == "raw \xC3\xA9");
  CHECK(type_of("/", R"({"":"empty key"})") == "empty key");
  // The first of two equal keys; what follows the value is never read.
  CHECK(type_of("/type", R"({"type":"first","type":"second"})") == "first");
  CHECK(type_of("/type", R"({"type":"chat", this is never read)") == "chat");
  // The path may pass through a container that does not hold it, and then one that does.
  CHECK(type_of("/a/type", R"({"a":{"x":1},"a":{"type":"again"}})") == "again");
}

TEST_CASE("no type: not a string, not there, not JSON, too deep", "[json_type]") {
  for (const char* doc : {
           R"({"type":5})",
           R"({"type":null})",
           R"({"type":{"name":"chat"}})",
           R"({"type":["chat"]})",
           R"({"type":true})",  // not strings
           R"({"kind":"chat"})",
           R"({"x":{"type":"chat"}})",
           R"(["type","chat"])",
           R"("type")",
           R"(42)",
           R"({})",
           R"([])",  // not there
           R"({"type" "chat"})",
           R"({'type':'chat'})",
           R"({"a":1,,"type":"x"})",
           R"({"a":tru,"type":"x"})",
           R"({"a":[1,],"type":"x"})",
           R"({"a":1 "type":"x"})",
           "{\"a\":\"line\nbreak\",\"type\":\"x\"}",
           R"({"a":"\ud800","type":"x"})",
           R"({"a":"\udc00","type":"x"})",
           R"({"a":"\q","type":"x"})",
           R"({"a":"\u12G4","type":"x"})",
           R"(})",
           R"(]{"type":"x"})",
           R"({"type":"chat)",  // the message ended first
           "",
           "   ",
           "\xEF\xBB\xBF{\"type\":\"x\"}",  // empty; a byte order mark
       }) {
    CAPTURE(doc);
    CHECK(type_of("/type", doc) == "<none>");
  }
  CHECK(type_of("/01", R"(["a","b"])") == "<none>");  // not an index
  CHECK(type_of("/-", R"(["a","b"])") == "<none>");
  // A document that ends is not read past: what comes after its end is not JSON.
  CHECK(type_of("/type", R"({"a":1} {"type":"x"})") == "<none>");
  // Nesting past max_depth.
  std::string deep(type_scanner::max_depth + 1, '[');
  CHECK(type_of("/0", deep) == "<none>");
  std::string shallow(type_scanner::max_depth - 1, '[');
  shallow += R"(["x"])";
  shallow += std::string(type_scanner::max_depth - 1, ']');
  CHECK(type_of("/0", "[" + shallow.substr(1)) == "<none>");  // a string, not at /0's depth
}

TEST_CASE("a long value is found but names nothing, and a long message is read only so far",
          "[json_type]") {
  const std::string longest(type_scanner::max_value, 'x');
  CHECK(type_of("/type", R"({"type":")" + longest + R"("})") == longest);
  const json_pointer p = pointer("/type");
  type_scanner s(p);
  s.reset();
  s.feed(bytes_of(R"({"type":")" + longest + R"(y"})"));
  CHECK(s.where() == state::found);
  CHECK(s.value().empty());
  // 1 MiB of message: the type at byte 0 is found after 16 bytes, nothing more is read.
  std::string big = R"({"type":"chat","pad":")" + std::string(1 << 20, 'p') + R"("})";
  s.reset();
  CHECK(s.feed(bytes_of(std::string_view(big).substr(0, 16))) == state::found);
  CHECK(s.value() == "chat");
  // The same bytes with the type at the end: still scanning after the first 5000.
  std::string late = R"({"pad":")" + std::string(5000, 'p') + R"(","type":"chat"})";
  s.reset();
  CHECK(s.feed(bytes_of(std::string_view(late).substr(0, 5000))) == state::scanning);
  CHECK(s.feed(bytes_of(std::string_view(late).substr(5000))) == state::found);
  CHECK(s.value() == "chat");
}
