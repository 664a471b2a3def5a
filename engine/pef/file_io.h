// Whole-file reads and atomic whole-file writes, for PEFs and their logs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace samba::pef {

// Reads the whole file; throws IoError naming the path and the reason.
std::vector<uint8_t> read_file_bytes(const std::string& path);

// Writes `bytes` to `path` so that readers see either the old file or the
// complete new one, never a part: a temporary file beside `path` is written,
// flushed to disk (fsync) and renamed over it. Throws IoError naming the path
// and the reason; on failure the temporary file is removed and `path` is
// left as it was.
void write_file_atomically(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace samba::pef
