// Whole-file reads (PEFs, their logs). Writes go through AtomicFile
// (atomic_file.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace samba {

// Opens `path` for reading and returns the descriptor, refusing anything but a
// regular file before any read can block: the open is non-blocking (a FIFO
// with no writer would otherwise wait forever), the kind is checked with
// fstat on that same descriptor (no race with a rename), and only then is the
// descriptor made blocking. `what` names the file's role in messages
// ("PEF", "checkpoint"). Throws IoError naming the path and what it is.
int open_regular_file_for_read(const std::string& path, const char* what);

// Reads the whole regular file; throws IoError naming the path and the reason.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace samba
