#pragma once
/// The gateway's own log lines (start-up, reload, errors) as text or as one JSON object a line
/// (logging.format), on the standard output; and the access log's destination.

#include "gateway/config/gateway.hpp"
#include "gateway/core/log_file.hpp"

namespace tollgate::app {

/// Formats spdlog's lines as `format` says: text `[2026-11-23 09:24:23.123] [info] message`,
/// or json `{"time":"2026-11-23T09:24:23.123Z","level":"info","message":"..."}` (UTC). Takes
/// effect at once, for every thread.
void set_log_format(config::logging_config::log_format format);

/// Points `log` where `next` says (the file opened again even when it is the same: SIGHUP and
/// SIGUSR1 reopen it for logrotate); nothing when the access log is off. Throws
/// std::runtime_error naming the file when it cannot be opened; then `log` is as it was.
void open_access_log(core::log_file& log, const config::logging_config& next);

}  // namespace tollgate::app
