// The PEF writer: ProgramDesc -> the FlatBuffers file of engine/pef/pef.fbs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/pef/program.h"

namespace samba::pef {

// zstd level of blobs: level 1 keeps multi-MB weights well under a second
// to write (about 0.5 GB/s a core) and still shrinks zeros and repeated data
// to almost nothing; higher levels buy a few percent on float weights.
inline constexpr int kBlobZstdLevel = 1;

// The bytes of a PEF holding `program`. Deterministic: the same program gives
// the same bytes, whatever the thread count. Blobs are zstd-compressed (or
// kept raw when that is not smaller) with an XXH64 checksum of their bytes.
// The program is written as given: run verify_program first (the compiler
// does) to refuse a program no reader would accept. Throws Unsupported when
// the file would exceed the 2 GiB a FlatBuffers file can address.
std::vector<uint8_t> serialize_pef(const ProgramDesc& program);

// serialize_pef to `path`, atomically (a temporary file, fsync, rename):
// readers see the old file or the new one, never a part. Throws IoError.
void write_pef(const ProgramDesc& program, const std::string& path);

}  // namespace samba::pef
