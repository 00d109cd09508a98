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
