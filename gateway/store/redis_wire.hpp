#pragma once
/// What the Redis store says to Redis and how it reads the answers (docs/design.md §11), without a
/// socket: the GCRA script, key names, the command of one decision, the decoding of its reply,
/// Cluster slots and redirections. RESP itself is hiredis's (formatting and reading).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gateway/limit/request.hpp"

struct redisReply;
struct redisReader;

namespace tollgate::store::redis {

/// The script that evaluates and commits every limit of one request, all-or-nothing, with
/// the GCRA of docs/design.md §3 in integer nanoseconds on Redis's clock (`TIME`): gateway/store/
/// gcra.lua, compiled in.
///
/// KEYS: one per group of the request. ARGV[1]: "" (Redis time) or a decimal nanosecond
/// instant (tests only); ARGV[2]: the cost; then five per group: shadow (0|1), T and burst of
/// the short tier, T and burst of the long tier (burst 0: no such tier).
/// Reply: admitted, shadow_limited, Redis's now (seconds, nanoseconds), then per group and
/// tier: allowed (1, 0; -1 when the tier is absent), tat − now (seconds, nanoseconds).
/// Stored value per key: both tiers' tat as "%011d%09d %011d%09d" (seconds, nanoseconds), and
/// the key expires when its later tat passes (PXAT), so idle keys cost no memory. A quota's
/// key holds "q<window end, Unix s> <count>" and expires at the window's end (PXAT: Redis's
/// now plus the milliseconds the gateway's clock has to run to it). A quota's window is the
/// gateway's (docs/design.md §11): the script keeps the later of the stored window and the one
/// asked for, so replicas never go back to a window another has closed.
std::string_view gcra_script() noexcept;
/// SHA-1 of gcra_script() in lower-case hex (what EVALSHA names it by).
const std::string& gcra_sha() noexcept;

/// The refund script of Redis Cluster (docs/design.md §11; gateway/store/refund.lua): gives back
/// what a part of a decision committed when another part, in another slot, rejected the request.
/// Per key and tier it takes r = min(c·T, max(0, tat_written − now)) off the stored tat, which
/// provably never lowers it below the tat of the same admitted requests without the refunded one; a
/// key whose tats have both passed is deleted.
///
/// KEYS: the keys to refund. ARGV per key and tier (short, long): c·T and the tat written, each
/// as seconds and nanoseconds (0 0 0 0: nothing for that tier). A quota's key: the cost, 0, the
/// end of the window it was counted in (Unix seconds), then five zeros; its count loses the
/// cost if the key still holds that window, and keeps its expiry.
std::string_view refund_script() noexcept;
/// SHA-1 of refund_script().
const std::string& refund_sha() noexcept;

/// The Redis Cluster slot of `key`: CRC16 (XMODEM) of its hash tag, modulo 16384.
std::uint16_t key_slot(std::string_view key) noexcept;
/// CRC16/XMODEM of `s` (the Cluster specification's).
std::uint16_t crc16(std::string_view s) noexcept;

/// Appends the Redis key of group `g` of `req` to `out`:
/// - address levels: `{<prefix><coarse network>}<state name>:<prefix text>`, so that one
///   request's address keys share a Cluster slot, e.g.
///   `{tg:198.51.100.0/24}auth/ipv4_individual/32:198.51.100.7`;
/// - other keys: `{<prefix><state name>:<hashed value, hex>}`; a global limit:
///   `{<prefix><state name>}`.
void append_key(std::string& out, std::string_view prefix, const limit::limit_request& req,
                std::uint8_t g);

/// hiredis's RESP reader with bounds (hiredis 0.14 allocates an array's element pointers when
/// its header arrives: a reply of "*2000000000" would ask for 16 GB): an array may declare at
/// most 65 536 elements, and one reply at most 262 144 in all; past either the reader fails
/// (the connection is then closed). Its replies live in an arena of the reader's: one is valid
/// until the next redisReaderGetReply, and is never freed by the caller.
struct reader_free {
  void operator()(redisReader* r) const noexcept;
};
using reader_ptr = std::unique_ptr<redisReader, reader_free>;
reader_ptr make_reader();
/// Most bytes a connection's reader may hold unparsed (a reply not yet complete): past it, the
/// connection is closed.
inline constexpr std::size_t max_unparsed_bytes = 4 * 1024 * 1024;

/// The arguments of one script call, pointing into `storage`.
struct command_args {
  std::string storage;               ///< the arguments, back to back
  std::vector<const char*> argv;     ///< for redisFormatCommandArgv
  std::vector<std::size_t> lengths;  ///< of each argument
  int count = 0;                     ///< arguments used
  // Scratch of the builders (kept to keep their capacity).
  std::vector<std::size_t> ends, key_ends, key_slots, key_table, spec_slots;
  std::vector<const limit::limit_spec*> specs;
  std::vector<core::nanos> delays;  ///< per entry of `specs`: the delay its requests ask for
  std::string keys;
};

/// Groups of a request, as bits (bit g: group g).
using group_mask = std::uint16_t;
inline constexpr group_mask all_groups = 0xffff;

/// One request of a batch: the request and which of its groups the call decides.
struct batch_entry {
  const limit::limit_request* req;
  group_mask groups = all_groups;
};
/// Most requests one script call decides.
inline constexpr std::size_t max_batch = 64;

/// Fills `out` with the script call deciding `batch` in order (each entry all-or-nothing, as
/// if one after the other): KEYS each distinct key once; ARGV: `now_arg` ("" in production:
/// Redis time), the batch's distinct limits (their number, then per limit its kind (0 GCRA, 1
/// GCRA shadowed, 2 quota, 3 quota shadowed), T and burst of each tier and the delay a request
/// may be held for (docs/design.md §16), or a quota's limit and four zeros), the requests
/// (their number, then per request its cost, its number of groups and per group its key's and
/// its limit's index, and for a quota its window's end in Unix seconds and the milliseconds
/// from the request's now to it).
/// Reply: Redis's now (seconds, nanoseconds), then per request admitted, shadow_limited, and
/// per group and tier allowed (1, 0; -1: no such tier) and tat − now (seconds, nanoseconds);
/// per quota group its count (−count − 1 when it rejected) and its window's end (seconds).
/// A request admitted with a wait is told by its tiers: tat − now past burst·T by the wait.
void build_call(command_args& out, std::string_view verb, std::string_view script_ref,
                std::string_view prefix, std::span<const batch_entry> batch,
                std::string_view now_arg = {});
/// The same for a batch of one request (its groups in `groups`).
void build_call(command_args& out, std::string_view verb, std::string_view script_ref,
                std::string_view prefix, const limit::limit_request& req,
                std::string_view now_arg = {}, group_mask groups = all_groups);

/// What the script said of one tier.
/// A quota's reply is in its group's first tier: `d` is its window's end − the request's now
/// (both on the gateway's clock), `used` its count (committed if allowed, else stored).
struct tier_reply {
  std::int8_t allowed = -1;  ///< 1 allowed, 0 rejected, -1 no such tier
  std::uint32_t used = 0;    ///< a quota's count
  core::nanos d = 0;         ///< tat − now on Redis's clock (new tat if allowed, else stored)
};
/// What the script said of the groups it decided.
struct script_reply {
  bool admitted = false;        ///< its enforced groups allowed (and were committed)
  bool shadow_limited = false;  ///< admitted, but one of its shadowed groups rejected
  core::nanos redis_now = 0;    ///< Redis's clock when it ran
  std::array<std::array<tier_reply, 2>, limit::max_groups> tiers{};  ///< by request group
};
/// Reads the script's reply for a batch of one, the groups `groups` of `req`, into `out`
/// (other groups are left alone). False when the reply does not have the script's shape.
bool read_reply(const redisReply& reply, const limit::limit_request& req, group_mask groups,
                script_reply& out);
/// For a batch: checks the reply's size for `batch` and reads Redis's now.
bool read_now(const redisReply& reply, std::span<const batch_entry> batch, core::nanos& now);
/// For a batch: reads the entry `e` whose part of the reply starts at element `at` (moved past
/// it) into `out` (redis_now not set).
bool read_entry(const redisReply& reply, std::size_t& at, const batch_entry& e, script_reply& out);
/// The decision for `req` from every tier's reply in `r` (outcomes in request order, tats on
/// the gateway's clock: req.now + d), admitted and shadow_limited as given, binding chosen.
void assemble(const limit::limit_request& req, const script_reply& r, bool admitted,
              bool shadow_limited, limit::decision& out);

/// Fills `out` with the refund call for the groups `groups` of `req`, whose tats the part's
/// script wrote at Redis time `r.redis_now` (+ each tier's d).
void build_refund(command_args& out, std::string_view prefix, const limit::limit_request& req,
                  group_mask groups, const script_reply& r);

/// Appends `args` as one RESP command to `out` (as redisFormatCommandArgv would write it).
/// Always true.
bool append_command(std::string& out, const command_args& args);
/// Formats a command of plain arguments and appends it to `out`.
bool append_command(std::string& out, std::initializer_list<std::string_view> args);

/// Reads the script's reply into `out` for `req` (the outcomes' tats on the gateway's clock,
/// req.now + the relative time Redis returned) and chooses the binding tiers. False when the
/// reply does not have the script's shape (then `out` is unspecified).
bool decode_decision(const redisReply& reply, const limit::limit_request& req, limit::decision& out,
                     core::nanos* redis_now = nullptr);

/// A `MOVED` or `ASK` error reply: where the slot's keys are (now or for this command).
struct redirect {
  bool ask = false;        ///< ASK: ask that node once (with ASKING), keep the slot map
  std::uint16_t slot = 0;  ///< the slot
  std::string host;        ///< the node
  std::uint16_t port = 0;  ///< its port
};
/// Parses `MOVED 3999 127.0.0.1:6381` or `ASK ...`; nothing for anything else.
std::optional<redirect> parse_redirect(std::string_view error);

/// One range of slots and the primary that serves it (CLUSTER SLOTS).
struct slot_range {
  std::uint16_t first = 0, last = 0;  ///< inclusive
  std::string host;                   ///< the primary
  std::uint16_t port = 0;             ///< its port
};
/// The ranges of a CLUSTER SLOTS reply ([[start, end, [host, port, id, ...], replicas...], ...]);
/// an empty host (or "?") is `asked`, the node that answered. Malformed entries are skipped;
/// nothing when the reply is not an array.
std::vector<slot_range> parse_slot_map(const redisReply& reply, const std::string& asked);

/// Classifies an error reply for the error metric: "noscript", "oom", "busy", "redirect",
/// "tryagain", "clusterdown", or "script" for anything else.
std::string_view error_kind(std::string_view error) noexcept;

}  // namespace tollgate::store::redis
