// The PEF writer: ProgramDesc -> the FlatBuffers file of engine/pef/pef.fbs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/pef/program.h"

namespace samba::pef {

// zstd level of blobs: level 1 writes 64 MiB of weights in under 0.1 s
// (bench/pef_bench.cpp) and still shrinks zeros and smooth data to little;
// higher levels buy a few percent on float weights at several times the cost.
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
