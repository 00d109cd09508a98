/// Fuzz target: the readers of limit keys from untrusted request bytes
/// (gateway/policy/keys.*): a query parameter from a request target and a cookie from a
/// Cookie field value, as compiled_policy::request calls them.
///
/// Input: `name` NUL `text`. Checked: both readers only read the bytes given (each gets a heap
/// copy of exactly that many bytes, so ASan sees an over-read); a query value found is
/// non-empty and no longer than the text; a cookie value is a part of the text, and loses its
/// quotes in pairs (one `"` before it means one after it: `"""a"""` gives `""a""`); asking again
/// gives the same answer.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/policy/keys.hpp"

namespace {

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_keys: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const auto nul = input.find('\0');
  if (nul == std::string_view::npos) return 0;
  const std::vector<char> name(input.begin(), input.begin() + static_cast<long>(nul));
  const std::vector<char> text(input.begin() + static_cast<long>(nul) + 1, input.end());
  const std::string_view n(name.data(), name.size()), t(text.data(), text.size());

  std::string value, again;
  const bool found = tollgate::policy::query_value(t, n, value);
  require(!found || !value.empty(), "a query value found is empty");
  require(value.size() <= t.size(), "a decoded query value is longer than the target");
  require(found == tollgate::policy::query_value(t, n, again) && value == again,
          "query_value is not a function of its input");

  const std::string_view cookie = tollgate::policy::cookie_value(t, n);
  if (!cookie.empty()) {
    require(cookie.data() >= t.data() && cookie.data() + cookie.size() <= t.data() + t.size(),
            "a cookie value outside the field");
    const bool quoted_before = cookie.data() > t.data() && cookie.data()[-1] == '"';
    const bool quoted_after =
        cookie.data() + cookie.size() < t.data() + t.size() && cookie.data()[cookie.size()] == '"';
    require(quoted_before == quoted_after, "a cookie value lost one quote of a pair");
    require(tollgate::policy::cookie_value(t, n) == cookie, "cookie_value is not a function");
  }
  return 0;
}
