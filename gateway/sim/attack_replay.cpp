#include "gateway/sim/attack_replay.hpp"

#include <algorithm>

namespace tollgate::sim {

namespace {

constexpr core::nanos second = core::ns_per_s;

}  // namespace

attack_replay::attack_replay(const policy::compiled_policy& p)
    : policy_(p),
      board_(p.categories().size()),
      monitors_(p.categories().size()),
      totals_(p.categories().size(), 0),
      second_(p.categories().size(), -1),
      in_second_(p.categories().size(), 0),
      timeline_(p.categories().size()) {
  for (const policy::category_limits& c : p.categories()) {
    if (!c.attack) continue;
    any_ = true;
    monitors_[c.index].emplace();
    // Silence steps down one level per cool_down, and after five windows the average keeps
    // under 1% of what it had learnt: past that, more ticks of silence change next to nothing.
    const policy::attack_rules& r = *c.attack;
    catch_up_ = std::max(catch_up_, r.sustain + 3 * r.cool_down + 5 * r.window);
  }
  catch_up_ = (catch_up_ + second - 1) / second * second;
}

void attack_replay::advance(core::nanos now) {
  if (!any_) return;
  const core::nanos whole = now - now % second;
  if (!started_) {
    started_ = true;
    next_ = whole;  // the first tick only starts the counts, as the gateway's at start
  }
  if (now < next_) return;
  if (whole - next_ > catch_up_) {
    for (const core::nanos stop = next_ + catch_up_; next_ < stop; next_ += second)
      tick(next_);
    next_ = whole;
  }
  for (; next_ <= now; next_ += second)
    tick(next_);
}

void attack_replay::tick(core::nanos at) {
  for (const policy::category_limits& c : policy_.categories()) {
    std::optional<policy::attack_monitor>& m = monitors_[c.index];
    if (!m) continue;
    const policy::attack_rules& r = *c.attack;
    auto t = m->tick(at, totals_[c.index], r);
    const policy::attack_status s = m->status(at, r);
    board_.set(c.index, s);
    time_bucket& b = timeline_.at(c.index, at / second);
    b.baseline_sum += m->baseline(r);
    ++b.ticks;
    b.level = std::max(b.level, s.level);
    if (t) timeline_.changes.push_back({at, c.index, t->from, t->to, std::move(t->why)});
  }
}

void attack_replay::count(std::uint16_t category, core::nanos now, core::outcome result) {
  ++totals_[category];
  const std::int64_t sec = now / second;
  time_bucket& b = timeline_.at(category, sec);
  ++b.requests;
  ++b.outcomes[static_cast<std::size_t>(result)];
  if (core::forwarded(result)) ++b.admitted;
  if (second_[category] != sec) {
    second_[category] = sec;
    in_second_[category] = 0;
  }
  b.peak = std::max(b.peak, ++in_second_[category]);
}

}  // namespace tollgate::sim
