// Checkpoints: named tensors (parameters, optionally with optimizer state and
// buffers) and user metadata saved to one file, and loaded back all or
// nothing.
//
// File layout (format 1.0). Integers are little-endian; offsets and sizes
// are in bytes.
//
//   header, 64 bytes at offset 0
//     0  u8[8]  magic "SMBACKPT"
//     8  u32    format major (1): a reader refuses another major
//    12  u32    format minor (0): readers of the same major accept any minor
//    16  u32    flags: none are defined yet; a reader refuses a file with
//               a flag it does not know
//    20  u32    entry count
//    24  u32    metadata count
//    28  u32    block size B: tensors are compressed in frames of B raw bytes
//    32  u64    table size T (entries then metadata)
//    40  u64    data size D
//    48  u64    file size (64 + T + D)
//    56  u64    XXH64 (seed 0) of header bytes 0..55 followed by the table
//   table, T bytes at offset 64; per entry:
//     u32 name length, name bytes (UTF-8, no terminator, unique, non-empty)
//     u8 kind (CheckpointKind), u8 dtype (samba_dtype), u8 rank (<= 16),
//     u8 codec (1: zstd frames)
//     i64 dims[rank]
//     u64 raw size (numel x element size)
//     u64 data offset, relative to the data section
//     u64 stored size (the sum of its frames)
//     u32 frame count (ceil(raw size / B))
//     per frame: u64 stored size, u64 XXH64 (seed 0) of its stored bytes,
//       u64 XXH64 (seed 0) of its raw bytes
//   then per metadata item: u32 key length, key, u32 value length, value
//   data, D bytes at offset 64 + T: each entry's frames back to back, the
//     entries in table order with no gaps. A frame is one zstd frame that
//     decompresses to B raw bytes (the last of a tensor to the remainder).
//
// The table checksum guards every size and offset. Each frame carries two
// checksums: of its stored bytes, so any damage is caught before zstd sees
// it (some bytes of a zstd frame, such as its window size, can change
// without changing what it decodes to), and of its raw bytes, which proves
// the decompressed tensor is the one saved. Per frame rather than per
// tensor, so frames are compressed, decompressed and verified in parallel.
//
// Saving writes to a temporary file and renames it over the target
// (AtomicFile): the old file stays intact until the new one is complete and
// on disk. Loading parses and verifies the whole file and checks every
// target before it changes any of them.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/core/tensor.h"

namespace samba {

// What a tensor is to the model. Values are stored in files.
enum class CheckpointKind : uint8_t {
  Parameter = 0,
  OptimizerState = 1,
  Buffer = 2,
  Gradient = 3,
  Other = 4,
};
inline constexpr int kNumCheckpointKinds = 5;
using CheckpointKindMask = uint32_t;
constexpr CheckpointKindMask kind_bit(CheckpointKind k) { return 1u << static_cast<unsigned>(k); }
inline constexpr CheckpointKindMask kAllCheckpointKinds = (1u << kNumCheckpointKinds) - 1;

std::string_view checkpoint_kind_name(CheckpointKind k);  // "parameter", "optimizer_state", ...

inline constexpr uint32_t kCheckpointFormatMajor = 1;
inline constexpr uint32_t kCheckpointFormatMinor = 0;

struct CheckpointEntry {
  std::string name;
  CheckpointKind kind = CheckpointKind::Parameter;
  Tensor tensor;  // any strides; saved as contiguous bytes
};

// Key/value strings (program name, step, ...), in the order given; keys are unique.
using CheckpointMetadata = std::vector<std::pair<std::string, std::string>>;

struct SaveOptions {
  // zstd level. 1 is zstd's fastest level that still entropy-codes (fp32
  // weights shrink ~8%, bf16 and zero-filled state far more); negative
  // levels store incompressible float bytes as they are, several times
  // faster.
  int compression_level = 1;
  // Raw bytes per zstd frame: the unit of parallel work and of streaming.
  uint32_t block_bytes = 4u << 20;
};

// Writes `entries` and `metadata` to `path` atomically. Throws
// InvalidArgument for an empty or repeated name, a repeated metadata key or
// a tensor without data (before anything is written), IoError for file
// errors; in every case `path` keeps its previous contents.
void save_checkpoint(const std::string& path, std::span<const CheckpointEntry> entries,
                     const CheckpointMetadata& metadata = {}, const SaveOptions& options = {});

// A verified checkpoint in memory.
struct Checkpoint {
  uint32_t format_major = 0;
  uint32_t format_minor = 0;
  std::vector<CheckpointEntry> entries;  // contiguous host tensors, in file order
  CheckpointMetadata metadata;

  const CheckpointEntry* find(std::string_view name) const;
  const std::string* metadata_value(std::string_view key) const;
};

// Reads and verifies the whole file. CorruptFile for anything malformed
// (bad magic, sizes out of bounds, bad codes, checksum or decompression
// failures), VersionMismatch naming both versions, IoError for file errors.
Checkpoint read_checkpoint(const std::string& path);
// The table and metadata only: entries hold symbolic tensors (shape and
// dtype, no data). Verifies the header and table checksum, not the data.
Checkpoint inspect_checkpoint(const std::string& path);

struct CheckpointTarget {
  std::string name;
  Tensor tensor;  // receives the values; any strides
};

struct LoadOptions {
  // Strict: every file entry of the selected kinds must have a target and
  // every target must be in the file. Otherwise both are skipped (and
  // reported). Dtype and shape mismatches are errors either way.
  bool strict = true;
  // The kinds of file entries to load (parameters only, say, from a file
  // that also holds optimizer state).
  CheckpointKindMask kinds = kAllCheckpointKinds;
};

struct LoadReport {
  std::vector<std::string> loaded;   // targets that received values
  std::vector<std::string> missing;  // targets with no entry in the file (not strict)
  std::vector<std::string> unused;   // selected file entries with no target (not strict)
};

// Loads the file's tensors into `targets`, matched by name. Everything is
// checked first (the file as read_checkpoint does; each target's dtype and
// shape against its entry: DTypeMismatch / ShapeMismatch name the tensor,
// the expected and the found); on any failure no target has changed.
LoadReport load_checkpoint(const std::string& path, std::span<const CheckpointTarget> targets,
                           const LoadOptions& options = {});

}  // namespace samba
