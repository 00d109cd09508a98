/// Fuzz target: the readers of limit keys from untrusted request bytes
/// (gateway/policy/keys.*): a query parameter from a request target and a cookie from a
/// Cookie field value, as compiled_policy::request calls them; and the browser readers
/// (gateway/policy/browser.*): an Accept value, and a Cookie value without one cookie.
///
/// Input: `name` NUL `text`. Checked: both readers only read the bytes given (each gets a heap
/// copy of exactly that many bytes, so ASan sees an over-read); a query value found is
/// non-empty and no longer than the text; a cookie value is a part of the text, and loses its
/// quotes in pairs (one `"` before it means one after it: `"""a"""` gives `""a""`); asking again
/// gives the same answer. strip_cookie leaves no pair named `name` (cookie_value finds none
/// in what it leaves), never grows the text past the pairs it had, and is idempotent;
/// prefers_html is a function of its input.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/policy/browser.hpp"
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

  std::string rest, rest_again;
  tollgate::policy::strip_cookie(t, n, rest);
  require(rest.size() <= t.size() + t.size() / 2 + 2, "strip_cookie grew the field");
  if (!n.empty()) {
    require(tollgate::policy::cookie_value(rest, n).empty(), "strip_cookie left the cookie");
  }
  require(!tollgate::policy::strip_cookie(rest, n, rest_again) && rest_again == rest,
          "strip_cookie is not idempotent");
  require(tollgate::policy::prefers_html(t) == tollgate::policy::prefers_html(t),
          "prefers_html is not a function");
  return 0;
}
