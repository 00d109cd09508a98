#include "gateway/metrics/exposition.hpp"

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <sstream>

#include "gateway/core/levels.hpp"
#include "gateway/metrics/family_table.hpp"

namespace tollgate::metrics {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;

/// What /proc says of this process now.
process_stats read_process() {
  process_stats p;
  const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (std::ifstream stat("/proc/self/stat"); stat) {
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    // Fields after the command's closing parenthesis (the command may hold spaces): state is
    // field 3, utime 14, stime 15, starttime 22, vsize 23, rss 24.
    const auto close = text.rfind(')');
    if (close != std::string::npos) {
      std::istringstream in(text.substr(close + 2));
      std::vector<std::string> f((std::istream_iterator<std::string>(in)),
                                 std::istream_iterator<std::string>());
      auto field = [&](std::size_t n) { return n - 3 < f.size() ? std::stod(f[n - 3]) : 0.0; };
      p.cpu_seconds = (field(14) + field(15)) / ticks;
      p.virtual_bytes = field(23);
      p.resident_bytes = field(24) * page;
      double boot = 0;
      if (std::ifstream s("/proc/stat"); s) {
        std::string key;
        while (s >> key) {
          if (key == "btime") {
            s >> boot;
            break;
          }
        }
      }
      p.start_time = boot + field(22) / ticks;
    }
  }
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    p.open_fds += 1;
  }
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0) p.max_fds = static_cast<double>(limit.rlim_cur);
  return p;
}

// ---- labels ------------------------------------------------------------------------------------

/// One value of an axis: the index it reads and the labels it writes.
struct axis_value {
  std::size_t index = 0;                    ///< into the counters (or the scrape's values)
  std::vector<ClientMetric::Label> labels;  ///< one label (two for an endpoint)
  bool shown_at_zero = true;                ///< false: a series only once it is counted
};
using axis_values = std::vector<axis_value>;

/// The label indices of `in_force`, without repeats (names past max_names share "other").
std::vector<std::size_t> shown(const std::vector<std::uint16_t>& in_force, std::size_t all) {
  std::vector<std::size_t> out;
  for (const auto i : in_force) {
    if (i < all && std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  }
  return out;
}

/// Between a host entry's label and a category's name in a host_category name: a byte
/// neither holds.
constexpr char host_separator = '\x1f';

/// `category` over `names` at `indices`, and `host` for a name host_category made.
axis_values categories_at(const std::vector<std::string>& names,
                          const std::vector<std::size_t>& indices) {
  axis_values out;
  for (const auto i : indices) {
    const std::string& name = names[i];
    const auto sep = name.find(host_separator);
    if (sep == std::string::npos) {
      out.push_back({i, {{"category", name}}});
    } else {
      out.push_back({i, {{"category", name.substr(sep + 1)}, {"host", name.substr(0, sep)}}});
    }
  }
  return out;
}

/// `label` over `names` at `indices`.
axis_values named(std::string label, const std::vector<std::string>& names,
                  const std::vector<std::size_t>& indices) {
  axis_values out;
  for (const auto i : indices)
    out.push_back({i, {{label, names[i]}}});
  return out;
}

/// `label` over the `n` values `name(i)`.
template <class Name>
axis_values every(std::string label, std::size_t n, Name name) {
  axis_values out;
  for (std::size_t i = 0; i < n; ++i)
    out.push_back({i, {{label, std::string(name(i))}}});
  return out;
}

/// `label` over every one of `names`.
template <class Names>
axis_values every(std::string label, const Names& names) {
  return every(std::move(label), std::size(names), [&](std::size_t i) { return names[i]; });
}

/// 0, 1, ..., n - 1.
std::vector<std::size_t> all_of(std::size_t n) {
  std::vector<std::size_t> out(n);
  for (std::size_t i = 0; i < n; ++i)
    out[i] = i;
  return out;
}

// ---- writing the table -------------------------------------------------------------------------

/// Every axis's values at this scrape.
struct label_sets {
  std::array<axis_values, axis_count> of;  ///< by axis
  /// axis::category_limit, by position on axis::category.
  std::vector<axis_values> limits_by_category;
  /// axis::category_tier, by position on axis::category.
  std::vector<axis_values> tiers_by_category;

  axis_values& operator[](axis a) { return of[static_cast<std::size_t>(a)]; }
};

/// `consumer_tier` of each category in force (`tiers` by its position), the way `host` is
/// written: absent while no policy in force has tiers; else a tiered category's tier names, and
/// every category's "" for requests without a tier (an untiered category's, shown at 0).
std::vector<axis_values> tiers_at(const std::vector<std::string>& names,
                                  const std::vector<std::vector<std::uint16_t>>& tiers) {
  const bool labelled =
      std::any_of(tiers.begin(), tiers.end(), [](const auto& t) { return !t.empty(); });
  std::vector<axis_values> out;
  for (const auto& t : tiers) {
    axis_values& values = out.emplace_back();
    if (!labelled) {
      values.push_back({no_consumer_tier, {}});
      continue;
    }
    values = named("consumer_tier", names, shown(t, names.size()));
    // A tiered policy gives every request its limits judge a tier: its "" would only show a
    // count made without one.
    values.push_back({no_consumer_tier, {{"consumer_tier", ""}}, t.empty()});
  }
  return out;
}

/// The axes of the names the configurations gave: those in force, or all so far.
void add_configured(label_sets& l, const registry& r, const scrape_values& values) {
  const auto categories = r.categories.names();
  const auto limit_names = r.limits.names();
  const auto upstreams = r.upstreams.names();
  const auto listeners = r.listeners.names();
  const auto reasons = r.reasons.names();
  const auto in_force = shown(values.categories, categories.size());
  l[axis::category] = categories_at(categories, in_force);
  for (std::size_t k = 0; k < in_force.size(); ++k) {
    l.limits_by_category.push_back(
        named("level", limit_names, shown(values.category_limits[k], limit_names.size())));
  }
  auto tiers = values.category_tiers;
  tiers.resize(in_force.size());  // none given: no category has tiers
  l.tiers_by_category = tiers_at(r.consumer_tiers.names(), tiers);
  l[axis::upstream] = named("upstream", upstreams, shown(values.upstreams, upstreams.size()));
  l[axis::listener] = named("listener", listeners, all_of(listeners.size()));
  l[axis::reason] = named("reason", reasons, all_of(reasons.size()));
}

/// The axes of names fixed in counters.hpp.
void add_fixed(label_sets& l) {
  // The label keeps its name: `decision`, the outcome of the request.
  l[axis::decision] = every("decision", core::outcome_count, [](std::size_t d) {
    return core::outcome_name(static_cast<core::outcome>(d));
  });
  l[axis::code_class] = every("code_class", code_class_names);
  l[axis::upstream_error] = every("kind", upstream_error_count, [](std::size_t k) {
    return upstream_error_name(static_cast<upstream_error>(k));
  });
  l[axis::refusal] = every("reason", refusal_names);
  l[axis::h2_goaway] = every("reason", h2_goaway_names);
  l[axis::verification] = every("result", verification_results);
  l[axis::clearance_result] = every("result", clearance_results);
  l[axis::penalty_step] = every("step", penalty_steps);
  l[axis::attack_from] = every("from", attack_levels);
  l[axis::attack_to] = every("to", attack_levels);
  l[axis::token_result] = every("result", token_result_count, [](std::size_t r) {
    return r == 0 ? std::string_view("cached")
                  : core::token_failure_name(static_cast<core::token_failure>(r - 1));
  });
  l[axis::tier] = every("tier", limit_tier_names);
  // Most limits are not quotas: a quota's series appears once it has counted.
  l[axis::tier][quota_tier].shown_at_zero = false;
  l[axis::limit_mode] = every("mode", limit_mode_names);
  for (auto& v : l[axis::limit_mode])
    v.shown_at_zero = v.index == static_cast<std::size_t>(limit_mode::enforce);
  l[axis::ws_direction] = every("direction", ws_direction_names);
  l[axis::ws_action] = every("action", ws_action_names);
  l[axis::upgrade_refusal] = every("reason", upgrade_refusal_names);
  l[axis::ws_close_code] = every("code", ws_close_code_count, [](std::size_t k) {
    return k < ws_close_codes.size() ? std::to_string(ws_close_codes[k]) : std::string("other");
  });
  l[axis::ws_closer] = every("by", ws_closer_names);
  l[axis::store_source] = every("source", store_source_names);
  l[axis::store_error] = every("kind", store_error_names);
  l[axis::reload_result] = {{0, {{"result", "success"}}}, {1, {{"result", "failure"}}}};
  l[axis::admin_closed] = {{0, {{"reason", "room"}}}, {1, {{"reason", "refused"}}}};
}

/// The axes of values read at scrape time.
void add_scraped(label_sets& l, const scrape_values& values) {
  l[axis::version] = {{0, {{"version", values.version}}}};
  for (std::size_t i = 0; i < values.endpoints.size(); ++i) {
    const auto& e = values.endpoints[i];
    l[axis::endpoint].push_back({i, {{"upstream", e.upstream}, {"endpoint", e.endpoint}}});
  }
  l[axis::tracked_level] = every("level", values.tracked_keys.size(),
                                 [&](std::size_t i) { return values.tracked_keys[i].first; });
  l[axis::table] =
      every("table", values.tables.size(), [&](std::size_t i) { return values.tables[i].name; });
  l[axis::certificate] = every("name", values.certificates.size(),
                               [&](std::size_t i) { return values.certificates[i].first; });
}

/// Sums `read` over `workers`.
template <class W>
std::uint64_t sum(const std::vector<const W*>& workers, count_of<W> read, const series_index& i) {
  std::uint64_t total = 0;
  for (const auto* w : workers)
    total += read(*w, i);
  return total;
}

/// The histogram `read` summed over `workers`, buckets cumulative.
template <class W>
ClientMetric::Histogram sum(const std::vector<const W*>& workers, histogram_of<W> read,
                            const series_index& i) {
  static const W none{};  // the bounds when there are no workers
  ClientMetric::Histogram h;
  const auto bounds = read(workers.empty() ? none : *workers.front(), i).bounds;
  std::uint64_t cumulative = 0, sum_ns = 0;
  for (std::size_t b = 0; b <= bounds.size(); ++b) {
    for (const auto* w : workers)
      cumulative += read(*w, i).buckets[b].value();
    if (b < bounds.size()) h.bucket.push_back({cumulative, bounds[b]});
  }
  for (const auto* w : workers)
    sum_ns += read(*w, i).sum_ns->value();
  h.bucket.push_back({cumulative, std::numeric_limits<double>::infinity()});
  h.sample_count = cumulative;
  h.sample_sum = static_cast<double>(sum_ns) / 1e9;
  return h;
}

/// Writes the families of the table, one series per product of a family's axes.
class family_writer {
 public:
  family_writer(const scrape& s, const label_sets& labels) : s_(s), labels_(labels) {}

  /// The family of `row`, its series summed over the workers.
  MetricFamily write(const family_row& row) {
    MetricFamily f;
    f.name = std::string(row.name);
    f.help = std::string(row.help);
    f.type = row.type;
    ClientMetric m;
    expand(row, f, 0, m, true);
    return f;
  }

 private:
  /// Adds the values of axis `depth` to `m`'s labels, or at the last axis writes the series.
  void expand(const family_row& row, MetricFamily& f, std::size_t depth, const ClientMetric& m,
              bool shown_at_zero) {
    if (depth == row.labels.size() || row.labels[depth] == axis::none) {
      return write_series(row, f, m, shown_at_zero);
    }
    const axis a = row.labels[depth];
    // The axes of a category's own names follow its category, the family's first axis.
    const axis_values& values = a == axis::category_limit ? labels_.limits_by_category[position_[0]]
                                : a == axis::category_tier
                                    ? labels_.tiers_by_category[position_[0]]
                                    : labels_.of[static_cast<std::size_t>(a)];
    for (std::size_t p = 0; p < values.size(); ++p) {
      position_[depth] = p;
      index_[depth] = values[p].index;
      ClientMetric next = m;
      next.label.insert(next.label.end(), values[p].labels.begin(), values[p].labels.end());
      expand(row, f, depth + 1, next, shown_at_zero && values[p].shown_at_zero);
    }
  }

  /// Adds the series labelled `m` to `f` (not a count at 0 unless every label is shown at 0).
  void write_series(const family_row& row, MetricFamily& f, ClientMetric m, bool shown_at_zero) {
    if (row.code_first) std::swap(m.label[0], m.label[1]);
    double value = 0;
    if (const auto* read = std::get_if<count_of<worker_counters>>(&row.read)) {
      const std::uint64_t n = sum(s_.workers, *read, index_);
      if (n == 0 && (row.only_counted || !shown_at_zero)) return;
      value = static_cast<double>(n);
    } else if (const auto* read = std::get_if<count_of<store_counters>>(&row.read)) {
      value = static_cast<double>(sum(s_.values.store, *read, index_));
    } else if (const auto* read = std::get_if<value_of>(&row.read)) {
      value = (*read)(s_, index_);
      if (std::isnan(value)) return;  // a series the values leave out
    } else if (const auto* read = std::get_if<histogram_of<worker_counters>>(&row.read)) {
      m.histogram = sum(s_.workers, *read, index_);
    } else if (const auto* read = std::get_if<histogram_of<store_counters>>(&row.read)) {
      m.histogram = sum(s_.values.store, *read, index_);
    }
    if (row.type == MetricType::Counter) m.counter.value = value;
    if (row.type == MetricType::Gauge) m.gauge.value = value;
    f.metric.push_back(std::move(m));
  }

  const scrape& s_;           ///< what is read
  const label_sets& labels_;  ///< the axes' values
  series_index index_{};      ///< the series' label indices, by axis
  series_index position_{};   ///< the position of each in its axis's values
};

}  // namespace

std::string host_category(std::string_view host, std::string_view category) {
  std::string out(host);
  out += host_separator;
  out += category;
  return out;
}

std::string render(const std::vector<const worker_counters*>& workers, const registry& r,
                   const scrape_values& values) {
  const scrape s{workers, r, values, read_process()};
  label_sets labels;
  add_configured(labels, r, values);
  add_fixed(labels);
  add_scraped(labels, values);
  family_writer writer(s, labels);
  std::vector<MetricFamily> out;
  for (const family_row& row : families) {
    if (row.store_only && values.store.empty()) continue;
    out.push_back(writer.write(row));
  }
  std::ostringstream text;
  prometheus::TextSerializer().Serialize(text, out);
  return text.str();
}

}  // namespace tollgate::metrics
