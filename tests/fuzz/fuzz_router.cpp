/// Fuzz target: request-target normalisation and route matching (gateway/policy/router.*),
/// each against a reference written here for clarity, not speed.
///
/// Input, one item a line: the request target; its method; its Upgrade value ("" absent); then
/// up to 8 rules, each `<kind><options><method><pattern>[\t<Upgrade value>]` where kind is
/// `=` exact, `^` prefix, `.` any, anything else glob; options a digit whose bits are 1
/// ignore_trailing_slash, 2 case_insensitive, 4 ignore_path_parameters; method `G` GET, `P`
/// POST, anything else any method.
///
/// Checked: normalize_path agrees with the reference normaliser; glob_match agrees with a
/// reference glob (dynamic programming over segments, then characters) on the normalised path
/// and on the raw target; router::match picks the first rule the reference matches; and a
/// router whose rules all ignore trailing slashes (or case) gives "/x" and "/x/" (or "/x" and
/// "/X") the same route.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/core/text.hpp"
#include "gateway/policy/compiled_policy.hpp"
#include "gateway/policy/router.hpp"

namespace {

using namespace tollgate;

void require(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_router: %s\n", what);
  std::abort();
}

std::vector<std::string_view> split(std::string_view s, char by) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto at = s.find(by);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Segments resolved: "" and "." dropped, ".." pops (`strict`: fails at the root; else stays).
/// The result ends in '/' when it is the root or the last segment was "", "." or "..".
std::optional<std::string> resolve(const std::vector<std::string>& segments, bool strict) {
  std::vector<std::string> kept;
  for (const auto& s : segments) {
    if (s == "..") {
      if (kept.empty() && strict) return std::nullopt;
      if (!kept.empty()) kept.pop_back();
    } else if (!s.empty() && s != ".") {
      kept.push_back(s);
    }
  }
  std::string out;
  for (const auto& s : kept)
    out += "/" + s;
  const std::string& last = segments.back();
  if (out.empty() || last.empty() || last == "." || last == "..") out += '/';
  return out;
}

/// normalize_path as its comment in router.hpp says: absolute form reduced to its path,
/// query and fragment dropped, every %XX decoded (bad escape or NUL: fail), then resolved.
std::optional<std::string> ref_normalize(std::string_view t) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (t.substr(0, scheme.size()) != scheme) continue;
    const auto slash = t.find('/', scheme.size());
    t = slash == std::string_view::npos ? std::string_view("/") : t.substr(slash);
  }
  if (t.empty() || t[0] != '/') return std::nullopt;
  t = t.substr(0, t.find_first_of("?#"));
  std::string decoded;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] != '%') {
      decoded += t[i];
      continue;
    }
    if (i + 2 >= t.size() || hex(t[i + 1]) < 0 || hex(t[i + 2]) < 0) return std::nullopt;
    const char c = static_cast<char>(hex(t[i + 1]) * 16 + hex(t[i + 2]));
    if (c == '\0') return std::nullopt;
    decoded += c;
    i += 2;
  }
  std::vector<std::string> segments;
  for (auto s : split(std::string_view(decoded).substr(1), '/'))
    segments.emplace_back(s);
  return resolve(segments, true);
}

bool same_char(char a, char b, bool fold) {
  return fold ? core::ascii_lower(a) == core::ascii_lower(b) : a == b;
}

bool same(std::string_view a, std::string_view b, bool fold) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (!same_char(a[i], b[i], fold)) return false;
  }
  return true;
}

/// Wildcard matching by dynamic programming: `star(p)` items match any run of `s`'s items,
/// other items exactly one item that `one(p, s)` accepts. row[j]: the rest matches s[j..].
template <class P, class S, class Star, class One>
bool ref_wildcard(const P& p, const S& s, Star star, One one) {
  std::vector<char> next(s.size() + 1, 0), cur(s.size() + 1, 0);
  next[s.size()] = 1;
  for (std::size_t i = p.size(); i-- > 0;) {
    for (std::size_t j = s.size() + 1; j-- > 0;) {
      cur[j] = star(p[i]) ? next[j] || (j < s.size() && cur[j + 1])
                          : j < s.size() && one(p[i], s[j]) && next[j + 1];
    }
    std::swap(cur, next);
  }
  return next[0];
}

/// The glob of router.hpp: `*` any run within a segment, a `**` segment any run of segments.
bool ref_glob(std::string_view pattern, std::string_view path, bool fold) {
  const auto segment = [fold](std::string_view p, std::string_view s) {
    return ref_wildcard(
        p, s, [](char c) { return c == '*'; },
        [fold](char a, char b) { return same_char(a, b, fold); });
  };
  return ref_wildcard(
      split(pattern, '/'), split(path, '/'), [](std::string_view p) { return p == "**"; }, segment);
}

/// `p` without one trailing '/', unless it is the root.
std::string_view without_slash(std::string_view p) {
  return p.size() > 1 && p.back() == '/' ? p.substr(0, p.size() - 1) : p;
}

/// A normalised path with ";params" cut from every segment, then resolved (".." stops at root).
std::string ref_strip(std::string_view path) {
  std::vector<std::string> segments;
  for (auto s : split(path.substr(1), '/'))
    segments.emplace_back(s.substr(0, s.find(';')));
  return *resolve(segments, false);
}

bool ref_path_matches(const config::route_config& r, std::string_view path) {
  const auto& o = r.options;
  const bool fold = o.case_insensitive;
  std::string stripped;
  if (o.ignore_path_parameters && path.find(';') != std::string_view::npos) {
    stripped = ref_strip(path);
    path = stripped;
  }
  const std::string_view pattern = r.path;
  switch (r.kind) {
    case config::path_match::any:
      return true;
    case config::path_match::exact:
      return o.ignore_trailing_slash ? same(without_slash(path), without_slash(pattern), fold)
                                     : same(path, pattern, fold);
    case config::path_match::prefix:
      // With ignore_trailing_slash, a folder prefix "/a/" also names "/a" itself.
      return same(path.substr(0, pattern.size()), pattern, fold) ||
             (o.ignore_trailing_slash && pattern.size() > 1 && pattern.back() == '/' &&
              same(path, without_slash(pattern), fold));
    case config::path_match::glob:
      return o.ignore_trailing_slash ? ref_glob(without_slash(pattern), without_slash(path), fold)
                                     : ref_glob(pattern, path, fold);
  }
  return false;
}

/// A header condition: the value, or one element of its comma list, equal ignoring case.
bool ref_value_matches(std::string_view value, std::string_view wanted) {
  for (auto element : split(value, ',')) {
    if (core::iequals(core::trim(element), wanted)) return true;
  }
  return false;
}

struct request {
  std::string method, path, upgrade;
  static std::string_view header(const void* self, std::string_view name) {
    const auto* r = static_cast<const request*>(self);
    return core::iequals(name, "upgrade") ? std::string_view(r->upgrade) : std::string_view();
  }
};

int ref_match(const config::gateway_config& g, const request& req) {
  for (const auto& r : g.routes) {
    if (!r.method.empty() && r.method != req.method) continue;
    if (!ref_path_matches(r, req.path)) continue;
    bool headers = true;
    for (const auto& [name, value] : r.headers)
      headers = headers && ref_value_matches(request::header(&req, name), value);
    if (headers) return r.line;
  }
  return 0;
}

/// The rule of one input line (see the header comment).
config::route_config rule_of(std::string_view line, int number) {
  config::route_config r;
  const char kind = line.size() > 0 ? line[0] : '~';
  r.kind = kind == '='   ? config::path_match::exact
           : kind == '^' ? config::path_match::prefix
           : kind == '.' ? config::path_match::any
                         : config::path_match::glob;
  const unsigned bits = line.size() > 1 ? static_cast<unsigned char>(line[1]) - '0' : 0;
  r.options.ignore_trailing_slash = (bits & 1) != 0;
  r.options.case_insensitive = (bits & 2) != 0;
  r.options.ignore_path_parameters = (bits & 4) != 0;
  const char method = line.size() > 2 ? line[2] : '-';
  r.method = method == 'G' ? "GET" : method == 'P' ? "POST" : "";
  line = line.substr(std::min<std::size_t>(3, line.size()));
  const auto tab = line.find('\t');
  r.path = std::string(line.substr(0, tab));
  if (tab != std::string_view::npos && tab + 1 < line.size()) {
    r.headers.emplace_back("Upgrade", std::string(line.substr(tab + 1)));
  }
  r.category = number % 2 == 0 ? "even" : "odd";
  r.upstream = "app";
  r.line = number;
  return r;
}

/// Beast accepts these in a request target (VCHAR and obs-text): nothing else reaches routing.
bool target_char(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u > 0x20 && u != 0x7f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto lines = split({reinterpret_cast<const char*>(data), size}, '\n');
  if (lines.size() < 3 || lines.size() > 3 + 8) return -1;  // not kept in the corpus
  const std::string_view target = lines[0];
  for (const char c : target) {
    if (!target_char(c)) return -1;
  }

  std::string path;
  const bool ok = policy::normalize_path(target, path);
  const auto expected = ref_normalize(target);
  require(ok == expected.has_value(), "normalize_path accepts what the reference refuses, or not");
  if (!ok) return 0;
  require(path == *expected, "normalize_path differs from the reference");

  config::gateway_config g;
  g.upstreams.push_back({});
  g.upstreams.back().name = "app";
  for (std::size_t i = 3; i < lines.size(); ++i)
    g.routes.push_back(rule_of(lines[i], static_cast<int>(i - 2)));
  g.default_route.category = "even";
  g.default_route.upstream = "app";
  for (const auto& r : g.routes) {
    if (r.kind != config::path_match::glob) continue;
    for (const bool fold : {false, true}) {
      require(policy::glob_match(r.path, path, fold) == ref_glob(r.path, path, fold),
              "glob_match differs from the reference on a normalised path");
      require(policy::glob_match(r.path, target, fold) == ref_glob(r.path, target, fold),
              "glob_match differs from the reference on a raw target");
    }
  }

  config::policy_config pc;
  for (const char* name : {"even", "odd"}) {
    pc.categories.emplace_back();
    pc.categories.back().name = name;
  }
  const policy::compiled_policy compiled(pc, {});
  const policy::router router(g, compiled);
  request req{std::string(lines[1]), path, std::string(lines[2])};
  auto line_of = [&](const request& r) {
    return router.match({r.method, r.path, &request::header, &r}).line;
  };
  const int line = line_of(req);
  require(line == ref_match(g, req), "router::match differs from the reference");

  bool all_slash = !g.routes.empty(), all_case = !g.routes.empty();
  for (const auto& r : g.routes) {
    all_slash = all_slash && r.options.ignore_trailing_slash;
    all_case = all_case && r.options.case_insensitive;
  }
  if (all_slash && path.back() != '/') {
    request slashed = req;
    slashed.path += '/';
    require(line_of(slashed) == line, "ignore_trailing_slash: /x and /x/ route differently");
  }
  if (all_case) {
    request swapped = req;
    for (char& c : swapped.path) {
      if (c >= 'a' && c <= 'z')
        c = static_cast<char>(c - 'a' + 'A');
      else if (c >= 'A' && c <= 'Z')
        c = static_cast<char>(c - 'A' + 'a');
    }
    require(line_of(swapped) == line, "case_insensitive: /x and /X route differently");
  }
  return 0;
}
