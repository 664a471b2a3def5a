#include "engine/pef/blob_codec.h"

namespace samba::pef {

EncodedBlob encode_blob(std::span<const uint8_t> data, int level) {
  EncodedBlob out;
  out.checksum = blob_checksum(data);
  if (data.empty()) return out;
  out.zstd.resize(max_frame_bytes(data.size()));
  size_t n = compress_frame(data, out.zstd, level);
  if (n >= data.size()) {
    out.zstd = {};
    return out;
  }
  out.zstd.resize(n);
  out.zstd.shrink_to_fit();
  out.compressed = true;
  return out;
}

}  // namespace samba::pef
