#pragma once
/// systemd's readiness protocol (sd_notify(3)) without libsystemd: one datagram to the socket
/// that NOTIFY_SOCKET names, when it is set (Type=notify units); nothing otherwise.

#include <string_view>

namespace tollgate::app {

/// Sends `state` ("READY=1", "RELOADING=1\nMONOTONIC_USEC=...", "STOPPING=1") to systemd;
/// errors are ignored (the service runs the same without a manager listening).
void notify_systemd(std::string_view state) noexcept;

/// "RELOADING=1" with the MONOTONIC_USEC that systemd asks to come with it.
void notify_reloading() noexcept;

}  // namespace tollgate::app
