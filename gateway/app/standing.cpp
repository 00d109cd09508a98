#include "gateway/app/standing.hpp"

#include <unistd.h>

#include <spdlog/spdlog.h>

#include <array>

#include "gateway/core/address.hpp"
#include "gateway/limit/address.hpp"
#include "gateway/store/redis_store.hpp"

namespace tollgate::app {

namespace {

namespace entry = policy::standing_entry;

/// How long an admin change waits for Redis before it holds on this replica only.
constexpr auto admin_wait = std::chrono::seconds(2);
/// How often each replica reads the stream: a change holds everywhere within about this plus
/// one round trip (docs/design.md §18 asks for 100 ms).
constexpr auto poll = std::chrono::milliseconds(20);
/// A manual ban lasts at most 30 days: the stream outlives its latest entry that long, so a
/// replica that starts then still learns every ban in force.
constexpr auto retention = std::chrono::hours(24 * 31);

std::string host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "tollgate";
  std::string out(name.data());
  for (char& c : out) {
    if (c == ' ' || static_cast<unsigned char>(c) < 0x21) c = '_';
  }
  return out;
}

/// The individual subject of `b` when it is one client's block (its individual prefix).
std::optional<pow::subject> client_of(const core::key_block& b, const core::level_prefixes& p) {
  const bool v4 = b.family == core::family::v4;
  if (b.prefix != (v4 ? p.ipv4_individual : p.ipv6_subnet)) return std::nullopt;
  return pow::subject{b.net, static_cast<std::uint8_t>(v4 ? core::level::ipv4_individual
                                                          : core::level::ipv6_subnet)};
}

}  // namespace

standing_keeper::standing_keeper(policy::pow_state& pow, policy::tier_memory& tiers,
                                 store::decision_store& store,
                                 const config::pow_counters_config& counters,
                                 std::shared_ptr<const net::snapshot> current)
    : pow_(pow),
      tiers_(tiers),
      store_(store),
      replica_(host_name() + "/" + std::to_string(::getpid())),
      snapshot_(std::move(current)) {
  auto* redis = dynamic_cast<store::redis_store*>(&store);
  if (redis == nullptr) return;
  closed_ = redis->options().on_failure == store::fail_mode::closed;
  // About two entries per client the violation tables hold: a replica that starts learns
  // nearly all that the others know.
  const std::size_t max_entries =
      std::max<std::size_t>(100'000, 2 * counters.max_individual_entries);
  journal_ = std::make_unique<store::redis_journal>(redis->options(), redis->tls(), "standing",
                                                    poll, max_entries, retention,
                                                    [this](std::string_view text) { apply(text); });
  journal_->every_poll([this] { flush_points(); });
  // A violation (or points, or tiers) that could not be written after all is applied here, as
  // it would have been had Redis been away when it happened.
  journal_->on_unsent([this](std::string_view text) { apply(text); });
}

standing_keeper::~standing_keeper() = default;

void standing_keeper::start(unsigned workers, counting count) {
  count_ = std::move(count);
  for (unsigned i = 0; i < std::max(1u, workers); ++i)
    buffers_.push_back(std::make_unique<point_buffer>());
  if (journal_) journal_->start();
}

void standing_keeper::set_snapshot(std::shared_ptr<const net::snapshot> s) {
  const std::lock_guard lock(snapshot_mutex_);
  snapshot_ = std::move(s);
}

std::shared_ptr<const net::snapshot> standing_keeper::snapshot() const {
  const std::lock_guard lock(snapshot_mutex_);
  return snapshot_;
}

bool standing_keeper::points(std::uint32_t worker, const pow::subject& client, std::uint32_t points,
                             std::string_view identity, const core::address& address,
                             core::nanos now) {
  if (!journal_ || !journal_->ready() || buffers_.empty()) return false;
  point_buffer& b = *buffers_[worker % buffers_.size()];
  // The worker's own lock: the journal's thread takes it once a poll.
  const std::lock_guard lock(b.mutex);
  auto it = b.clients.find(client);
  if (it == b.clients.end()) {
    if (b.clients.size() >= max_pending) return false;
    // Named once per client and poll, not per request.
    std::string name =
        identity.empty() ? "address " + address.to_string() : "identity " + std::string(identity);
    it = b.clients.emplace(client, pending_points{0, std::move(name), now}).first;
  }
  it->second.points = std::min<std::uint32_t>(1'000'000, it->second.points + points);
  it->second.at = std::max(it->second.at, now);
  return true;
}

bool standing_keeper::tier(std::uint32_t worker, const pow::subject& client, std::string_view tier,
                           core::nanos until) {
  if (!journal_ || !journal_->ready() || buffers_.empty()) return false;
  point_buffer& b = *buffers_[worker % buffers_.size()];
  const std::lock_guard lock(b.mutex);
  auto it = b.tiers.find(client);
  if (it == b.tiers.end()) {
    if (b.tiers.size() >= max_pending) return false;
    b.tiers.emplace(client, std::make_pair(std::string(tier), until));
  } else {
    it->second.first.assign(tier);
    it->second.second = until;
  }
  return true;
}

void standing_keeper::flush_points() {
  std::vector<policy::standing_entry::point_record> records;
  core::nanos at = 0;
  const auto send = [&] {
    if (records.empty()) return;
    if (!journal_->append(entry::points(replica_, at, records))) {
      spdlog::warn("standing: {} clients' penalty points not sent: Redis went away",
                   records.size());
    }
    records.clear();
    at = 0;
  };
  std::vector<policy::standing_entry::tier_record> tiers;
  for (auto& b : buffers_) {
    std::unordered_map<pow::subject, pending_points, pow::subject_hash> taken;
    std::unordered_map<pow::subject, std::pair<std::string, core::nanos>, pow::subject_hash> set;
    {
      const std::lock_guard lock(b->mutex);
      taken.swap(b->clients);
      set.swap(b->tiers);
    }
    for (auto& [who, t] : set) {
      tiers.push_back({who, t.second, std::move(t.first)});
      if (tiers.size() == entry::max_point_records) {
        journal_->append(entry::tiers(replica_, t.second, tiers));
        tiers.clear();
      }
    }
    for (auto& [who, p] : taken) {
      records.push_back({who, p.points, std::move(p.name)});
      at = std::max(at, p.at);
      if (records.size() == entry::max_point_records) send();
    }
  }
  send();
  if (!tiers.empty()) journal_->append(entry::tiers(replica_, tiers.back().until, tiers));
}

bool standing_keeper::violation(const policy::client_subjects& who, std::string_view reason,
                                const pow::reason_rule& rule, core::nanos now) {
  return journal_ && journal_->append(entry::violation(replica_, who, reason, rule, now));
}

void standing_keeper::spend(std::string_view challenge, std::int64_t expires,
                            store::claim_handler done) {
  journal_->claim(challenge, expires, std::move(done));
}

bool standing_keeper::closed() const noexcept {
  return closed_;
}

std::string standing_keeper::share_ban(const bans::manual_ban& b) {
  if (!journal_) return {};
  return journal_->append_and_wait(entry::ban(replica_, b), admin_wait);
}

std::string standing_keeper::share_lift(const core::key_block& block, core::nanos now) {
  if (!journal_) return {};
  return journal_->append_and_wait(entry::lift(replica_, block, now), admin_wait);
}

std::string standing_keeper::share_clear_client(const pow::subject& who, core::nanos now) {
  if (!journal_) return {};
  return journal_->append_and_wait(entry::clear_client(replica_, who, now), admin_wait);
}

std::string standing_keeper::share_attack(const std::string& category, std::uint8_t level,
                                          core::nanos until, core::nanos now) {
  if (!journal_) return {};
  return journal_->append_and_wait(entry::attack(replica_, category, level, until, now),
                                   admin_wait);
}

std::string standing_keeper::share_reset(const core::key_block& block, core::nanos now) {
  if (!journal_) return {};
  return journal_->append_and_wait(entry::reset(replica_, block, now), admin_wait);
}

standing_keeper::limits_reset standing_keeper::reset_limits(
    const core::key_block& block, const core::level_prefixes& p,
    const std::vector<const limit::limit_spec*>& specs) {
  limits_reset out;
  if (!journal_) return out;
  const bool v6 = block.family == core::family::v6;
  const unsigned width = v6 ? 64 : 32;
  const unsigned fine = v6 ? p.ipv6_subnet : p.ipv4_individual;
  const unsigned coarse = v6 ? p.ipv6_provider : p.ipv4_network;
  constexpr unsigned max_network_bits = 4;      // 16 networks
  constexpr unsigned max_individual_bits = 12;  // 4096 clients per network
  const auto mask = [&](unsigned bits) { return v6 ? core::mask64(bits) : core::mask32(bits); };
  const auto text = [&](std::uint64_t key) {
    return v6 ? core::address::from_v6(key, 0).to_string()
              : core::address::from_v4(static_cast<std::uint32_t>(key)).to_string();
  };
  const std::string& key_prefix = journal_->key_prefix();
  // The networks the block covers (or lies in), and the clients of each it covers.
  const unsigned network_bits = block.prefix < coarse ? coarse - block.prefix : 0;
  if (network_bits > max_network_bits) {
    out.whole = false;
    return out;
  }
  const unsigned from = std::max<unsigned>(block.prefix, coarse);
  const unsigned individual_bits = fine > from ? fine - from : 0;
  if (individual_bits > max_individual_bits) out.whole = false;
  const std::uint64_t first = block.net & mask(std::min<unsigned>(block.prefix, coarse));
  for (std::uint64_t n = 0; n < (std::uint64_t{1} << network_bits); ++n) {
    const std::uint64_t network = first + (n << (width - coarse));
    std::string tag = "{" + key_prefix + text(network) + "/" + std::to_string(coarse) + "}";
    std::vector<std::string> keys;
    const std::uint64_t start = (block.net & mask(std::min(from, fine))) | network;
    for (const limit::limit_spec* s : specs) {
      const limit::level l = s->level_for(v6);
      const bool individual = l == limit::level::ipv4_individual || l == limit::level::ipv6_subnet;
      if (!individual) {
        keys.push_back(tag + s->state_name + ":" + text(network));
        continue;
      }
      if (individual_bits > max_individual_bits) continue;
      for (std::uint64_t i = 0; i < (std::uint64_t{1} << individual_bits); ++i)
        keys.push_back(tag + s->state_name + ":" + text(start + (i << (width - fine))));
    }
    std::string error;
    const long long n_deleted = journal_->remove(std::move(keys), admin_wait, error);
    if (n_deleted < 0) {
      out.error = error;
      return out;
    }
    out.deleted += n_deleted;
  }
  return out;
}

void standing_keeper::apply(std::string_view text) {
  std::string error;
  const auto e = entry::parse(text, error);
  if (!e) {
    // Logged sparingly: a foreign writer could fill the stream.
    if (skipped_++ % 1000 == 0) {
      spdlog::warn("standing: skipped an unreadable entry of the shared stream ({}; {} so far)",
                   error, skipped_);
    }
    return;
  }
  const bool mine = e->origin == replica_;
  const auto snap = snapshot();
  const core::level_prefixes& p = snap->policy.prefixes();
  switch (e->kind) {
    case 'v': {
      const std::size_t slot = pow_.slot(e->reason);
      const auto until =
          pow_.violations().record(e->who.individual, e->who.network, slot, e->rule, e->at);
      if (!until) return;
      if (mine && count_.ban) count_.ban();
      const std::string who = limit::key_to_string(
          static_cast<limit::level>(e->who.individual.level), e->who.individual.key, p);
      if (mine) {
        spdlog::warn("banned {} for {} s after repeated {} violations", who,
                     core::ceil_seconds(*until - e->at), e->reason);
      } else {
        spdlog::info("standing: {} banned until {} (after repeated {} violations, seen by {})", who,
                     *until / core::ns_per_s, e->reason, e->origin);
      }
      return;
    }
    case 'b': {
      if (mine) return;  // placed here when it was asked
      const bans::manual_ban b{e->block, e->at, e->until, e->reason};
      if (pow_.manual_bans().place(b, e->at) == bans::manual_bans::placed::full) {
        spdlog::warn("standing: manual ban of {} from {} not placed: the manual bans are full",
                     e->block.to_string(), e->origin);
        return;
      }
      spdlog::info("standing: manual ban of {} until {} placed by {}", e->block.to_string(),
                   e->until / core::ns_per_s, e->origin);
      return;
    }
    case 'u': {
      if (mine) return;
      bool lifted = false;
      if (const auto who = client_of(e->block, p)) lifted = pow_.violations().lift(*who, e->at);
      lifted = pow_.manual_bans().lift(e->block, e->at) || lifted;
      if (lifted) {
        spdlog::info("standing: bans on {} lifted by {}", e->block.to_string(), e->origin);
      }
      return;
    }
    case 'r': {
      // Also here where it was asked: violations that came between the reset and its entry
      // are forgotten as on every other replica.
      const auto f = pow_.violations().forget(e->block, p, e->at);
      const std::size_t limiter = store_.forget(e->block, p);
      if (!mine) {
        spdlog::info("standing: {} reset by {} (violations={} bans={} limiter={})",
                     e->block.to_string(), e->origin, f.individual + f.network, f.bans, limiter);
      }
      return;
    }
    case 'p': {
      const pow::penalty_rules* ladder = snap->policy.penalties();
      if (ladder == nullptr) return;  // no ladder in force: points mean nothing now
      for (const auto& r : e->points) {
        const auto c = pow_.penalties().add(r.who, r.points, e->at, *ladder);
        if (!mine || !c.entered()) continue;
        const pow::penalty_action action = c.after.action(*ladder);
        if (count_.transition) count_.transition(action);
        spdlog::log(
            action >= pow::penalty_action::read_only ? spdlog::level::warn : spdlog::level::info,
            "penalty ladder: {} entered step {} ({}) at score {} (points shared by every "
            "replica)",
            r.name, c.after.step + 1, pow::penalty_action_name(action), c.after.score);
      }
      return;
    }
    case 'k':
      if (!mine) pow_.penalties().reset(e->who.individual);
      return;
    case 't':
      for (const auto& t : e->tiers)
        tiers_.set(t.who, t.tier, t.until);
      return;
    case 'a':
      if (!mine && on_attack_) on_attack_(e->reason, e->level, e->until);
      return;
    default:
      return;
  }
}

}  // namespace tollgate::app
