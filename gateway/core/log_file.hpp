#pragma once
/// Where the access log goes: the standard output (containers) or a file, reopened in place
/// for logrotate. Lines are written with one write(2) each, from any worker, without a lock:
/// a file is opened with O_APPEND, so each line lands whole at its end; a pipe takes a line of
/// up to PIPE_BUF (4 KiB) bytes in one piece.

#include <atomic>
#include <chrono>
#include <string>
#include <string_view>

namespace tollgate::core {

/// Thread safety: write() from any thread; open() and reopen() from one thread (the control
/// thread), concurrently with write().
class log_file {
 public:
  log_file() = default;
  ~log_file();
  log_file(const log_file&) = delete;
  log_file& operator=(const log_file&) = delete;

  /// Sends lines to `path`, or to the standard output when `path` is empty; called again with
  /// the same path after logrotate moved the file away. The descriptor writers use keeps its
  /// number: the new file is put in its place (dup3), so a line being written meanwhile goes
  /// to the old file or the new one, never to a closed descriptor. Throws std::runtime_error
  /// naming the file when it cannot be opened (then nothing changes).
  void open(const std::string& path);

  /// Writes `line` (which ends with '\n') in one system call; a short write is finished with
  /// more. Lost when the destination fails (a full disk must not stop the gateway).
  void write(std::string_view line) noexcept;

 private:
  std::atomic<int> fd_{-1};  ///< our own descriptor; its number never changes once set
};

/// Appends `t` as an RFC 3339 time in UTC with microseconds: 2026-11-23T09:24:23.123456Z. The
/// access log's time: `tollgate simulate` replays a request at this time less its duration, and
/// milliseconds reordered requests of one client that came within one millisecond.
void append_utc_time(std::string& out, std::chrono::system_clock::time_point t);

}  // namespace tollgate::core
