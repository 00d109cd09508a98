// Protocol text helpers of core/text.hpp.

#include <catch2/catch.hpp>

#include "gateway/core/text.hpp"

using tollgate::core::bearer_token;

TEST_CASE("the Bearer scheme matches in any case, the token as sent", "[text]") {
  const std::pair<const char*, const char*> cases[] = {
      {"Bearer s3cret", "s3cret"},
      {"bearer s3cret", "s3cret"},
      {"BEARER s3cret", "s3cret"},
      {"bEaReR S3CRET", "S3CRET"},    // the token keeps its case
      {"Bearer   s3cret", "s3cret"},  // RFC 9110 §11.4: 1*SP after the scheme
      {"Bearer dG9r/ZW4+=", "dG9r/ZW4+="},
      {"Basic s3cret", ""},
      {"Bearers3cret", ""},
      {"Bearer", ""},
      {"Bearer ", ""},
      {"Bearer\ts3cret", ""},
      {"", ""},
      {"s3cret", ""},
      {"Token Bearer s3cret", ""},
  };
  for (const auto& [value, token] : cases) {
    INFO(value);
    CHECK(bearer_token(value) == token);
  }
}

TEST_CASE("JSON escaping: runs pass whole, quotes and control bytes are escaped", "[text]") {
  struct row {
    std::string_view in;
    bool ascii_only;
    std::string_view out;
  };
  using namespace std::string_view_literals;
  const row rows[] = {
      {"", false, ""},
      {"plain text", false, "plain text"},
      {R"(a "quoted" \ path)", false, R"(a \"quoted\" \\ path)"},
      {"\"", false, R"(\")"},
      {"tab\there\n", false, R"(tab\u0009here\u000a)"},
      {"\x7f\x01", false, R"(\u007f\u0001)"},
      {"nul\0end"sv, false, R"(nul\u0000end)"},
      {"caf\xc3\xa9", false, "caf\xc3\xa9"},
      {"caf\xc3\xa9", true, R"(caf\u00c3\u00a9)"},
      {"\\\\", false, R"(\\\\)"},
  };
  for (const auto& r : rows) {
    std::string out = "prefix:";
    tollgate::core::append_json_escaped(out, r.in, r.ascii_only);
    CHECK(out == "prefix:" + std::string(r.out));
  }
}
