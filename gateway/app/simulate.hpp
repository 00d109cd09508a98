#pragma once
/// `tollgate simulate`: the offline policy simulator of docs/design.md §13 (gateway/sim/).

namespace tollgate::app {

/// Runs `tollgate simulate` with the arguments after "simulate"; returns the exit status:
/// 0 done, 1 a configuration that does not load or a log that cannot be read, 2 bad usage.
int simulate(int argc, char** argv);

}  // namespace tollgate::app
