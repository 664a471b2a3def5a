// The one codec of Samba's files: zstd frames checked with XXH64. PEF blobs
// (engine/pef/blob_codec.h) and checkpoint frames (engine/checkpoint/) both
// compress, hash and decompress through it, so a fix to the handling of
// hostile input applies to every file the engine reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

struct XXH64_state_s;  // xxhash.h

namespace samba {

// XXH64 with seed 0: the checksum every Samba file stores.
uint64_t xxh64(std::span<const uint8_t> bytes);

// XXH64 over bytes given in pieces (a header and the table after it).
class Xxh64Stream {
 public:
  Xxh64Stream();
  ~Xxh64Stream();
  Xxh64Stream(const Xxh64Stream&) = delete;
  Xxh64Stream& operator=(const Xxh64Stream&) = delete;
  void update(std::span<const uint8_t> bytes);
  uint64_t digest() const;

 private:
  XXH64_state_s* state_;
};

// Throws CorruptFile "<what>: checksum mismatch: ..." unless XXH64(bytes)
// is `expected`.
void verify_xxh64(std::span<const uint8_t> bytes, uint64_t expected, std::string_view what);

// The compression levels zstd accepts, and the largest frame `raw_bytes`
// can compress to.
int min_compression_level();
int max_compression_level();
size_t max_frame_bytes(size_t raw_bytes);

// Compresses `raw` into one zstd frame in `out` (at least
// max_frame_bytes(raw.size()) bytes) and returns the frame's size. The frame
// records its content size and carries no zstd checksum (the files store
// XXH64 of their own). Deterministic for a given input and level; each
// thread keeps one compression context.
size_t compress_frame(std::span<const uint8_t> raw, std::span<uint8_t> out, int level);

// Decompresses one zstd frame that must hold exactly out.size() bytes into
// `out`. A frame that is damaged, truncated, followed by other bytes, or that
// decodes to fewer or more bytes is refused with CorruptFile, the message
// starting with `what` ("blob 3"); no more than out.size() bytes are written.
void decompress_frame(std::span<const uint8_t> frame, std::span<uint8_t> out, std::string_view what);

// The same for a frame whose declared size comes from an untrusted file:
// memory grows with the bytes actually produced and never past `size`, so a
// frame that expands further (a zip bomb) or declares a huge size it does
// not hold is refused after at most `size` bytes of work.
std::vector<uint8_t> decompress_frame(std::span<const uint8_t> frame, uint64_t size,
                                      std::string_view what);

}  // namespace samba
