// TLS listeners through a real client: certificates made by the openssl command, curl as the
// client, tollgate-echo as the upstream.

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "harness.hpp"

using namespace tollgate::test;

namespace {

/// A directory with a fresh self-signed certificate for 127.0.0.1 (cert.pem, key.pem).
struct certificate {
  certificate() {
    dir = std::filesystem::temp_directory_path() / ("tollgate-tls-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir);
    std::string out;
    const int status =
        run_with_input({"openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                        "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                        "-keyout", (dir / "key.pem").string(), "-out", (dir / "cert.pem").string()},
                       "", out);
    INFO(out);
    REQUIRE(status == 0);
  }
  ~certificate() { std::filesystem::remove_all(dir); }
  std::string cert() const { return (dir / "cert.pem").string(); }
  std::string key() const { return (dir / "key.pem").string(); }
  std::filesystem::path dir;
};

std::string tls_gateway(const certificate& c) {
  return "listeners: [{ name: public, address: 127.0.0.1, port: 0, tls: { certificate: " +
         c.cert() + ", private_key: " + c.key() + R"( } }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
upstreams: { app: { endpoints: ["{echo}"] } }
default_route: { category: open, upstream: app }
policies: ["{policy}"]
)";
}

const std::string policy_yaml = R"(
categories:
  open:
    limits:
      ipv4_individual: { short: { rate: 1000/s, burst: 1000 } }
)";

/// curl's output (-i: heads and bodies) for `args` against the gateway.
std::string curl(const std::vector<std::string>& args, int& status) {
  std::vector<std::string> argv{"curl", "-s", "-i", "--max-time", "10"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::string out;
  status = run_with_input(argv, "", out);
  return out;
}

}  // namespace

TEST_CASE("a TLS listener serves HTTPS, keeps connections and says https upstream",
          "[integration][tls]") {
  certificate c;
  echo_server echo;
  gateway gw(tls_gateway(c), policy_yaml, echo.port);
  const std::string base = "https://127.0.0.1:" + std::to_string(gw.port);

  int status = 0;
  // Two requests over one verified TLS connection.
  auto out = curl({"--cacert", c.cert(), base + "/a", base + "/b"}, status);
  INFO(out);
  REQUIRE(status == 0);
  CHECK(out.find("HTTP/1.1 200 OK") != std::string::npos);
  CHECK(out.find(R"("target":"/a")") != std::string::npos);
  CHECK(out.find(R"("target":"/b")") != std::string::npos);
  CHECK(out.find(R"(["X-Forwarded-Proto","https"])") != std::string::npos);
  CHECK(out.find("X-RateLimit-Limit: 1000") != std::string::npos);
  CHECK(echo.requests() == 2);

  // A body of 1 MiB arrives whole.
  const auto body = c.dir / "body.bin";
  std::ofstream(body) << std::string(1 << 20, 'z');
  out =
      curl({"--cacert", c.cert(), "--data-binary", "@" + body.string(), base + "/upload"}, status);
  CHECK(status == 0);
  CHECK(out.find(R"("body_bytes":1048576)") != std::string::npos);
  CHECK(out.find("\"body_fnv1a64\":\"" + fnv1a64_hex(std::string(1 << 20, 'z')) + "\"") !=
        std::string::npos);

  // Plain HTTP to the TLS port gets no HTTP answer; a client that does not trust the
  // certificate stops at the handshake; the listener keeps serving.
  CHECK_THROWS(request(gw.port, get("/plain")));
  curl({base + "/untrusted"}, status);
  CHECK(status != 0);
  curl({"--cacert", c.cert(), base + "/again"}, status);
  CHECK(status == 0);
}

TEST_CASE("a TLS key that does not load is a configuration error naming the key",
          "[integration][tls]") {
  certificate c;
  std::ofstream(c.dir / "broken.pem") << "-----BEGIN PRIVATE KEY-----\nnot a key\n";
  std::ofstream(c.dir / "p.yaml") << policy_yaml;
  std::ofstream(c.dir / "g.yaml")
      << "listeners: [{ name: public, address: 127.0.0.1, port: 8443, tls: { certificate: "
      << c.cert() << ", private_key: " << (c.dir / "broken.pem").string() << " } }]\n"
      << "upstreams: { app: { endpoints: ['127.0.0.1:1'] } }\n"
      << "default_route: { category: open, upstream: app }\npolicies: [p.yaml]\n";
  std::string out;
  CHECK(run_with_input({built("tollgate"), "--check-config", (c.dir / "g.yaml").string()}, "",
                       out) == 1);
  CHECK(out.find("listeners.public.tls.private_key: cannot load") != std::string::npos);
}

TEST_CASE("TLS behind the PROXY protocol: the client named in the header, over TLS",
          "[integration][tls]") {
  certificate c;
  echo_server echo;
  std::string yaml = tls_gateway(c);
  yaml.replace(yaml.find(" } }]"), 5, " }, proxy_protocol: true }]");
  gateway gw(yaml, policy_yaml, echo.port);
  int status = 0;
  // curl sends a PROXY v1 line naming its own source address, then the TLS handshake.
  const auto out = curl({"--haproxy-protocol", "--cacert", c.cert(),
                         "https://127.0.0.1:" + std::to_string(gw.port) + "/behind"},
                        status);
  INFO(out);
  CHECK(status == 0);
  CHECK(out.find("HTTP/1.1 200 OK") != std::string::npos);
  CHECK(out.find(R"(["X-Forwarded-Proto","https"])") != std::string::npos);
  CHECK(out.find(R"(["X-Real-IP","127.0.0.1"])") != std::string::npos);
}
