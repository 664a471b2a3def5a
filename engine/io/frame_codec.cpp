#include "engine/io/frame_codec.h"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <memory>

#include "engine/core/error.h"

namespace samba {
namespace {

struct CCtxFree {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

ZSTD_CCtx* thread_cctx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxFree> ctx(ZSTD_createCCtx());
  SAMBA_CHECK(ctx != nullptr, Status::OutOfMemory, "zstd: cannot create a compression context");
  return ctx.get();
}

ZSTD_DCtx* thread_dctx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxFree> ctx(ZSTD_createDCtx());
  SAMBA_CHECK(ctx != nullptr, Status::OutOfMemory, "zstd: cannot create a decompression context");
  return ctx.get();
}

// The first output buffer of a growing decompression: enough for data that
// compresses like weights do in one step, small enough that a frame
// declaring gigabytes it does not hold costs little before it is caught.
constexpr uint64_t kFirstOutputBytes = 4u << 20;

// Streams `frame` into `out`, which `growable` (when given) holds and may
// grow up to `size` bytes as output arrives. Once the output holds the
// declared size, the rest of the frame may only finish it (an empty last
// block): it decodes into a one-byte probe that must stay empty.
void stream_frame(std::span<const uint8_t> frame, uint64_t size, std::string_view what,
                  std::span<uint8_t> out, std::vector<uint8_t>* growable) {
  ZSTD_DCtx* dctx = thread_dctx();
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  ZSTD_outBuffer ob{out.data(), out.size(), 0};
  uint8_t extra = 0;
  ZSTD_outBuffer probe{&extra, 1, 0};
  for (;;) {
    if (growable && ob.pos == ob.size && ob.size < size) {
      growable->resize(static_cast<size_t>(std::min<uint64_t>(size, uint64_t{ob.size} * 2)));
      ob = ZSTD_outBuffer{growable->data(), growable->size(), ob.pos};
    }
    ZSTD_outBuffer* target = ob.pos == ob.size ? &probe : &ob;
    size_t in_before = in.pos, out_before = target->pos;
    size_t r = ZSTD_decompressStream(dctx, target, &in);
    SAMBA_CHECK(!ZSTD_isError(r), Status::CorruptFile, "{}: the zstd data is damaged ({})", what,
                ZSTD_getErrorName(r));
    SAMBA_CHECK(probe.pos == 0, Status::CorruptFile,
                "{}: decompresses to more than its declared {} bytes", what, size);
    if (r == 0) break;  // the frame is complete
    SAMBA_CHECK(in.pos != in_before || target->pos != out_before, Status::CorruptFile,
                "{}: the zstd data ends before its frame does (truncated)", what);
  }
  SAMBA_CHECK(ob.pos == size, Status::CorruptFile, "{}: decompresses to {} bytes, declared {}",
              what, ob.pos, size);
  SAMBA_CHECK(in.pos == in.size, Status::CorruptFile, "{}: {} bytes follow the zstd frame", what,
              in.size - in.pos);
}

}  // namespace

uint64_t xxh64(std::span<const uint8_t> bytes) { return XXH64(bytes.data(), bytes.size(), 0); }

Xxh64Stream::Xxh64Stream() : state_(XXH64_createState()) {
  SAMBA_CHECK(state_ != nullptr, Status::OutOfMemory, "cannot allocate a checksum state");
  XXH64_reset(state_, 0);
}
Xxh64Stream::~Xxh64Stream() { XXH64_freeState(state_); }
void Xxh64Stream::update(std::span<const uint8_t> bytes) {
  XXH64_update(state_, bytes.data(), bytes.size());
}
uint64_t Xxh64Stream::digest() const { return XXH64_digest(state_); }

void verify_xxh64(std::span<const uint8_t> bytes, uint64_t expected, std::string_view what) {
  const uint64_t sum = xxh64(bytes);
  SAMBA_CHECK(sum == expected, Status::CorruptFile,
              "{}: checksum mismatch: the {} bytes hash to {:016x}, the file says {:016x}", what,
              bytes.size(), sum, expected);
}

int min_compression_level() { return ZSTD_minCLevel(); }
int max_compression_level() { return ZSTD_maxCLevel(); }
size_t max_frame_bytes(size_t raw_bytes) { return ZSTD_compressBound(raw_bytes); }

size_t compress_frame(std::span<const uint8_t> raw, std::span<uint8_t> out, int level) {
  SAMBA_CHECK(out.size() >= max_frame_bytes(raw.size()), Status::Internal,
              "zstd compression of {} bytes needs room for {}, has {}", raw.size(),
              max_frame_bytes(raw.size()), out.size());
  size_t n = ZSTD_compressCCtx(thread_cctx(), out.data(), out.size(), raw.data(), raw.size(), level);
  SAMBA_CHECK(!ZSTD_isError(n), Status::Internal, "zstd compression of {} bytes failed: {}",
              raw.size(), ZSTD_getErrorName(n));
  return n;
}

void decompress_frame(std::span<const uint8_t> frame, std::span<uint8_t> out, std::string_view what) {
  stream_frame(frame, out.size(), what, out, nullptr);
}

std::vector<uint8_t> decompress_frame(std::span<const uint8_t> frame, uint64_t size,
                                      std::string_view what) {
  SAMBA_CHECK(size <= SIZE_MAX / 2, Status::CorruptFile,
              "{}: uncompressed size {} is not addressable", what, size);
  // Multiplying the frame size bounds the first buffer by what the file could
  // plausibly hold; zeros and repeats grow it by doubling.
  uint64_t first =
      std::min<uint64_t>(size, std::max<uint64_t>(kFirstOutputBytes, frame.size() * 4));
  std::vector<uint8_t> out(static_cast<size_t>(first));
  stream_frame(frame, size, what, out, &out);
  return out;
}

}  // namespace samba
