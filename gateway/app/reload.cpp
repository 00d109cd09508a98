#include "gateway/app/reload.hpp"

#include <spdlog/spdlog.h>

#include <chrono>
#include <stdexcept>

#include "gateway/app/logging.hpp"
#include "gateway/config/reload_diff.hpp"

namespace tollgate::app {

double unix_seconds_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void reload(const reload_context& r, reload_files files) {
  try {
    if (!files.loaded) throw std::runtime_error(files.error);
    config::gateway_config loaded = std::move(*files.loaded);
    const auto& running = r.current->config;
    const auto restart_only = config::restart_only_changes(running, loaded);
    auto next = std::make_shared<const net::snapshot>(
        config::keep_restart_only(running, std::move(loaded)), r.identity_key, r.metrics, r.pow);
    // The access log is (re)opened before anything changes: a file that cannot be opened
    // fails the reload. Reopened even when unchanged, for logrotate.
    app::open_access_log(r.access_log, next->config.logging);
    for (const auto& key : restart_only) {
      spdlog::warn("reload: {} changed; takes effect at restart", key);
    }
    for (const auto& w : config::coverage_warnings(next->config))
      spdlog::warn("{}", w);
    // A key set fetched from a jwks_url that stays is the new verifier's too, until the next
    // fetch (app/serve.cpp's follow_jwks keeps fetching into it).
    const auto& was = running.identity.jwt;
    const auto& is = next->config.identity.jwt;
    if (next->jwt && r.current->jwt && was && is && !is->jwks_url.empty() &&
        is->jwks_url == was->jwks_url) {
      next->jwt->set_keys(r.current->jwt->keys());
    }
    r.current = next;
    if (r.settle) r.settle();  // before the workers have it: no request sees it unsettled
    r.server.publish(std::move(next));
    // spdlog's level is one atomic, read by every logger call: it changes live. Set before the
    // line that says the configuration is in force (which is then true of the level too), and
    // that line written at the new level when it is above info, so that it is still seen.
    const auto level = spdlog::level::from_str(r.current->config.logging.level);
    spdlog::set_level(level);
    app::set_log_format(r.current->config.logging.format);
    r.metrics.reloads_ok.fetch_add(1);
    r.metrics.last_reload_ok.store(true);
    r.metrics.last_reload_success.store(unix_seconds_now());
    spdlog::log(std::max(level, spdlog::level::info), "reload: configuration from {} in force",
                r.path);
  } catch (const std::exception& e) {
    // config::error is what a bad file gives; catching every std::exception is the last line
    // of defence: a reload must never end the process that is serving.
    r.metrics.reloads_failed.fetch_add(1);
    r.metrics.last_reload_ok.store(false);
    spdlog::error("reload failed, the running configuration stays: {}", e.what());
  }
}

}  // namespace tollgate::app
