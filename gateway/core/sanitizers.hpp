#pragma once
/// Which sanitizer a build runs under, for the few places that allocate differently there.

/// Defined under AddressSanitizer (GCC's -fsanitize=address, clang's too). Memory mapped
/// from the kernel rather than taken from the heap is kept on the heap under it: LeakSanitizer
/// does not look inside mappings, and would call leaked what is reachable only from one.
#if defined(__SANITIZE_ADDRESS__)
#define TOLLGATE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TOLLGATE_ASAN 1
#endif
#endif
