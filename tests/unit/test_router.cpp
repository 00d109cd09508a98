#include <catch2/catch.hpp>

#include <map>

#include "gateway/config/gateway.hpp"
#include "gateway/policy/router.hpp"

using namespace tollgate;
using namespace tollgate::policy;

TEST_CASE("request targets normalise to the path routes see", "[router]") {
  const std::pair<const char*, const char*> ok[] = {
      {"/", "/"},
      {"/api/auth/login", "/api/auth/login"},
      {"/api/auth/login?x=1#f", "/api/auth/login"},
      {"//api///auth/login", "/api/auth/login"},
      {"/api/./auth/login", "/api/auth/login"},
      {"/api/x/../auth/login", "/api/auth/login"},
      {"/api/auth%2Flogin", "/api/auth/login"},
      {"/api/%61uth/login", "/api/auth/login"},
      {"/api/%2e%2e/api/auth/login", "/api/auth/login"},
      {"/ws/crdt/", "/ws/crdt/"},
      {"/a/b/..", "/a/"},
      {"/a/.", "/a/"},
      {"/.well-known/x", "/.well-known/x"},
      {"/a/..b/c.d", "/a/..b/c.d"},
      {"/v1.2/x/", "/v1.2/x/"},
      {"http://example.com/api/inbox?q", "/api/inbox"},
      {"https://example.com", "/"},
  };
  std::string out;
  for (const auto& [target, path] : ok) {
    INFO(target);
    REQUIRE(normalize_path(target, out));
    CHECK(out == path);
  }
  for (const char* bad :
       {"", "*", "example.com:443", "api/x", "/..", "/a/../../b", "/%", "/%4", "/%zz", "/a%00b"}) {
    INFO(bad);
    CHECK_FALSE(normalize_path(bad, out));
  }
}

TEST_CASE("globs: * within a segment, ** across segments", "[router]") {
  CHECK(glob_match("/api/files/**", "/api/files/a/b/c.txt"));
  CHECK(glob_match("/api/files/**", "/api/files/"));
  CHECK(glob_match("/api/files/**", "/api/files"));
  CHECK_FALSE(glob_match("/api/files/**", "/api/filesx/a"));
  CHECK(glob_match("/api/*/info", "/api/users/info"));
  CHECK_FALSE(glob_match("/api/*/info", "/api/users/7/info"));
  CHECK(glob_match("/api/**/info", "/api/users/7/info"));
  CHECK(glob_match("/api/**/info", "/api/info"));
  CHECK(glob_match("/img/*.png", "/img/cat.png"));
  CHECK_FALSE(glob_match("/img/*.png", "/img/cat.jpg"));
  CHECK_FALSE(glob_match("/img/*.png", "/img/a/cat.png"));
  CHECK(glob_match("/**/*.png", "/a/b/c/d.png"));
  CHECK(glob_match("/a/**/b/**/c", "/a/x/b/y/z/c"));
  CHECK_FALSE(glob_match("/a/**/b/**/c", "/a/x/y/z/c"));
  CHECK(glob_match("/*", "/anything"));
  CHECK_FALSE(glob_match("/*", "/two/segments"));
  // Long hostile paths stay cheap: no exponential backtracking.
  std::string hostile(8000, 'a');
  CHECK_FALSE(glob_match("/*a*a*a*a*a*a*a*b", "/" + hostile));
  std::string deep;
  for (int i = 0; i < 2000; ++i)
    deep += "/a";
  CHECK_FALSE(glob_match("/**/a/**/a/**/b", deep));
}

namespace {

struct fake_request {
  std::map<std::string, std::string> headers;  // lower-case names
  static std::string_view lookup(const void* ctx, std::string_view name) {
    const auto& h = static_cast<const fake_request*>(ctx)->headers;
    std::string lower(name);
    for (auto& c : lower)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const auto it = h.find(lower);
    return it == h.end() ? std::string_view() : std::string_view(it->second);
  }
};

}  // namespace

TEST_CASE("the default routes classify as design.md section 3 says", "[router]") {
  const auto g = config::load_gateway(std::string(TOLLGATE_SOURCE_DIR) + "/config/gateway.yaml");
  const compiled_policy p(g.policy, {});
  const router r(g, p);
  auto classify = [&](std::string_view method, std::string_view target,
                      std::map<std::string, std::string> headers = {}) {
    fake_request req{std::move(headers)};
    std::string path;
    REQUIRE(normalize_path(target, path));
    return r.match({method, path, &fake_request::lookup, &req}).category->name;
  };
  CHECK(classify("POST", "/api/auth/login") == "auth");
  CHECK(classify("GET", "/api/auth/login") == "general");  // the method is part of the rule
  CHECK(classify("POST", "/api/profile/register") == "auth");
  CHECK(classify("POST", "/api/auth/password") == "auth");
  CHECK(classify("POST", "//api/./auth/login?next=/") == "auth");  // no bypass by spelling
  CHECK(classify("POST", "/api/auth%2flogin") == "auth");
  // Spellings that upstream frameworks serve as the same route (docs/configuration.md, "Route
  // matching").
  CHECK(classify("POST", "/api/auth/login/") == "auth");
  CHECK(classify("POST", "/API/auth/login") == "auth");
  CHECK(classify("POST", "/api/auth/login;x=1") == "auth");
  CHECK(classify("POST", "/Api/Profile/Register/;jsessionid=1") == "auth");
  CHECK(classify("POST", "/api/x/..;/auth/password") == "auth");
  CHECK(classify("GET", "/API/auth/login/") == "general");
  CHECK(classify("POST", "/api/auth/login/x") == "general");
  CHECK(classify("PUT", "/api/inbox/42") == "federation");
  CHECK(classify("GET", "/api/inboxes") == "federation");  // a prefix is a string prefix
  CHECK(classify("GET", "/ws/bus", {{"upgrade", "websocket"}}) == "websocket");
  CHECK(classify("GET", "/ws/bus", {{"upgrade", "WebSocket"}}) == "websocket");
  CHECK(classify("GET", "/ws/bus") == "general");  // no upgrade: not a websocket request
  CHECK(classify("GET", "/ws/crdt/doc-1", {{"upgrade", "websocket"}}) == "websocket");
  CHECK(classify("GET", "/ws/rtdb/x", {{"upgrade", "h2c, websocket"}}) == "websocket");
  // No spelling of a path takes an upgrade out of the websocket category (issue 21).
  for (const char* spelled : {"/ws/bus/", "/WS/bus", "/ws/bus;x=1", "/Ws/Crdt", "/ws/other", "/"}) {
    INFO(spelled);
    CHECK(classify("GET", spelled, {{"upgrade", "websocket"}}) == "websocket");
  }
  // Only a GET can upgrade: another method naming Upgrade does not choose the websocket
  // category's buckets.
  CHECK(classify("PUT", "/api/profiles/x", {{"upgrade", "websocket"}}) == "general");
  CHECK(classify("GET", "/api/profiles/x") == "general");
  const fake_request none;
  const auto& def = r.match({"GET", "/", &fake_request::lookup, &none});
  CHECK(def.line == 0);
  CHECK(g.upstreams[def.upstream].name == "app");
}
