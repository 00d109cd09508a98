// tollgate: the command line of docs/design.md §2. Serving is gateway/app/serve.cpp.

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gateway/app/serve.hpp"
#include "gateway/app/simulate.hpp"
#include "gateway/app/store_setup.hpp"
#include "gateway/config/error.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/identity/setup.hpp"
#include "gateway/net/snapshot.hpp"
#include "gateway/policy/challenge_page.hpp"
#include "gateway/pow/challenge.hpp"

namespace {

using namespace tollgate;

constexpr std::string_view version = "0.1.0";

int usage() {
  std::fprintf(
      stderr,
      "usage: tollgate [--config FILE]      run (default FILE: config/gateway.yaml)\n"
      "       tollgate --check-config FILE  validate, print errors with file:line\n"
      "       tollgate --version\n"
      "       tollgate pow solve CHALLENGE BITS  print a nonce for a challenge\n"
      "       tollgate simulate --config FILE --log LOG [--log LOG ...]\n"
      "                [--compare OTHER_FILE] [--json] [--top N]\n"
      "                                     replay a request log offline (docs/design.md §13)\n");
  return 2;
}

int check_config(const std::string& path) {
  try {
    const auto g = config::load_gateway(path);
    net::make_tls_contexts(g);                      // certificates and keys load
    net::make_upstream_contexts(g);                 // and the upstreams' TLS files
    const policy::challenge_page page(g.pow.page);  // the page template compiles
    std::vector<std::string> skipped;               // the JWK Set reads, the secret is set
    identity::make_verifier(g, {}, &skipped);
    for (const auto& k : skipped)
      std::fprintf(stderr, "warning: identity.jwt.jwks_file: left out: %s\n", k.c_str());
    try {
      app::check_store(g.store);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(g.file + ": " + e.what());
    }
    for (const auto& w : config::coverage_warnings(g))
      std::fprintf(stderr, "warning: %s\n", w.c_str());
    std::printf("%s: ok (%zu listeners, %zu upstreams, %zu routes, %zu categories", path.c_str(),
                g.listeners.size(), g.upstreams.size(), g.routes.size(),
                g.policy.categories.size());
    // Host entries (docs/design.md §15), when there are any: their own routes and categories.
    for (const auto& h : g.hosts) {
      std::printf("; host %s: %zu routes, %zu categories", h.label().c_str(), h.routes.size(),
                  h.policy.categories.size());
    }
    std::printf(")\n");
    return 0;
  } catch (const std::exception& e) {
    // config::error above all; anything else is a bug, but still an answer, not an abort.
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}

/// tollgate pow solve CHALLENGE BITS
int solve(const char* challenge, const char* bits_text) {
  char* end = nullptr;
  const unsigned long bits = std::strtoul(bits_text, &end, 10);
  if (end == bits_text || *end != '\0' || bits > 64) {
    std::fprintf(stderr, "tollgate pow solve: BITS must be a number from 0 to 64\n");
    return 2;
  }
  std::printf("%s\n", pow::solve(challenge, static_cast<unsigned>(bits),
                                 std::max(1u, std::thread::hardware_concurrency()))
                          .c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "config/gateway.yaml";
  if (argc == 2 && std::strcmp(argv[1], "--version") == 0) {
    std::printf("tollgate %s\n", version.data());
    return 0;
  }
  if (argc == 3 && std::strcmp(argv[1], "--check-config") == 0) return check_config(argv[2]);
  if (argc >= 2 && std::strcmp(argv[1], "simulate") == 0) return app::simulate(argc - 2, argv + 2);
  if (argc == 5 && std::strcmp(argv[1], "pow") == 0 && std::strcmp(argv[2], "solve") == 0) {
    return solve(argv[3], argv[4]);
  }
  if (argc == 3 && std::strcmp(argv[1], "--config") == 0) {
    path = argv[2];
  } else if (argc != 1) {
    return usage();
  }
  return app::serve(path, version);
}
