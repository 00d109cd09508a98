// Route matching options (ignore_trailing_slash, case_insensitive, ignore_path_parameters) as
// tables through a real router: which spellings of a path a rule catches, and which it does not.

#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/policy/router.hpp"

using namespace tollgate;
using namespace tollgate::policy;
using config::path_match;

namespace {

/// A rule: how it matches, its pattern, its options as letters (s: ignore_trailing_slash,
/// c: case_insensitive, p: ignore_path_parameters) and its category.
struct rule_spec {
  path_match kind;
  std::string pattern;
  std::string_view options;
  std::string category = "hit";
};

/// The category a router of `rules` (default: "miss") gives a request for `target`.
std::string classify(const std::vector<rule_spec>& rules, std::string_view target) {
  config::gateway_config g;
  g.policy = config::load_policy_text("categories: { hit: {}, miss: {}, raw: {} }\n", "p.yaml");
  g.upstreams.emplace_back().name = "app";
  g.upstreams.back().endpoints = {{"127.0.0.1", 9000}};
  for (const rule_spec& r : rules) {
    config::route_config c;
    c.kind = r.kind;
    c.path = r.pattern;
    c.options.ignore_trailing_slash = r.options.find('s') != std::string_view::npos;
    c.options.case_insensitive = r.options.find('c') != std::string_view::npos;
    c.options.ignore_path_parameters = r.options.find('p') != std::string_view::npos;
    c.category = r.category;
    c.upstream = "app";
    g.routes.push_back(c);
  }
  g.default_route.category = "miss";
  g.default_route.upstream = "app";
  const compiled_policy p(g.policy, {});
  const router rt(g, p);
  std::string path;
  REQUIRE(normalize_path(target, path));
  return rt.match({"POST", path, nullptr, nullptr}).category->name;
}

/// One row: a rule, a request target, whether the rule catches it.
struct row {
  path_match kind;
  const char* pattern;
  const char* options;
  const char* target;
  bool hit;
};

void check_rows(std::initializer_list<row> rows) {
  for (const row& r : rows) {
    INFO(r.pattern << " [" << r.options << "] <- " << r.target);
    CHECK(classify({{r.kind, r.pattern, r.options}}, r.target) == (r.hit ? "hit" : "miss"));
  }
}

constexpr auto exact = path_match::exact;
constexpr auto prefix = path_match::prefix;
constexpr auto glob = path_match::glob;

}  // namespace

TEST_CASE("without options a route compares paths byte for byte", "[router][options]") {
  check_rows({
      {exact, "/api/auth/login", "", "/api/auth/login", true},
      {exact, "/api/auth/login", "", "/api/auth/login/", false},
      {exact, "/api/auth/login", "", "/API/auth/login", false},
      {exact, "/api/auth/login", "", "/api/auth/login;x=1", false},
      {exact, "/api/auth/login", "", "/api/x/..;/auth/login", false},
      {prefix, "/ws/crdt/", "", "/ws/crdt", false},
      {prefix, "/api/inbox", "", "/API/inbox/1", false},
      {prefix, "/api/inbox/", "", "/api/inbox;x/1", false},
      {glob, "/api/*/login", "", "/api/v1/login/", false},
      {glob, "/api/*/login", "", "/api/V1/LOGIN", false},
      {glob, "/api/*/login", "", "/api/v1/login;jsessionid=7", false},
      {glob, "/api/*/login", "", "/api/v1;x/login", true},  // "v1;x" is one segment
  });
}

TEST_CASE("ignore_trailing_slash: a path with or without its final slash", "[router][options]") {
  check_rows({
      {exact, "/api/auth/login", "s", "/api/auth/login", true},
      {exact, "/api/auth/login", "s", "/api/auth/login/", true},
      {exact, "/api/auth/login", "s", "/api/auth/login//", true},  // merged by normalisation
      {exact, "/api/auth/login", "s", "/api/auth/login/x", false},
      {exact, "/api/auth/login", "s", "/api/auth/loginx", false},
      {exact, "/api/auth/login", "s", "/API/auth/login/", false},
      {exact, "/docs/", "s", "/docs", true},
      {exact, "/docs/", "s", "/docs/", true},
      {exact, "/", "s", "/", true},
      {exact, "/", "s", "/x", false},
      {prefix, "/ws/crdt/", "s", "/ws/crdt", true},
      {prefix, "/ws/crdt/", "s", "/ws/crdt/doc", true},
      {prefix, "/ws/crdt/", "s", "/ws/crdtx", false},
      {prefix, "/ws/crdt/", "s", "/ws/crd", false},
      {prefix, "/api/inbox", "s", "/api/inbo", false},
      {glob, "/api/*/login", "s", "/api/v1/login/", true},
      {glob, "/api/*/login", "s", "/api/v1/login", true},
      {glob, "/api/*/login", "s", "/api/v1/", false},
      {glob, "/api/*/", "s", "/api/v1", true},
  });
}

TEST_CASE("case_insensitive: ASCII letters in any case", "[router][options]") {
  check_rows({
      {exact, "/api/auth/login", "c", "/API/Auth/LOGIN", true},
      {exact, "/api/auth/login", "c", "/api/auth/login", true},
      {exact, "/api/auth/login", "c", "/api/auth/login/", false},
      {exact, "/api/auth/login", "c", "/api/auth/logon", false},
      {exact, "/api/auth/login", "c", "/%41PI/auth/login", true},  // decoded first
      {exact, "/caf%C3%A9", "c", "/CAF%C3%A9", false},             // the pattern is not decoded
      {exact, "/café", "c", "/CAF%C3%A9", true},
      {exact, "/café", "c", "/caf%C3%89", false},  // É is not ASCII: not folded
      {prefix, "/api/inbox", "c", "/API/INBOX/1", true},
      {prefix, "/api/inbox", "c", "/api/inbo", false},
      {glob, "/api/*/login", "c", "/API/V1/Login", true},
      {glob, "/api/*.json", "c", "/API/X.JSON", true},
      {glob, "/api/*/login", "c", "/Api/x/y/login", false},
  });
}

TEST_CASE("ignore_path_parameters: path parameters dropped from every segment",
          "[router][options]") {
  check_rows({
      {exact, "/api/auth/login", "p", "/api/auth/login", true},
      {exact, "/api/auth/login", "p", "/api/auth/login;x=1", true},
      {exact, "/api/auth/login", "p", "/api/auth/login;", true},
      {exact, "/api/auth/login", "p", "/api/auth;v=2/login;jsessionid=A1", true},
      {exact, "/api/auth/login", "p", "/api/auth/login%3Bx=1", true},  // decoded, then dropped
      {exact, "/api/auth/login", "p", "/api/auth/;x/login", true},     // empty segment merged
      {exact, "/api/auth/login", "p", "/api/x/..;/auth/login", true},  // the ..; trick
      {exact, "/api/auth/login", "p", "/..;/api/auth/login", true},    // .. stops at the root
      {exact, "/api/auth/login", "p", "/api/auth/.;/login", true},
      {exact, "/api/auth/login", "p", "/api/auth/login;x/", false},  // the slash remains
      {exact, "/api/auth/login", "p", "/api/auth/login.;x", false},
      {exact, "/api/auth/login", "p", "/API/auth/login;x", false},
      {prefix, "/api/inbox/", "p", "/api/inbox;x/1", true},
      {prefix, "/api/inbox/", "p", "/api/inbox;x", false},
      {glob, "/api/*/login", "p", "/api/v1/login;jsessionid=7", true},
      {glob, "/api/*/login", "p", "/api/v1;a=b/login", true},
      {glob, "/api/*/login", "p", "/api/;a=b/login", false},  // no segment left for the *
  });
}

TEST_CASE("route options combine", "[router][options]") {
  check_rows({
      {exact, "/api/auth/login", "scp", "/API/Auth/Login/;x=1", true},
      {exact, "/api/auth/login", "scp", "/API/auth/login;x=1/", true},
      {exact, "/api/auth/login", "scp", "/Api/X/..;/AUTH/login/", true},
      {exact, "/api/auth/login", "scp", "/API/auth/logins", false},
      {exact, "/api/auth/login", "sp", "/api/auth/login;x/", true},
      {exact, "/api/auth/login", "sp", "/API/auth/login", false},
      {exact, "/api/auth/login", "sc", "/API/AUTH/LOGIN/", true},
      {exact, "/api/auth/login", "sc", "/api/auth/login;x", false},
      {prefix, "/ws/crdt/", "sc", "/WS/CRDT", true},
      {glob, "/api/*/login", "cp", "/API/V1;a=b/LOGIN", true},
      {glob, "/api/**", "scp", "/API;x", true},
  });
}

TEST_CASE("the stripped path is seen only by the rules that ask for it", "[router][options]") {
  const std::vector<rule_spec> raw_first = {{exact, "/a;x", "", "raw"}, {exact, "/a", "p"}};
  CHECK(classify(raw_first, "/a;x") == "raw");
  CHECK(classify(raw_first, "/a") == "hit");
  const std::vector<rule_spec> plain_first = {{exact, "/a", "", "raw"}, {exact, "/a", "p"}};
  CHECK(classify(plain_first, "/a") == "raw");
  CHECK(classify(plain_first, "/a;x") == "hit");
  CHECK(classify(plain_first, "/b;x") == "miss");
}

TEST_CASE("strip_path_parameters resolves what dropping parameters uncovers", "[router][options]") {
  const std::pair<const char*, const char*> cases[] = {
      {"/", "/"},          {"/a/b", "/a/b"},     {"/a;x/b;y=1,2", "/a/b"},
      {"/a/b/", "/a/b/"},  {"/a/b;x/", "/a/b/"}, {"/a/;x", "/a/"},
      {"/a/;x/b", "/a/b"}, {"/a/.;x/b", "/a/b"}, {"/a/b/..;x/c", "/a/c"},
      {"/a/..;", "/"},     {"/..;/..;/a", "/a"}, {"", "/"},
  };
  std::string out;
  for (const auto& [in, expected] : cases) {
    INFO(in);
    strip_path_parameters(in, out);
    CHECK(out == expected);
  }
}
