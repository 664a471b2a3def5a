// The checkpoint file's header and table (layout in checkpoint.h) as C++
// data, their encoding, and their decoding with every bound verified.
// Internal to checkpoint_write.cpp and checkpoint_read.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/core/dtype.h"
#include "engine/core/shape.h"

namespace samba::checkpoint_format {

inline constexpr std::array<uint8_t, 8> kMagic = {'S', 'M', 'B', 'A', 'C', 'K', 'P', 'T'};
inline constexpr size_t kHeaderBytes = 64;
inline constexpr uint8_t kCodecZstd = 1;
inline constexpr uint32_t kKnownFlags = 0;
inline constexpr uint32_t kMinBlockBytes = 4096;
inline constexpr uint32_t kMaxBlockBytes = 1u << 30;
// Bounds on what a file may ask a reader to allocate before its checksum
// has been verified.
inline constexpr uint64_t kMaxTableBytes = uint64_t{1} << 30;
inline constexpr uint32_t kMaxNameBytes = 1u << 16;
inline constexpr uint32_t kMaxMetadataBytes = 1u << 24;

struct Frame {
  uint64_t stored_bytes = 0;
  uint64_t stored_checksum = 0;  // XXH64 of the compressed bytes
  uint64_t raw_checksum = 0;     // XXH64 of the raw bytes
};
inline constexpr size_t kFrameRecordBytes = 24;

struct EntryRecord {
  std::string name;
  CheckpointKind kind = CheckpointKind::Parameter;
  DType dtype = DType::Float32;
  Dims shape;
  uint64_t raw_bytes = 0;
  uint64_t data_offset = 0;  // relative to the data section
  uint64_t stored_bytes = 0;
  std::vector<Frame> frames;
};

struct Header {
  uint32_t format_major = kCheckpointFormatMajor;
  uint32_t format_minor = kCheckpointFormatMinor;
  uint32_t flags = 0;
  uint32_t entry_count = 0;
  uint32_t metadata_count = 0;
  uint32_t block_bytes = 0;
  uint64_t table_bytes = 0;
  uint64_t data_bytes = 0;
  uint64_t file_bytes = 0;
  uint64_t checksum = 0;
};

struct Table {
  Header header;
  std::vector<EntryRecord> entries;
  CheckpointMetadata metadata;
};

// ceil(raw_bytes / block_bytes).
uint64_t frame_count(uint64_t raw_bytes, uint32_t block_bytes);
// Raw bytes of frame `i` of a tensor of `raw_bytes`.
uint64_t frame_raw_bytes(uint64_t raw_bytes, uint32_t block_bytes, uint64_t i);

std::vector<uint8_t> encode_table(std::span<const EntryRecord> entries,
                                  const CheckpointMetadata& metadata);
// The 64 header bytes; the checksum field is the one given.
std::array<uint8_t, kHeaderBytes> encode_header(const Header& h);
// XXH64 of header bytes 0..55 followed by the table.
uint64_t table_checksum(std::span<const uint8_t, kHeaderBytes> header,
                        std::span<const uint8_t> table);

// Decodes and checks the header of a file of `file_bytes` bytes: magic,
// version, flags, block size, and that the sizes fit the file. Messages
// start with "checkpoint '<path>': ".
Header decode_header(std::span<const uint8_t, kHeaderBytes> bytes, uint64_t file_bytes,
                     const std::string& path);
// Verifies the checksum and the file size, then decodes the table with
// every code, shape, size and offset checked (no arithmetic can overflow on
// hostile input).
Table decode_table(const Header& header, std::span<const uint8_t, kHeaderBytes> header_bytes,
                   std::span<const uint8_t> table, uint64_t file_bytes, const std::string& path);

}  // namespace samba::checkpoint_format
