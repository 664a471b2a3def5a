// The PEF reader: file bytes -> a verified ProgramDesc. A PEF is untrusted
// input: nothing in it is used before it is checked.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/pef/program.h"

namespace samba::pef {

// Reads a PEF from memory. In order: the file identifier ("SPEF"), the
// format version (a newer major is refused with VersionMismatch naming both
// versions; any minor of this runtime's major is accepted), the FlatBuffers
// verifier (offsets, sizes, nesting depth and table count bounded), the
// conversion (enum codes, union kinds, at most 256 attributes per op call,
// blob decompression of only the blobs tensors use, capped at each blob's
// declared size, their total at the memory plan's peak, and checked with
// its XXH64 checksum; blobs no tensor uses are left empty) and last
// verify_program. Work and memory grow linearly with the file's size, plus
// the decompressed blobs.
// Throws CorruptFile naming the field and index at fault; never reads out
// of bounds, whatever the bytes.
ProgramDesc parse_pef(std::span<const uint8_t> bytes);

// parse_pef of a file; IoError when it cannot be read. Messages of a
// corrupt file start with its path.
ProgramDesc read_pef(const std::string& path);

// The format version a PEF says it has, after checking only the identifier
// and the two version fields (CorruptFile otherwise). For tools that report
// on files this runtime cannot read.
struct PefVersion {
  uint32_t major = 0;
  uint32_t minor = 0;
};
PefVersion peek_pef_version(std::span<const uint8_t> bytes);

}  // namespace samba::pef
