// Loading files that cannot be loaded: every failure is a config::error naming the file (and
// line where known), never another exception type that would end a reloading gateway.

#include <catch2/catch.hpp>

#include <unistd.h>
#include <filesystem>
#include <fstream>
#include <ios>

#include "gateway/config/error.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/config/policy.hpp"
#include "gateway/config/yaml_reader.hpp"

using namespace tollgate;
using namespace tollgate::config;

namespace {

namespace fs = std::filesystem;

/// A scratch folder: a valid policy file, a folder where a file is expected, a broken file.
struct scratch {
  fs::path dir;
  scratch() {
    dir = fs::temp_directory_path() / ("tollgate-files-" + std::to_string(::getpid()));
    fs::create_directories(dir / "folder.yaml");
    std::ofstream(dir / "p.yaml") << "categories:\n  general: {}\n";
    std::ofstream(dir / "broken.yaml") << "categories:\n  general: {}\n  auth: { cost: 1\n";
  }
  ~scratch() { fs::remove_all(dir); }
  std::string path(const std::string& name) const { return (dir / name).string(); }
  /// Writes a gateway file g.yaml naming `policy` and returns its path.
  std::string gateway(const std::string& policy) const {
    std::ofstream(dir / "g.yaml") << "listeners: [{ name: public, address: 0.0.0.0, port: 8080 }]\n"
                                     "upstreams: { app: { endpoints: ['127.0.0.1:9000'] } }\n"
                                     "default_route: { category: general, upstream: app }\n"
                                     "policies: ["
                                  << policy << "]\n";
    return path("g.yaml");
  }
};

/// The message of the config::error that `load` throws; anything else fails the test.
template <class Load>
std::string error_of(Load&& load) {
  try {
    load();
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a policy path that is a folder is a configuration error", "[config]") {
  scratch s;
  const auto folder = s.path("folder.yaml");
  CHECK(error_of([&] { load_policies({folder}); }) ==
        folder + ": cannot read file: it is a directory");
  CHECK(error_of([&] { load_gateway(s.gateway("folder.yaml")); }) ==
        folder + ": cannot read file: it is a directory");
  // The gateway file itself.
  CHECK(error_of([&] { load_gateway(s.path("folder.yaml")); }) ==
        folder + ": cannot read file: it is a directory");
}

TEST_CASE("a missing policy or gateway file is a configuration error", "[config]") {
  scratch s;
  const auto missing = s.path("missing.yaml");
  CHECK(error_of([&] {
          load_policies({s.path("p.yaml"), missing});
        }) == missing + ": cannot read file: No such file or directory");
  CHECK(error_of([&] { load_gateway(s.gateway("missing.yaml")); }) ==
        missing + ": cannot read file: No such file or directory");
  CHECK(error_of([&] { load_gateway(missing); }) ==
        missing + ": cannot read file: No such file or directory");
}

TEST_CASE("a policy file with broken YAML names its file and line", "[config]") {
  scratch s;
  const auto broken = s.path("broken.yaml");
  CHECK(error_of([&] { load_policies({broken}); }) ==
        broken + ":4: YAML syntax: end of map flow not found");
  CHECK(error_of([&] { load_gateway(s.gateway("p.yaml, broken.yaml")); }) ==
        broken + ":4: YAML syntax: end of map flow not found");
  // A device that never ends is refused at a bound rather than read into memory.
  CHECK(error_of([&] { load_policies({"/dev/zero"}); }) ==
        "/dev/zero: cannot read file: larger than 16MiB");
}

TEST_CASE("exceptions of other types leave the loader as configuration errors", "[config]") {
  const auto convert = [](auto thrower) {
    return error_of([&] { with_file_errors("f.yaml", thrower); });
  };
  CHECK(convert([] {
          throw std::ios_base::failure("basic_filebuf::underflow error");
        }).rfind("f.yaml: cannot load: basic_filebuf::underflow error", 0) == 0);
  CHECK(convert([] { throw YAML::BadConversion(YAML::Mark::null_mark()); }) ==
        "f.yaml: YAML: bad conversion");
  CHECK(convert([] { throw error("other.yaml", 3, "k", "as it was"); }) ==
        "other.yaml:3: k: as it was");
  CHECK(with_file_errors("f.yaml", [] { return 7; }) == 7);
}
