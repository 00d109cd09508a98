#pragma once
/// `tollgate [--config FILE]`: the running gateway (docs/design.md §2): start-up in order, the
/// workers and the admin listener, signals (SIGHUP reloads, SIGUSR1 reopens the access log, SIGTERM
/// and SIGINT drain), until the workers have stopped.

#include <string>
#include <string_view>

namespace tollgate::app {

/// Serves the gateway file at `path` as version `version`; the exit status (1: it could not
/// start, the reason logged).
int serve(const std::string& path, std::string_view version);

}  // namespace tollgate::app
