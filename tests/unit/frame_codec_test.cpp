// The codec PEF blobs and checkpoint frames share (engine/io/frame_codec.h):
// zstd frames that round-trip, XXH64 checksums that catch a changed byte, and
// decompression that refuses damaged, truncated, trailing and oversized
// frames without producing more than the declared bytes.
#include "engine/io/frame_codec.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/core/error.h"

namespace samba {
namespace {

// Bytes that compress but not to nothing: a slow ramp with noise.
std::vector<uint8_t> sample_bytes(size_t n) {
  std::vector<uint8_t> out(n);
  uint32_t x = 12345;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1103515245u + 12345u;
    out[i] = static_cast<uint8_t>((i / 64) + ((x >> 16) & 3));
  }
  return out;
}

std::vector<uint8_t> compress(const std::vector<uint8_t>& raw, int level = 3) {
  std::vector<uint8_t> frame(max_frame_bytes(raw.size()));
  frame.resize(compress_frame(raw, frame, level));
  return frame;
}

// The status and message of what `f` throws; Ok and "" when it returns.
std::pair<Status, std::string> outcome(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {Status::Ok, ""};
}

#define EXPECT_REFUSED(call, needle)                                    \
  do {                                                                  \
    auto [st, msg] = outcome([&] { call; });                            \
    EXPECT_EQ(st, Status::CorruptFile) << msg;                          \
    EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg; \
  } while (0)

TEST(FrameCodec, RoundTripsIntoAVectorAndIntoAGivenBuffer) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{1000}, size_t{5} << 20}) {
    const std::vector<uint8_t> raw = sample_bytes(n);
    const std::vector<uint8_t> frame = compress(raw);
    if (n >= 1000) {
      EXPECT_LT(frame.size(), raw.size());
    }
    EXPECT_EQ(decompress_frame(frame, raw.size(), "blob"), raw) << n << " bytes";
    std::vector<uint8_t> out(raw.size(), 0xee);
    decompress_frame(frame, out, "frame");
    EXPECT_EQ(out, raw) << n << " bytes";
  }
}

TEST(FrameCodec, CompressionIsDeterministicAndLevelsAreChecked) {
  const std::vector<uint8_t> raw = sample_bytes(100000);
  EXPECT_EQ(compress(raw, 5), compress(raw, 5));
  EXPECT_LT(min_compression_level(), 0);
  EXPECT_GE(max_compression_level(), 19);
  std::vector<uint8_t> small(10);
  EXPECT_EQ(outcome([&] { compress_frame(raw, small, 3); }).first, Status::Internal);
}

TEST(FrameCodec, ChecksumIsXxh64AndCatchesOneChangedByte) {
  EXPECT_EQ(xxh64({}), 0xEF46DB3751D8E999ull);  // XXH64 of nothing, seed 0
  std::vector<uint8_t> raw = sample_bytes(4096);
  const uint64_t sum = xxh64(raw);
  Xxh64Stream pieces;
  pieces.update(std::span<const uint8_t>(raw).first(100));
  pieces.update(std::span<const uint8_t>(raw).subspan(100));
  EXPECT_EQ(pieces.digest(), sum);
  EXPECT_NO_THROW(verify_xxh64(raw, sum, "blob 2"));
  raw[2000] ^= 1;
  EXPECT_REFUSED(verify_xxh64(raw, sum, "blob 2"), "blob 2: checksum mismatch");
}

TEST(FrameCodec, TruncatedDamagedAndTrailingFramesAreRefused) {
  const std::vector<uint8_t> raw = sample_bytes(65536);
  const std::vector<uint8_t> frame = compress(raw);
  std::vector<uint8_t> out(raw.size());

  const std::vector<uint8_t> cut(frame.begin(), frame.end() - 5);
  EXPECT_REFUSED(decompress_frame(cut, raw.size(), "blob 1"), "blob 1: ");
  EXPECT_REFUSED(decompress_frame(cut, out, "frame 4"), "frame 4: ");
  const std::vector<uint8_t> header_only(frame.begin(), frame.begin() + 6);
  EXPECT_REFUSED(decompress_frame(header_only, out, "frame 4"), "truncated");

  const std::vector<uint8_t> garbage(frame.size(), 0x5a);
  EXPECT_REFUSED(decompress_frame(garbage, out, "frame 4"), "frame 4: the zstd data is damaged");

  std::vector<uint8_t> trailing = frame;
  trailing.push_back(0);
  EXPECT_REFUSED(decompress_frame(trailing, raw.size(), "blob 1"),
                 "blob 1: 1 bytes follow the zstd frame");
}

TEST(FrameCodec, DeclaredSizesAreEnforcedBothWays) {
  const std::vector<uint8_t> raw = sample_bytes(10000);
  const std::vector<uint8_t> frame = compress(raw);
  // Expanding past the declared size stops there, whichever the entry point.
  EXPECT_REFUSED(decompress_frame(frame, 9999, "blob 0"),
                 "blob 0: decompresses to more than its declared 9999 bytes");
  std::vector<uint8_t> small(100, 0xee);
  EXPECT_REFUSED(decompress_frame(frame, small, "frame 0"), "more than its declared 100 bytes");
  // A frame holding less than declared is refused, also when the declared
  // size is far beyond memory (only what the frame holds is allocated).
  EXPECT_REFUSED(decompress_frame(frame, uint64_t{1} << 40, "blob 0"),
                 "blob 0: decompresses to 10000 bytes, declared 1099511627776");
  std::vector<uint8_t> big(10001);
  EXPECT_REFUSED(decompress_frame(frame, big, "frame 0"),
                 "decompresses to 10000 bytes, declared 10001");
  EXPECT_REFUSED(decompress_frame(frame, UINT64_MAX, "blob 0"), "is not addressable");
}

TEST(FrameCodec, ZipBombCostsOnlyTheDeclaredSize) {
  const std::vector<uint8_t> zeros(64u << 20, 0);
  const std::vector<uint8_t> bomb = compress(zeros);
  ASSERT_LT(bomb.size(), 64u << 10);
  EXPECT_REFUSED(decompress_frame(bomb, 1000, "blob 0"), "more than its declared 1000 bytes");
}

}  // namespace
}  // namespace samba
