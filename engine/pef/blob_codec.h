// How PEF blobs are stored: zstd frames (or raw bytes when zstd does not
// shrink them) with an XXH64 checksum of the uncompressed bytes.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace samba::pef {

uint64_t blob_checksum(std::span<const uint8_t> data);  // XXH64, seed 0

struct EncodedBlob {
  bool compressed = false;    // false: store the original bytes as they are
  std::vector<uint8_t> zstd;  // the zstd frame when compressed
  uint64_t checksum = 0;
};

// Compresses at `level`; deterministic for a given input and level. Each
// thread keeps one compression context, so many blobs encode cheaply.
EncodedBlob encode_blob(std::span<const uint8_t> data, int level);

// Decompresses one zstd frame that must hold exactly `size` bytes. Memory
// grows with the bytes actually produced and never past `size`, so a frame
// that expands further (a zip bomb) or declares a huge size it does not hold
// is refused after at most `size` bytes of work. Throws CorruptFile, the
// message starting with `what` ("blob 3").
std::vector<uint8_t> decompress_blob(std::span<const uint8_t> frame, uint64_t size,
                                     std::string_view what);

}  // namespace samba::pef
