// Tollgate in front of nginx from Debian: a peer that is not ours.

#include <unistd.h>
#include <catch2/catch.hpp>

#include <fstream>

#include "harness.hpp"

using namespace tollgate::test;

namespace {

/// nginx serving a file, a fixed answer and 404s from a scratch folder on a free port.
struct nginx_server {
  std::filesystem::path dir;
  std::uint16_t port = free_port();
  std::string file_body;
  std::unique_ptr<child> process;

  nginx_server() {
    dir = std::filesystem::temp_directory_path() / ("tollgate-nginx-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir / "www");
    file_body.resize(2'000'000);
    for (std::size_t i = 0; i < file_body.size(); ++i)
      file_body[i] = static_cast<char>('A' + i % 23);
    std::ofstream(dir / "www" / "file.bin", std::ios::binary) << file_body;
    std::filesystem::permissions(dir, std::filesystem::perms::all);
    std::filesystem::permissions(dir / "www", std::filesystem::perms::all);
    std::ofstream(dir / "nginx.conf") << "worker_processes 1;\n"
                                         "pid "
                                      << (dir / "nginx.pid").string()
                                      << ";\n"
                                         "error_log "
                                      << (dir / "error.log").string()
                                      << " warn;\n"
                                         "events { worker_connections 64; }\n"
                                         "http {\n"
                                         "  access_log off;\n"
                                         "  client_body_temp_path "
                                      << (dir / "body").string()
                                      << ";\n"
                                         "  proxy_temp_path "
                                      << (dir / "proxy").string()
                                      << ";\n"
                                         "  fastcgi_temp_path "
                                      << (dir / "fcgi").string()
                                      << ";\n"
                                         "  uwsgi_temp_path "
                                      << (dir / "uwsgi").string()
                                      << ";\n"
                                         "  scgi_temp_path "
                                      << (dir / "scgi").string()
                                      << ";\n"
                                         "  server {\n"
                                         "    listen 127.0.0.1:"
                                      << port
                                      << ";\n"
                                         "    root "
                                      << (dir / "www").string()
                                      << ";\n"
                                         "    location = /hello { default_type text/plain; return "
                                         "200 \"hello from nginx\\n\"; }\n"
                                         "  }\n"
                                         "}\n";
    process = std::make_unique<child>(
        std::vector<std::string>{"/usr/sbin/nginx", "-p", dir.string(), "-c",
                                 (dir / "nginx.conf").string(), "-g", "daemon off;"});
    for (int i = 0; i < 100; ++i) {
      try {
        request(port, get("/hello"));
        return;
      } catch (const std::exception&) {
        usleep(50'000);
      }
    }
    FAIL("nginx did not start");
  }
  ~nginx_server() {
    process.reset();
    std::filesystem::remove_all(dir);
  }
};

const std::string gateway_yaml = R"(
listeners: [{ name: public, address: 127.0.0.1, port: 0 }]
admin: { address: 127.0.0.1, port: 0 }
workers: 2
upstreams: { web: { endpoints: ["{echo}"], max_idle_connections: 4 } }
default_route: { category: open, upstream: web }
policies: ["{policy}"]
)";

const std::string policy_yaml =
    "categories: { open: { limits: { ipv4_individual: { short: { rate: 1000/s, burst: 1000 } } } } "
    "}\n";

}  // namespace

TEST_CASE("nginx as the upstream: files, fixed answers, HEAD and 404 pass through",
          "[integration][nginx]") {
  nginx_server nginx;
  gateway gw(gateway_yaml, policy_yaml, nginx.port);  // {echo} stands for the upstream

  auto r = request(gw.port, get("/hello"));
  CHECK(r.status == 200);
  CHECK(r.body == "hello from nginx\n");
  CHECK(r.header("server").rfind("nginx", 0) == 0);
  CHECK(r.header("x-ratelimit-limit") == "1000");

  r = request(gw.port, get("/file.bin"));
  CHECK(r.status == 200);
  CHECK(r.header("content-length") == "2000000");
  CHECK(r.body == nginx.file_body);

  r = request(gw.port, "HEAD /file.bin HTTP/1.1\r\nHost: t\r\n\r\n");
  CHECK(r.status == 200);
  CHECK(r.header("content-length") == "2000000");
  CHECK(r.body.empty());

  r = request(gw.port, get("/missing"));
  CHECK(r.status == 404);
  CHECK(r.header("x-ratelimit-remaining") != "");

  // Many requests on one client connection reuse pooled upstream connections.
  std::string raw;
  for (int i = 0; i < 50; ++i)
    raw += get("/hello");
  const auto rs = exchange(gw.port, raw, 50);
  for (const auto& one : rs)
    CHECK(one.body == "hello from nginx\n");
}
