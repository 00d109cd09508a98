/// Fuzz target: the state file of store: memory (gateway/app/state_file.*), read at start from
/// a disk that may hold anything: a damaged file, another build's, or bytes an attacker with
/// write access to it chose.
///
/// Input: one byte, then the rest. Byte 0 even: the rest is the whole file. Odd: the rest is a
/// payload, wrapped in a right header and checksum, so that the sections' readers are reached.
/// Checked: decode_state() and state_identity_key() read or refuse with a reason, never throws,
/// never reads out of bounds, and allocates only what the input backs (counts are checked against
/// the bytes left); whatever it read is written again by encode_state() into a file that reads back
/// without an error.

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gateway/app/state_file.hpp"
#include "gateway/config/gateway.hpp"
#include "gateway/core/siphash.hpp"
#include "gateway/core/state_codec.hpp"
#include "gateway/limit/memory_store.hpp"

namespace {

using namespace tollgate;

constexpr core::nanos fuzz_now = 1'764'300'000LL * 1'000'000'000LL;

/// Fresh tables, as a gateway has them when it starts.
struct tables {
  config::pow_settings settings;
  config::pow_counters_config counters;
  policy::pow_state pow{"fuzz-secret", settings, counters};
  policy::tier_memory tiers{1000};
  policy::override_book overrides;
  limit::memory_store limits{{16, 16, 16, 16, 64}, 1};
  app::state_parts parts() {
    app::state_parts p{pow, tiers, overrides};
    p.limits = &limits;
    p.quotas = {{0, 1}, {limit::keyed_table, 1}, {limit::keyed_table, 0x5eed}};
    return p;
  }
};

/// `payload` in a right header and checksum.
std::string wrapped(std::string_view payload) {
  std::string out("TOLLGATE STATE\n\0", 16);
  core::state_writer w(out);
  w.u32(1);
  w.i64(fuzz_now - 1);
  w.u64(payload.size());
  out += payload;
  w.u64(core::siphash13(out, {0x746f6c6c67617465ULL, 0x2d73746174652d31ULL}));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string file = (data[0] & 1) != 0 ? wrapped(rest) : std::string(rest);
  app::state_identity_key(file);
  tables t;
  auto parts = t.parts();
  const app::state_read r = app::decode_state(file, parts, fuzz_now);
  if (!r.error.empty() && r.error.find_first_not_of(' ') == std::string::npos) std::abort();
  const std::string again = app::encode_state(parts, fuzz_now);
  tables u;
  auto into = u.parts();
  const app::state_read back = app::decode_state(again, into, fuzz_now);
  if (!back.error.empty()) {
    std::fprintf(stderr, "fuzz_state_file: its own file is refused: %s\n", back.error.c_str());
    std::abort();
  }
  return 0;
}
