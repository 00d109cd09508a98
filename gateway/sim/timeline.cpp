#include "gateway/sim/timeline.hpp"

#include <algorithm>

namespace tollgate::sim {

void time_bucket::merge(const time_bucket& o) noexcept {
  requests += o.requests;
  admitted += o.admitted;
  for (std::size_t i = 0; i < outcomes.size(); ++i)
    outcomes[i] += o.outcomes[i];
  peak = std::max(peak, o.peak);
  baseline_sum += o.baseline_sum;
  ticks += o.ticks;
  level = std::max(level, o.level);
}

time_bucket& timeline::at(std::uint16_t category, std::int64_t second) {
  if (!started_) {
    started_ = true;
    origin_ = second;
  }
  const std::int64_t since = std::max<std::int64_t>(0, second - origin_);
  // A gap of years halves a few dozen times at most: each halving halves the index.
  while (static_cast<std::uint64_t>(since / width_) >= max_buckets)
    halve();
  const auto index = static_cast<std::size_t>(since / width_);
  std::vector<time_bucket>& s = series_[category];
  if (index >= s.size()) s.resize(index + 1);
  size_ = std::max(size_, s.size());
  return s[index];
}

void timeline::halve() {
  for (std::vector<time_bucket>& s : series_) {
    const std::size_t n = (s.size() + 1) / 2;
    for (std::size_t i = 0; i < n; ++i) {
      time_bucket b = s[2 * i];
      if (2 * i + 1 < s.size()) b.merge(s[2 * i + 1]);
      s[i] = b;
    }
    s.resize(n);
  }
  size_ = (size_ + 1) / 2;
  width_ *= 2;
}

}  // namespace tollgate::sim
