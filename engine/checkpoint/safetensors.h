// safetensors: the Hugging Face tensor file format, read into and written from
// Samba's tensors so weights move between Samba and the PyTorch ecosystem.
// The native checkpoint (checkpoint.h) stays the format for full training
// state; this one carries named tensors and string metadata only.
//
// File layout (https://github.com/huggingface/safetensors):
//
//   u64 little-endian N, the header's byte length
//   N bytes of JSON: an object mapping each tensor name to
//     {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}
//     and optionally "__metadata__" to an object of string values
//   the data: each tensor's row-major little-endian bytes at
//     [begin, end) relative to the data's start
//
// Reading validates the whole file before anything uses it, as the
// reference reader does: the header length within the file and under
// kMaxSafetensorsHeaderBytes, JSON that is one object with unique names,
// known dtypes (the ones Samba has; others are refused by name), shapes
// whose byte size equals end - begin, and data ranges that neither overlap
// nor leave holes and end exactly at the end of the file.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/core/tensor.h"

namespace samba {

// The reference reader's cap: a header beyond it is refused before parsing.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// One tensor's header record. `begin` and `end` are absolute file offsets.
struct SafetensorsRecord {
  std::string name;
  DType dtype = DType::Float32;
  Dims shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct SafetensorsHeader {
  std::vector<SafetensorsRecord> records;  // in the order of the JSON text
  std::map<std::string, std::string> metadata;
};

// Parses and validates `file`, the whole file's bytes. `origin` names the
// file in messages. Throws CorruptFile naming the tensor and what was
// expected, Unsupported for a dtype Samba does not have (naming it).
SafetensorsHeader parse_safetensors(std::span<const uint8_t> file, std::string_view origin);

// The safetensors dtype code of `dtype` ("F32", "BF16", ...).
std::string_view safetensors_dtype_code(DType dtype);

// Writes `entries` (their kinds are not stored) and `metadata` to `path`
// atomically (AtomicFile). Tensors are laid out by decreasing element size,
// so every tensor's data starts aligned to its element size. Throws
// InvalidArgument for an empty or repeated name, a name "__metadata__" or a
// tensor without data, before anything is written; IoError for file errors.
void save_safetensors(const std::string& path, std::span<const CheckpointEntry> entries,
                      const std::map<std::string, std::string>& metadata);

// Renames applied to the file's tensor names before they are matched with
// targets: each rule (from, to) replaces a leading `from` by `to`. A rule
// whose `from` is the whole name wins; otherwise the longest matching
// `from`; a name no rule matches keeps its name. ("transformer.", "") strips
// a prefix; ("lm_head.weight", "wte.weight") renames one tensor.
using SafetensorsNameMap = std::vector<std::pair<std::string, std::string>>;
std::string map_safetensors_name(const std::string& name, const SafetensorsNameMap& rules);

struct SafetensorsLoadOptions {
  // As torch's load_state_dict(strict=): every file tensor must have a
  // target and every target must be in the file. Otherwise both are skipped
  // (and reported). Shape mismatches are errors either way.
  bool strict = true;
  SafetensorsNameMap name_map;
};

// Loads the file's tensors into `targets`, matched by (mapped) name, each
// converted to its target's dtype as torch's copy_ does. The file is mapped
// read-only, not read. Everything is checked before any target changes: the
// file as parse_safetensors does, two file tensors mapped to one name,
// shapes (ShapeMismatch naming the tensor, the file's and the target's
// shape) and, when strict, coverage (NotFound / InvalidArgument naming the
// tensor). IoError for unreadable or non-regular files.
LoadReport load_safetensors(const std::string& path, std::span<const CheckpointTarget> targets,
                            const SafetensorsLoadOptions& options = {});

}  // namespace samba
