#pragma once
/// One HTTP/2 connection and its streams (docs/design.md §17), over nghttp2's session API
/// driven from the worker's event loop: a reader feeds it the client's bytes, a writer sends
/// what it has to say, and each stream is a request served by its own coroutine
/// (h2_stream.cpp). All of it runs on the connection's worker: nothing is locked. Internal to
/// net/.

#include <nghttp2/nghttp2.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/admission/request_view.hpp"
#include "gateway/net/scratch.hpp"
#include "gateway/net/worker.hpp"

namespace tollgate::net {

class h2_connection;

/// One stream: the request a client sent on it, its body as it arrives, and the response on
/// its way out. Owned by its connection; lives until its coroutine ends.
struct h2_stream final : admission::header_source {
  h2_stream(h2_connection& c, std::int32_t stream_id);
  ~h2_stream();
  h2_stream(const h2_stream&) = delete;
  h2_stream& operator=(const h2_stream&) = delete;

  h2_connection& conn;    ///< its connection
  std::int32_t id;        ///< its stream identifier
  std::size_t place = 0;  ///< its index in the connection's list

  // The request head, as received.
  std::string method;     ///< :method
  std::string path;       ///< :path
  std::string authority;  ///< :authority (else Host)
  std::string scheme;     ///< :scheme
  /// A regular field, by offsets into `store` (which grows while the head arrives).
  struct field_at {
    std::uint32_t name, name_size, value, value_size;
  };
  std::string store;                            ///< names and values of the fields
  std::vector<field_at> fields;                 ///< in the order received; cookies joined into one
  std::uint64_t head_bytes = 0;                 ///< its size as RFC 9113 §6.5.2 counts it
  bool too_large = false;                       ///< past max_header_bytes: answered 431
  bool head_done = false;                       ///< the header block is complete
  bool trailers_coming = false;                 ///< a second header block (trailers) is being read
  std::optional<std::uint64_t> content_length;  ///< as announced

  // The request body, from DATA frames, until the stream's coroutine passes it on.
  std::string body_in;           ///< received and not yet passed on
  std::uint64_t body_bytes = 0;  ///< received in all
  bool request_ended = false;    ///< END_STREAM received
  bool discard_body = false;     ///< nobody will read the body: consumed as it comes
  std::string request_trailers;  ///< trailer lines for the upstream ("name: value\r\n" each)

  // The response.
  std::string body_out;           ///< to be sent as DATA
  std::size_t out_at = 0;         ///< of body_out, already handed to nghttp2
  bool out_end = false;           ///< nothing will be added to body_out
  bool out_done = false;          ///< nghttp2 has taken the last byte (and the trailers)
  bool deferred = false;          ///< nghttp2 waits for data (NGHTTP2_ERR_DEFERRED)
  bool submitted = false;         ///< the response head was submitted
  std::string response_trailers;  ///< trailer lines of the upstream's response, to relay
  unsigned status = 0;            ///< of the response submitted
  std::uint64_t bytes_out = 0;    ///< DATA bytes handed to nghttp2

  // Its state.
  bool closed = false;                     ///< nghttp2 closed the stream (done, or reset)
  bool reset_by_client = false;            ///< the client sent RST_STREAM
  timer wake;                              ///< the coroutine waits on it; cancelled to wake it
  std::shared_ptr<deadline_watch> watch;   ///< bounds each phase of this stream
  tcp_socket* upstream = nullptr;          ///< its upstream connection, closed when reset
  std::unique_ptr<connection_scratch> sc;  ///< buffers while it is served

  /// Wakes the stream's coroutine from whatever it waits for.
  void notify() noexcept { wake.cancel(); }

  // admission::header_source: names compared case-insensitively; Host falls back to
  // :authority, which serves as Host (RFC 9113 §8.3.1).
  std::string_view value(std::string_view name) const override;
  std::size_t count(std::string_view name) const override;
  void each(std::string_view name, void (*f)(void*, std::string_view),
            void* context) const override;

  /// The name and value of field `f`.
  std::string_view name_of(const field_at& f) const noexcept {
    return {store.data() + f.name, f.name_size};
  }
  std::string_view value_of(const field_at& f) const noexcept {
    return {store.data() + f.value, f.value_size};
  }
};

/// Abuse a connection is ended for (metrics::h2_goaway).
enum class h2_abuse : std::uint8_t { none, rapid_reset, flood, header_block, protocol };

/// One HTTP/2 connection. Shared by its reader, its writer and its streams' coroutines, so
/// that whichever ends last (or is destroyed last when the worker stops) frees it.
/// In its worker's tunnel_list while it runs: a drain (SIGTERM) tells it the gateway is going
/// away, as it tells WebSockets.
class h2_connection : public std::enable_shared_from_this<h2_connection>,
                      public tunnel_list::member {
 public:
  h2_connection(worker& w, deadline_watch& watch, const listener_info& l, core::address peer);
  ~h2_connection();
  h2_connection(const h2_connection&) = delete;
  h2_connection& operator=(const h2_connection&) = delete;

  /// Serves the connection, starting with `initial` (bytes already read), until it ends and
  /// every stream's coroutine has ended.
  task<void> run(std::string initial);

  // For streams (h2_stream.cpp).
  /// Submits the response head `head` (an HTTP/1.1 status line and fields, as the gateway
  /// renders them for HTTP/1.1 clients: connection-specific fields are dropped, names
  /// lowercased) for `s`, with a body (`body`: body_out is read) or without. A body not in
  /// body_out yet is sent with its first bytes: resume() when they come (or before waiting
  /// for them).
  void respond(h2_stream& s, std::string_view head, bool body);
  /// body_out of `s` grew, or ended, or what was submitted should go before a wait: nghttp2
  /// sends on.
  void resume(h2_stream& s);
  /// `n` bytes of the request body of `s` were passed on: the client may send that many more.
  void consumed(h2_stream& s, std::size_t n);
  /// Resets `s` with `code` (RFC 9113 §7).
  void reset(h2_stream& s, std::uint32_t code);
  /// The coroutine of `s` has ended: `s` goes.
  void finished(h2_stream& s);
  /// A watch over a stream's upstream phases, its watchdog running: the one a finished stream
  /// left, else a new one. One per connection in the usual case, not one (and its timer's arming
  /// and cancelling) per stream.
  std::shared_ptr<deadline_watch> take_watch();
  /// A finished stream's watch: kept for the next stream (one), ended otherwise.
  void keep_watch(std::shared_ptr<deadline_watch> watch) noexcept;
  /// A stream completed honestly (a response sent whole).
  void completed() noexcept { ++honest_; }
  /// The gateway is going away (tunnel_list::member): GOAWAY NO_ERROR naming the last stream
  /// taken; those streams are served to their end, then the connection closes.
  void close_with(std::uint16_t code) override;

  worker& w;                    ///< its worker
  deadline_watch& watch;        ///< the connection's
  const listener_info& l;       ///< its listener
  const core::address peer;     ///< its peer
  const std::string peer_text;  ///< the same as text
  /// The address the last stream was charged to (docs/design.md §7): the client the
  /// connection's abuse is charged to; none before a stream was admitted.
  std::optional<core::address> last_client;

  // nghttp2's callbacks (h2_connection.cpp).
  int on_begin_frame(const nghttp2_frame_hd& hd);
  int on_begin_headers(const nghttp2_frame& f);
  int on_header(const nghttp2_frame& f, std::string_view name, std::string_view value);
  int on_frame_recv(const nghttp2_frame& f);
  int on_data_chunk(std::int32_t id, const std::uint8_t* data, std::size_t n);
  int on_stream_close(std::int32_t id, std::uint32_t code);
  ssize_t read_body(h2_stream& s, std::uint8_t* buf, std::size_t length, std::uint32_t* flags);

 private:
  /// The writer: sends what nghttp2 has to send whenever there is some, until the session
  /// wants nothing more.
  task<void> writer(std::shared_ptr<h2_connection> self);
  /// Wakes the writer, when it has something to send or the session has ended.
  void wake_writer() noexcept;
  /// Sends what nghttp2 has to send: at once when the connection serves one stream (plain,
  /// outside nghttp2's callbacks, the writer idle), by the writer otherwise.
  void send_soon();
  /// Takes up to write_gather bytes from nghttp2 into out_.
  void gather();
  /// Ends the connection for `why` with GOAWAY ENHANCE_YOUR_CALM (PROTOCOL_ERROR for a
  /// protocol error): counted, and a violation for its client.
  void calm(h2_abuse why);
  /// The connection's deadline for what it is doing now.
  void arm();
  /// The watchdog's call when the connection's deadline passes.
  static void due(void* self);
  /// Charges the connection's abuse to its client as a protocol_abuse violation.
  void charge_abuse();

  nghttp2_session* session_ = nullptr;
  std::vector<std::unique_ptr<h2_stream>> streams_;  ///< alive (coroutine running)
  timer wake_;                                       ///< the writer waits on it
  timer ended_;                      ///< run() waits on it for the writer and the streams
  bool wake_pending_ = false;        ///< something to send came while the writer was busy
  bool writing_ = false;             ///< the writer is in a write
  bool writer_done_ = false;         ///< the writer has ended
  bool reading_done_ = false;        ///< the reader has ended
  bool goaway_due_ = false;          ///< the connection ends after what is queued is sent
  h2_abuse abuse_ = h2_abuse::none;  ///< why it was ended, if for abuse
  std::string out_;                  ///< bytes being written
  std::size_t out_at_ = 0;           ///< of out_, written (what send_soon left to the writer)
  bool receiving_ = false;           ///< within nghttp2_session_mem_recv (its callbacks)
  // The abuse guard (docs/design.md §17).
  std::uint64_t premature_ = 0;  ///< streams reset by the client before their response ended
  std::uint64_t honest_ = 0;     ///< streams whose response was sent whole
  double flood_tokens_ = 0;      ///< budget of frames that carry no request
  std::chrono::steady_clock::time_point flood_at_;  ///< when the budget was last refilled
  std::uint64_t block_bytes_ = 0;                   ///< of the header block being read, on the wire
  std::uint32_t block_frames_ = 0;                  ///< CONTINUATION frames of that block
  std::uint64_t max_header_bytes_ = 0;              ///< limits.max_header_bytes when it started
  std::uint32_t max_streams_ = 100;  ///< limits.max_concurrent_streams when it started
  std::vector<nghttp2_nv> nv_;       ///< respond()'s fields for nghttp2, kept from one to the next
  std::shared_ptr<deadline_watch> spare_watch_;  ///< see take_watch
  bool closing_ = false;                         ///< being destroyed: watches are ended
};

/// Serves stream `s` of `c` (h2_stream.cpp): admission, then the gateway's answer or the
/// upstream's.
task<void> run_stream(std::shared_ptr<h2_connection> c, h2_stream& s);
/// Starts run_stream for `s` on its worker (h2_io.cpp).
void spawn_stream(std::shared_ptr<h2_connection> c, h2_stream& s);

}  // namespace tollgate::net
