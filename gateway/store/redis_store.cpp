#include "gateway/store/redis_store.hpp"

#include <algorithm>
#include <stdexcept>

#include "gateway/store/redis_worker.hpp"

namespace tollgate::store {

redis_store::redis_store(redis_options o, std::uint32_t workers,
                         std::unique_ptr<local_store> fallback)
    : o_(std::move(o)), fallback_(std::move(fallback)) {
  if (o_.nodes.empty()) throw std::runtime_error("store: no redis address");
  if (!o_.tls_ca.empty()) {
    tls_ = std::make_unique<boost::asio::ssl::context>(boost::asio::ssl::context::tls_client);
    boost::system::error_code ec;
    tls_->load_verify_file(o_.tls_ca, ec);
    if (ec) throw std::runtime_error("store.tls.ca: " + o_.tls_ca + ": " + ec.message());
    if (!o_.tls_certificate.empty()) {
      tls_->use_certificate_chain_file(o_.tls_certificate, ec);
      if (ec) {
        throw std::runtime_error("store.tls.certificate: " + o_.tls_certificate + ": " +
                                 ec.message());
      }
      tls_->use_private_key_file(o_.tls_private_key, boost::asio::ssl::context::pem, ec);
      if (ec) {
        throw std::runtime_error("store.tls.private_key: " + o_.tls_private_key + ": " +
                                 ec.message());
      }
    }
  }
  for (std::uint32_t i = 0; i < std::max(1u, workers); ++i) {
    workers_.push_back(std::make_unique<redis::worker>(o_, tls_.get(), fallback_.get(), i));
  }
}

redis_store::~redis_store() = default;

void redis_store::attach(std::uint32_t index, boost::asio::io_context& io) {
  if (index < workers_.size()) workers_[index]->attach(io);
}

bool redis_store::try_decide(const limit::limit_request& req, limit::decision& out) {
  return workers_[req.home % workers_.size()]->try_decide(req, out);
}

void redis_store::start_decide(const limit::limit_request& req, limit::decision& out,
                               decide_handler done) {
  workers_[req.home % workers_.size()]->start_decide(req, out, std::move(done));
}

std::vector<table_size> redis_store::tracked() const {
  return fallback_->tracked();
}

std::optional<limit_state> redis_store::state_of(const limit::limit_spec& spec, std::uint64_t key) {
  return fallback_->state_of(spec, key);
}

redis::link_options control_link(const redis_options& o, boost::asio::ssl::context* tls,
                                 const std::string& host, std::uint16_t port,
                                 std::size_t max_in_flight) {
  redis::link_options l;
  l.host = host;
  l.port = port;
  l.username = o.username;
  l.password = o.password;
  l.timeout = std::max<std::chrono::nanoseconds>(o.connect_timeout, std::chrono::seconds(1));
  l.connect_timeout = o.connect_timeout;
  l.tls = tls;
  l.server_name = o.tls_server_name.empty() ? host : o.tls_server_name;
  l.max_in_flight = max_in_flight;
  return l;
}

std::size_t redis_store::forget(const core::key_block& block,
                                const core::level_prefixes& prefixes) {
  // What Redis refused is remembered per worker; a reset lets each ask Redis again.
  for (const auto& w : workers_)
    w->clear_cache();
  return fallback_->forget(block, prefixes);
}

store_report redis_store::report() const {
  store_report r;
  r.shared = true;
  r.degraded = degraded();
  r.refusing = r.degraded && o_.on_failure == fail_mode::closed;
  r.fail_mode = fail_mode_name(o_.on_failure);
  r.counters = counters();
  return r;
}

bool redis_store::degraded() const noexcept {
  for (const auto& w : workers_) {
    if (!w->ready()) return true;
  }
  return false;
}

std::vector<const metrics::store_counters*> redis_store::counters() const {
  std::vector<const metrics::store_counters*> out;
  for (const auto& w : workers_)
    out.push_back(&w->counters());
  return out;
}

}  // namespace tollgate::store
