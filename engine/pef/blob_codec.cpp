#include "engine/pef/blob_codec.h"

#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <memory>

#include "engine/core/error.h"

namespace samba::pef {
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

// The first output buffer: enough for data that compresses like weights do
// in one step, small enough that a frame declaring gigabytes it does not
// hold costs little before it is caught.
constexpr uint64_t kFirstOutputBytes = 4u << 20;

}  // namespace

uint64_t blob_checksum(std::span<const uint8_t> data) { return XXH64(data.data(), data.size(), 0); }

EncodedBlob encode_blob(std::span<const uint8_t> data, int level) {
  EncodedBlob out;
  out.checksum = blob_checksum(data);
  if (data.empty()) return out;
  out.zstd.resize(ZSTD_compressBound(data.size()));
  ZSTD_CCtx* cctx = thread_cctx();
  size_t n =
      ZSTD_compressCCtx(cctx, out.zstd.data(), out.zstd.size(), data.data(), data.size(), level);
  SAMBA_CHECK(!ZSTD_isError(n), Status::Internal, "zstd compression of {} bytes failed: {}",
              data.size(), ZSTD_getErrorName(n));
  if (n >= data.size()) {
    out.zstd = {};
    return out;
  }
  out.zstd.resize(n);
  out.zstd.shrink_to_fit();
  out.compressed = true;
  return out;
}

std::vector<uint8_t> decompress_blob(std::span<const uint8_t> frame, uint64_t size,
                                     std::string_view what) {
  SAMBA_CHECK(size <= SIZE_MAX / 2, Status::CorruptFile,
              "{}: uncompressed size {} is not addressable", what, size);
  ZSTD_DCtx* dctx = thread_dctx();
  ZSTD_DCtx_reset(dctx, ZSTD_reset_session_only);
  // Multiplying the frame size bounds the first buffer by what the file could
  // plausibly hold; zeros and repeats grow it by doubling.
  uint64_t first =
      std::min<uint64_t>(size, std::max<uint64_t>(kFirstOutputBytes, frame.size() * 4));
  std::vector<uint8_t> out(static_cast<size_t>(first));
  ZSTD_inBuffer in{frame.data(), frame.size(), 0};
  ZSTD_outBuffer ob{out.data(), out.size(), 0};
  // Once the output holds the declared size, the rest of the frame may only
  // finish it (an empty last block, the frame checksum): it decodes into a
  // one-byte probe that must stay empty.
  uint8_t extra = 0;
  ZSTD_outBuffer probe{&extra, 1, 0};
  for (;;) {
    if (ob.pos == ob.size && out.size() < size) {
      out.resize(static_cast<size_t>(std::min<uint64_t>(size, uint64_t{out.size()} * 2)));
      ob = ZSTD_outBuffer{out.data(), out.size(), ob.pos};
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
  return out;
}

}  // namespace samba::pef
