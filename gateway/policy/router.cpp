#include "gateway/policy/router.hpp"

#include <algorithm>

#include "gateway/core/text.hpp"
#include "gateway/policy/tenants.hpp"

namespace tollgate::policy {

namespace {

using core::iequals;
using core::trim;

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// A header value matches when equal ignoring case, or when one element of its comma list is
/// ("Upgrade: websocket", "Connection: keep-alive, Upgrade").
bool value_matches(std::string_view value, std::string_view wanted) noexcept {
  while (true) {
    const auto comma = value.find(',');
    if (iequals(trim(value.substr(0, comma)), wanted)) return true;
    if (comma == std::string_view::npos) return false;
    value.remove_prefix(comma + 1);
  }
}

/// One character of a pattern against one of a path.
bool same_char(char p, char s, bool fold) noexcept {
  return p == s || (fold && core::ascii_lower(p) == core::ascii_lower(s));
}

/// Equal strings, ASCII case folded when `fold`.
bool same(std::string_view a, std::string_view b, bool fold) noexcept {
  return fold ? iequals(a, b) : a == b;
}

/// `p` without one trailing '/', unless it is the root.
std::string_view without_slash(std::string_view p) noexcept {
  return p.size() > 1 && p.back() == '/' ? p.substr(0, p.size() - 1) : p;
}

/// `*` within one segment (no '/'): greedy with one backtrack point, O(n * m) at worst.
bool segment_match(std::string_view p, std::string_view s, bool fold) noexcept {
  std::size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (pi < p.size() && same_char(p[pi], s[si], fold)) {
      ++pi;
      ++si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*')
    ++pi;
  return pi == p.size();
}

constexpr std::size_t no_more = std::string_view::npos;

/// The segment of `s` starting at `at`, and where the next one starts (no_more after the last).
std::pair<std::string_view, std::size_t> segment_at(std::string_view s, std::size_t at) noexcept {
  const auto slash = s.find('/', at);
  if (slash == std::string_view::npos) return {s.substr(at), no_more};
  return {s.substr(at, slash - at), slash + 1};
}

}  // namespace

bool normalize_path(std::string_view target, std::string& out) {
  out.clear();
  // Absolute-form (a client talking to us as a forward proxy): keep only the path.
  if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0) {
    const auto start = target.find("//") + 2;
    const auto slash = target.find('/', start);
    target = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
  }
  if (target.empty() || target.front() != '/') return false;
  target = target.substr(0, target.find_first_of("?#"));
  // Most paths need nothing done: no escapes, no empty, "." or ".." segments.
  bool plain = true;
  for (std::size_t i = 0; i < target.size() && plain; ++i) {
    plain = target[i] != '%' && !(target[i] == '/' && i + 1 < target.size() &&
                                  (target[i + 1] == '/' || target[i + 1] == '.'));
  }
  if (plain) {
    out.assign(target);
    return true;
  }

  // Decode and split into segments at once, resolving "." and ".." as they complete.
  std::string segment;
  auto finish_segment = [&]() -> bool {
    if (segment == ".") {
      // stays in the same folder
    } else if (segment == "..") {
      if (out.empty()) return false;  // above the root
      out.resize(out.rfind('/'));
    } else if (!segment.empty()) {
      out += '/';
      out += segment;
    }
    segment.clear();
    return true;
  };
  bool trailing_slash = false;
  for (std::size_t i = 0; i < target.size(); ++i) {
    char c = target[i];
    if (c == '%') {
      if (i + 2 >= target.size()) return false;
      const int hi = hex_value(target[i + 1]), lo = hex_value(target[i + 2]);
      if (hi < 0 || lo < 0) return false;
      c = static_cast<char>(hi * 16 + lo);
      if (c == '\0') return false;
      i += 2;
    }
    if (c == '/') {
      if (!finish_segment()) return false;
      trailing_slash = true;
    } else {
      segment += c;
      trailing_slash = false;
    }
  }
  const bool dot_end = segment == "." || segment == "..";
  if (!finish_segment()) return false;
  if (out.empty() || trailing_slash || dot_end) out += '/';
  return true;
}

bool glob_match(std::string_view pattern, std::string_view path, bool case_insensitive) noexcept {
  // The same greedy match as within a segment, one level up: segments are the characters and
  // a "**" segment is the star (zero or more segments). Offsets only: nothing is allocated.
  std::size_t pi = 0, si = 0;
  bool starred = false;
  std::size_t after_star = 0, mark = 0;
  while (si != no_more) {
    if (pi != no_more) {
      const auto [ps, pnext] = segment_at(pattern, pi);
      if (ps == "**") {
        starred = true;
        after_star = pnext;
        mark = si;
        pi = pnext;
        continue;
      }
      const auto [ss, snext] = segment_at(path, si);
      if (segment_match(ps, ss, case_insensitive)) {
        pi = pnext;
        si = snext;
        continue;
      }
    }
    if (!starred) return false;
    // Let the last "**" take one more segment and match the rest of the pattern after it.
    mark = segment_at(path, mark).second;
    si = mark;
    pi = after_star;
  }
  for (; pi != no_more; pi = segment_at(pattern, pi).second) {
    if (segment_at(pattern, pi).first != "**") return false;
  }
  return true;
}

void strip_path_parameters(std::string_view path, std::string& out) {
  out.clear();
  bool ends_in_slash = false;
  for (std::size_t at = path.empty() ? no_more : 1; at != no_more;) {
    const auto [whole, next] = segment_at(path, at);
    const std::string_view segment = whole.substr(0, whole.find(';'));
    at = next;
    ends_in_slash = segment.empty() || segment == "." || segment == "..";
    if (segment == "..") {
      out.resize(out.empty() ? 0 : out.rfind('/'));  // at the root it stays there
    } else if (!ends_in_slash) {
      out += '/';
      out += segment;
    }
  }
  if (out.empty() || ends_in_slash) out += '/';
}

bool path_matches(config::path_match kind, std::string_view pattern, std::string_view path,
                  const config::path_options& o) noexcept {
  const bool fold = o.case_insensitive;
  switch (kind) {
    case config::path_match::any:
      return true;
    case config::path_match::exact:
      return o.ignore_trailing_slash ? same(without_slash(path), without_slash(pattern), fold)
                                     : same(path, pattern, fold);
    case config::path_match::prefix:
      if (same(path.substr(0, pattern.size()), pattern, fold)) return true;
      // A prefix ending in '/' names a folder; the folder without its slash is the same one.
      return o.ignore_trailing_slash && without_slash(pattern).size() < pattern.size() &&
             same(path, without_slash(pattern), fold);
    case config::path_match::glob:
      return o.ignore_trailing_slash ? glob_match(without_slash(pattern), without_slash(path), fold)
                                     : glob_match(pattern, path, fold);
  }
  return false;
}

router::router(const config::gateway_config& g, const compiled_policy& p, const tenants* hosts)
    : router(g.routes, g.default_route, g, p) {
  hosts_ = hosts != nullptr && !hosts->empty() ? hosts : nullptr;
}

router::router(const std::vector<config::route_config>& routes,
               const config::route_config& default_route, const config::gateway_config& g,
               const compiled_policy& p) {
  auto target = [&](const config::route_config& r) {
    route t;
    t.category = p.find(r.category);
    t.policy = &p;
    const auto it = std::find_if(g.upstreams.begin(), g.upstreams.end(),
                                 [&](const auto& u) { return u.name == r.upstream; });
    t.upstream = static_cast<std::size_t>(it - g.upstreams.begin());
    t.line = r.line;
    t.cost = r.cost != 0 ? r.cost : t.category->cost;
    return t;
  };
  for (const auto& r : routes) {
    rules_.push_back({r.method, r.kind, r.path, r.options, r.headers, target(r)});
    strips_parameters_ = strips_parameters_ || r.options.ignore_path_parameters;
  }
  default_ = target(default_route);
  default_.line = 0;
}

bool router::matches(const rule& r, const request_view& v, std::string_view path) const noexcept {
  if (!r.method.empty() && r.method != v.method) return false;
  if (!path_matches(r.kind, r.path, path, r.options)) return false;
  for (const auto& [name, value] : r.headers) {
    if (v.header == nullptr || !value_matches(v.header(v.context, name), value)) return false;
  }
  return true;
}

const route& router::match(const request_view& v) const {
  // The Host names a host entry first (docs/design.md §15): its own routes decide.
  if (hosts_ != nullptr && v.header != nullptr) {
    if (const tenant* t = hosts_->find(v.header(v.context, "host")); t != nullptr) {
      return t->routes.match(v);
    }
  }
  // Most paths have no ';': then the stripped path is the path and nothing is built.
  const bool has_parameters = strips_parameters_ && v.path.find(';') != std::string_view::npos;
  std::string stripped;
  if (has_parameters) strip_path_parameters(v.path, stripped);
  for (const rule& r : rules_) {
    const bool strip = has_parameters && r.options.ignore_path_parameters;
    if (matches(r, v, strip ? std::string_view(stripped) : v.path)) return r.target;
  }
  return default_;
}

}  // namespace tollgate::policy
