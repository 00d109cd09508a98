#pragma once
/// The one exception of the configuration layer: what is wrong, and where.

#include <stdexcept>
#include <string>

namespace tollgate::config {

/// A configuration that cannot be used. `what()` reads `file:line: key: problem`, the form
/// printed by --check-config and logged by a failed reload.
class error : public std::runtime_error {
 public:
  /// An error at `line` (1-based; 0 when unknown) of `file`, about the dotted `key`.
  error(std::string file, int line, std::string key, const std::string& problem)
      : std::runtime_error(format(file, line, key, problem)),
        file_(std::move(file)),
        line_(line),
        key_(std::move(key)),
        problem_(problem) {}

  /// The file the error is in.
  const std::string& file() const noexcept { return file_; }
  /// Its 1-based line, or 0.
  int line() const noexcept { return line_; }
  /// The dotted path of the key, e.g. "categories.auth.limits.ipv4_network.short.rate".
  const std::string& key() const noexcept { return key_; }
  /// The problem alone, without the location.
  const std::string& problem() const noexcept { return problem_; }

 private:
  static std::string format(const std::string& file, int line, const std::string& key,
                            const std::string& problem) {
    std::string out = file;
    if (line > 0) out += ":" + std::to_string(line);
    out += ": ";
    if (!key.empty()) out += key + ": ";
    return out + problem;
  }

  std::string file_;     ///< path as given
  int line_;             ///< 1-based, 0 unknown
  std::string key_;      ///< dotted key path
  std::string problem_;  ///< what is wrong
};

}  // namespace tollgate::config
