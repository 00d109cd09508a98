#include "gateway/sim/log_set.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace tollgate::sim {

namespace {

/// Reads what `fd` gives until its end (a pipe, a character device).
std::string read_whole(int fd, const std::string& path) {
  std::string out;
  char block[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, block, sizeof block);
    if (n == 0) return out;
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error("cannot read " + path + ": " + std::strerror(errno));
    }
    out.append(block, static_cast<std::size_t>(n));
  }
}

/// The start of a line for a report: at most 120 bytes, anything not printable as \xHH.
std::string shown(std::string_view line) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (const char c : line.substr(0, 120)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  if (line.size() > 120) out += "...";
  return out;
}

bool earlier(const indexed_line& a, const indexed_line& b) noexcept {
  return a.time < b.time;
}

}  // namespace

log_set::log_set(std::vector<std::string> paths) {
  files_.reserve(paths.size());
  for (auto& p : paths) {
    file& f = files_.emplace_back();
    f.path = std::move(p);
    const int fd = ::open(f.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw std::runtime_error("cannot open " + f.path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
      void* m = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ,
                       MAP_PRIVATE | MAP_POPULATE, fd, 0);
      if (m != MAP_FAILED) {
        ::madvise(m, static_cast<std::size_t>(st.st_size), MADV_SEQUENTIAL);
        f.mapped = m;
        f.mapped_size = static_cast<std::size_t>(st.st_size);
        f.data = std::string_view(static_cast<const char*>(m), f.mapped_size);
        ::close(fd);
        continue;
      }
    }
    try {
      f.owned = read_whole(fd, f.path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    f.data = f.owned;
  }
}

log_set::~log_set() {
  for (auto& f : files_) {
    if (f.mapped != nullptr) ::munmap(f.mapped, f.mapped_size);
  }
}

void log_set::index(const std::function<void(std::uint64_t)>& tick) {
  std::size_t bytes = 0;
  for (const auto& f : files_)
    bytes += f.data.size();
  // About one request per 100 bytes of log: reserved, not touched, so the index is not copied
  // as it grows.
  index_.reserve(bytes / 100);
  for (std::uint32_t f = 0; f < files_.size(); ++f)
    index_file(f, tick);
  order();
}

void log_set::index_file(std::uint32_t f, const std::function<void(std::uint64_t)>& tick) {
  const std::string_view data = files_[f].data;
  log_record record;
  parse_scratch scratch;
  std::uint64_t number = 0;
  for (std::size_t at = 0; at < data.size();) {
    const void* nl = std::memchr(data.data() + at, '\n', data.size() - at);
    const std::size_t end =
        nl == nullptr ? data.size()
                      : static_cast<std::size_t>(static_cast<const char*>(nl) - data.data());
    const std::string_view line = data.substr(at, end - at);
    ++number;
    if ((++counts_.lines & 0xffff) == 0 && tick) tick(counts_.lines);
    std::string_view why;
    core::nanos time = 0;
    line_kind kind = parse_time(line, time, record, scratch, why);
    if (kind == line_kind::request && line.size() > UINT32_MAX) {
      kind = line_kind::bad;  // cannot be indexed; no log writes such a line
      why = "a line longer than 4 GiB";
    }
    switch (kind) {
      case line_kind::request:  // counted by read()
        index_.push_back({time, at, static_cast<std::uint32_t>(line.size()), f, number});
        break;
      case line_kind::bad:
        count_bad(f, number, why, line);
        break;
      case line_kind::not_request:
        ++counts_.not_requests;
        break;
      case line_kind::no_request:
        ++counts_.no_request;
        break;
      case line_kind::application:
        ++counts_.application;
        break;
      case line_kind::blank:
        ++counts_.blank;
        break;
    }
    at = end + 1;
  }
}

void log_set::count_bad(std::uint32_t f, std::uint64_t line, std::string_view why,
                        std::string_view text) {
  ++counts_.bad;
  // The first lines of the files are kept, whatever order they are found in (read() finds
  // some in time order).
  auto later = [](const bad_line& a, const bad_line& b) {
    return a.file != b.file ? a.file < b.file : a.line < b.line;
  };
  if (bad_.size() == max_bad_kept) {
    const auto last = std::max_element(bad_.begin(), bad_.end(), later);
    if (!later(bad_line{f, line, {}, {}}, *last)) return;
    bad_.erase(last);
  }
  const bad_line b{f, line, std::string(why), shown(text)};
  bad_.insert(std::upper_bound(bad_.begin(), bad_.end(), b, later), b);
}

bool log_set::read(const indexed_line& l, log_record& out, parse_scratch& scratch) {
  std::string_view why;
  const std::string_view line = text(l);
  switch (parse_again(line, l.time, out, scratch, why)) {
    case line_kind::request:
      ++counts_.requests;
      ++counts_.by_format[static_cast<std::size_t>(out.format)];
      return true;
    case line_kind::not_request:
      ++counts_.not_requests;
      return false;
    case line_kind::no_request:
      ++counts_.no_request;
      return false;
    case line_kind::application:
      ++counts_.application;
      return false;
    case line_kind::blank:
      ++counts_.blank;
      return false;
    case line_kind::bad:
      count_bad(l.file, l.line, why, line);
      return false;
  }
  return false;
}

void log_set::order() {
  // Access lines are written as responses end, so they are nearly in decision order: keep a
  // rising run in place, sort only the lines that break it, and merge the two. Stable: lines
  // of one instant keep their order in the files (a late line never ties with a kept line
  // after it, since that one's time was at least the run's, above the late line's).
  std::vector<indexed_line> late;
  std::size_t kept = 0;
  for (std::size_t i = 0; i < index_.size(); ++i) {
    if (kept == 0 || !earlier(index_[i], index_[kept - 1])) {
      index_[kept++] = index_[i];
    } else {
      late.push_back(index_[i]);
    }
  }
  counts_.reordered = late.size();
  if (late.empty()) return;
  index_.resize(kept);
  std::stable_sort(late.begin(), late.end(), earlier);
  std::vector<indexed_line> merged;
  merged.reserve(kept + late.size());
  std::merge(index_.begin(), index_.end(), late.begin(), late.end(), std::back_inserter(merged),
             earlier);
  index_ = std::move(merged);
}

}  // namespace tollgate::sim
