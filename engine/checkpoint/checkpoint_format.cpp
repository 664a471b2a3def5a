#include "engine/checkpoint/checkpoint_format.h"

#include <cstring>
#include <unordered_set>

#include "engine/core/error.h"
#include "engine/io/frame_codec.h"

namespace samba {

std::string_view checkpoint_kind_name(CheckpointKind k) {
  switch (k) {
    case CheckpointKind::Parameter:
      return "parameter";
    case CheckpointKind::OptimizerState:
      return "optimizer_state";
    case CheckpointKind::Buffer:
      return "buffer";
    case CheckpointKind::Gradient:
      return "gradient";
    case CheckpointKind::Other:
      return "other";
  }
  return "unknown";
}

namespace checkpoint_format {
namespace {

class ByteWriter {
 public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void bytes(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.insert(out_.end(), s.begin(), s.end());
  }
  std::vector<uint8_t>& out() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

uint32_t load_u32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(p[i]) << (8 * i);
  return v;
}
uint64_t load_u64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// Reads the table; every read is bounds-checked and says what it was
// reading when the table ends early.
class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> in, const std::string& path) : in_(in), path_(path) {}

  uint8_t u8(const char* what) { return *take(1, what); }
  uint32_t u32(const char* what) { return load_u32(take(4, what)); }
  uint64_t u64(const char* what) { return load_u64(take(8, what)); }
  std::string text(uint32_t max_bytes, const char* what) {
    const uint32_t n = u32(what);
    if (n > max_bytes)
      fail(Status::CorruptFile, "checkpoint '{}': {} is {} bytes long; at most {} are allowed",
           path_, what, n, max_bytes);
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  size_t remaining() const { return in_.size() - pos_; }

 private:
  const uint8_t* take(size_t n, const char* what) {
    if (n > remaining())
      fail(Status::CorruptFile,
           "checkpoint '{}': the table ends inside {} (needs {} bytes at table offset {}, {} left)",
           path_, what, n, pos_, remaining());
    const uint8_t* p = in_.data() + pos_;
    pos_ += n;
    return p;
  }

  std::span<const uint8_t> in_;
  const std::string& path_;
  size_t pos_ = 0;
};

// a + b, or a CorruptFile error when it does not fit in 64 bits.
uint64_t add_checked(uint64_t a, uint64_t b, const std::string& path, const std::string& what) {
  if (b > UINT64_MAX - a) fail(Status::CorruptFile, "checkpoint '{}': {} overflows", path, what);
  return a + b;
}

EntryRecord decode_entry(ByteReader& r, const Header& h, uint32_t index, uint64_t expected_offset,
                         const std::string& path) {
  EntryRecord e;
  e.name = r.text(kMaxNameBytes, "an entry name");
  const std::string where = fmt::format("entry {} ('{}')", index, e.name);
  SAMBA_CHECK(!e.name.empty(), Status::CorruptFile, "checkpoint '{}': entry {} has an empty name",
              path, index);
  const uint8_t kind = r.u8("an entry kind");
  const uint8_t dtype = r.u8("an entry dtype");
  const uint8_t rank = r.u8("an entry rank");
  const uint8_t codec = r.u8("an entry codec");
  SAMBA_CHECK(kind < kNumCheckpointKinds, Status::CorruptFile,
              "checkpoint '{}': {} has kind code {}; known codes are 0..{}", path, where, kind,
              kNumCheckpointKinds - 1);
  SAMBA_CHECK(is_valid_dtype(dtype), Status::CorruptFile,
              "checkpoint '{}': {} has dtype code {}; known codes are 0..{}", path, where, dtype,
              kNumDTypes - 1);
  SAMBA_CHECK(rank <= kMaxRank, Status::CorruptFile,
              "checkpoint '{}': {} has rank {}; at most {} is supported", path, where, rank,
              kMaxRank);
  SAMBA_CHECK(codec == kCodecZstd, Status::CorruptFile,
              "checkpoint '{}': {} has codec {}; expected {} (zstd)", path, where, codec,
              kCodecZstd);
  e.kind = static_cast<CheckpointKind>(kind);
  e.dtype = static_cast<DType>(dtype);

  // numel x element size, refusing negative dims and overflow.
  uint64_t bytes = element_size(e.dtype);
  e.shape.resize(rank);
  for (uint8_t d = 0; d < rank; ++d) {
    const int64_t dim = static_cast<int64_t>(r.u64("a dimension"));
    SAMBA_CHECK(dim >= 0, Status::CorruptFile, "checkpoint '{}': {} has dimension {} = {}", path,
                where, d, dim);
    e.shape[d] = dim;
    if (dim != 0 && bytes > (uint64_t{1} << 62) / static_cast<uint64_t>(dim))
      fail(Status::CorruptFile, "checkpoint '{}': {} has a shape whose byte size overflows", path,
           where);
    bytes *= static_cast<uint64_t>(dim);
  }
  e.raw_bytes = r.u64("a raw size");
  SAMBA_CHECK(e.raw_bytes == bytes, Status::CorruptFile,
              "checkpoint '{}': {} says {} raw bytes; its {} shape {} needs {}", path, where,
              e.raw_bytes, dtype_name(e.dtype), dims_str(e.shape), bytes);
  e.data_offset = r.u64("a data offset");
  e.stored_bytes = r.u64("a stored size");
  SAMBA_CHECK(e.data_offset == expected_offset, Status::CorruptFile,
              "checkpoint '{}': {} starts at data offset {}; the previous entry ends at {}", path,
              where, e.data_offset, expected_offset);
  const uint64_t end = add_checked(e.data_offset, e.stored_bytes, path, where + " data end");
  SAMBA_CHECK(end <= h.data_bytes, Status::CorruptFile,
              "checkpoint '{}': {} ends at data offset {}, past the {}-byte data section", path,
              where, end, h.data_bytes);

  const uint32_t frames = r.u32("a frame count");
  const uint64_t expected_frames = frame_count(e.raw_bytes, h.block_bytes);
  SAMBA_CHECK(frames == expected_frames, Status::CorruptFile,
              "checkpoint '{}': {} has {} frames; {} raw bytes in blocks of {} make {}", path,
              where, frames, e.raw_bytes, h.block_bytes, expected_frames);
  SAMBA_CHECK(static_cast<uint64_t>(frames) * kFrameRecordBytes <= r.remaining(),
              Status::CorruptFile, "checkpoint '{}': the table ends inside the {} frames of {}",
              path, frames, where);
  e.frames.resize(frames);
  uint64_t sum = 0;
  for (uint32_t f = 0; f < frames; ++f) {
    Frame& fr = e.frames[f];
    fr.stored_bytes = r.u64("a frame size");
    fr.stored_checksum = r.u64("a frame checksum");
    fr.raw_checksum = r.u64("a frame checksum");
    const uint64_t bound = max_frame_bytes(frame_raw_bytes(e.raw_bytes, h.block_bytes, f));
    SAMBA_CHECK(
        fr.stored_bytes > 0 && fr.stored_bytes <= bound, Status::CorruptFile,
        "checkpoint '{}': frame {} of {} is {} bytes; a frame of that tensor is 1 to {} bytes",
        path, f, where, fr.stored_bytes, bound);
    sum += fr.stored_bytes;  // frames <= 2^32, each <= ~2^31: cannot overflow
  }
  SAMBA_CHECK(sum == e.stored_bytes, Status::CorruptFile,
              "checkpoint '{}': the frames of {} add up to {} bytes; the entry says {}", path,
              where, sum, e.stored_bytes);
  return e;
}

}  // namespace

uint64_t frame_count(uint64_t raw_bytes, uint32_t block_bytes) {
  return raw_bytes / block_bytes + (raw_bytes % block_bytes != 0);
}

uint64_t frame_raw_bytes(uint64_t raw_bytes, uint32_t block_bytes, uint64_t i) {
  const uint64_t begin = i * block_bytes;
  return std::min<uint64_t>(block_bytes, raw_bytes - begin);
}

std::vector<uint8_t> encode_table(std::span<const EntryRecord> entries,
                                  const CheckpointMetadata& metadata) {
  ByteWriter w;
  for (const EntryRecord& e : entries) {
    w.bytes(e.name);
    w.u8(static_cast<uint8_t>(e.kind));
    w.u8(static_cast<uint8_t>(e.dtype));
    w.u8(static_cast<uint8_t>(e.shape.size()));
    w.u8(kCodecZstd);
    for (int64_t d : e.shape) w.u64(static_cast<uint64_t>(d));
    w.u64(e.raw_bytes);
    w.u64(e.data_offset);
    w.u64(e.stored_bytes);
    w.u32(static_cast<uint32_t>(e.frames.size()));
    for (const Frame& f : e.frames) {
      w.u64(f.stored_bytes);
      w.u64(f.stored_checksum);
      w.u64(f.raw_checksum);
    }
  }
  for (const auto& [key, value] : metadata) {
    w.bytes(key);
    w.bytes(value);
  }
  return std::move(w.out());
}

std::array<uint8_t, kHeaderBytes> encode_header(const Header& h) {
  ByteWriter w;
  for (uint8_t c : kMagic) w.u8(c);
  w.u32(h.format_major);
  w.u32(h.format_minor);
  w.u32(h.flags);
  w.u32(h.entry_count);
  w.u32(h.metadata_count);
  w.u32(h.block_bytes);
  w.u64(h.table_bytes);
  w.u64(h.data_bytes);
  w.u64(h.file_bytes);
  w.u64(h.checksum);
  std::array<uint8_t, kHeaderBytes> out;
  std::memcpy(out.data(), w.out().data(), kHeaderBytes);
  return out;
}

uint64_t table_checksum(std::span<const uint8_t, kHeaderBytes> header,
                        std::span<const uint8_t> table) {
  Xxh64Stream sum;
  sum.update(header.first(kHeaderBytes - 8));
  sum.update(table);
  return sum.digest();
}

Header decode_header(std::span<const uint8_t, kHeaderBytes> b, uint64_t file_bytes,
                     const std::string& path) {
  SAMBA_CHECK(std::memcmp(b.data(), kMagic.data(), kMagic.size()) == 0, Status::CorruptFile,
              "checkpoint '{}': not a Samba checkpoint (the file does not start with \"SMBACKPT\")",
              path);
  Header h;
  h.format_major = load_u32(&b[8]);
  h.format_minor = load_u32(&b[12]);
  h.flags = load_u32(&b[16]);
  h.entry_count = load_u32(&b[20]);
  h.metadata_count = load_u32(&b[24]);
  h.block_bytes = load_u32(&b[28]);
  h.table_bytes = load_u64(&b[32]);
  h.data_bytes = load_u64(&b[40]);
  h.file_bytes = load_u64(&b[48]);
  h.checksum = load_u64(&b[56]);
  SAMBA_CHECK(
      h.format_major == kCheckpointFormatMajor, Status::VersionMismatch,
      "checkpoint '{}' has format {}.{}; this build reads format {}.x{}", path, h.format_major,
      h.format_minor, kCheckpointFormatMajor,
      h.format_major > kCheckpointFormatMajor ? " (the file was written by a newer Samba)" : "");
  SAMBA_CHECK((h.flags & ~kKnownFlags) == 0, Status::Unsupported,
              "checkpoint '{}' uses flags {:#x} that this build does not know (known: {:#x})", path,
              h.flags, kKnownFlags);
  SAMBA_CHECK(h.block_bytes >= kMinBlockBytes && h.block_bytes <= kMaxBlockBytes,
              Status::CorruptFile, "checkpoint '{}': block size {} is outside {}..{}", path,
              h.block_bytes, kMinBlockBytes, kMaxBlockBytes);
  SAMBA_CHECK(h.table_bytes <= kMaxTableBytes, Status::CorruptFile,
              "checkpoint '{}': the table claims {} bytes; at most {} are allowed", path,
              h.table_bytes, kMaxTableBytes);
  SAMBA_CHECK(h.table_bytes <= file_bytes - kHeaderBytes, Status::CorruptFile,
              "checkpoint '{}' is {} bytes, too short for its {}-byte table: truncated?", path,
              file_bytes, h.table_bytes);
  return h;
}

Table decode_table(const Header& h, std::span<const uint8_t, kHeaderBytes> header_bytes,
                   std::span<const uint8_t> table, uint64_t file_bytes, const std::string& path) {
  const uint64_t sum = table_checksum(header_bytes, table);
  SAMBA_CHECK(sum == h.checksum, Status::CorruptFile,
              "checkpoint '{}': the header and table fail their checksum (stored {:016x}, computed "
              "{:016x})",
              path, h.checksum, sum);
  // Trusted from here on, but a buggy writer is still caught.
  SAMBA_CHECK(h.data_bytes <= UINT64_MAX - kHeaderBytes - h.table_bytes &&
                  h.file_bytes == kHeaderBytes + h.table_bytes + h.data_bytes,
              Status::CorruptFile,
              "checkpoint '{}': header sizes disagree (file {} bytes, 64 + table {} + data {})",
              path, h.file_bytes, h.table_bytes, h.data_bytes);
  SAMBA_CHECK(file_bytes == h.file_bytes, Status::CorruptFile,
              "checkpoint '{}' is {} bytes; its header says {}: the file was {}", path, file_bytes,
              h.file_bytes, file_bytes < h.file_bytes ? "truncated" : "extended");

  Table t;
  t.header = h;
  ByteReader r(table, path);
  // An entry takes at least 36 bytes: no huge reservation from a hostile count.
  t.entries.reserve(std::min<uint64_t>(h.entry_count, table.size() / 36));
  std::unordered_set<std::string_view> names;
  uint64_t offset = 0;
  for (uint32_t i = 0; i < h.entry_count; ++i) {
    t.entries.push_back(decode_entry(r, h, i, offset, path));
    offset = t.entries.back().data_offset + t.entries.back().stored_bytes;
  }
  for (const EntryRecord& e : t.entries)
    SAMBA_CHECK(names.insert(e.name).second, Status::CorruptFile,
                "checkpoint '{}': entry name '{}' appears twice", path, e.name);
  SAMBA_CHECK(offset == h.data_bytes, Status::CorruptFile,
              "checkpoint '{}': the entries' data ends at {}; the data section is {} bytes", path,
              offset, h.data_bytes);
  std::unordered_set<std::string> keys;
  t.metadata.reserve(std::min<uint64_t>(h.metadata_count, table.size() / 8));
  for (uint32_t i = 0; i < h.metadata_count; ++i) {
    std::string key = r.text(kMaxNameBytes, "a metadata key");
    std::string value = r.text(kMaxMetadataBytes, "a metadata value");
    SAMBA_CHECK(keys.insert(key).second, Status::CorruptFile,
                "checkpoint '{}': metadata key '{}' appears twice", path, key);
    t.metadata.emplace_back(std::move(key), std::move(value));
  }
  SAMBA_CHECK(r.remaining() == 0, Status::CorruptFile,
              "checkpoint '{}': {} unexpected bytes follow the table", path, r.remaining());
  return t;
}

}  // namespace checkpoint_format
}  // namespace samba
