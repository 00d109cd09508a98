#include "gateway/config/yaml_reader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>
#include <unordered_set>

namespace tollgate::config {

yaml_node::yaml_node(YAML::Node node, std::shared_ptr<const std::string> file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}

int yaml_node::line() const noexcept {
  const YAML::Mark m = node_.Mark();
  return m.line < 0 ? 0 : m.line + 1;
}

void yaml_node::fail(const std::string& problem) const {
  throw error(*file_, line(), path_, problem);
}

std::string yaml_node::child_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

std::string one_of(std::initializer_list<std::string_view> names) {
  std::string out;
  std::size_t i = 0;
  for (std::string_view n : names) {
    if (i > 0) out += (i + 1 == names.size()) ? " or " : ", ";
    out += n;
    ++i;
  }
  return out;
}

std::vector<std::pair<std::string, yaml_node>> yaml_node::entries() const {
  if (!node_.IsMap()) fail("expected a mapping");
  std::vector<std::pair<std::string, yaml_node>> out;
  out.reserve(node_.size());
  // Linear in the keys however many there are (a search of `out` per key took minutes for a
  // policy file of 100k keys, while the reload held the admin listener's thread).
  std::unordered_set<std::string_view> seen;
  seen.reserve(node_.size());
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    yaml_node key(it->first, file_, path_);
    if (!it->first.IsScalar()) key.fail("keys must be plain scalars");
    // yaml-cpp keeps duplicate keys silently; a second value would be ignored, so refuse it.
    // The key's text lives in the document, which outlives this call.
    const std::string& name = it->first.Scalar();
    if (!seen.insert(name).second)
      throw error(*file_, key.line(), child_path(name), "duplicate key");
    out.emplace_back(name, yaml_node(it->second, file_, child_path(name)));
    out.back().second.key_line_ = key.line();
  }
  return out;
}

void yaml_node::expect_keys(std::initializer_list<std::string_view> allowed) const {
  entries();  // mapping, plain and unique keys
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    const std::string& name = it->first.Scalar();
    if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
      // The key's own line: its value may start on the next one.
      throw error(*file_, yaml_node(it->first, file_, path_).line(), child_path(name),
                  "unknown key (expected " + one_of(allowed) + ")");
    }
  }
}

std::vector<yaml_node> yaml_node::items() const {
  if (!node_.IsSequence()) fail("expected a list");
  std::vector<yaml_node> out;
  std::size_t i = 0;
  for (const auto& item : node_) {
    out.emplace_back(item, file_, path_ + "[" + std::to_string(i++) + "]");
  }
  return out;
}

std::optional<yaml_node> yaml_node::get(std::string_view key) const {
  if (!node_.IsMap()) fail("expected a mapping");
  const YAML::Node child = node_[std::string(key)];
  if (!child.IsDefined()) return std::nullopt;
  return yaml_node(child, file_, child_path(key));
}

yaml_node yaml_node::at(std::string_view key) const {
  if (auto child = get(key)) return *child;
  throw error(*file_, line(), child_path(key), "missing required key");
}

std::string yaml_node::as_string() const {
  if (!node_.IsScalar()) fail("expected a single value");
  return node_.Scalar();
}

bool yaml_node::as_bool() const {
  const std::string s = as_string();
  if (s == "true") return true;
  if (s == "false") return false;
  fail("expected true or false, got '" + s + "'");
}

std::uint64_t yaml_node::as_uint(std::uint64_t min, std::uint64_t max) const {
  const std::string s = as_string();
  const auto v = core::parse_uint(s, max);
  if (!v || *v < min) {
    fail("expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) +
         ", got '" + s + "'");
  }
  return *v;
}

core::rate yaml_node::as_rate() const {
  const std::string s = as_string();
  const auto r = core::parse_rate(s);
  if (!r) fail("invalid rate '" + s + "' (expected N/s, N/m or N/h with N from 1 to 1000000000)");
  return *r;
}

core::duration yaml_node::as_duration() const {
  const std::string s = as_string();
  const auto d = core::parse_duration(s);
  if (!d) fail("invalid duration '" + s + "' (expected a number and ms, s, m, h or d, e.g. 30s)");
  return core::duration(*d);
}

std::uint64_t yaml_node::as_size() const {
  const std::string s = as_string();
  const auto v = core::parse_size(s);
  if (!v) fail("invalid size '" + s + "' (expected bytes or a number and KiB, MiB or GiB)");
  return *v;
}

namespace {

/// Larger files are refused rather than read: no configuration comes near this, and a path
/// naming a device (/dev/zero) must not exhaust memory.
constexpr std::size_t max_file_bytes = 16u << 20;

yaml_node parse(const std::string& text, const std::string& name) {
  auto file = std::make_shared<const std::string>(name);
  return with_file_errors(name, [&] { return yaml_node(YAML::Load(text), file, ""); });
}

}  // namespace

std::string read_text_file(const std::string& path) {
  const auto fail = [&](const std::string& why) {
    throw error(path, 0, "", "cannot read file: " + why);
  };
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) fail("it is a directory");
  const std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"),
                                                          &std::fclose);
  if (!f) fail(std::strerror(errno));
  std::string text;
  char buf[8192];
  while (const std::size_t n = std::fread(buf, 1, sizeof buf, f.get())) {
    text.append(buf, n);
    if (text.size() > max_file_bytes) fail("larger than 16MiB");
  }
  if (std::ferror(f.get())) fail(std::strerror(errno));
  return text;
}

int line_of(const YAML::Exception& e) noexcept {
  return e.mark.is_null() || e.mark.line < 0 ? 0 : e.mark.line + 1;
}

yaml_node load_yaml_file(const std::string& path) {
  return parse(read_text_file(path), path);
}

yaml_node load_yaml_text(const std::string& text, const std::string& name) {
  return parse(text, name);
}

}  // namespace tollgate::config
