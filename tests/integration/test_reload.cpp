// Reload through a real process: what a SIGHUP changes, what it refuses to change live, and
// what it logs about it.
