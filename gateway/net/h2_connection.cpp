#include "gateway/net/h2_connection.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include <spdlog/spdlog.h>

#include "gateway/core/sanitizers.hpp"
#include "gateway/core/text.hpp"
#include "gateway/net/forward.hpp"

namespace tollgate::net {

namespace {

using clock = std::chrono::steady_clock;

/// Frames that carry no request (SETTINGS, PING, PRIORITY, empty DATA) a connection may send
/// at once, and how many a second it earns back: far more than any client needs (a browser
/// sends a handful, a gRPC keepalive one PING every ten seconds or more), far fewer than a flood.
constexpr double flood_burst = 1000;
constexpr double flood_rate = 100;

/// The window of each stream and of the connection (RFC 9113 §6.9.2's default): the request
/// body bytes a client may send before the upstream has taken them, so one connection holds at
/// most this much of request bodies, however many streams it has.
constexpr std::int32_t window = 65535;

h2_connection& self_of(void* user) {
  return *static_cast<h2_connection*>(user);
}

h2_stream* stream_of(nghttp2_session* session, std::int32_t id) {
  return static_cast<h2_stream*>(nghttp2_session_get_stream_user_data(session, id));
}

/// Whether `name` is a field HTTP/2 forbids (RFC 9113 §8.2.2): connection-specific.
bool connection_specific(std::string_view name) noexcept {
  return core::iequals(name, "connection") || core::iequals(name, "keep-alive") ||
         core::iequals(name, "proxy-connection") || core::iequals(name, "transfer-encoding") ||
         core::iequals(name, "upgrade") || core::iequals(name, "te");
}

}  // namespace

// --- h2_stream ------------------------------------------------------------------------------

h2_stream::h2_stream(h2_connection& c, std::int32_t stream_id)
    : conn(c), id(stream_id), wake(c.w.io.get_executor()) {
  wake.expires_at(timer::time_point::max());
}

h2_stream::~h2_stream() {
  if (watch) conn.keep_watch(std::move(watch));
  if (sc) {
    sc->buffer.clear();
    conn.w.scratch.give(std::move(sc));
  }
}

std::string_view h2_stream::value(std::string_view name) const {
  for (const auto& f : fields) {
    if (core::iequals(name_of(f), name)) return value_of(f);
  }
  if (core::iequals(name, "host")) return authority;
  return {};
}

std::size_t h2_stream::count(std::string_view name) const {
  std::size_t n = 0;
  for (const auto& f : fields)
    n += core::iequals(name_of(f), name) ? 1 : 0;
  if (n == 0 && core::iequals(name, "host") && !authority.empty()) return 1;
  return n;
}

void h2_stream::each(std::string_view name, void (*f)(void*, std::string_view),
                     void* context) const {
  bool any = false;
  for (const auto& field : fields) {
    if (core::iequals(name_of(field), name)) {
      any = true;
      f(context, value_of(field));
    }
  }
  if (!any && core::iequals(name, "host") && !authority.empty()) f(context, authority);
}

// --- nghttp2's callbacks --------------------------------------------------------------------

namespace {

int begin_frame(nghttp2_session*, const nghttp2_frame_hd* hd, void* user) {
  return self_of(user).on_begin_frame(*hd);
}

int begin_headers(nghttp2_session*, const nghttp2_frame* f, void* user) {
  return self_of(user).on_begin_headers(*f);
}

int header(nghttp2_session*, const nghttp2_frame* f, const std::uint8_t* name, std::size_t nlen,
           const std::uint8_t* value, std::size_t vlen, std::uint8_t, void* user) {
  return self_of(user).on_header(*f, {reinterpret_cast<const char*>(name), nlen},
                                 {reinterpret_cast<const char*>(value), vlen});
}

int frame_recv(nghttp2_session*, const nghttp2_frame* f, void* user) {
  return self_of(user).on_frame_recv(*f);
}

int data_chunk(nghttp2_session*, std::uint8_t, std::int32_t id, const std::uint8_t* data,
               std::size_t n, void* user) {
  return self_of(user).on_data_chunk(id, data, n);
}

int stream_close(nghttp2_session*, std::int32_t id, std::uint32_t code, void* user) {
  return self_of(user).on_stream_close(id, code);
}

ssize_t body_source(nghttp2_session* session, std::int32_t id, std::uint8_t* buf,
                    std::size_t length, std::uint32_t* flags, nghttp2_data_source*, void* user) {
  h2_stream* s = stream_of(session, id);
  if (s == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
  return self_of(user).read_body(*s, buf, length, flags);
}

// nghttp2's memory. Its session allocates a table of streams (256 buckets, 4 KiB) zeroed,
// which an idle connection never writes to: from calloc, zeroing it made the page resident,
// a quarter of an idle connection's memory (bench/http2.sh). Zeroed blocks of a page come
// from a region reserved once instead, whose pages the kernel provides zeroed as they are
// first written, and which are given back (MADV_DONTNEED: zeroed again, not resident) when
// freed. Everything else, and every block once the region is used up, from the heap.
// Under AddressSanitizer, the heap only (core/sanitizers.hpp); likewise where pages are not
// 4 KiB.

class zero_pages {
 public:
  static constexpr std::size_t page = 4096;
  /// Pages reserved (address space only): 1 GiB, a page per HTTP/2 connection.
  static constexpr std::size_t reserved = std::size_t{1} << 18;

  static zero_pages& instance() {
    static zero_pages pages;
    return pages;
  }
  /// A zeroed page, or null when none is left.
  void* take() {
    if (base_ == nullptr) return nullptr;
    const std::lock_guard lock(mutex_);  // once per HTTP/2 connection
    if (!free_.empty()) {
      void* p = free_.back();
      free_.pop_back();
      return p;
    }
    if (used_ == reserved) return nullptr;
    return base_ + page * used_++;
  }
  /// Whether `p` is one of the region's pages (no lock: the region never moves).
  bool owns(const void* p) const noexcept {
    const auto* c = static_cast<const char*>(p);
    return base_ != nullptr && c >= base_ && c < base_ + page * reserved;
  }
  /// Gives back page `p`, zeroed and not resident.
  void give(void* p) {
    if (::madvise(p, page, MADV_DONTNEED) != 0) std::memset(p, 0, page);
    const std::lock_guard lock(mutex_);
    free_.push_back(p);
  }

 private:
  zero_pages() {
#ifndef TOLLGATE_ASAN
    if (::sysconf(_SC_PAGESIZE) != static_cast<long>(page)) return;
    void* p = ::mmap(nullptr, page * reserved, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) base_ = static_cast<char*>(p);
#endif
  }
  char* base_ = nullptr;
  std::mutex mutex_;
  std::size_t used_ = 0;     ///< pages handed out at least once
  std::vector<void*> free_;  ///< pages given back
};

void* h2_malloc(std::size_t n, void*) {
  return std::malloc(n);
}
void h2_free(void* p, void*) {
  zero_pages& pages = zero_pages::instance();
  if (pages.owns(p)) {
    pages.give(p);
    return;
  }
  std::free(p);
}
void* h2_calloc(std::size_t count, std::size_t size, void*) {
  if (size != 0 && count * size == zero_pages::page) {
    if (void* p = zero_pages::instance().take()) return p;
  }
  return std::calloc(count, size);
}
void* h2_realloc(void* p, std::size_t n, void*) {
  zero_pages& pages = zero_pages::instance();
  if (!pages.owns(p)) return std::realloc(p, n);
  void* moved = std::malloc(n);
  if (moved == nullptr) return nullptr;
  std::memcpy(moved, p, std::min(n, zero_pages::page));
  pages.give(p);
  return moved;
}
nghttp2_mem h2_memory{nullptr, h2_malloc, h2_free, h2_calloc, h2_realloc};

/// The callbacks, made once for the process (nghttp2 copies them into each session).
const nghttp2_session_callbacks* callbacks() {
  static nghttp2_session_callbacks* const cbs = [] {
    nghttp2_session_callbacks* c = nullptr;
    nghttp2_session_callbacks_new(&c);
    nghttp2_session_callbacks_set_on_begin_frame_callback(c, begin_frame);
    nghttp2_session_callbacks_set_on_begin_headers_callback(c, begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(c, header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(c, frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(c, data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(c, stream_close);
    return c;
  }();
  return cbs;
}

}  // namespace

// --- h2_connection --------------------------------------------------------------------------

h2_connection::h2_connection(worker& wk, deadline_watch& dw, const listener_info& li,
                             core::address p)
    : w(wk),
      watch(dw),
      l(li),
      peer(p),
      peer_text(p.to_string()),
      wake_(wk.io.get_executor()),
      ended_(wk.io.get_executor()),
      flood_tokens_(flood_burst),
      flood_at_(clock::now()) {
  wake_.expires_at(timer::time_point::max());
  ended_.expires_at(timer::time_point::max());
  const auto& limits = w.current->config.limits;
  max_header_bytes_ = limits.max_header_bytes;
  max_streams_ = limits.max_concurrent_streams;
  nghttp2_option* opt = nullptr;
  nghttp2_option_new(&opt);
  // The request body's window is given back as the upstream takes it (consumed()), not as it
  // arrives: a slow upstream holds the client back instead of filling memory.
  nghttp2_option_set_no_auto_window_update(opt, 1);
  // nghttp2's own guards stay as a second line behind ours (on_begin_frame): a header block
  // in more CONTINUATION frames than max_header_bytes needs, the encoder's table at the
  // default, resets at its default rate.
  nghttp2_option_set_max_continuations(opt, std::max<std::size_t>(8, max_header_bytes_ / 4096));
  nghttp2_option_set_max_deflate_dynamic_table_size(opt, 4096);
  nghttp2_session_server_new3(&session_, callbacks(), this, opt, &h2_memory);
  nghttp2_option_del(opt);
  const std::array<nghttp2_settings_entry, 4> settings{{
      {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max_streams_},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<std::uint32_t>(window)},
      {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<std::uint32_t>(max_header_bytes_)},
      {NGHTTP2_SETTINGS_HEADER_TABLE_SIZE, 4096},
  }};
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings.data(), settings.size());
}

h2_connection::~h2_connection() {
  // Streams first: their destructors give back scratch; nghttp2's stream data points at them.
  closing_ = true;
  streams_.clear();
  if (spare_watch_) spare_watch_->end();
  nghttp2_session_del(session_);
}

std::shared_ptr<deadline_watch> h2_connection::take_watch() {
  if (spare_watch_) return std::move(spare_watch_);
  auto made = std::make_shared<deadline_watch>(watch.client, watch.stream);
  // Only upstream phases are watched; a client phase never runs out there (h2_stream.cpp).
  made->on_due = [](void*) {};
  start_watchdog(made);
  return made;
}

void h2_connection::keep_watch(std::shared_ptr<deadline_watch> kept) noexcept {
  if (spare_watch_ || closing_) {
    kept->end();
    return;
  }
  // At rest: nothing comes due until the next stream's upstream phase.
  kept->rest();
  kept->upstream_timed_out = false;
  spare_watch_ = std::move(kept);
}

int h2_connection::on_begin_frame(const nghttp2_frame_hd& hd) {
  switch (hd.type) {
    case NGHTTP2_HEADERS:
      block_bytes_ = hd.length;
      block_frames_ = 0;
      break;
    case NGHTTP2_CONTINUATION:
      block_bytes_ += hd.length;
      ++block_frames_;
      break;
    case NGHTTP2_DATA:
      if (hd.length != 0 || (hd.flags & NGHTTP2_FLAG_END_STREAM) != 0) return 0;
      [[fallthrough]];
    case NGHTTP2_SETTINGS:
    case NGHTTP2_PING:
    case NGHTTP2_PRIORITY: {
      const auto now = clock::now();
      flood_tokens_ = std::min(
          flood_burst,
          flood_tokens_ + flood_rate * std::chrono::duration<double>(now - flood_at_).count());
      flood_at_ = now;
      flood_tokens_ -= 1;
      if (flood_tokens_ < 0) calm(h2_abuse::flood);
      return 0;
    }
    default:
      return 0;
  }
  // A header block is bounded on the wire as well as decoded (on_header): HPACK may make it
  // smaller, never much larger, so a block past twice the limit, or spread over more
  // CONTINUATION frames than such a block needs, is a flood (CVE-2024-27316).
  const std::uint64_t frames_needed = 2 + 2 * max_header_bytes_ / 16384;
  if (block_bytes_ > 2 * max_header_bytes_ + 1024 || block_frames_ > frames_needed) {
    calm(h2_abuse::header_block);
  }
  return 0;
}

int h2_connection::on_begin_headers(const nghttp2_frame& f) {
  if (f.headers.cat == NGHTTP2_HCAT_HEADERS) {
    // Trailers of a request (or a misplaced block nghttp2 refuses after this).
    if (h2_stream* s = stream_of(session_, f.hd.stream_id)) s->trailers_coming = true;
    return 0;
  }
  if (f.headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
  w.counters.h2_streams[l.metric].add();
  if (abuse_ != h2_abuse::none) return 0;
  // nghttp2 holds the client to max_concurrent_streams open streams. Streams whose coroutine
  // still runs count here though nghttp2 has closed them (a client that resets a stream does
  // not end the work it started; a stream answered whole ends a moment after its client saw
  // the end): twice the bound leaves room for the second, not for rapid resets.
  if (streams_.size() >= 2 * std::size_t{max_streams_}) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, f.hd.stream_id, NGHTTP2_REFUSED_STREAM);
    if (++premature_ > honest_ + max_streams_) calm(h2_abuse::rapid_reset);
    return 0;
  }
  auto s = std::make_unique<h2_stream>(*this, f.hd.stream_id);
  s->place = streams_.size();
  nghttp2_session_set_stream_user_data(session_, f.hd.stream_id, s.get());
  streams_.push_back(std::move(s));
  return 0;
}

int h2_connection::on_header(const nghttp2_frame& f, std::string_view name,
                             std::string_view value) {
  h2_stream* s = stream_of(session_, f.hd.stream_id);
  if (s == nullptr || s->too_large) return 0;
  // RFC 9113 §6.5.2: a field's size is its name and value and 32 more.
  s->head_bytes += name.size() + value.size() + 32;
  if (s->head_bytes > max_header_bytes_) {
    s->too_large = true;
    return 0;
  }
  if (s->trailers_coming) {
    if (name.empty() || name[0] == ':' || connection_specific(name)) return 0;
    s->request_trailers.append(name).append(": ").append(value).append("\r\n");
    return 0;
  }
  if (!name.empty() && name[0] == ':') {
    if (name == ":method") {
      s->method.assign(value);
    } else if (name == ":path") {
      s->path.assign(value);
    } else if (name == ":authority") {
      s->authority.assign(value);
    } else if (name == ":scheme") {
      s->scheme.assign(value);
    }
    return 0;
  }
  if (name == "content-length") {
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (ec == std::errc() && end == value.data() + value.size()) s->content_length = n;
  }
  // Cookies may come as one field per cookie (RFC 9113 §8.2.3): joined into one, as an
  // HTTP/1.1 client would send them, so that a proof in any of them is found.
  if (name == "cookie") {
    for (auto& field : s->fields) {
      if (s->name_of(field) == "cookie") {
        std::string joined(s->value_of(field));
        joined.append("; ").append(value);
        field.value = static_cast<std::uint32_t>(s->store.size());
        field.value_size = static_cast<std::uint32_t>(joined.size());
        s->store += joined;
        return 0;
      }
    }
  }
  const auto at = static_cast<std::uint32_t>(s->store.size());
  s->store.append(name).append(value);
  s->fields.push_back({at, static_cast<std::uint32_t>(name.size()),
                       at + static_cast<std::uint32_t>(name.size()),
                       static_cast<std::uint32_t>(value.size())});
  return 0;
}

int h2_connection::on_frame_recv(const nghttp2_frame& f) {
  const bool end_stream = (f.hd.flags & NGHTTP2_FLAG_END_STREAM) != 0;
  switch (f.hd.type) {
    case NGHTTP2_HEADERS: {
      h2_stream* s = stream_of(session_, f.hd.stream_id);
      if (s == nullptr) return 0;
      if (s->head_done) {  // trailers: the body is complete
        s->request_ended = true;
        s->notify();
        return 0;
      }
      s->head_done = true;
      s->request_ended = end_stream;
      spawn_stream(shared_from_this(), *s);
      return 0;
    }
    case NGHTTP2_DATA:
      if (end_stream) {
        if (h2_stream* s = stream_of(session_, f.hd.stream_id)) {
          s->request_ended = true;
          s->notify();
        }
      }
      return 0;
    case NGHTTP2_RST_STREAM: {
      h2_stream* s = stream_of(session_, f.hd.stream_id);
      if (s == nullptr) return 0;
      s->reset_by_client = true;
      // Rapid reset (CVE-2023-44487): a client may cancel as many streams as it completed,
      // and max_concurrent_streams more; past that it opens streams only to cancel them.
      if (!s->out_done && ++premature_ > honest_ + max_streams_) calm(h2_abuse::rapid_reset);
      return 0;
    }
    default:
      return 0;
  }
}

int h2_connection::on_data_chunk(std::int32_t id, const std::uint8_t* data, std::size_t n) {
  h2_stream* s = stream_of(session_, id);
  if (s == nullptr || s->discard_body) {
    // Nobody reads it: the window is given back at once.
    nghttp2_session_consume(session_, id, n);
    return 0;
  }
  s->body_in.append(reinterpret_cast<const char*>(data), n);
  s->body_bytes += n;
  s->notify();
  return 0;
}

int h2_connection::on_stream_close(std::int32_t id, std::uint32_t) {
  h2_stream* s = stream_of(session_, id);
  if (s == nullptr) return 0;
  s->closed = true;
  if (!s->head_done) {
    // Closed before its head was whole (a malformed header block, a reset): no coroutine
    // serves it, so it goes now.
    finished(*s);
    return 0;
  }
  if (!s->out_done && s->upstream != nullptr) {
    // Reset before its response ended: its upstream's work stops now (as client_abort_watch
    // does for an HTTP/1.1 client that goes away).
    error_code ignored;
    s->upstream->close(ignored);
  }
  s->notify();
  return 0;
}

ssize_t h2_connection::read_body(h2_stream& s, std::uint8_t* buf, std::size_t length,
                                 std::uint32_t* flags) {
  const std::size_t available = s.body_out.size() - s.out_at;
  const std::size_t n = std::min(length, available);
  if (n == 0 && !s.out_end) {
    s.deferred = true;
    return NGHTTP2_ERR_DEFERRED;
  }
  std::memcpy(buf, s.body_out.data() + s.out_at, n);
  s.out_at += n;
  s.bytes_out += n;
  if (s.out_at == s.body_out.size()) {
    s.body_out.clear();
    s.out_at = 0;
    if (s.out_end) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      s.out_done = true;
      if (!s.response_trailers.empty()) {
        // The upstream's trailers follow the body (RFC 9113 §8.1).
        std::vector<nghttp2_nv> nv;
        std::string_view rest = s.response_trailers;
        while (!rest.empty()) {
          const auto end = rest.find("\r\n");
          const std::string_view line = rest.substr(0, end);
          rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 2);
          const auto colon = line.find(':');
          if (colon == std::string_view::npos) continue;
          const std::string_view value = core::trim(line.substr(colon + 1));
          nv.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(line.data())),
                        reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), colon,
                        value.size(), NGHTTP2_NV_FLAG_NONE});
        }
        if (!nv.empty() && nghttp2_submit_trailer(session_, s.id, nv.data(), nv.size()) == 0) {
          *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        }
      }
    }
  }
  s.notify();  // room for more
  return static_cast<ssize_t>(n);
}

void h2_connection::respond(h2_stream& s, std::string_view head, bool body) {
  // The head as rendered for an HTTP/1.1 client: its status from the status line, its fields
  // with names in lowercase (RFC 9113 §8.2.1) and without those HTTP/2 forbids. Names are
  // lowercased into `names`, sized first so that no pointer into it moves; values stay in
  // `head`. nghttp2 copies both.
  std::string& names = s.sc->response_fields;  // free once the head is rendered
  names.resize(head.size());
  char* to = names.data();
  std::vector<nghttp2_nv>& nv = nv_;
  nv.clear();
  const char* at = head.data();
  const char* const end = at + head.size();
  // The end of the line that starts at `at` (its CR LF, or the end of the head).
  auto line_end = [&] {
    const void* lf = std::memchr(at, '\n', static_cast<std::size_t>(end - at));
    return lf == nullptr ? end : static_cast<const char*>(lf);
  };
  const char* eol = line_end();
  const std::string_view code =
      eol - at >= 12 ? std::string_view(at + 9, 3) : std::string_view("502");
  s.status = static_cast<unsigned>((code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0'));
  static constexpr std::string_view status_name = ":status";
  nv.push_back({reinterpret_cast<std::uint8_t*>(const_cast<char*>(status_name.data())),
                reinterpret_cast<std::uint8_t*>(const_cast<char*>(code.data())), status_name.size(),
                code.size(), NGHTTP2_NV_FLAG_NONE});
  while (eol != end) {
    at = eol + 1;
    eol = line_end();
    const char* const stop = eol != at && eol[-1] == '\r' ? eol - 1 : eol;
    const void* colon = std::memchr(at, ':', static_cast<std::size_t>(stop - at));
    if (colon == nullptr || colon == at) continue;
    const std::string_view name(at, static_cast<std::size_t>(static_cast<const char*>(colon) - at));
    if (connection_specific(name)) continue;
    char* const lower = to;
    for (const char c : name)
      *to++ = static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    const std::string_view value = core::trim(std::string_view(
        name.data() + name.size() + 1, static_cast<std::size_t>(stop - at) - name.size() - 1));
    nv.push_back({reinterpret_cast<std::uint8_t*>(lower),
                  reinterpret_cast<std::uint8_t*>(const_cast<char*>(value.data())), name.size(),
                  value.size(), NGHTTP2_NV_FLAG_NONE});
  }
  nghttp2_data_provider provider{};
  provider.read_callback = body_source;
  s.submitted = true;
  if (!body) s.out_done = true;
  nghttp2_submit_response(session_, s.id, nv.data(), nv.size(), body ? &provider : nullptr);
  // A body still to come is sent with its first bytes (resume()), in the same write.
  if (!body || s.out_end || !s.body_out.empty()) send_soon();
}

void h2_connection::resume(h2_stream& s) {
  if (s.closed) return;
  if (s.deferred) {
    s.deferred = false;
    nghttp2_session_resume_data(session_, s.id);
  }
  send_soon();
}

void h2_connection::consumed(h2_stream& s, std::size_t n) {
  if (n == 0) return;
  if (s.closed) {
    nghttp2_session_consume_connection(session_, n);
  } else {
    nghttp2_session_consume(session_, s.id, n);
  }
  wake_writer();
}

void h2_connection::reset(h2_stream& s, std::uint32_t code) {
  if (s.closed) return;
  nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, code);
  wake_writer();
}

void h2_connection::finished(h2_stream& s) {
  // A response sent whole to a client still sending its body: it may stop (RFC 9113 §8.1).
  if (!s.closed && !s.request_ended) {
    nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, s.id, NGHTTP2_NO_ERROR);
  }
  // However it was closed (by nghttp2, by a reset of ours, by the connection's end), nghttp2
  // must not reach it again (found by fuzz_h2_frames); a stream nghttp2 forgot refuses this.
  nghttp2_session_set_stream_user_data(session_, s.id, nullptr);
  // What the stream received and did not pass on goes back to the connection's window.
  if (!s.body_in.empty()) nghttp2_session_consume_connection(session_, s.body_in.size());
  const std::size_t i = s.place;
  streams_[i] = std::move(streams_.back());
  streams_[i]->place = i;
  streams_.pop_back();  // `s` is gone
  wake_writer();
  if (streams_.empty()) {
    ended_.cancel();
    arm();
  }
}

void h2_connection::wake_writer() noexcept {
  // Nothing to send and the session not at its end (when the writer closes the sending side):
  // the writer stays asleep, not woken through the scheduler for nothing.
  if (out_at_ == out_.size() && nghttp2_session_want_write(session_) == 0 &&
      nghttp2_session_want_read(session_) != 0) {
    return;
  }
  wake_pending_ = true;
  wake_.cancel();
}

void h2_connection::arm() {
  if (writing_) return;  // the write's own deadline stands
  const auto& limits = w.current->config.limits;
  if (goaway_due_) {
    watch.client_for(std::chrono::seconds(1));
  } else if (streams_.empty()) {
    watch.client_for(honest_ + premature_ == 0 ? limits.header_timeout : limits.keepalive_timeout);
  } else {
    watch.rest();
  }
}

void h2_connection::close_with(std::uint16_t) {
  if (goaway_due_) return;
  nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                        nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                        nullptr, 0);
  wake_writer();
}

void h2_connection::due(void* context) {
  h2_connection& c = *static_cast<h2_connection*>(context);
  if (c.goaway_due_ || c.writing_) {
    // A GOAWAY the client did not act on, or a write it does not read: the end.
    c.watch.close_client();
    return;
  }
  // Idle for keepalive_timeout: told so (RFC 9113 §6.8), then closed.
  nghttp2_session_terminate_session(c.session_, NGHTTP2_NO_ERROR);
  c.goaway_due_ = true;
  c.wake_writer();
  c.arm();
}

void h2_connection::calm(h2_abuse why) {
  if (abuse_ != h2_abuse::none) return;
  abuse_ = why;
  w.counters.h2_goaways[l.metric][static_cast<std::size_t>(why) - 1].add();
  // Everything the client sends after this is ignored (nghttp2 reads past it).
  nghttp2_session_terminate_session(
      session_, why == h2_abuse::protocol ? NGHTTP2_PROTOCOL_ERROR : NGHTTP2_ENHANCE_YOUR_CALM);
  goaway_due_ = true;
  static constexpr std::array<std::string_view, 5> names = {"", "rapid reset", "frame flood",
                                                            "oversized header block", "protocol"};
  spdlog::debug("HTTP/2 connection from {} ended: {}", peer_text,
                names[static_cast<std::size_t>(why)]);
  if (why != h2_abuse::protocol) charge_abuse();
  wake_writer();
}

void h2_connection::charge_abuse() {
  const auto snap = w.current;
  // Behind a trusted balancer the peer is many clients: only the last one served is charged.
  if (!last_client && core::in_any(snap->config.trusted_proxies, peer)) return;
  auto rec = std::make_unique<admission::record>();
  rec->client = last_client.value_or(peer);
  rec->who = policy::subjects_of(rec->client, snap->policy.prefixes());
  record_violation(w, *snap, *rec, snap->policy.violations().protocol_abuse, w.shared.clock.now());
}

}  // namespace tollgate::net
