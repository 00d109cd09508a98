#include "gateway/store/redis_wire.hpp"

#include <hiredis/hiredis.h>
#include <openssl/sha.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "gateway/core/address.hpp"
#include "gateway/core/calendar.hpp"
#include "gateway/core/text.hpp"

namespace tollgate::store::redis {

namespace {

std::string sha1_hex(std::string_view s) {
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(s.data()), s.size(), digest);
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  for (const unsigned char b : digest) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

void append_ipv4(std::string& out, std::uint32_t a) {
  for (int i = 3; i >= 0; --i) {
    core::append_decimal(out, (a >> (8 * i)) & 0xff);
    if (i != 0) out += '.';
  }
}

void append_hex(std::string& out, std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  char buf[16];
  for (int i = 15; i >= 0; --i, v >>= 4)
    buf[i] = digits[v & 15];
  out.append(buf, 16);
}

void append_address(std::string& out, bool v6, std::uint64_t key) {
  if (v6) {
    out += core::address::from_v6(key, 0).to_string();
  } else {
    append_ipv4(out, static_cast<std::uint32_t>(key));
  }
}

/// A reply element that is an integer, or nothing.
bool integer_at(const redisReply& r, std::size_t i, long long& v) {
  if (i >= r.elements || r.element[i] == nullptr || r.element[i]->type != REDIS_REPLY_INTEGER) {
    return false;
  }
  v = r.element[i]->integer;
  return true;
}

/// The bounded reader: hiredis's parser, with reply objects of ours (the same redisReply
/// layout) taken from an arena that starts again with each top-level reply, so that reading a
/// reply allocates nothing once the arena has grown to the replies' size, and with a check of
/// the elements an array declares. Lives in the reader's privdata (hiredis copies it into each
/// task).
struct reader_state {
  redisReplyObjectFunctions fn{};  ///< ours
  std::size_t elements = 0;        ///< declared by the reply being read
  /// The arena: blocks of block_size (a larger object gets a block of its own); the first is
  /// kept from reply to reply, later ones are freed when the next reply starts.
  static constexpr std::size_t block_size = 64 * 1024;
  std::vector<std::unique_ptr<std::byte[]>> blocks;
  std::size_t used = block_size;  ///< in the last block

  void* take(std::size_t n) {
    n = (n + 15) & ~std::size_t{15};
    if (blocks.empty() || used + n > block_size) {
      blocks.push_back(std::make_unique<std::byte[]>(std::max(n, block_size)));
      used = 0;
    }
    void* p = blocks.back().get() + used;
    used += n;
    std::memset(p, 0, n);
    return p;
  }
  void restart() {
    if (blocks.size() > 1) blocks.resize(1);
    used = 0;
  }
};
constexpr int max_array_elements = 65536;
constexpr std::size_t max_reply_elements = 1u << 18;

reader_state* state_of(const redisReadTask* t) {
  return static_cast<reader_state*>(t->privdata);
}

/// A reply object in the arena, linked into its parent array.
redisReply* make_object(const redisReadTask* t, int type) {
  reader_state* st = state_of(t);
  if (t->parent == nullptr) {  // a new reply: the previous one has been used and let go
    st->elements = 0;
    st->restart();
  }
  auto* r = static_cast<redisReply*>(st->take(sizeof(redisReply)));
  r->type = type;
  if (t->parent != nullptr) {
    auto* parent = static_cast<redisReply*>(t->parent->obj);
    if (parent == nullptr || parent->type != REDIS_REPLY_ARRAY || t->idx < 0 ||
        static_cast<std::size_t>(t->idx) >= parent->elements) {
      return nullptr;
    }
    parent->element[t->idx] = r;
  }
  return r;
}
void* create_array(const redisReadTask* t, int elements) {
  reader_state* st = state_of(t);
  if (elements > max_array_elements) return nullptr;  // the reader reports "out of memory"
  if (t->parent == nullptr) st->elements = 0;
  st->elements += static_cast<std::size_t>(elements < 0 ? 0 : elements);
  if (st->elements > max_reply_elements) return nullptr;
  redisReply* r = make_object(t, REDIS_REPLY_ARRAY);
  if (r == nullptr) return nullptr;
  if (elements > 0) {
    r->elements = static_cast<std::size_t>(elements);
    r->element = static_cast<redisReply**>(
        st->take(sizeof(redisReply*) * static_cast<std::size_t>(elements)));
  }
  return r;
}
void* create_string(const redisReadTask* t, char* s, std::size_t n) {
  redisReply* r = make_object(t, t->type);
  if (r == nullptr) return nullptr;
  r->str = static_cast<char*>(state_of(t)->take(n + 1));
  std::memcpy(r->str, s, n);
  r->len = n;
  return r;
}
void* create_integer(const redisReadTask* t, long long v) {
  redisReply* r = make_object(t, REDIS_REPLY_INTEGER);
  if (r != nullptr) r->integer = v;
  return r;
}
void* create_nil(const redisReadTask* t) {
  return make_object(t, REDIS_REPLY_NIL);
}
void free_object(void*) {}  // the arena owns every object

}  // namespace

void reader_free::operator()(redisReader* r) const noexcept {
  auto* st = static_cast<reader_state*>(r->privdata);
  redisReaderFree(r);
  delete st;
}

reader_ptr make_reader() {
  auto* st = new reader_state;
  st->fn.createArray = create_array;
  st->fn.createString = create_string;
  st->fn.createInteger = create_integer;
  st->fn.createNil = create_nil;
  st->fn.freeObject = free_object;
  redisReader* r = redisReaderCreateWithFunctions(&st->fn);
  if (r == nullptr) {
    delete st;
    return nullptr;
  }
  r->privdata = st;
  return reader_ptr(r);
}

// gcra_script() and refund_script(): the generated redis_scripts.cpp, from gcra.lua and
// refund.lua.

const std::string& gcra_sha() noexcept {
  static const std::string sha = sha1_hex(gcra_script());
  return sha;
}

const std::string& refund_sha() noexcept {
  static const std::string sha = sha1_hex(refund_script());
  return sha;
}

std::uint16_t crc16(std::string_view s) noexcept {
  std::uint16_t crc = 0;
  for (const char ch : s) {
    crc ^= static_cast<std::uint16_t>(static_cast<unsigned char>(ch)) << 8;
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                                : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

std::uint16_t key_slot(std::string_view key) noexcept {
  // The hash tag: what lies between the first '{' and the next '}', when not empty.
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return crc16(key) & 16383;
}

namespace {

/// The request's coarse network as the hash tag's text ("198.51.100.0/24", "2001:db8::/48").
void append_network(std::string& out, const limit::limit_request& req) {
  append_address(out, req.v6, req.network);
  out += '/';
  core::append_decimal(out, req.network_bits);
}

}  // namespace

void append_key(std::string& out, std::string_view prefix, const limit::limit_request& req,
                std::uint8_t g) {
  const limit::limit_group& group = req.groups[g];
  const limit::limit_spec& spec = *group.spec;
  out += '{';
  out += prefix;
  switch (spec.source) {
    case limit::key_source::address:
      append_network(out, req);
      out += '}';
      out += spec.state_name;
      out += ':';
      append_address(out, req.v6, group.key);
      return;
    case limit::key_source::global:
      out += spec.state_name;
      out += '}';
      return;
    default:
      out += spec.state_name;
      out += ':';
      append_hex(out, group.key);
      out += '}';
      return;
  }
}

namespace {

/// Writes arguments back to back into `out.storage`, then points argv at them (the string
/// may move while it grows).
class args_writer {
 public:
  explicit args_writer(command_args& out) : out_(out) {
    out_.storage.clear();
    ends_.clear();
  }
  std::string& text() { return out_.storage; }
  void end_arg() { ends_.push_back(out_.storage.size()); }
  void number(std::int64_t v) {
    core::append_decimal(out_.storage, v);
    end_arg();
  }
  void finish() {
    out_.argv.resize(ends_.size());
    out_.lengths.resize(ends_.size());
    std::size_t start = 0;
    for (std::size_t i = 0; i < ends_.size(); ++i) {
      out_.argv[i] = out_.storage.data() + start;
      out_.lengths[i] = ends_[i] - start;
      start = ends_[i];
    }
    out_.count = static_cast<int>(ends_.size());
  }

 private:
  command_args& out_;
  std::vector<std::size_t>& ends_ = out_.ends;
};

bool in(group_mask m, std::uint8_t g) {
  return (m >> g & 1) != 0;
}

}  // namespace

void build_call(command_args& out, std::string_view verb, std::string_view script_ref,
                std::string_view prefix, std::span<const batch_entry> batch,
                std::string_view now_arg) {
  // KEYS first (each distinct key once), then ARGV, which names keys by their index.
  std::string& keys = out.keys;
  keys.clear();
  auto& slots = out.key_slots;  // per entry and group: the key's 1-based index
  slots.clear();
  auto& ends = out.key_ends;  // where each distinct key ends in `keys`
  ends.clear();
  // Distinct keys by open addressing over `keys` (at least twice as many places as the
  // batch has keys): nothing is allocated per key.
  std::size_t places = 16;
  for (const batch_entry& e : batch)
    places += 2 * e.req->group_count;
  places = std::bit_ceil(places);
  auto& table = out.key_table;
  table.assign(places, 0);
  auto key_at = [&](std::size_t i) {  // 1-based
    const std::size_t start = i == 1 ? 0 : ends[i - 2];
    return std::string_view(keys.data() + start, ends[i - 1] - start);
  };
  for (const batch_entry& e : batch) {
    for (std::uint8_t g = 0; g < e.req->group_count; ++g) {
      if (!in(e.groups, g)) continue;
      const std::size_t start = keys.size();
      append_key(keys, prefix, *e.req, g);
      const std::string_view name(keys.data() + start, keys.size() - start);
      std::size_t h = std::hash<std::string_view>{}(name) & (table.size() - 1);
      while (table[h] != 0 && key_at(table[h]) != name)
        h = (h + 1) & (table.size() - 1);
      if (table[h] == 0) {
        ends.push_back(keys.size());
        table[h] = ends.size();
      } else {
        keys.resize(start);
      }
      slots.push_back(table[h]);
    }
  }
  // The batch's distinct limits (a category has a few; requests of one batch share them),
  // each with the delay its requests may be held for: a request whose worker holds max_delayed
  // under a limit asks for it without (limit_request::no_delay), a limit of its own here.
  auto& specs = out.specs;
  specs.clear();
  auto& delays = out.delays;
  delays.clear();
  auto& spec_of = out.spec_slots;  // per entry and group: the limit's 1-based index
  spec_of.clear();
  for (const batch_entry& e : batch) {
    for (std::uint8_t g = 0; g < e.req->group_count; ++g) {
      if (!in(e.groups, g)) continue;
      const limit::limit_spec* spec = e.req->groups[g].spec;
      const core::nanos delay = limit::delay_of(*e.req, g);
      std::size_t i = 0;
      while (i < specs.size() && (specs[i] != spec || delays[i] != delay))
        ++i;
      if (i == specs.size()) {
        specs.push_back(spec);
        delays.push_back(delay);
      }
      spec_of.push_back(i + 1);
    }
  }
  args_writer w(out);
  std::string& s = w.text();
  s += verb;
  w.end_arg();
  s += script_ref;
  w.end_arg();
  w.number(static_cast<std::int64_t>(ends.size()));
  std::size_t start = 0;
  for (const std::size_t end : ends) {
    s.append(keys, start, end - start);
    w.end_arg();
    start = end;
  }
  s += now_arg;
  w.end_arg();
  w.number(static_cast<std::int64_t>(specs.size()));
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const limit::limit_spec* spec = specs[i];
    s += static_cast<char>('0' + (spec->is_quota() ? 2 : 0) + (spec->shadow ? 1 : 0));
    w.end_arg();
    if (spec->is_quota()) {
      w.number(spec->quota.limit);
      for (int k = 0; k < 4; ++k)
        w.number(0);
      continue;
    }
    for (const limit::gcra_params& p : spec->tiers) {
      w.number(p.burst == 0 ? 0 : p.emission);
      w.number(p.burst);
    }
    w.number(delays[i]);
  }
  w.number(static_cast<std::int64_t>(batch.size()));
  std::size_t k = 0;
  for (const batch_entry& e : batch) {
    const limit::limit_request& req = *e.req;
    int groups = 0;
    for (std::uint8_t g = 0; g < req.group_count; ++g)
      groups += in(e.groups, g);
    w.number(req.cost);
    w.number(groups);
    for (std::uint8_t g = 0; g < req.group_count; ++g) {
      if (!in(e.groups, g)) continue;
      w.number(static_cast<std::int64_t>(slots[k]));
      w.number(static_cast<std::int64_t>(spec_of[k]));
      ++k;
      if (const limit::limit_spec& spec = *req.groups[g].spec; spec.is_quota()) {
        // The window is the gateway's: its end, and the time its clock has to run to it.
        const core::nanos end = core::window_of(spec.quota.period, req.now).end;
        w.number(end / core::ns_per_s);
        w.number(end / core::ns_per_ms - req.now / core::ns_per_ms);
      }
    }
  }
  w.finish();
}

void build_call(command_args& out, std::string_view verb, std::string_view script_ref,
                std::string_view prefix, const limit::limit_request& req, std::string_view now_arg,
                group_mask groups) {
  const batch_entry one{&req, groups};
  build_call(out, verb, script_ref, prefix, std::span<const batch_entry>(&one, 1), now_arg);
}

void build_refund(command_args& out, std::string_view prefix, const limit::limit_request& req,
                  group_mask groups, const script_reply& r) {
  args_writer w(out);
  std::string& s = w.text();
  s += "EVALSHA";
  w.end_arg();
  s += refund_sha();
  w.end_arg();
  int keys = 0;
  for (std::uint8_t g = 0; g < req.group_count; ++g)
    keys += in(groups, g);
  w.number(keys);
  for (std::uint8_t g = 0; g < req.group_count; ++g) {
    if (!in(groups, g)) continue;
    append_key(s, prefix, req, g);
    w.end_arg();
  }
  constexpr core::nanos B = 1'000'000'000;
  for (std::uint8_t g = 0; g < req.group_count; ++g) {
    if (!in(groups, g)) continue;
    const limit::limit_spec& spec = *req.groups[g].spec;
    if (spec.is_quota()) {
      // The cost to take back from the count, if the key still holds the same window.
      const tier_reply& tr = r.tiers[g][0];
      const bool written = tr.allowed == 1;
      w.number(written ? req.cost : 0);
      w.number(0);
      w.number(written ? (req.now + tr.d) / core::ns_per_s : 0);
      for (int i = 0; i < 5; ++i)
        w.number(0);
      continue;
    }
    for (std::size_t t = 0; t < 2; ++t) {
      const tier_reply& tr = r.tiers[g][t];
      if (tr.allowed != 1) {  // nothing written for this tier
        for (int i = 0; i < 4; ++i)
          w.number(0);
        continue;
      }
      // c·T <= burst·T fits in int64 (validated at load); a tat past int64 gets no refund.
      const core::nanos e = static_cast<core::nanos>(req.cost) * spec.tiers[t].emission;
      core::nanos written;
      if (__builtin_add_overflow(r.redis_now, tr.d, &written)) {
        for (int i = 0; i < 4; ++i)
          w.number(0);
        continue;
      }
      w.number(e / B);
      w.number(e % B);
      w.number(written / B);
      w.number(written % B);
    }
  }
  w.finish();
}

bool append_command(std::string& out, const command_args& args) {
  // RESP's request form, "*<count>\r\n" then "$<length>\r\n<bytes>\r\n" per argument: what
  // redisFormatCommandArgv writes (the unit tests compare the two), without its formatter,
  // which took more instructions than the rest of a decision's call.
  std::size_t total = 16;
  for (int i = 0; i < args.count; ++i)
    total += args.lengths[i] + 24;
  out.reserve(out.size() + total);
  auto number = [&](char lead, std::size_t v) {
    out += lead;
    core::append_decimal(out, static_cast<std::int64_t>(v));
    out += "\r\n";
  };
  number('*', static_cast<std::size_t>(args.count));
  for (int i = 0; i < args.count; ++i) {
    number('$', args.lengths[i]);
    out.append(args.argv[i], args.lengths[i]);
    out += "\r\n";
  }
  return true;
}

bool append_command(std::string& out, std::initializer_list<std::string_view> args) {
  command_args a;
  for (const std::string_view v : args) {
    a.argv.push_back(v.data());
    a.lengths.push_back(v.size());
    ++a.count;
  }
  return append_command(out, a);
}

std::size_t reply_elements(std::span<const batch_entry> batch) {
  std::size_t n = 2;
  for (const batch_entry& e : batch) {
    n += 1;
    for (std::uint8_t g = 0; g < e.req->group_count; ++g) {
      if (!in(e.groups, g)) continue;
      const limit::limit_spec& spec = *e.req->groups[g].spec;
      if (spec.is_quota()) n += 2;  // its count and its window's end
      for (const limit::gcra_params& p : spec.tiers)
        n += p.burst != 0;
    }
  }
  return n;
}

bool read_now(const redisReply& reply, std::span<const batch_entry> batch, core::nanos& now) {
  if (reply.type != REDIS_REPLY_ARRAY || reply.elements != reply_elements(batch)) return false;
  long long now_s = 0, now_n = 0;
  if (!integer_at(reply, 0, now_s) || !integer_at(reply, 1, now_n) || now_s < 0 ||
      now_s > 9'000'000'000LL || now_n < 0 || now_n >= 1'000'000'000) {
    return false;
  }
  now = now_s * 1'000'000'000LL + now_n;
  return true;
}

namespace {

/// One tier's element: tat − now in ns, negative (−d − 1) when it rejected, or past 2^53 ns
/// the text "allowed:s:ns".
bool read_tier(const redisReply* e, bool& allowed, core::nanos& d) {
  if (e == nullptr) return false;
  if (e->type == REDIS_REPLY_INTEGER) {
    allowed = e->integer >= 0;
    d = allowed ? e->integer : -(e->integer + 1);
    return true;
  }
  if (e->type != REDIS_REPLY_STRING || e->str == nullptr) return false;
  const char* p = e->str;
  const char* end = e->str + e->len;
  long long a = 0, ds = 0, dn = 0;
  auto field = [&](long long& v, bool last) {
    const auto r = std::from_chars(p, end, v);
    if (r.ec != std::errc() || (last ? r.ptr != end : (r.ptr == end || *r.ptr != ':')))
      return false;
    p = last ? r.ptr : r.ptr + 1;
    return true;
  };
  if (!field(a, false) || !field(ds, false) || !field(dn, true)) return false;
  if ((a != 0 && a != 1) || ds < 0 || ds > 9'000'000'000LL || dn < 0 || dn >= 1'000'000'000) {
    return false;
  }
  allowed = a == 1;
  d = ds * 1'000'000'000LL + dn;
  return true;
}

/// A quota group's two elements at `at` (moved past them): its count (−count − 1: rejected)
/// and its window's end in Unix seconds, checked against what the script can have said.
bool read_quota(const redisReply& reply, std::size_t& at, const limit::limit_request& req,
                const limit::limit_spec& spec, tier_reply& out) {
  long long n = 0, end_s = 0;
  if (!integer_at(reply, at, n) || !integer_at(reply, at + 1, end_s)) return false;
  at += 2;
  const bool allowed = n >= 0;
  const long long used = allowed ? n : -(n + 1);
  // Admitted: its cost counted, within the limit; rejected: no room for the cost.
  if (used > spec.quota.limit || (allowed && used < req.cost) ||
      (!allowed && used + req.cost <= spec.quota.limit)) {
    return false;
  }
  // The window ends after now, and within two months: this window, or the next one that a
  // replica whose clock runs ahead has opened.
  const core::nanos d = end_s * core::ns_per_s - req.now;
  if (end_s <= 0 || end_s > 9'000'000'000LL || d <= 0 || d > 64 * 86'400 * core::ns_per_s) {
    return false;
  }
  out = {static_cast<std::int8_t>(allowed ? 1 : 0), static_cast<std::uint32_t>(used), d};
  return true;
}

}  // namespace

bool read_entry(const redisReply& reply, std::size_t& at, const batch_entry& e, script_reply& out) {
  const limit::limit_request& req = *e.req;
  long long verdict = 0;
  if (!integer_at(reply, at, verdict) || verdict < 0 || verdict > 2) return false;
  ++at;
  out.admitted = verdict != 0;
  out.shadow_limited = verdict == 2;
  for (std::uint8_t g = 0; g < req.group_count; ++g) {
    if (!in(e.groups, g)) continue;
    const limit::limit_spec& spec = *req.groups[g].spec;
    if (spec.is_quota()) {
      out.tiers[g][1] = {};
      if (!read_quota(reply, at, req, spec, out.tiers[g][0])) return false;
      continue;
    }
    for (std::uint8_t t = 0; t < 2; ++t) {
      const limit::gcra_params& p = spec.tiers[t];
      if (p.burst == 0) {
        out.tiers[g][t] = {};
        continue;
      }
      bool allowed = false;
      core::nanos d = 0;
      if (at >= reply.elements || !read_tier(reply.element[at], allowed, d)) return false;
      ++at;
      // The GCRA keeps every tat within now + burst·T + delay (clamped so), and a rejection's
      // stored tat lies beyond what admits the cost within the delay.
      const core::nanos delay = limit::delay_of(req, g);
      if (d > static_cast<core::nanos>(p.burst) * p.emission + delay) return false;
      if (!allowed && d <= static_cast<core::nanos>(p.burst - req.cost) * p.emission + delay) {
        return false;
      }
      core::nanos tat;
      if (__builtin_add_overflow(req.now, d, &tat)) return false;
      out.tiers[g][t] = {static_cast<std::int8_t>(allowed ? 1 : 0), 0, d};
    }
  }
  return true;
}

bool read_reply(const redisReply& reply, const limit::limit_request& req, group_mask groups,
                script_reply& out) {
  const batch_entry one{&req, groups};
  const std::span<const batch_entry> batch(&one, 1);
  std::size_t at = 2;
  return read_now(reply, batch, out.redis_now) && read_entry(reply, at, one, out);
}

void assemble(const limit::limit_request& req, const script_reply& r, bool admitted,
              bool shadow_limited, limit::decision& out) {
  out = limit::decision{};
  out.admitted = admitted;
  out.shadow_limited = admitted && shadow_limited;
  for (std::uint8_t g = 0; g < req.group_count; ++g) {
    const limit::limit_spec& spec = *req.groups[g].spec;
    if (spec.is_quota()) {
      const tier_reply& tr = r.tiers[g][0];
      out.limits[out.count++] = {req.now + tr.d, tr.allowed == 1 ? 0 : tr.d, g,
                                 limit::tier::short_term, tr.used};
      continue;
    }
    for (std::uint8_t t = 0; t < 2; ++t) {
      const limit::gcra_params& p = spec.tiers[t];
      if (p.burst == 0) continue;
      const tier_reply& tr = r.tiers[g][t];
      // Relative to Redis's now, placed on the gateway's: remaining, Retry-After and the
      // policy's t= are differences, so a gateway clock that differs from Redis's changes
      // only the absolute X-RateLimit-Reset.
      const core::nanos wait =
          tr.allowed == 1 ? 0 : tr.d - static_cast<core::nanos>(p.burst - req.cost) * p.emission;
      out.limits[out.count++] = {req.now + tr.d, wait, g, static_cast<limit::tier>(t), 0};
      // An admitting tier whose new tat lies past now + burst·T held the request within its
      // delay (docs/design.md §16): by that much, its wait before the commit.
      const core::nanos hold = tr.d - static_cast<core::nanos>(p.burst) * p.emission;
      if (admitted && tr.allowed == 1 && hold > 0 && !spec.shadow) {
        out.hold = std::max(out.hold, hold);
        out.held |= static_cast<std::uint16_t>(1u << g);
      }
    }
  }
  limit::choose_binding(req, out);
}

bool decode_decision(const redisReply& reply, const limit::limit_request& req, limit::decision& out,
                     core::nanos* redis_now) {
  script_reply r;
  if (!read_reply(reply, req, all_groups, r)) return false;
  if (redis_now != nullptr) *redis_now = r.redis_now;
  assemble(req, r, r.admitted, r.shadow_limited, out);
  return true;
}

std::optional<redirect> parse_redirect(std::string_view e) {
  redirect r;
  if (e.starts_with("MOVED ")) {
    e.remove_prefix(6);
  } else if (e.starts_with("ASK ")) {
    r.ask = true;
    e.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = e.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  unsigned slot = 0;
  const auto [sp, sec] = std::from_chars(e.data(), e.data() + space, slot);
  if (sec != std::errc() || sp != e.data() + space || slot > 16383) return std::nullopt;
  r.slot = static_cast<std::uint16_t>(slot);
  const std::string_view where = e.substr(space + 1);
  const auto colon = where.rfind(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  unsigned port = 0;
  const auto [pp, pec] =
      std::from_chars(where.data() + colon + 1, where.data() + where.size(), port);
  if (pec != std::errc() || pp != where.data() + where.size() || port == 0 || port > 65535) {
    return std::nullopt;
  }
  r.port = static_cast<std::uint16_t>(port);
  std::string_view host = where.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  // A host name or address: printable, no spaces, not empty.
  if (host.empty() || host.size() > 255) return std::nullopt;
  for (const char ch : host) {
    if (static_cast<unsigned char>(ch) <= ' ' || static_cast<unsigned char>(ch) >= 0x7f) {
      return std::nullopt;
    }
  }
  r.host = std::string(host);
  return r;
}

std::vector<slot_range> parse_slot_map(const redisReply& r, const std::string& asked) {
  std::vector<slot_range> out;
  if (r.type != REDIS_REPLY_ARRAY) return out;
  for (std::size_t i = 0; i < r.elements; ++i) {
    const redisReply* e = r.element[i];
    if (e == nullptr || e->type != REDIS_REPLY_ARRAY || e->elements < 3) continue;
    const redisReply* a = e->element[0];
    const redisReply* b = e->element[1];
    const redisReply* primary = e->element[2];
    if (a->type != REDIS_REPLY_INTEGER || b->type != REDIS_REPLY_INTEGER ||
        primary->type != REDIS_REPLY_ARRAY || primary->elements < 2 ||
        primary->element[0]->type != REDIS_REPLY_STRING ||
        primary->element[1]->type != REDIS_REPLY_INTEGER || a->integer < 0 || b->integer > 16383 ||
        a->integer > b->integer || primary->element[1]->integer <= 0 ||
        primary->element[1]->integer > 65535) {
      continue;
    }
    slot_range s;
    s.first = static_cast<std::uint16_t>(a->integer);
    s.last = static_cast<std::uint16_t>(b->integer);
    s.host.assign(primary->element[0]->str, primary->element[0]->len);
    if (s.host.empty() || s.host == "?") s.host = asked;  // "the node you asked"
    s.port = static_cast<std::uint16_t>(primary->element[1]->integer);
    out.push_back(std::move(s));
  }
  return out;
}

std::string_view error_kind(std::string_view e) noexcept {
  if (e.starts_with("NOSCRIPT")) return "noscript";
  if (e.starts_with("OOM")) return "oom";
  if (e.starts_with("BUSY")) return "busy";
  if (e.starts_with("MOVED") || e.starts_with("ASK")) return "redirect";
  if (e.starts_with("TRYAGAIN")) return "tryagain";
  if (e.starts_with("CLUSTERDOWN")) return "clusterdown";
  return "script";
}

}  // namespace tollgate::store::redis
