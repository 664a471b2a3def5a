// Which sanitizer the code is compiled under, the same way for GCC (which
// defines __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__) and clang (which
// answers __has_feature): SAMBA_ASAN and SAMBA_TSAN are 1 or 0.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define SAMBA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SAMBA_ASAN 1
#endif
#endif
#ifndef SAMBA_ASAN
#define SAMBA_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define SAMBA_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SAMBA_TSAN 1
#endif
#endif
#ifndef SAMBA_TSAN
#define SAMBA_TSAN 0
#endif
