#include "gateway/app/logging.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "gateway/core/text.hpp"

namespace tollgate::app {

namespace {

/// `%*` in a pattern: the message as the inside of a JSON string.
class json_message final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    std::string escaped;
    core::append_json_escaped(escaped, std::string_view(msg.payload.data(), msg.payload.size()),
                              true);
    dest.append(escaped.data(), escaped.data() + escaped.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<json_message>();
  }
};

}  // namespace

void set_log_format(config::logging_config::log_format format) {
  if (format == config::logging_config::log_format::text) {
    spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    return;
  }
  auto f = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  f->add_flag<json_message>('*').set_pattern(
      R"({"time":"%Y-%m-%dT%H:%M:%S.%eZ","level":"%l","message":"%*"})");
  spdlog::set_formatter(std::move(f));
}

void open_access_log(core::log_file& log, const config::logging_config& next) {
  using destination = config::logging_config::destination;
  if (next.access_log == destination::off) return;  // lines are not written: nothing to open
  log.open(next.access_log == destination::file ? next.access_log_path : std::string());
}

}  // namespace tollgate::app
