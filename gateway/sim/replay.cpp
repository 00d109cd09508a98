#include "gateway/sim/replay.hpp"

namespace tollgate::sim {

namespace {

address_key key_of(const core::address& a) noexcept {
  if (a.family() == core::family::v4) return {0, a.v4(), false};
  return {a.v6_high(), a.v6_low(), true};
}

/// The client's network at the policy's coarse prefix (ipv4_network, ipv6_provider).
address_key network_of(const core::address& a, const limit::level_prefixes& p) noexcept {
  const limit::address_keys k = limit::keys_of(a, p);
  if (a.family() == core::family::v4) return {0, k.coarse_key, false};
  return {k.coarse_key, 0, true};
}

void prepare(run_tally& t, const simulator& s) {
  const policy::tier_rules* tiers = s.policy().tiers();
  const std::size_t tier_count = tiers != nullptr ? tiers->names.size() : 0;
  for (const auto& c : s.policy().categories()) {
    category_tally& ct = t.categories.emplace_back();
    ct.limited.assign(c.limits.size(), {0, 0});
    ct.shadow.assign(c.limits.size(), {0, 0});
    ct.unkeyed.assign(c.limits.size(), 0);
    ct.tier_requests.assign(tier_count, 0);
    ct.tier_limited.assign(tier_count, 0);
  }
}

void count(run_tally& t, const simulator& s, const simulated& o, const core::address& client) {
  category_tally& c = t.categories[o.category];
  ++c.requests;
  ++c.outcomes[static_cast<std::size_t>(o.result)];
  if (o.admitted()) ++c.admitted;
  if (o.exempt) ++c.exempt;
  for (std::uint32_t bits = o.unkeyed; bits != 0; bits &= bits - 1) {
    ++c.unkeyed[static_cast<std::size_t>(__builtin_ctz(bits))];
  }
  if (o.limit != nullptr) {
    auto& by = o.result == core::outcome::shadow_limited ? c.shadow : c.limited;
    ++by[o.limit->slot][static_cast<std::size_t>(o.tier)];
  }
  const bool limited = o.result == core::outcome::limited || o.result == core::outcome::challenged;
  if (o.consumer_tier < c.tier_requests.size()) {
    ++c.tier_requests[o.consumer_tier];
    if (limited) ++c.tier_limited[o.consumer_tier];
  }
  if (limited) {
    ++c.addresses[key_of(client)];
    ++c.networks[network_of(client, s.policy().prefixes())];
  }
}

/// The route of `r` under `s`, and whether `r` was a WebSocket upgrade: a 101; or, in
/// Tollgate's logs, a request whose logged category is the one its route gives only with the
/// upgrade headers (a refused upgrade is logged with its 429, 428 or 403). Null when the target
/// is no valid path.
const policy::route* route_of(const log_record& r, simulator& s, bool& upgrade) {
  upgrade = r.status == 101;
  const policy::route* plain = s.route(r, upgrade);
  if (upgrade || plain == nullptr || !r.has_decision() || r.category.empty() ||
      plain->category->name == r.category) {
    return plain;
  }
  const policy::route* upgraded = s.route(r, true);
  // Routes live in the router: `plain` is still valid.
  if (upgraded == nullptr || upgraded->category->name != r.category) return plain;
  upgrade = true;
  return upgraded;
}

/// Whether the logged decision is one the simulation can make: not a proof, a store error, a
/// proof the client's violations required (challenged without a limit) or an upgrade over the
/// per-address connection count (limited without a limit). A ban is replayed from the log.
bool comparable(const log_record& r) noexcept {
  const std::string_view d = r.decision;
  if (d == "allowed" || d == "shadow_limited" || d == "denied" || d == "banned") return true;
  return (d == "limited" || d == "challenged") && !r.limit.empty();
}

difference make_difference(const indexed_line& l, const log_record& r) {
  difference d;
  d.file = l.file;
  d.line = l.line;
  d.time = r.time;
  d.client = r.client;
  d.method = std::string(r.method);
  d.target = std::string(r.target);
  return d;
}

/// Fills side `i` of `d` with `o` under `s` (`ok` false: the target is no valid path).
void describe(difference& d, int i, const simulator& s, bool ok, const simulated& o) {
  if (!ok) {
    d.decision[i] = "unroutable";
    return;
  }
  d.category[i] = s.policy().categories()[o.category].name;
  d.decision[i] = std::string(core::outcome_name(o.result));
  append_limit(d.limit[i], o);
}

/// Compares the simulated outcome `o` of `r` with its logged decision.
void agree(log_agreement& a, const indexed_line& l, const log_record& r, const simulator& s,
           const simulated& o, std::size_t keep) {
  if (s.policy().categories()[o.category].name != r.category) ++a.other_category;
  if (!comparable(r)) {
    ++a.not_comparable[std::string(r.decision)];
    return;
  }
  ++a.compared;
  thread_local std::string limit;
  limit.clear();
  append_limit(limit, o);
  if (core::outcome_name(o.result) == r.decision && limit == r.limit) return;
  ++a.differ;
  // Built in a reused string and looked up without a copy: a log replayed under another
  // policy may differ on most lines.
  thread_local std::string pair;
  pair.assign(r.decision);
  if (!r.limit.empty()) pair.append(" ").append(r.limit);
  pair.append(" -> ").append(core::outcome_name(o.result));
  if (!limit.empty()) pair.append(" ").append(limit);
  if (const auto it = a.pairs.find(pair); it != a.pairs.end()) {
    ++it->second;
  } else {
    a.pairs.emplace(pair, 1);
  }
  if (a.first.size() >= keep) return;
  difference d = make_difference(l, r);
  d.category[0] = std::string(r.category);
  d.decision[0] = std::string(r.decision);
  d.limit[0] = std::string(r.limit);
  describe(d, 1, s, true, o);
  a.first.push_back(std::move(d));
}

}  // namespace

namespace {

/// One request line read and routed, ahead of its decision.
struct staged {
  log_record r;                        ///< the record; its views may point into `scratch`
  parse_scratch scratch;               ///< never moved while `r` is in use
  const indexed_line* line = nullptr;  ///< where it came from
  const policy::route* to = nullptr;   ///< its route under the first configuration, or null
  bool upgrade = false;                ///< replayed as a WebSocket upgrade
};

/// Decides `s` under both configurations and tallies it.
void settle(replay_result& res, const staged& s, simulator& a, simulator* b,
            const replay_options& opt) {
  const log_record& r = s.r;
  if (res.requests++ == 0) res.first = r.time;
  res.last = r.time;
  if ((res.requests & 0xffff) == 0 && opt.tick) opt.tick(res.requests);
  res.upgrades += s.upgrade ? 1 : 0;
  simulated oa, ob;
  const bool ra = s.to != nullptr;
  if (ra) {
    a.decide(r, *s.to, s.upgrade, oa);
    count(res.runs[0], a, oa, r.client);
    if (r.has_decision()) agree(res.agreement, *s.line, r, a, oa, opt.max_log_differences);
  } else {
    ++res.runs[0].unroutable;
  }
  if (b == nullptr) return;
  const bool rb = b->decide(r, s.upgrade, ob);
  if (rb) {
    count(res.runs[1], *b, ob, r.client);
  } else {
    ++res.runs[1].unroutable;
  }
  if (ra == rb && (!ra || oa.same_as(ob))) return;
  if (res.differences_total++ >= opt.max_differences) return;
  difference d = make_difference(*s.line, r);
  describe(d, 0, a, ra, oa);
  describe(d, 1, *b, rb, ob);
  res.differences.push_back(std::move(d));
}

}  // namespace

replay_result replay(log_set& logs, simulator& a, simulator* b, const replay_options& opt) {
  replay_result res;
  prepare(res.runs[0], a);
  if (b != nullptr) prepare(res.runs[1], *b);
  // One request is read, routed and its store slots prefetched while the one before it is
  // decided: the store's tables miss the cache on most keys (bench/README.md). Two slots used
  // in turn, never moved, since a record's views may point into its slot's scratch.
  const std::vector<indexed_line>& lines = logs.requests();
  std::size_t next = 0;
  auto stage = [&](staged& s) {
    while (next < lines.size()) {
      const indexed_line& l = lines[next++];
      if (!logs.read(l, s.r, s.scratch)) continue;
      s.line = &l;
      s.to = route_of(s.r, a, s.upgrade);
      if (s.to != nullptr) a.prefetch(s.r, *s.to, s.upgrade);
      return true;
    }
    return false;
  };
  std::array<staged, 2> slots;
  int current = 0;
  for (bool more = stage(slots[0]); more; current ^= 1) {
    more = stage(slots[current ^ 1]);
    settle(res, slots[current], a, b, opt);
  }
  return res;
}

}  // namespace tollgate::sim
