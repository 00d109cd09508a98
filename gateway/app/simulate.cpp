#include "gateway/app/simulate.hpp"

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gateway/config/gateway.hpp"
#include "gateway/sim/log_set.hpp"
#include "gateway/sim/replay.hpp"
#include "gateway/sim/report.hpp"

namespace tollgate::app {

namespace {

using clock_type = std::chrono::steady_clock;

constexpr const char* usage_text =
    "usage: tollgate simulate --config GATEWAY.yaml --log FILE [--log FILE ...]\n"
    "                         [--compare OTHER_GATEWAY.yaml] [--json] [--top N]\n"
    "                         [--html FILE]\n"
    "  --html FILE  also writes the report as one self-contained HTML page: per category,\n"
    "               charts of the request rate against attack mode's baseline, of the\n"
    "               answers, and of the attack level over time (docs/simulator.md)\n";

int usage() {
  std::fputs(usage_text, stderr);
  return 2;
}

/// The command line of `tollgate simulate`.
struct arguments {
  std::string config;             ///< --config
  std::vector<std::string> logs;  ///< --log, at least one
  std::string compare;            ///< --compare, or ""
  bool json = false;              ///< --json
  std::size_t top = 10;           ///< --top
  std::string html;               ///< --html, or ""
};

std::optional<arguments> parse(int argc, char** argv) {
  arguments a;
  for (int i = 0; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--json") {
      a.json = true;
    } else if (arg == "--config" && has_value && a.config.empty()) {
      a.config = argv[++i];
    } else if (arg == "--log" && has_value) {
      a.logs.emplace_back(argv[++i]);
    } else if (arg == "--compare" && has_value && a.compare.empty()) {
      a.compare = argv[++i];
    } else if (arg == "--html" && has_value && a.html.empty()) {
      a.html = argv[++i];
    } else if (arg == "--top" && has_value) {
      char* end = nullptr;
      const char* v = argv[++i];
      const unsigned long n = std::strtoul(v, &end, 10);
      if (end == v || *end != '\0' || n > 1'000'000) return std::nullopt;
      a.top = n;
    } else {
      return std::nullopt;
    }
  }
  if (a.config.empty() || a.logs.empty()) return std::nullopt;
  return a;
}

/// Prints progress on stderr at most every two seconds: `what` so far and its rate.
class progress {
 public:
  explicit progress(const char* what) : what_(what), start_(clock_type::now()), last_(start_) {}
  void operator()(std::uint64_t done) {
    const auto now = clock_type::now();
    if (now - last_ < std::chrono::seconds(2)) return;
    last_ = now;
    const double s = std::chrono::duration<double>(now - start_).count();
    std::fprintf(stderr, "simulate: %llu %s (%.0f/s)\n", static_cast<unsigned long long>(done),
                 what_, static_cast<double>(done) / s);
  }

 private:
  const char* what_;
  clock_type::time_point start_, last_;
};

/// Loads a gateway file; prints its error (file:line:key) and returns null when it is bad.
std::unique_ptr<sim::simulator> load(const std::string& path) {
  try {
    return std::make_unique<sim::simulator>(config::load_gateway(path));
  } catch (const std::exception& e) {  // config::error; anything else is still an answer
    std::fprintf(stderr, "%s\n", e.what());
    return nullptr;
  }
}

/// Writes `page` to `path`; false (said on stderr) when it cannot.
bool write_page(const std::string& path, const std::string& page) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(page.data(), static_cast<std::streamsize>(page.size()));
  f.close();
  if (f) return true;
  std::fprintf(stderr, "tollgate simulate: cannot write %s: %s\n", path.c_str(),
               std::strerror(errno));
  return false;
}

}  // namespace

int simulate(int argc, char** argv) {
  if (argc == 1 && (std::strcmp(argv[0], "--help") == 0 || std::strcmp(argv[0], "-h") == 0)) {
    std::fputs(usage_text, stdout);  // asked for: on stdout, and no error
    return 0;
  }
  const auto args = parse(argc, argv);
  if (!args) return usage();
  const auto start = clock_type::now();
  auto a = load(args->config);
  if (a == nullptr) return 1;
  std::unique_ptr<sim::simulator> b;
  if (!args->compare.empty() && (b = load(args->compare)) == nullptr) return 1;
  std::optional<sim::log_set> logs;
  try {
    logs.emplace(args->logs);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tollgate simulate: %s\n", e.what());
    return 1;
  }
  progress reading("lines read");
  logs->index([&](std::uint64_t n) { reading(n); });
  progress replaying("requests replayed");
  sim::replay_options options;
  options.tick = [&](std::uint64_t n) { replaying(n); };
  const sim::replay_result result = sim::replay(*logs, *a, b.get(), options);
  sim::report_input in{*logs, result, {}, 0, 50};
  in.runs.push_back(sim::summarise(result.runs[0], *a, args->top));
  if (b != nullptr) in.runs.push_back(sim::summarise(result.runs[1], *b, args->top));
  in.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  if (!args->html.empty() && !write_page(args->html, sim::html_report(in))) return 1;
  const std::string out = args->json ? sim::json_report(in) : sim::text_report(in);
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "tollgate simulate: cannot write the report: %s\n", std::strerror(errno));
    return 1;
  }
  return 0;
}

}  // namespace tollgate::app
