#pragma once
/// Time for the gateway: integer nanoseconds on a Unix-epoch scale that never goes backwards.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tollgate::core {

/// Nanoseconds as one integer: instants since the Unix epoch, and the arithmetic of the limiter
/// and PoW code (GCRA state is one such integer, docs/design.md §3).
using nanos = std::int64_t;

/// A length of time, typed: what configuration holds and timers take. Its count() is `nanos`
/// where the integer arithmetic needs one; whole seconds only where the wire wants them.
using duration = std::chrono::nanoseconds;

inline constexpr nanos ns_per_ms = 1'000'000;
inline constexpr nanos ns_per_s = 1'000'000'000;

/// A source of "now". Only net/ and app/ read one; everything below takes `now` as a parameter.
/// Thread safety: implementations are safe to call from any thread.
class clock {
 public:
  virtual ~clock() = default;
  /// The current instant in nanoseconds since the Unix epoch.
  virtual nanos now() const noexcept = 0;
};

/// The real clock: the monotonic clock shifted once, at construction, onto the Unix epoch, so
/// limiter state never sees time run backwards when the wall clock is stepped.
/// Thread safety: immutable after construction.
class steady_unix_clock final : public clock {
 public:
  /// Captures the offset between the steady clock and the system clock, moved by `shift`
  /// (tests only: replicas whose clocks differ).
  explicit steady_unix_clock(nanos shift = 0);
  /// Steady time plus the captured offset.
  nanos now() const noexcept override;

 private:
  nanos offset_;  ///< system_clock - steady_clock at construction
};

/// A clock the tests move by hand.
/// Thread safety: reads and writes are atomic.
class manual_clock final : public clock {
 public:
  /// Starts at `start` nanoseconds since the epoch.
  explicit manual_clock(nanos start = 0) : now_(start) {}
  /// The instant last set.
  nanos now() const noexcept override { return now_.load(std::memory_order_relaxed); }
  /// Moves to `t`.
  void set(nanos t) noexcept { now_.store(t, std::memory_order_relaxed); }
  /// Moves forward by `d`.
  void advance(nanos d) noexcept { now_.fetch_add(d, std::memory_order_relaxed); }

 private:
  std::atomic<nanos> now_;  ///< the current instant
};

/// Whole seconds covering `d`, rounded up (0 for d <= 0).
constexpr std::int64_t ceil_seconds(nanos d) noexcept {
  return d <= 0 ? 0 : (d + ns_per_s - 1) / ns_per_s;
}

}  // namespace tollgate::core
