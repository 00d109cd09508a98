#include "gateway/pow/penalties.hpp"

#include <algorithm>

namespace tollgate::pow {

namespace {

/// Scores stop here: a client this far gone stays at the top step long enough as it is.
constexpr std::uint32_t max_score = 1'000'000;

/// The score of `e` at `now`: its points less what decayed since the last came.
std::uint32_t score_at(std::uint32_t score, std::int64_t last, std::int64_t now,
                       const penalty_rules& r) noexcept {
  if (score == 0 || r.decay_interval <= 0 || now <= last) return score;
  const std::int64_t periods = (now - last) / r.decay_interval;
  const std::int64_t fallen = periods * static_cast<std::int64_t>(r.decay_points);
  return fallen >= score ? 0 : score - static_cast<std::uint32_t>(fallen);
}

}  // namespace

std::string_view penalty_action_name(penalty_action a) noexcept {
  switch (a) {
    case penalty_action::none:
      return "none";
    case penalty_action::warn:
      return "warn";
    case penalty_action::throttle:
      return "throttle";
    case penalty_action::read_only:
      return "read_only";
    case penalty_action::pow:
      return "pow";
    case penalty_action::ban:
      return "ban";
  }
  return "none";
}

int penalty_rules::step_for(std::uint32_t score) const noexcept {
  int step = -1;
  for (std::size_t i = 0; i < steps.size() && steps[i].at <= score; ++i)
    step = static_cast<int>(i);
  return step;
}

standing penalty_table::standing_of(const entry& e, std::int64_t now,
                                    const penalty_rules& r) noexcept {
  standing s;
  s.score = score_at(e.score, e.last, now, r);
  s.step = r.step_for(s.score);
  // A timed step holds until its end, whatever the score did since (a reload that dropped
  // steps leaves none to hold).
  if (e.held > s.step && e.held_until > now && static_cast<std::size_t>(e.held) < r.steps.size()) {
    s.step = e.held;
    s.until = e.held_until;
  } else if (s.step >= 0 && e.held == s.step && e.held_until > now) {
    s.until = e.held_until;
  }
  return s;
}

penalty_table::change penalty_table::add(const subject& who, std::uint32_t points, std::int64_t now,
                                         const penalty_rules& r) {
  return map_.update(who, [&](entry& e) {
    change c;
    c.before = standing_of(e, now, r);
    e.score = static_cast<std::uint32_t>(
        std::min<std::uint64_t>(std::uint64_t{c.before.score} + points, max_score));
    e.last = now;
    const int reached = r.step_for(e.score);
    if (reached > c.before.step) {
      // Entering a step: a timed one lasts its `for` from now. Of several passed at once, the
      // highest is the one entered.
      const penalty_step& step = r.steps[static_cast<std::size_t>(reached)];
      if (step.hold > 0) {
        e.held = static_cast<std::int8_t>(reached);
        e.held_until = now + step.hold;
      }
    }
    c.after = standing_of(e, now, r);
    return c;
  });
}

standing penalty_table::at(const subject& who, std::int64_t now, const penalty_rules& r) const {
  standing s;
  map_.find(who, [&](const entry& e) { s = standing_of(e, now, r); });
  return s;
}

std::array<std::size_t, penalty_action_count> penalty_table::census(std::int64_t now,
                                                                    const penalty_rules& r) const {
  std::array<std::size_t, penalty_action_count> n{};
  map_.for_each([&](const subject&, const entry& e) {
    ++n[static_cast<std::size_t>(standing_of(e, now, r).action(r))];
  });
  return n;
}

void penalty_table::save(core::state_writer& w) const {
  core::write_counted(
      w, [&](auto&& f) { map_.for_each_oldest_first(f); },
      [](core::state_writer& b, const subject& k, const entry& e) {
        b.u64(k.key);
        b.u8(k.level);
        b.u32(e.score);
        b.i64(e.last);
        b.u8(static_cast<std::uint8_t>(e.held));
        b.i64(e.held_until);
      });
}

bool penalty_table::load(core::state_reader& r) {
  for (std::uint32_t i = 0, n = r.count(30); i < n && r.ok(); ++i) {
    const subject k{r.u64(), r.u8()};
    entry e;
    e.score = r.u32();
    e.last = r.i64();
    e.held = static_cast<std::int8_t>(r.u8());
    e.held_until = r.i64();
    // A step is an index of the ladder (at most a few); -1 is none.
    if (e.held < -1) r.fail();
    if (!r.ok()) break;
    map_.update(k, [&](entry& to) { to = e; });
  }
  return r.ok();
}

}  // namespace tollgate::pow
