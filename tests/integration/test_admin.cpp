// The admin API's bearer token through the admin listener.

#include <stdlib.h>
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "harness.hpp"

using namespace tollgate::test;

namespace {

const std::string gateway_yaml = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 1
upstreams: { app: { endpoints: ["{echo}"] } }
default_route: { category: open, upstream: app }
policies: ["{policy}"]
)";

const std::string policy_yaml = R"(
categories:
  open:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
)";

/// Sets TOLLGATE_ADMIN_TOKEN for the gateways started while it lives.
struct admin_token {
  explicit admin_token(const char* token) { setenv("TOLLGATE_ADMIN_TOKEN", token, 1); }
  ~admin_token() { unsetenv("TOLLGATE_ADMIN_TOKEN"); }
};

}  // namespace

TEST_CASE("the admin token is taken with the Bearer scheme in any case and nothing but the token",
          "[integration][admin]") {
  echo_server echo;
  const auto gw = [&] {
    admin_token token("s3cret-token");
    return std::make_unique<gateway>(gateway_yaml, policy_yaml, echo.port);
  }();
  // RFC 9110 §11.1: the scheme is case-insensitive.
  for (const char* scheme : {"Bearer", "bearer", "BEARER", "bEaReR"}) {
    INFO(scheme);
    const auto r = request(gw->admin_port, get("/admin/bans", std::string("Authorization: ") +
                                                                  scheme + " s3cret-token\r\n"));
    CHECK(r.status == 200);
    CHECK(r.body == R"({"bans":[]})");
  }
  for (const char* value :
       {"bearer wrong", "Bearer S3CRET-TOKEN", "bearer s3cret-token-and-more", "bearer s3cret-toke",
        "Basic s3cret-token", "bearers3cret-token", "s3cret-token"}) {
    INFO(value);
    const auto r = request(gw->admin_port,
                           get("/admin/bans", std::string("Authorization: ") + value + "\r\n"));
    CHECK(r.status == 401);
    CHECK(r.header("www-authenticate") == "Bearer");
  }
  CHECK(request(gw->admin_port, get("/admin/bans")).status == 401);
  CHECK(request(gw->admin_port, get("/metrics")).status == 200);  // scrapes need no token
}
