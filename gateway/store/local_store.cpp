#include "gateway/store/local_store.hpp"

#include <boost/asio/any_completion_executor.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/execution.hpp>
#include <boost/asio/prefer.hpp>

namespace tollgate::store {

void local_store::start_decide(const limit::limit_request& req, limit::decision& out,
                               decide_handler done) {
  out = memory_.decide(req);
  // Completed through the handler's executor, never inline: an initiating function must not
  // call its handler before it returns.
  // (An any_completion_executor can only be asked, not required, never to block: Asio 1.81's
  // post() insists on the requirement, so the function is executed under the preference.)
  namespace execution = boost::asio::execution;
  const auto ex =
      boost::asio::prefer(boost::asio::get_associated_executor(done), execution::blocking.never);
  ex.execute([done = std::move(done)]() mutable { std::move(done)(boost::system::error_code{}); });
}

std::vector<table_size> local_store::tracked() const {
  std::vector<table_size> out;
  for (std::size_t l = 0; l < limit::level_count; ++l) {
    const auto t = static_cast<std::uint8_t>(l);
    out.push_back({std::string(limit::level_name(static_cast<limit::level>(l))), memory_.tracked(t),
                   memory_.capacity(t), memory_.evictions(t)});
  }
  out.push_back({"keyed", memory_.tracked(limit::keyed_table), memory_.capacity(limit::keyed_table),
                 memory_.evictions(limit::keyed_table)});
  return out;
}

std::optional<limit_state> local_store::state_of(const limit::limit_spec& spec, std::uint64_t key) {
  const auto e = memory_.lookup(spec, key);
  if (!e) return std::nullopt;
  return limit_state{{e->tat[0], e->tat[1]}};
}

}  // namespace tollgate::store
