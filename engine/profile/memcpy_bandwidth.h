// The machine's memcpy bandwidth: what a kernel that only moves bytes could
// reach, so a profile can say how close each kernel's byte rate comes to it.
#pragma once

#include <cstdint>

namespace samba {

struct MemcpyBandwidth {
  // Bytes read plus bytes written per second (a copy of n bytes moves 2n),
  // the same convention as a kernel's bytes (its loads plus its stores).
  double bytes_per_s = 0;
  int threads = 0;            // copying at once
  uint64_t buffer_bytes = 0;  // the size of each of the two buffers
  int repetitions = 0;        // timed copies; the figure is the best one
};

// Measured on the first call (as many threads as the default pool has,
// copying a buffer four times the last-level cache, 64 to 256 MiB, five
// times; a few tenths of a second), then the same figure for the
// process's lifetime.
// Thread-safe.
const MemcpyBandwidth& memcpy_bandwidth();

}  // namespace samba
