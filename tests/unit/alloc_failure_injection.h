// Allocation-failure injection for the tests that run a C ABI call with its
// Nth allocation failing (alloc_failure_test.cpp). The test executable
// replaces the global operator new and delete (every variant), so every C++
// allocation of the engine, on any thread (oneTBB's workers included), is
// counted; malloc is left alone: the sanitizers interpose it, and the engine
// allocates through new except inside zstd and oneTBB, which check for NULL.
#pragma once

#include <cstddef>
#include <cstdint>

namespace samba::testing {

// The allocations a call made while armed, and whether the failure fired.
struct InjectionResult {
  int64_t allocations = 0;
  bool failed = false;
};

// From now on the `nth` allocation (1-based, counted over all threads) throws
// std::bad_alloc (nothrow variants return nullptr); nth = 0 only counts.
void arm_allocation_failure(int64_t nth);
InjectionResult disarm_allocation_failure();

// While armed, count (and fail) only allocations of at least `bytes` (0, the
// default: every one); smaller ones pass untouched.
void set_counted_allocation_size(size_t bytes);

// Blocks allocated by operator new and not yet deleted: equal before and
// after a failed call unless the call leaked.
int64_t live_allocations();

}  // namespace samba::testing
