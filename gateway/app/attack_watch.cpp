#include "gateway/app/attack_watch.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>

namespace tollgate::app {

attack_watch::attack_watch(boost::asio::io_context& control,
                           const std::shared_ptr<const net::snapshot>& current,
                           const net::server& server, const core::clock& clock)
    : timer_(control), current_(current), server_(server), clock_(clock) {}

void attack_watch::start() {
  running_ = true;
  tick();  // the first tick starts the counts
  schedule();
}

void attack_watch::stop() {
  running_ = false;
  timer_.cancel();
}

void attack_watch::schedule() {
  timer_.expires_after(std::chrono::seconds(1));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || !running_) return;
    tick();
    schedule();
  });
}

std::vector<attack_watch::place> attack_watch::places() const {
  std::vector<place> out;
  const net::snapshot& snap = *current_;
  auto add = [&](const policy::compiled_policy& p, const std::string& host) {
    for (const policy::category_limits& c : p.categories()) {
      if (!c.attack) continue;
      out.push_back(
          {host.empty() ? c.name : host + "/" + c.name, &*c.attack, c.index, snap.metric_of(c)});
    }
  };
  add(snap.policy, "");
  for (const policy::tenant& t : snap.hosts.entries())
    add(t.policy, t.label);
  return out;
}

void attack_watch::apply(entry& e, const place& p,
                         const std::optional<policy::attack_monitor::transition>& t) {
  const core::nanos now = clock_.now();
  current_->attack.set(p.index, e.monitor.status(now, *p.rules));
  if (!t) return;
  ++e.transitions[t->from * policy::attack_levels + t->to];
  spdlog::log(t->to > t->from ? spdlog::level::warn : spdlog::level::info,
              "attack mode: category {} {} -> {}: {}", p.name, policy::attack_level_names[t->from],
              policy::attack_level_names[t->to], t->why);
}

void attack_watch::tick() {
  const core::nanos now = clock_.now();
  const auto workers = server_.counters();
  for (const place& p : places()) {
    std::uint64_t total = 0;
    for (const metrics::worker_counters* w : workers) {
      for (const auto& c : w->requests[p.metric])
        total += c.value();
    }
    entry& e = monitors_[p.name];
    apply(e, p, e.monitor.tick(now, total, *p.rules));
  }
}

void attack_watch::refresh() {
  const core::nanos now = clock_.now();
  for (const place& p : places()) {
    const auto it = monitors_.find(p.name);
    if (it != monitors_.end())
      current_->attack.set(p.index, it->second.monitor.status(now, *p.rules));
  }
}

std::vector<attack_watch::view> attack_watch::list() const {
  std::vector<view> out;
  const core::nanos now = clock_.now();
  for (const place& p : places()) {
    const auto it = monitors_.find(p.name);
    view v;
    v.category = p.name;
    if (it != monitors_.end()) {
      const policy::attack_monitor& m = it->second.monitor;
      v.status = m.status(now, *p.rules);
      v.baseline = m.baseline(*p.rules);
      v.rate = m.rate();
      v.forced_until = m.forced_until();
    } else {
      v.baseline = p.rules->floor;
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::string attack_watch::force(const std::string& category, std::uint8_t level,
                                core::nanos until) {
  for (const place& p : places()) {
    if (p.name != category) continue;
    if (level > 0 && !p.rules->levels[level].on) {
      return "category " + category + " has no level " +
             std::string(policy::attack_level_names[level]) + " in its attack_mode";
    }
    entry& e = monitors_[p.name];
    apply(e, p, e.monitor.force(level, clock_.now(), until, *p.rules));
    return "";
  }
  return "no category " + category + " with attack_mode";
}

std::string attack_watch::release(const std::string& category) {
  for (const place& p : places()) {
    if (p.name != category) continue;
    entry& e = monitors_[p.name];
    apply(e, p, e.monitor.release(clock_.now(), *p.rules));
    return "";
  }
  return "no category " + category + " with attack_mode";
}

void attack_watch::describe(metrics::scrape_values& values) const {
  for (const place& p : places()) {
    if (values.attack.size() <= p.metric) values.attack.resize(p.metric + 1u);
    metrics::attack_values& a = values.attack[p.metric];
    a.on = true;
    const auto it = monitors_.find(p.name);
    if (it == monitors_.end()) continue;
    a.level = it->second.monitor.level();
    for (std::size_t i = 0; i < a.transitions.size(); ++i)
      a.transitions[i] = static_cast<double>(it->second.transitions[i]);
  }
}

}  // namespace tollgate::app
