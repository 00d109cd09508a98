#pragma once
/// A thin layer over yaml-cpp that remembers where each node came from, so every check can
/// report file, line and dotted key. Internal to the config module.

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gateway/config/error.hpp"
#include "gateway/core/units.hpp"

namespace tollgate::config {

/// One YAML node with its file and dotted key path.
/// Thread safety: a value type; used at load time only.
class yaml_node {
 public:
  /// Wraps `node`, found at `path` in `file`.
  yaml_node(YAML::Node node, std::shared_ptr<const std::string> file, std::string path);

  /// The dotted key path ("" for the document root).
  const std::string& path() const noexcept { return path_; }
  /// The file name.
  const std::string& file() const noexcept { return *file_; }
  /// 1-based line of the node.
  int line() const noexcept;
  /// 1-based line of the key this node is the value of (from entries()), else line(): a
  /// block mapping's value starts on the line after its key.
  int key_line() const noexcept { return key_line_ > 0 ? key_line_ : line(); }
  /// Whether the node is a mapping / sequence / null.
  bool is_map() const noexcept { return node_.IsMap(); }
  bool is_sequence() const noexcept { return node_.IsSequence(); }
  bool is_null() const noexcept { return !node_.IsDefined() || node_.IsNull(); }

  /// Throws `error` at this node.
  [[noreturn]] void fail(const std::string& problem) const;

  /// Requires a mapping whose keys are all in `allowed` and appear once.
  void expect_keys(std::initializer_list<std::string_view> allowed) const;
  /// Requires a mapping (any keys, each once) and returns its entries in file order.
  std::vector<std::pair<std::string, yaml_node>> entries() const;
  /// Requires a sequence and returns its items.
  std::vector<yaml_node> items() const;
  /// The value of `key`, if present (this node must be a mapping).
  std::optional<yaml_node> get(std::string_view key) const;
  /// The value of `key`; an error naming the key when it is missing.
  yaml_node at(std::string_view key) const;

  /// A scalar as text.
  std::string as_string() const;
  /// `true` or `false`.
  bool as_bool() const;
  /// A whole number in [min, max].
  std::uint64_t as_uint(std::uint64_t min, std::uint64_t max) const;
  /// A rate `N/s`, `N/m` or `N/h`.
  core::rate as_rate() const;
  /// A duration such as `250ms`, `5s`, `1h`.
  core::duration as_duration() const;
  /// A byte size such as `16KiB`, `1MiB`.
  std::uint64_t as_size() const;

 private:
  std::string child_path(std::string_view key) const;

  YAML::Node node_;                          ///< the node
  std::shared_ptr<const std::string> file_;  ///< its file
  std::string path_;                         ///< its dotted key path
  int key_line_ = 0;                         ///< see key_line (0: not known)
};

/// Parses `path` and returns its root; I/O and syntax errors as `error` with file and line.
yaml_node load_yaml_file(const std::string& path);

/// The whole of `path` (at most 16 MiB); every I/O failure (missing, unreadable, a directory,
/// too large) as `error` naming the file. Read with stdio, whose failures are return values:
/// libstdc++'s filebuf throws std::ios_base::failure from a read error (EISDIR) under yaml-cpp.
std::string read_text_file(const std::string& path);

/// The 1-based line a yaml-cpp exception points at, or 0.
int line_of(const YAML::Exception& e) noexcept;

/// Runs `read`, which reads `file`, and returns what it returns. Whatever it throws leaves as
/// `error` naming `file`: yaml-cpp's exceptions with their line, any other std::exception with
/// its message, an `error` unchanged. A bad file is then only ever a configuration error, which
/// --check-config prints and a reload survives.
template <class Read>
auto with_file_errors(const std::string& file, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const error&) {
    throw;
  } catch (const YAML::ParserException& e) {
    throw error(file, line_of(e), "", "YAML syntax: " + e.msg);
  } catch (const YAML::Exception& e) {
    throw error(file, line_of(e), "", "YAML: " + e.msg);
  } catch (const std::exception& e) {
    throw error(file, 0, "", std::string("cannot load: ") + e.what());
  }
}

/// Parses YAML `text` as if read from `name` (tests).
yaml_node load_yaml_text(const std::string& text, const std::string& name);

/// Whether `s` may name a category, limit, listener, upstream or violation reason: 1-64 of
/// [a-z0-9_-] (such names become metric labels).
inline bool valid_name(std::string_view s) {
  return !s.empty() && s.size() <= 64 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

/// Whether `s` may name a header field a route matches or a limit is keyed on: 1-128 of
/// [A-Za-z0-9_-].
inline bool valid_header_name(std::string_view s) {
  return !s.empty() && s.size() <= 128 && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
}

/// "a, b or c": the allowed keys in a message.
std::string one_of(std::initializer_list<std::string_view> names);

}  // namespace tollgate::config
