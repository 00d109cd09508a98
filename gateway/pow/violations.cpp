#include "gateway/pow/violations.hpp"

#include <algorithm>

namespace tollgate::pow {

unsigned decaying_counter::value(std::int64_t now, std::int64_t interval) const noexcept {
  if (count == 0) return 0;
  const std::int64_t elapsed = now - last;
  if (elapsed <= 0 || interval <= 0) return count;
  const std::int64_t fallen = elapsed / interval;
  return fallen >= count ? 0 : count - static_cast<unsigned>(fallen);
}

unsigned decaying_counter::raise(std::int64_t now, std::int64_t interval, unsigned max) noexcept {
  count = std::min(value(now, interval) + 1, std::max(max, 1u));
  last = now;
  return count;
}

violation_tables::violation_tables(const counter_settings& s, std::size_t reasons)
    : settings_(s),
      reasons_(reasons),
      individual_(s.max_individual),
      network_(s.max_network),
      // Bans outlive counters (repeat bans double), but are bounded like them.
      bans_(s.max_individual) {}

std::optional<std::int64_t> violation_tables::record(const subject& individual,
                                                     const subject& network, std::size_t reason,
                                                     const reason_rule& rule, std::int64_t now) {
  const auto interval = settings_.decay_interval;
  if (rule.network) {
    // An IPv6 source is a /56: one subscriber commonly holds a /56 of /64s, each an
    // individual key, and must not make the distinct sources of its /48 by itself.
    const bool v6 = individual.level == static_cast<std::uint8_t>(core::level::ipv6_subnet);
    const std::uint64_t source = v6 ? individual.key & ~std::uint64_t{0xff} : individual.key;
    network_.update(network, [&](network_entry& e) {
      if (enough_sources(e, source, now)) e.counter.raise(now, interval, settings_.max_counter);
      return 0;
    });
  }
  bool ban = false;
  if (rule.individual || rule.ban_threshold > 0) {
    ban = individual_.update(individual, [&](individual_entry& e) {
      if (rule.individual) e.counter.raise(now, interval, settings_.max_counter);
      if (reason >= reasons_) return false;  // no slot left for its own count
      if (e.reasons.size() < reasons_) e.reasons.resize(reasons_);
      auto& c = e.reasons[reason];
      const unsigned cap = rule.ban_threshold > 0 ? rule.ban_threshold : settings_.max_counter;
      if (c.raise(now, interval, cap) < rule.ban_threshold || rule.ban_threshold == 0) return false;
      c = {};  // the next ban takes a full threshold again
      return true;
    });
  }
  if (!ban) return std::nullopt;
  return bans_.update(individual, [&](ban_entry& b) -> std::optional<std::int64_t> {
    // Violations of requests admitted before the ban, still in flight, do not ban again.
    if (b.until > now) return std::nullopt;
    // Each ban of the same address lasts twice the one before, up to the cap.
    std::int64_t d = rule.ban_duration;
    for (unsigned i = 0; i < b.bans && d < rule.ban_max_duration; ++i)
      d *= 2;
    d = std::min(d, std::max(rule.ban_max_duration, rule.ban_duration));
    b.until = now + d;
    ++b.bans;
    return b.until;
  });
}

bool violation_tables::enough_sources(network_entry& e, std::uint64_t source,
                                      std::int64_t now) const {
  const auto interval = settings_.decay_interval;
  const std::size_t wanted = std::max(1u, settings_.network_min_sources);
  // Sources whose last violation is a decay interval old no longer count.
  std::erase_if(e.sources, [&](const source_seen& s) { return now - s.last >= interval; });
  const auto same = std::find_if(e.sources.begin(), e.sources.end(),
                                 [&](const source_seen& s) { return s.key == source; });
  if (same != e.sources.end()) {
    same->last = now;
  } else if (e.sources.size() < wanted) {
    e.sources.push_back({source, now});
  } else {
    // Full: the longest quiet source makes room (the others are as recent or more).
    auto oldest = std::min_element(
        e.sources.begin(), e.sources.end(),
        [](const source_seen& a, const source_seen& b) { return a.last < b.last; });
    *oldest = {source, now};
  }
  return e.sources.size() >= wanted;
}

unsigned violation_tables::requirement(const subject& individual, const subject& network,
                                       std::int64_t now) const {
  const auto interval = settings_.decay_interval;
  unsigned n = 0;
  individual_.find(individual,
                   [&](const individual_entry& e) { n = e.counter.value(now, interval); });
  network_.find(network,
                [&](const network_entry& e) { n = std::max(n, e.counter.value(now, interval)); });
  return n;
}

std::int64_t violation_tables::last_violation(const subject& individual) const {
  std::int64_t last = 0;
  individual_.find(individual, [&](const individual_entry& e) {
    if (e.counter.count > 0) last = e.counter.last;
  });
  return last;
}

std::optional<std::int64_t> violation_tables::banned_until(const subject& individual,
                                                           std::int64_t now) const {
  std::optional<std::int64_t> until;
  bans_.find(individual, [&](const ban_entry& b) {
    if (b.until > now) until = b.until;
  });
  return until;
}

bool violation_tables::lift(const subject& individual, std::int64_t now) {
  bool was = false;
  bans_.find(individual, [&](const ban_entry& b) { was = b.until > now; });
  if (!was) return false;
  bans_.update(individual, [&](ban_entry& b) { b.until = now; });
  return true;
}

violation_tables::forgotten violation_tables::forget(const core::key_block& block,
                                                     const core::level_prefixes& p,
                                                     std::int64_t now) {
  const auto overlaps = [&](const subject& s) {
    const auto l = static_cast<core::level>(s.level);
    const std::uint8_t bits[] = {p.ipv4_individual, p.ipv4_network, p.ipv6_subnet, p.ipv6_provider};
    return s.level < core::level_count && block.overlaps(l, s.key, bits[s.level]);
  };
  forgotten f;
  f.individual = individual_.erase_if([&](const subject& k, const auto&) { return overlaps(k); });
  f.network = network_.erase_if([&](const subject& k, const auto&) { return overlaps(k); });
  bans_.erase_if([&](const subject& k, const ban_entry& b) {
    if (!overlaps(k)) return false;
    if (b.until > now) ++f.bans;
    return true;
  });
  return f;
}

std::vector<violation_tables::ban_view> violation_tables::bans(std::int64_t now) const {
  std::vector<ban_view> out;
  bans_.for_each([&](const subject& k, const ban_entry& b) {
    if (b.until > now) out.push_back({k, b.until, b.bans});
  });
  std::sort(out.begin(), out.end(),
            [](const ban_view& a, const ban_view& b) { return a.until < b.until; });
  return out;
}

violation_tables::client_view violation_tables::describe(const subject& individual,
                                                         const subject& network,
                                                         std::int64_t now) const {
  const auto interval = settings_.decay_interval;
  client_view v;
  v.reasons.assign(reasons_, 0);
  individual_.find(individual, [&](const individual_entry& e) {
    v.individual = e.counter.value(now, interval);
    for (std::size_t i = 0; i < e.reasons.size() && i < reasons_; ++i)
      v.reasons[i] = e.reasons[i].value(now, interval);
  });
  network_.find(network,
                [&](const network_entry& e) { v.network = e.counter.value(now, interval); });
  bans_.find(individual, [&](const ban_entry& b) {
    v.bans = b.bans;
    if (b.until > now) v.banned_until = b.until;
  });
  return v;
}

}  // namespace tollgate::pow

namespace tollgate::pow {

namespace {

void save_counter(core::state_writer& w, const decaying_counter& c) {
  w.u32(c.count);
  w.i64(c.last);
}

decaying_counter load_counter(core::state_reader& r) {
  decaying_counter c;
  c.count = r.u32();
  c.last = r.i64();
  return c;
}

void save_subject(core::state_writer& w, const subject& s) {
  w.u64(s.key);
  w.u8(s.level);
}

subject load_subject(core::state_reader& r) {
  subject s;
  s.key = r.u64();
  s.level = r.u8();
  if (s.level >= core::level_count) r.fail();
  return s;
}

/// The smallest record of each table: a subject (9 bytes) and a counter (12).
constexpr std::size_t min_record = 9 + 12;

}  // namespace

void violation_tables::save(core::state_writer& w) const {
  core::write_counted(
      w, [&](auto&& f) { individual_.for_each_oldest_first(f); },
      [](core::state_writer& b, const subject& k, const individual_entry& e) {
        save_subject(b, k);
        save_counter(b, e.counter);
        // Only the reasons it has a count of (most clients have one of 32 slots).
        const auto counted = std::count_if(e.reasons.begin(), e.reasons.end(),
                                           [](const decaying_counter& c) { return c.count > 0; });
        b.u32(static_cast<std::uint32_t>(counted));
        for (std::size_t slot = 0; slot < e.reasons.size(); ++slot) {
          if (e.reasons[slot].count == 0) continue;
          b.u8(static_cast<std::uint8_t>(slot));
          save_counter(b, e.reasons[slot]);
        }
      });
  core::write_counted(
      w, [&](auto&& f) { network_.for_each_oldest_first(f); },
      [](core::state_writer& b, const subject& k, const network_entry& e) {
        save_subject(b, k);
        save_counter(b, e.counter);
        b.u32(static_cast<std::uint32_t>(e.sources.size()));
        for (const auto& src : e.sources) {
          b.u64(src.key);
          b.i64(src.last);
        }
      });
  core::write_counted(
      w, [&](auto&& f) { bans_.for_each_oldest_first(f); },
      [](core::state_writer& b, const subject& k, const ban_entry& e) {
        save_subject(b, k);
        b.i64(e.until);
        b.u32(e.bans);
      });
}

bool violation_tables::load(core::state_reader& r, const std::vector<std::size_t>& slots) {
  const unsigned max = std::max(settings_.max_counter, 1u);
  const auto bounded = [&](decaying_counter c) {
    c.count = std::min(c.count, static_cast<std::uint32_t>(max));
    return c;
  };
  for (std::uint32_t i = 0, n = r.count(min_record); i < n && r.ok(); ++i) {
    const subject k = load_subject(r);
    const decaying_counter counter = bounded(load_counter(r));
    const std::uint32_t reasons = r.count(13);
    std::vector<decaying_counter> counts;
    for (std::uint32_t j = 0; j < reasons && r.ok(); ++j) {
      const std::size_t saved = r.u8();
      const decaying_counter c = load_counter(r);
      // A saved slot names a reason; this process may count it in another slot, or in none.
      if (saved >= slots.size() || slots[saved] >= reasons_) continue;
      if (counts.empty()) counts.resize(reasons_);
      // A reason count never passes its threshold (it restarts at a ban): max_counter bounds
      // the rest.
      counts[slots[saved]] = bounded(c);
    }
    if (!r.ok()) break;
    individual_.update(k, [&](individual_entry& e) {
      e.counter = counter;
      e.reasons = std::move(counts);
    });
  }
  for (std::uint32_t i = 0, n = r.count(min_record); i < n && r.ok(); ++i) {
    const subject k = load_subject(r);
    const decaying_counter counter = bounded(load_counter(r));
    const std::uint32_t sources = r.count(16);
    std::vector<source_seen> seen;
    for (std::uint32_t j = 0; j < sources && r.ok(); ++j) {
      const source_seen s{r.u64(), r.i64()};
      if (seen.size() < std::max(1u, settings_.network_min_sources)) seen.push_back(s);
    }
    if (!r.ok()) break;
    network_.update(k, [&](network_entry& e) {
      e.counter = counter;
      e.sources = std::move(seen);
    });
  }
  for (std::uint32_t i = 0, n = r.count(9 + 12); i < n && r.ok(); ++i) {
    const subject k = load_subject(r);
    const ban_entry b{r.i64(), r.u32()};
    if (!r.ok()) break;
    bans_.update(k, [&](ban_entry& e) { e = b; });
  }
  return r.ok();
}

}  // namespace tollgate::pow
