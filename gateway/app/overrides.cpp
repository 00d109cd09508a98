#include "gateway/app/overrides.hpp"

#include <spdlog/spdlog.h>

#include <boost/json.hpp>

#include "gateway/store/redis_records.hpp"
#include "gateway/store/redis_store.hpp"

namespace tollgate::app {

namespace {

namespace json = boost::json;

}  // namespace

override_keeper::override_keeper(policy::override_book& book, store::decision_store& store,
                                 const core::clock& clock, std::chrono::nanoseconds poll)
    : book_(book), clock_(clock) {
  auto* redis = dynamic_cast<store::redis_store*>(&store);
  if (redis == nullptr) return;
  records_ = std::make_unique<store::redis_records>(
      redis->options(), redis->tls(), "overrides", poll,
      [this](const store::redis_records::records& all) {
        // What Redis holds is what every replica applies; expired ones are dropped there.
        std::vector<policy::override_rule> rules;
        std::vector<std::string> stale;
        const core::nanos now = clock_.now();
        for (const auto& [id, text] : all) {
          std::string error;
          auto r = override_from_json(text, now, true, error);
          if (!r || r->id != id) {
            spdlog::warn("redis: override {} is unreadable ({}); left alone", id,
                         r ? "its id does not match its target" : error);
            continue;
          }
          if (!r->live(now)) {
            stale.push_back(id);
            continue;
          }
          rules.push_back(std::move(*r));
        }
        if (book_.replace_all(std::move(rules))) {
          spdlog::info("overrides: {} in force, as Redis holds them", book_.list(now).size());
        }
        return stale;
      });
}

override_keeper::~override_keeper() = default;

void override_keeper::start() {
  if (records_) records_->start();
}

override_keeper::put_result override_keeper::put(const policy::override_rule& r) {
  put_result out;
  if (records_) {
    if (!book_.get(r.id) && book_.list(r.created).size() >= policy::override_book::capacity) {
      out.placed = policy::override_book::placed::full;
      return out;
    }
    out.error =
        records_->write({{r.id, json::serialize(override_json(r))}}, std::chrono::seconds(2));
    if (!out.error.empty()) return out;
  }
  out.placed = book_.put(r);
  return out;
}

std::string override_keeper::remove(std::string_view id) {
  if (records_) {
    std::string error = records_->write({{std::string(id), ""}}, std::chrono::seconds(2));
    if (!error.empty()) return error;
  }
  book_.remove(id);
  return {};
}

}  // namespace tollgate::app
