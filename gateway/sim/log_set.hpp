#pragma once
/// The log files of one simulation, mapped into memory and indexed: every line classified once,
/// each request's line remembered with its time, then ordered by time (stable: lines of one
/// instant keep their order), sorting only what was out of order.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/sim/log_reader.hpp"

namespace tollgate::sim {

/// One request line, located.
struct indexed_line {
  core::nanos time;      ///< the instant of the decision
  std::uint64_t offset;  ///< where the line starts in its file
  std::uint32_t length;  ///< its length, without '\n'
  std::uint32_t file;    ///< which file
  std::uint64_t line;    ///< its line number in that file, from 1
};

/// A line that could not be read.
struct bad_line {
  std::uint32_t file = 0;  ///< which file
  std::uint64_t line = 0;  ///< its line number, from 1
  std::string reason;      ///< what is wrong with it
  std::string text;        ///< its start, non-printable bytes as \xHH
};

/// What reading the files found.
struct read_counts {
  std::uint64_t lines = 0;          ///< every line
  std::uint64_t requests = 0;       ///< request lines
  std::uint64_t by_format[3] = {};  ///< requests per log_format
  std::uint64_t not_requests = 0;   ///< tunnel ends
  std::uint64_t no_request = 0;     ///< connections that sent no request (nginx `"-"`)
  std::uint64_t application = 0;    ///< the gateway's own log lines
  std::uint64_t blank = 0;          ///< empty lines
  std::uint64_t bad = 0;            ///< lines of no format
  std::uint64_t reordered = 0;      ///< requests out of time order in the files
};

/// The mapped files.
/// Thread safety: none (one simulation, one thread).
class log_set {
 public:
  /// Most bad lines kept for the report (all are counted).
  static constexpr std::size_t max_bad_kept = 20;

  /// Maps every file of `paths` (a regular file is mapped, anything else read whole). Throws
  /// std::runtime_error naming the file when one cannot be read.
  explicit log_set(std::vector<std::string> paths);
  ~log_set();
  log_set(const log_set&) = delete;
  log_set& operator=(const log_set&) = delete;

  /// Reads every line, indexes the requests and orders them by time. `tick` is called with
  /// the number of lines read so far every 2^16 lines. Tollgate's text lines are only read at
  /// their two ends here (parse_time): read() parses them whole.
  void index(const std::function<void(std::uint64_t)>& tick);
  /// Parses indexed line `l` whole into `out` and counts it: false (and counted as a tunnel's
  /// end or a bad line) when it is no request after all. Call once per indexed line.
  bool read(const indexed_line& l, log_record& out, parse_scratch& scratch);

  /// The request lines in time order (after index()).
  const std::vector<indexed_line>& requests() const noexcept { return index_; }
  /// The text of a request line.
  std::string_view text(const indexed_line& l) const noexcept {
    return files_[l.file].data.substr(l.offset, l.length);
  }
  /// What was read (requests and formats once every line went through read()).
  const read_counts& counts() const noexcept { return counts_; }
  /// The first max_bad_kept bad lines, in file and line order.
  const std::vector<bad_line>& bad_lines() const noexcept { return bad_; }
  /// The path of file `i`.
  const std::string& path(std::uint32_t i) const noexcept { return files_[i].path; }
  /// How many files.
  std::size_t file_count() const noexcept { return files_.size(); }

 private:
  struct file {
    std::string path;             ///< as given
    std::string_view data;        ///< its bytes
    void* mapped = nullptr;       ///< the mapping, or null when read into `owned`
    std::size_t mapped_size = 0;  ///< the mapping's length
    std::string owned;            ///< the bytes of a file that could not be mapped
  };
  void index_file(std::uint32_t f, const std::function<void(std::uint64_t)>& tick);
  void count_bad(std::uint32_t f, std::uint64_t line, std::string_view why, std::string_view text);
  void order();

  std::vector<file> files_;
  std::vector<indexed_line> index_;
  read_counts counts_;
  std::vector<bad_line> bad_;
};

}  // namespace tollgate::sim
