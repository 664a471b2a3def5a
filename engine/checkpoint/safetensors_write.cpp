// Writing safetensors files: the header is built first (every offset is
// known from the shapes), then the tensors' bytes follow through AtomicFile.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_set>

#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "engine/core/shape.h"
#include "engine/io/atomic_file.h"

namespace samba {

void save_safetensors(const std::string& path, std::span<const CheckpointEntry> entries,
                      const std::map<std::string, std::string>& metadata) {
  std::unordered_set<std::string_view> names;
  for (const CheckpointEntry& e : entries) {
    SAMBA_CHECK(!e.name.empty() && e.name != "__metadata__", Status::InvalidArgument,
                "saving safetensors file '{}': tensor name '{}' is reserved or empty", path,
                e.name);
    SAMBA_CHECK(names.insert(e.name).second, Status::InvalidArgument,
                "saving safetensors file '{}': tensor '{}' is given twice", path, e.name);
    SAMBA_CHECK(e.tensor.defined() && e.tensor.has_data(), Status::InvalidArgument,
                "saving safetensors file '{}': tensor '{}' has no data", path, e.name);
  }

  // Wider elements first, as the reference writer does: with the header
  // padded to 8 bytes every tensor then starts aligned to its element size.
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return element_size(entries[a].tensor.dtype()) > element_size(entries[b].tensor.dtype());
  });

  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (size_t i : order) {
    const Tensor& t = entries[i].tensor;
    const uint64_t nbytes = checked_nbytes(t.shape(), t.dtype());
    header[entries[i].name] = {{"dtype", safetensors_dtype_code(t.dtype())},
                               {"shape", t.shape()},
                               {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');

  AtomicFile out(path);
  const uint64_t header_bytes = text.size();
  out.write(&header_bytes, sizeof header_bytes);  // little-endian host (safetensors_read.cpp)
  out.write(text);
  for (size_t i : order) {
    const Tensor& t = entries[i].tensor;
    if (t.numel() == 0) continue;
    const Tensor c = t.contiguous();
    out.write(c.raw_data(), checked_nbytes(c.shape(), c.dtype()));
  }
  out.commit();
}

}  // namespace samba
