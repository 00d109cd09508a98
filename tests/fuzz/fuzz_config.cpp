/// Fuzz target: both YAML loaders (gateway/config/gateway.*, policy.*) on arbitrary files.
///
/// Input: a YAML file. It is written to `input.yaml` in a private temporary folder that also
/// holds a valid `policy.yaml` (so a gateway file naming it loads completely) and a folder
/// `folder.yaml` (a path that is no file), then loaded as a gateway file, as a policy file and
/// as policy text. A configuration the loaders refuse must leave as config::error (what
/// --check-config and a failed reload print); any other exception escaping them is a finding,
/// reported with its type and message. tests/fuzz/fuzz_config.dict holds the files' keys.

#include <cxxabi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "gateway/config/error.hpp"
#include "gateway/config/gateway.hpp"

namespace {

using namespace tollgate;

/// A policy with the categories the seeds' gateway files route to.
constexpr const char* valid_policy = R"(categories:
  auth:
    limits:
      ipv4_individual: { short: { rate: 2/s, burst: 5 }, long: { rate: 30/h, burst: 30 } }
    pow: { enabled: true }
  general:
    limits:
      ipv4_individual: { short: { rate: 20/s, burst: 50 } }
violations:
  pow_failed: { levels: [network] }
)";

struct folder {
  std::string path;
  folder() {
    char name[] = "/tmp/tollgate-fuzz-config-XXXXXX";
    if (mkdtemp(name) == nullptr) std::abort();
    path = name;
    write("policy.yaml", valid_policy, std::char_traits<char>::length(valid_policy));
    // A folder where a file is expected, as the loaders' tests have one.
    if (mkdir((path + "/folder.yaml").c_str(), 0700) != 0) std::abort();
  }
  ~folder() {
    std::remove((path + "/input.yaml").c_str());
    std::remove((path + "/policy.yaml").c_str());
    rmdir((path + "/folder.yaml").c_str());
    rmdir(path.c_str());
  }
  std::string write(const char* name, const void* data, std::size_t size) const {
    const std::string file = path + "/" + name;
    std::FILE* f = std::fopen(file.c_str(), "wb");
    if (f == nullptr || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) std::abort();
    return file;
  }
};

template <class Load>
void expect_config_errors_only(const char* loader, Load load) {
  try {
    load();
  } catch (const config::error&) {
    // A refused configuration, reported as it should be.
  } catch (const std::exception& e) {
    int status = 0;
    char* type = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
    std::fprintf(stderr, "fuzz_config: %s let %s escape: %s\n", loader,
                 type != nullptr ? type : typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz_config: %s let a non-std exception escape\n", loader);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const folder dir;
  const std::string file = dir.write("input.yaml", data, size);
  expect_config_errors_only("load_gateway", [&] { config::load_gateway(file); });
  expect_config_errors_only("load_policies", [&] { config::load_policies({file}); });
  const std::string text(reinterpret_cast<const char*>(data), size);
  expect_config_errors_only("load_policy_text",
                            [&] { config::load_policy_text(text, "input.yaml"); });
  return 0;
}
