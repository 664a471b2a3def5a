// A bound on single host allocations, for processes that must stay within a
// memory budget whatever a model asks for (the fuzz targets run arbitrary
// models, and a valid one may compute a Range of billions of elements).
#pragma once

#include <cstddef>

namespace samba {

// The largest single host allocation, in bytes: a larger one fails with
// OutOfMemory naming the limit, as if the system had refused it. Unlimited
// (SIZE_MAX) by default. Process-wide; thread-safe.
void set_host_allocation_limit(size_t bytes);
size_t host_allocation_limit();

}  // namespace samba
