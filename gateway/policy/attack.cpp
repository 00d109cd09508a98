#include "gateway/policy/attack.hpp"

#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>

namespace tollgate::policy {

namespace {

core::nanos ns(core::duration d) noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

/// `v` with up to one decimal, as the log reads it: "512", "10.2".
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 || v == std::floor(v) ? "%.0f" : "%.1f", v);
  return buf;
}

}  // namespace

std::optional<std::uint8_t> attack_level_of(std::string_view name) noexcept {
  for (std::size_t i = 0; i < attack_levels; ++i)
    if (attack_level_names[i] == name) return static_cast<std::uint8_t>(i);
  return std::nullopt;
}

attack_rules attack_rules::compile(const config::attack_mode_config& c) {
  attack_rules r;
  r.window = ns(c.window);
  r.floor = c.floor;
  r.sustain = ns(c.sustain);
  r.cool_down = ns(c.cool_down);
  r.restore = c.restore;
  double tightest = 1;
  for (std::size_t i = 0; i < c.levels.size(); ++i) {
    const config::attack_level_config& l = c.levels[i];
    if (!l.set) continue;
    attack_level_rules& out = r.levels[i + 1];
    out.on = true;
    out.above = l.above;
    // A level without its own factor keeps the tightest of those below it: a severe level that
    // only filters who passes does not loosen the limits a high one set.
    out.limits = l.limits_given ? l.limits : tightest;
    tightest = std::min(tightest, out.limits);
    out.pow = l.pow;
    out.admit_only = l.admit_only;
    out.admit_allowed = l.admit_allowed;
    out.admit_cleared = l.admit_cleared;
  }
  return r;
}

core::nanos attack_rules::restore_step() const noexcept {
  return std::max<core::nanos>(1,
                               static_cast<core::nanos>(static_cast<double>(cool_down) * restore));
}

attack_board::attack_board(std::size_t categories)
    : words_(new std::atomic<std::uint64_t>[std::max<std::size_t>(1, categories)]),
      size_(categories) {
  for (std::size_t i = 0; i < std::max<std::size_t>(1, categories); ++i)
    words_[i].store(std::uint64_t{std::bit_cast<std::uint32_t>(1.0f)} << 32,
                    std::memory_order_relaxed);
}

attack_status attack_board::get(std::size_t category) const noexcept {
  if (category >= size_) return {};
  const std::uint64_t w = words_[category].load(std::memory_order_relaxed);
  return {static_cast<std::uint8_t>(w & 0xff), ((w >> 8) & 1) != 0,
          std::bit_cast<float>(static_cast<std::uint32_t>(w >> 32))};
}

void attack_board::set(std::size_t category, attack_status s) noexcept {
  if (category >= size_) return;
  const std::uint64_t w = std::uint64_t{s.level} | (std::uint64_t{s.forced} << 8) |
                          (std::uint64_t{std::bit_cast<std::uint32_t>(s.factor)} << 32);
  words_[category].store(w, std::memory_order_relaxed);
}

double attack_monitor::baseline(const attack_rules& r) const noexcept {
  return std::max(r.floor, learnt_ ? average_ : 0.0);
}

attack_status attack_monitor::status(core::nanos now, const attack_rules& r) const noexcept {
  attack_status s;
  s.level = level_;
  s.forced = forced_;
  const double target = level_ == 0 ? 1.0 : r.levels[level_].limits;
  if (target <= from_factor_) {
    s.factor = static_cast<float>(target);  // tightened at once
    return s;
  }
  // Restoring: a share of the way at the step down, and one more each restore step.
  const double steps =
      1.0 + static_cast<double>(std::max<core::nanos>(0, now - entered_) / r.restore_step());
  const double done = std::min(1.0, steps * r.restore);
  s.factor = static_cast<float>(from_factor_ + (target - from_factor_) * done);
  return s;
}

std::uint8_t attack_monitor::sustained(core::nanos now, const attack_rules& r) const noexcept {
  for (std::size_t l = attack_levels - 1; l > 0; --l) {
    if (r.levels[l].on && above_since_[l] != 0 && now - above_since_[l] >= r.sustain) {
      return static_cast<std::uint8_t>(l);
    }
  }
  return 0;
}

attack_monitor::transition attack_monitor::move(std::uint8_t to, core::nanos now,
                                                const attack_rules& r, std::string why) {
  transition t{level_, to, std::move(why)};
  from_factor_ = status(now, r).factor;
  level_ = to;
  entered_ = now;
  calm_since_ = 0;
  return t;
}

std::optional<attack_monitor::transition> attack_monitor::tick(core::nanos now, std::uint64_t total,
                                                               const attack_rules& r) {
  if (!started_) {
    started_ = true;
    last_ = now;
    total_ = total;
    return std::nullopt;
  }
  const core::nanos dt = now - last_;
  if (dt <= 0) return std::nullopt;
  rate_ = static_cast<double>(total - total_) * 1e9 / static_cast<double>(dt);
  last_ = now;
  total_ = total;
  // The first traffic seen is the first baseline (a gateway started before its traffic does
  // not take the silence for normal).
  const bool first = !learnt_ && rate_ > 0 && level_ == 0;
  if (first) {
    average_ = rate_;
    learnt_ = true;
  }
  const double base = baseline(r);
  const double ratio = rate_ / base;
  bool suspect = false;
  for (std::size_t l = 1; l < attack_levels; ++l) {
    if (r.levels[l].on && ratio > r.levels[l].above) {
      if (above_since_[l] == 0) above_since_[l] = now;
      suspect = true;
    } else {
      above_since_[l] = 0;
    }
  }
  // The baseline learns normal traffic only: not in attack mode, not while the rate is above a
  // level (it may be the start of one). An operator who forces normal says the traffic is
  // normal, whatever its rate: a lasting rise is learnt so.
  if (learnt_ && !first && level_ == 0 && (forced_ || !suspect)) {
    const double alpha = 1.0 - std::exp(-static_cast<double>(dt) / static_cast<double>(r.window));
    average_ += alpha * (rate_ - average_);
  }
  if (forced_) {
    if (forced_until_ == 0 || now < forced_until_) return std::nullopt;
    return release(now, r);  // a forced level's `for` is over
  }
  const std::uint8_t up = sustained(now, r);
  if (up > level_) {
    return move(up, now, r,
                "rate " + number(rate_) + "/s is " + number(ratio) + "x the baseline " +
                    number(base) + "/s (above " + number(r.levels[up].above) + "x for " +
                    number(static_cast<double>(now - above_since_[up]) / 1e9) + "s)");
  }
  if (level_ == 0) return std::nullopt;
  if (ratio > r.levels[level_].above) {
    calm_since_ = 0;
    return std::nullopt;
  }
  if (calm_since_ == 0) calm_since_ = now;
  if (now - calm_since_ < r.cool_down) return std::nullopt;
  std::uint8_t down = 0;
  for (std::size_t l = level_ - 1u; l > 0; --l) {
    if (r.levels[l].on) {
      down = static_cast<std::uint8_t>(l);
      break;
    }
  }
  transition t = move(down, now, r,
                      "rate " + number(rate_) + "/s at or below " + number(r.levels[level_].above) +
                          "x the baseline " + number(base) + "/s for " +
                          number(static_cast<double>(now - calm_since_) / 1e9) + "s");
  calm_since_ = now;  // the calm goes on: the next step down is one cool_down from this one
  return t;
}

std::optional<attack_monitor::transition> attack_monitor::force(std::uint8_t level, core::nanos now,
                                                                core::nanos until,
                                                                const attack_rules& r) {
  forced_ = true;
  forced_until_ = until;
  if (level == level_) return std::nullopt;
  return move(level, now, r, "forced by an operator");
}

std::optional<attack_monitor::transition> attack_monitor::release(core::nanos now,
                                                                  const attack_rules& r) {
  const bool was = forced_;
  forced_ = false;
  forced_until_ = 0;
  const std::uint8_t to = sustained(now, r);
  if (!was || to == level_) return std::nullopt;
  return move(to, now, r, "released to automatic");
}

}  // namespace tollgate::policy
