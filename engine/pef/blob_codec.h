// How PEF blobs are stored: one zstd frame of the engine's codec
// (engine/io/frame_codec.h), or the raw bytes when zstd does not shrink
// them, with the XXH64 checksum of the uncompressed bytes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/io/frame_codec.h"

namespace samba::pef {

inline uint64_t blob_checksum(std::span<const uint8_t> data) { return xxh64(data); }

struct EncodedBlob {
  bool compressed = false;    // false: store the original bytes as they are
  std::vector<uint8_t> zstd;  // the zstd frame when compressed
  uint64_t checksum = 0;
};

// Compresses at `level`; deterministic for a given input and level.
EncodedBlob encode_blob(std::span<const uint8_t> data, int level);

}  // namespace samba::pef
