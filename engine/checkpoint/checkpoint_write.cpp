// Saving a checkpoint: tensors are cut into frames of block_bytes raw bytes,
// compressed and checksummed in parallel a group at a time, and streamed to
// a temporary file in order; the header and table, whose sizes are known
// before any data, are patched in at the end.
#include <cstring>
#include <unordered_set>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/checkpoint_format.h"
#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/io/atomic_file.h"
#include "engine/io/frame_codec.h"

namespace samba {
namespace {

using namespace checkpoint_format;

// One frame to compress: where its raw bytes are and where its result goes.
struct FrameJob {
  size_t entry = 0;
  uint64_t frame = 0;
  const uint8_t* src = nullptr;
  size_t raw = 0;
  size_t out_offset = 0;  // into the group's output arena
  size_t stored = 0;      // the frame's size
  uint64_t stored_checksum = 0;
  uint64_t raw_checksum = 0;
};

void check_entries(const std::string& path, std::span<const CheckpointEntry> entries,
                   const CheckpointMetadata& metadata, const SaveOptions& options) {
  SAMBA_CHECK(options.block_bytes >= kMinBlockBytes && options.block_bytes <= kMaxBlockBytes,
              Status::InvalidArgument, "saving checkpoint '{}': block size {} is outside {}..{}",
              path, options.block_bytes, kMinBlockBytes, kMaxBlockBytes);
  SAMBA_CHECK(options.compression_level >= min_compression_level() &&
                  options.compression_level <= max_compression_level(),
              Status::InvalidArgument,
              "saving checkpoint '{}': compression level {} is outside {}..{}", path,
              options.compression_level, min_compression_level(), max_compression_level());
  SAMBA_CHECK(entries.size() < UINT32_MAX && metadata.size() < UINT32_MAX, Status::InvalidArgument,
              "saving checkpoint '{}': too many entries ({}) or metadata items ({})", path,
              entries.size(), metadata.size());
  std::unordered_set<std::string_view> names;
  for (size_t i = 0; i < entries.size(); ++i) {
    const CheckpointEntry& e = entries[i];
    SAMBA_CHECK(!e.name.empty() && e.name.size() <= kMaxNameBytes, Status::InvalidArgument,
                "saving checkpoint '{}': entry {} has a name of {} bytes; expected 1 to {}", path,
                i, e.name.size(), kMaxNameBytes);
    SAMBA_CHECK(names.insert(e.name).second, Status::InvalidArgument,
                "saving checkpoint '{}': the name '{}' is given twice", path, e.name);
    SAMBA_CHECK(static_cast<int>(e.kind) < kNumCheckpointKinds, Status::InvalidArgument,
                "saving checkpoint '{}': entry '{}' has kind code {}; expected 0..{}", path, e.name,
                static_cast<int>(e.kind), kNumCheckpointKinds - 1);
    SAMBA_CHECK(e.tensor.defined(), Status::NullPointer,
                "saving checkpoint '{}': entry '{}' has no tensor", path, e.name);
    SAMBA_CHECK(e.tensor.has_data(), Status::InvalidState,
                "saving checkpoint '{}': tensor '{}' of shape {} has no data (symbolic or cleared)",
                path, e.name, dims_str(e.tensor.shape()));
    SAMBA_CHECK(e.tensor.dim() <= kMaxRank, Status::InvalidArgument,
                "saving checkpoint '{}': tensor '{}' has rank {}; at most {} is supported", path,
                e.name, e.tensor.dim(), kMaxRank);
  }
  std::unordered_set<std::string_view> keys;
  for (const auto& [key, value] : metadata) {
    SAMBA_CHECK(
        key.size() <= kMaxNameBytes && value.size() <= kMaxMetadataBytes, Status::InvalidArgument,
        "saving checkpoint '{}': metadata '{}' is too long (key {} bytes, at most {}; value {} "
        "bytes, at "
        "most {})",
        path, key.substr(0, 64), key.size(), kMaxNameBytes, value.size(), kMaxMetadataBytes);
    SAMBA_CHECK(keys.insert(key).second, Status::InvalidArgument,
                "saving checkpoint '{}': metadata key '{}' is given twice", path, key);
  }
}

}  // namespace

void save_checkpoint(const std::string& path, std::span<const CheckpointEntry> entries,
                     const CheckpointMetadata& metadata, const SaveOptions& options) {
  check_entries(path, entries, metadata, options);
  const uint32_t block = options.block_bytes;

  std::vector<EntryRecord> records(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    EntryRecord& r = records[i];
    r.name = entries[i].name;
    r.kind = entries[i].kind;
    r.dtype = entries[i].tensor.dtype();
    r.shape = entries[i].tensor.shape();
    r.raw_bytes = entries[i].tensor.nbytes();
    r.frames.resize(frame_count(r.raw_bytes, block));
  }
  // The table's size does not depend on the values still to be computed.
  const uint64_t table_bytes = encode_table(records, metadata).size();

  AtomicFile file(path);
  file.write(std::vector<uint8_t>(kHeaderBytes + table_bytes, 0).data(),
             kHeaderBytes + table_bytes);

  // A group holds enough frames to keep every thread busy a few times over.
  const uint64_t group_raw =
      uint64_t{4} * static_cast<uint64_t>(std::max(current_pool().threads(), 1)) * block;
  constexpr size_t kMaxGroupFrames = 4096;
  std::vector<FrameJob> group;
  std::vector<uint8_t> arena;
  std::vector<Tensor> sources(entries.size());  // contiguous data of the entries in flight
  uint64_t data_written = 0;

  auto flush = [&] {
    if (group.empty()) return;
    parallel_for(static_cast<int64_t>(group.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        FrameJob& job = group[j];
        const std::span<const uint8_t> raw(job.src, job.raw);
        const std::span<uint8_t> dst(arena.data() + job.out_offset, max_frame_bytes(job.raw));
        job.stored = compress_frame(raw, dst, options.compression_level);
        job.stored_checksum = xxh64(dst.first(job.stored));
        job.raw_checksum = xxh64(raw);
      }
    });
    // Frames go out in order, packed together, with one write per group.
    size_t packed = 0;
    for (const FrameJob& job : group) {
      std::memmove(arena.data() + packed, arena.data() + job.out_offset, job.stored);
      packed += job.stored;
      EntryRecord& r = records[job.entry];
      r.frames[job.frame] = {job.stored, job.stored_checksum, job.raw_checksum};
      r.stored_bytes += job.stored;
      if (job.frame + 1 == r.frames.size()) sources[job.entry] = Tensor();  // done with its bytes
    }
    file.write(arena.data(), packed);
    data_written += packed;
    group.clear();
  };

  uint64_t pending_raw = 0;
  size_t arena_bytes = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryRecord& r = records[i];
    if (r.frames.empty()) continue;
    sources[i] = entries[i].tensor.contiguous();  // a copy only when the tensor is strided
    const uint8_t* base = static_cast<const uint8_t*>(sources[i].raw_data());
    for (uint64_t f = 0; f < r.frames.size(); ++f) {
      const size_t raw = frame_raw_bytes(r.raw_bytes, block, f);
      if (!group.empty() && (pending_raw + raw > group_raw || group.size() >= kMaxGroupFrames)) {
        flush();
        pending_raw = 0;
        arena_bytes = 0;
      }
      group.push_back({i, f, base + f * block, raw, arena_bytes});
      arena_bytes += max_frame_bytes(raw);
      if (arena.size() < arena_bytes) arena.resize(arena_bytes);
      pending_raw += raw;
    }
  }
  flush();

  // Entries are stored back to back in table order.
  uint64_t offset = 0;
  for (EntryRecord& r : records) {
    r.data_offset = offset;
    offset += r.stored_bytes;
  }
  SAMBA_CHECK(offset == data_written, Status::Internal,
              "saving checkpoint '{}': wrote {} data bytes, counted {}", path, data_written,
              offset);

  const std::vector<uint8_t> table = encode_table(records, metadata);
  SAMBA_CHECK(table.size() == table_bytes, Status::Internal,
              "saving checkpoint '{}': the table changed size from {} to {} bytes", path,
              table_bytes, table.size());
  Header h;
  h.entry_count = static_cast<uint32_t>(entries.size());
  h.metadata_count = static_cast<uint32_t>(metadata.size());
  h.block_bytes = block;
  h.table_bytes = table_bytes;
  h.data_bytes = data_written;
  h.file_bytes = kHeaderBytes + table_bytes + data_written;
  std::array<uint8_t, kHeaderBytes> header = encode_header(h);
  h.checksum = table_checksum(header, table);
  header = encode_header(h);
  file.write_at(0, header.data(), header.size());
  file.write_at(kHeaderBytes, table.data(), table.size());
  file.commit();
}

}  // namespace samba
