// Whole-file reads (PEFs, their logs). Writes go through AtomicFile
// (atomic_file.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace samba {

// Reads the whole file; throws IoError naming the path and the reason.
std::vector<uint8_t> read_file_bytes(const std::string& path);

}  // namespace samba
