// The readers of limit keys from untrusted request bytes: query parameters and cookies, with
// the nasty cases (escapes cut short, names spelled with escapes, empty values, look-alike
// names, quotes, separators without pairs).

#include <catch2/catch.hpp>

#include <string>

#include "gateway/core/text.hpp"
#include "gateway/policy/keys.hpp"

using tollgate::policy::cookie_value;
using tollgate::policy::query_value;

namespace {

/// The value of `name` in `target`, or "<none>".
std::string query(std::string_view target, std::string_view name) {
  std::string out;
  return query_value(target, name, out) ? out : "<none>";
}

}  // namespace

TEST_CASE("query parameters: decoded, first one wins, nothing read past the query", "[keys]") {
  CHECK(query("/x?tenant=acme", "tenant") == "acme");
  CHECK(query("/x?a=1&tenant=acme&b=2", "tenant") == "acme");
  CHECK(query("/x?tenant=a&tenant=b", "tenant") == "a");
  CHECK(query("/x?tenant=acme+corp%21", "tenant") == "acme corp!");
  CHECK(query("/x?t%65nant=acme", "tenant") == "acme");  // no way around by escaping the name
  CHECK(query("/x?tenant=acme#tenant=evil", "tenant") == "acme");
  CHECK(query("/x?a=1#tenant=acme", "tenant") == "<none>");  // a fragment is not the query
  CHECK(query("/x?tenant=%00", "tenant") == std::string(1, '\0'));
  CHECK(query("/x?xtenant=1&tenantx=2", "tenant") == "<none>");
}

TEST_CASE("query parameters: absent, empty and badly escaped values limit nobody", "[keys]") {
  for (const char* target :
       {"", "/", "/x", "/x?", "?", "/x?tenant", "/x?tenant=", "/x?&&&", "/x?tenant=%",
        "/x?tenant=%4", "/x?tenant=%zz", "/x?tenant=a%g1", "/x?=acme", "/x?tenant=%2"}) {
    INFO(target);
    CHECK(query(target, "tenant") == "<none>");
  }
}

TEST_CASE("cookies: the named one among others, trimmed, unquoted", "[keys]") {
  CHECK(cookie_value("sid=abc", "sid") == "abc");
  CHECK(cookie_value("theme=dark; sid=abc; x=1", "sid") == "abc");
  CHECK(cookie_value("theme=dark;sid=abc", "sid") == "abc");
  CHECK(cookie_value("  sid =  abc  ", "sid") == "abc");
  CHECK(cookie_value("sid=\"abc\"", "sid") == "abc");
  CHECK(cookie_value("sid=a=b", "sid") == "a=b");  // '=' inside a value is part of it
  CHECK(cookie_value("sid=1; sid=2", "sid") == "1");
  CHECK(cookie_value("xsid=1; sidx=2", "sid").empty());  // look-alike names
  CHECK(cookie_value("sid", "sid").empty());             // a name without '='
  CHECK(cookie_value("sid=", "sid").empty());
  CHECK(cookie_value("sid=\"\"", "sid").empty());
  CHECK(cookie_value("sid=\"", "sid") == "\"");  // a lone quote is not a quoted value
  CHECK(cookie_value(";;; ;", "sid").empty());
  CHECK(cookie_value("", "sid").empty());
}

TEST_CASE("the one percent-decoder", "[keys][text]") {
  std::string out;
  CHECK(tollgate::core::percent_decode("a%2Fb%2fc", out));
  CHECK(out == "a/b/c");
  out.clear();
  CHECK(tollgate::core::percent_decode("a+b", out));
  CHECK(out == "a+b");  // '+' is a plus outside forms
  out.clear();
  CHECK(tollgate::core::percent_decode("a+b", out, true));
  CHECK(out == "a b");
  for (const char* bad : {"%", "%1", "%g0", "a%", "%%"}) {
    out.clear();
    INFO(bad);
    CHECK_FALSE(tollgate::core::percent_decode(bad, out));
  }
}
