#pragma once
/// A test-and-test-and-set lock for critical sections of a few dozen instructions.

#include <atomic>
#include <thread>

namespace tollgate::limit {

/// Tells the CPU we are spinning (saves power, yields the core's pipeline to a sibling).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// Guards one shard of a state table. Holders never block or allocate, so spinning is cheaper
/// than parking; after a while it yields in case the holder was preempted.
/// Thread safety: that is its purpose.
class spinlock {
 public:
  /// Acquires the lock.
  void lock() noexcept {
    for (unsigned spins = 0;; ++spins) {
      if (!locked_.exchange(true, std::memory_order_acquire)) return;
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          std::this_thread::yield();
        } else {
          cpu_relax();
        }
      }
    }
  }
  /// Releases the lock.
  void unlock() noexcept { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};  ///< held or not
};

}  // namespace tollgate::limit
