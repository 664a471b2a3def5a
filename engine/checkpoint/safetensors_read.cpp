// Reading safetensors files: the header is parsed and the whole layout
// validated before any tensor is touched; loading maps the file and copies
// straight from the mapping into the targets once every check has passed.
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "engine/checkpoint/safetensors.h"
#include "engine/core/error.h"
#include "engine/core/shape.h"
#include "engine/io/file_io.h"

namespace samba {
namespace {

// The data is little-endian and is copied as it is.
static_assert(std::endian::native == std::endian::little,
              "safetensors reading assumes a little-endian host");

using Json = nlohmann::ordered_json;

// The depth, as the parser counts it, of the deepest object or array a
// header holds: a tensor's shape or data_offsets.
constexpr int kMaxHeaderDepth = 2;

struct DTypeCode {
  std::string_view code;
  DType dtype;
};
constexpr std::array<DTypeCode, kNumDTypes> kDTypeCodes{{
    {"F32", DType::Float32},
    {"BF16", DType::BFloat16},
    {"F16", DType::Float16},
    {"F64", DType::Float64},
    {"I64", DType::Int64},
    {"I32", DType::Int32},
    {"I16", DType::Int16},
    {"I8", DType::Int8},
    {"U8", DType::UInt8},
    {"BOOL", DType::Bool},
}};

std::string supported_codes() {
  std::string s;
  for (const auto& c : kDTypeCodes) s += (s.empty() ? "" : ", ") + std::string(c.code);
  return s;
}

DType dtype_of_code(const std::string& code, std::string_view origin, const std::string& name) {
  for (const auto& c : kDTypeCodes)
    if (c.code == code) return c.dtype;
  fail(Status::Unsupported,
       "safetensors file '{}': tensor '{}' has dtype '{}', which Samba does not have; expected one "
       "of {}",
       origin, name, code, supported_codes());
}

uint64_t offset_value(const Json& v, std::string_view origin, const std::string& name) {
  SAMBA_CHECK(v.is_number_unsigned(), Status::CorruptFile,
              "safetensors file '{}': tensor '{}' has data_offsets entry {}; expected a "
              "non-negative integer",
              origin, name, v.dump());
  return v.get<uint64_t>();
}

SafetensorsRecord parse_record(const std::string& name, const Json& v, uint64_t data_start,
                               uint64_t data_size, std::string_view origin) {
  SAMBA_CHECK(v.is_object(), Status::CorruptFile,
              "safetensors file '{}': tensor '{}' is described by {}; expected an object with "
              "dtype, shape and "
              "data_offsets",
              origin, name, v.type_name());
  for (const char* field : {"dtype", "shape", "data_offsets"})
    SAMBA_CHECK(v.contains(field), Status::CorruptFile,
                "safetensors file '{}': tensor '{}' has no '{}'", origin, name, field);
  const Json& dtype = v["dtype"];
  const Json& shape = v["shape"];
  const Json& offsets = v["data_offsets"];
  SAMBA_CHECK(dtype.is_string(), Status::CorruptFile,
              "safetensors file '{}': tensor '{}' has dtype {}; expected a string", origin, name,
              dtype.dump());
  SAMBA_CHECK(
      shape.is_array() && shape.size() <= static_cast<size_t>(kMaxRank), Status::CorruptFile,
      "safetensors file '{}': tensor '{}' has shape {}; expected an array of at most {} dimensions",
      origin, name, shape.dump(), kMaxRank);
  SAMBA_CHECK(offsets.is_array() && offsets.size() == 2, Status::CorruptFile,
              "safetensors file '{}': tensor '{}' has data_offsets {}; expected [begin, end]",
              origin, name, offsets.dump());

  SafetensorsRecord r;
  r.name = name;
  r.dtype = dtype_of_code(dtype.get<std::string>(), origin, name);
  for (const Json& d : shape) {
    SAMBA_CHECK(
        d.is_number_unsigned() && d.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX),
        Status::CorruptFile,
        "safetensors file '{}': tensor '{}' has shape {}; expected non-negative integer dimensions",
        origin, name, shape.dump());
    r.shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  size_t nbytes = 0;
  try {
    nbytes = checked_nbytes(r.shape, r.dtype);
  } catch (const Error&) {
    fail(Status::CorruptFile,
         "safetensors file '{}': tensor '{}' of shape {} has a byte size beyond 64 bits", origin,
         name, dims_str(r.shape));
  }
  const uint64_t begin = offset_value(offsets[0], origin, name);
  const uint64_t end = offset_value(offsets[1], origin, name);
  SAMBA_CHECK(begin <= end && end <= data_size, Status::CorruptFile,
              "safetensors file '{}': tensor '{}' has data_offsets [{}, {}]; expected begin <= end "
              "<= {} (the data's "
              "size)",
              origin, name, begin, end, data_size);
  SAMBA_CHECK(end - begin == nbytes, Status::CorruptFile,
              "safetensors file '{}': tensor '{}' is {} of shape {}, {} bytes, but its "
              "data_offsets [{}, {}] span {} "
              "bytes",
              origin, name, dtype.get<std::string>(), dims_str(r.shape), nbytes, begin, end,
              end - begin);
  r.begin = data_start + begin;
  r.end = data_start + end;
  return r;
}

// Overlaps and holes, as the reference reader: sorted by offset, each
// tensor starts where the previous one ended and the last ends the file.
void check_layout(const std::vector<SafetensorsRecord>& records, uint64_t data_start,
                  uint64_t file_size, std::string_view origin) {
  std::vector<size_t> order(records.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(records[a].begin, records[a].end) <
           std::pair(records[b].begin, records[b].end);
  });
  uint64_t at = data_start;
  const SafetensorsRecord* previous = nullptr;
  for (size_t i : order) {
    const SafetensorsRecord& r = records[i];
    if (r.begin < at)
      fail(Status::CorruptFile,
           "safetensors file '{}': tensor '{}' (data_offsets [{}, {}]) overlaps tensor '{}' "
           "(data_offsets [{}, {}])",
           origin, r.name, r.begin - data_start, r.end - data_start, previous->name,
           previous->begin - data_start, previous->end - data_start);
    SAMBA_CHECK(r.begin == at, Status::CorruptFile,
                "safetensors file '{}': tensor '{}' starts at data offset {}; expected {}, where "
                "the previous tensor "
                "ends (the data may have no holes)",
                origin, r.name, r.begin - data_start, at - data_start);
    at = r.end;
    previous = &r;
  }
  SAMBA_CHECK(at == file_size, Status::CorruptFile,
              "safetensors file '{}': the tensors' data ends at data offset {}; expected it to "
              "cover the data's {} "
              "bytes to the end of the file",
              origin, at - data_start, file_size - data_start);
}

// The file mapped read-only for the duration of a load.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    fd_ = open_regular_file_for_read(path, "safetensors file");
    struct stat st;
    if (::fstat(fd_, &st) != 0) fail_io(path, "cannot stat");
    size_ = static_cast<size_t>(st.st_size);
    if (size_ == 0) return;  // mmap refuses empty ranges; parsing refuses empty files
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
    if (p == MAP_FAILED) fail_io(path, "cannot map");
    data_ = static_cast<const uint8_t*>(p);
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
    if (fd_ >= 0) ::close(fd_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }

 private:
  [[noreturn]] void fail_io(const std::string& path, const char* step) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    fail(Status::IoError, "{} safetensors file '{}': {}", step, path, std::strerror(err));
  }

  int fd_ = -1;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A view of a record's bytes in the mapping; copied to aligned memory first
// when a conversion would read misaligned elements.
Tensor source_tensor(std::span<const uint8_t> file, const SafetensorsRecord& r, DType target) {
  const size_t nbytes = r.end - r.begin;
  void* p = const_cast<uint8_t*>(file.data() + r.begin);
  Tensor view =
      Tensor::view_of(Storage::borrow(p, nbytes), r.dtype, r.shape, contiguous_strides(r.shape), 0);
  const bool aligned = reinterpret_cast<uintptr_t>(p) % element_size(r.dtype) == 0;
  if (aligned || target == r.dtype || nbytes == 0) return view;
  Tensor copy = Tensor::empty(r.shape, r.dtype);
  std::memcpy(copy.raw_data(), p, nbytes);
  return copy;
}

}  // namespace

std::string_view safetensors_dtype_code(DType dtype) {
  for (const auto& c : kDTypeCodes)
    if (c.dtype == dtype) return c.code;
  fail(Status::InvalidArgument, "dtype {} has no safetensors code", static_cast<int32_t>(dtype));
}

SafetensorsHeader parse_safetensors(std::span<const uint8_t> file, std::string_view origin) {
  SAMBA_CHECK(file.size() >= 8, Status::CorruptFile,
              "safetensors file '{}' is {} bytes; expected at least 8 (the header length)", origin,
              file.size());
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, file.data(), 8);
  SAMBA_CHECK(header_bytes <= kMaxSafetensorsHeaderBytes, Status::CorruptFile,
              "safetensors file '{}': header length {} is above the limit of {} bytes", origin,
              header_bytes, kMaxSafetensorsHeaderBytes);
  SAMBA_CHECK(
      header_bytes <= file.size() - 8, Status::CorruptFile,
      "safetensors file '{}': header length {} goes beyond the file's {} bytes after the length",
      origin, header_bytes, file.size() - 8);
  const auto* text = reinterpret_cast<const char*>(file.data() + 8);

  // Duplicate names are caught while parsing: a JSON object keeps one value
  // per key. Nesting is bounded there too: a header is an object of objects
  // of flat arrays, and deeper values would only cost stack when printed.
  std::set<std::string> names;
  std::string duplicate;
  Json header;
  try {
    header = Json::parse(text, text + header_bytes,
                         [&](int depth, Json::parse_event_t event, Json& parsed) {
                           using Event = Json::parse_event_t;
                           if ((event == Event::object_start || event == Event::array_start) &&
                               depth > kMaxHeaderDepth)
                             fail(Status::CorruptFile,
                                  "safetensors file '{}': the header nests objects or arrays "
                                  "deeper than {} levels; expected an object of tensor objects "
                                  "holding flat arrays",
                                  origin, kMaxHeaderDepth + 1);
                           if (depth == 1 && event == Event::key &&
                               !names.insert(parsed.get<std::string>()).second && duplicate.empty())
                             duplicate = parsed.get<std::string>();
                           return true;
                         });
  } catch (const Json::exception& e) {
    fail(Status::CorruptFile, "safetensors file '{}': the header is not valid JSON: {}", origin,
         e.what());
  }
  SAMBA_CHECK(header.is_object(), Status::CorruptFile,
              "safetensors file '{}': the header is JSON {}; expected an object", origin,
              header.type_name());
  SAMBA_CHECK(duplicate.empty(), Status::CorruptFile,
              "safetensors file '{}': tensor '{}' appears twice in the header", origin, duplicate);

  SafetensorsHeader out;
  const uint64_t data_start = 8 + header_bytes;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      SAMBA_CHECK(value.is_object(), Status::CorruptFile,
                  "safetensors file '{}': __metadata__ is {}; expected an object of strings",
                  origin, value.type_name());
      for (const auto& [key, v] : value.items()) {
        SAMBA_CHECK(v.is_string(), Status::CorruptFile,
                    "safetensors file '{}': __metadata__ '{}' is {}; expected a string", origin,
                    key, v.type_name());
        out.metadata.emplace(key, v.get<std::string>());
      }
      continue;
    }
    out.records.push_back(parse_record(name, value, data_start, file.size() - data_start, origin));
  }
  check_layout(out.records, data_start, file.size(), origin);
  // A bool byte other than 0 or 1 has no value (reading one as bool is
  // undefined), so it is refused here rather than converted.
  for (const SafetensorsRecord& r : out.records) {
    if (r.dtype != DType::Bool) continue;
    const auto* bad =
        std::find_if(file.data() + r.begin, file.data() + r.end, [](uint8_t b) { return b > 1; });
    SAMBA_CHECK(bad == file.data() + r.end, Status::CorruptFile,
                "safetensors file '{}': tensor '{}' is BOOL but its element {} is byte {}; "
                "expected 0 or 1",
                origin, r.name, bad - (file.data() + r.begin), *bad);
  }
  return out;
}

std::string map_safetensors_name(const std::string& name, const SafetensorsNameMap& rules) {
  const std::pair<std::string, std::string>* best = nullptr;
  for (const auto& rule : rules) {
    if (rule.first == name) return rule.second;
    if (name.starts_with(rule.first) && (!best || rule.first.size() > best->first.size()))
      best = &rule;
  }
  return best ? best->second + name.substr(best->first.size()) : name;
}

LoadReport load_safetensors(const std::string& path, std::span<const CheckpointTarget> targets,
                            const SafetensorsLoadOptions& options) {
  std::unordered_map<std::string_view, const CheckpointTarget*> by_name;
  for (const CheckpointTarget& t : targets) {
    SAMBA_CHECK(by_name.emplace(t.name, &t).second, Status::InvalidArgument,
                "loading safetensors file '{}': target '{}' is given twice", path, t.name);
    SAMBA_CHECK(t.tensor.defined() && t.tensor.has_data(), Status::InvalidState,
                "loading safetensors file '{}': target '{}' has no data to load into", path,
                t.name);
  }

  const MappedFile file(path);
  const SafetensorsHeader header = parse_safetensors(file.bytes(), path);

  LoadReport report;
  std::unordered_map<std::string, const std::string*> mapped_from;  // target name -> file name
  std::vector<std::pair<const SafetensorsRecord*, const CheckpointTarget*>> copies;
  for (const SafetensorsRecord& r : header.records) {
    const std::string mapped = map_safetensors_name(r.name, options.name_map);
    const auto [seen, fresh] = mapped_from.emplace(mapped, &r.name);
    SAMBA_CHECK(fresh, Status::InvalidArgument,
                "loading safetensors file '{}': tensors '{}' and '{}' are both mapped to '{}'",
                path, *seen->second, r.name, mapped);
    const auto it = by_name.find(mapped);
    if (it == by_name.end()) {
      SAMBA_CHECK(!options.strict, Status::InvalidArgument,
                  "loading safetensors file '{}': its tensor '{}' (mapped to '{}') has no target "
                  "among the session's tensors being loaded; "
                  "strict loading uses every tensor of the file",
                  path, r.name, mapped);
      report.unused.push_back(r.name);
      continue;
    }
    const Tensor& dst = it->second->tensor;
    SAMBA_CHECK(r.shape == dst.shape(), Status::ShapeMismatch,
                "loading safetensors file '{}': tensor '{}' (for '{}') has shape {} in the file; "
                "the target has shape {}",
                path, r.name, mapped, dims_str(r.shape), dims_str(dst.shape()));
    copies.emplace_back(&r, it->second);
  }
  for (const CheckpointTarget& t : targets) {
    if (mapped_from.contains(t.name)) continue;
    SAMBA_CHECK(!options.strict, Status::NotFound,
                "loading safetensors file '{}': it has no tensor for '{}' (after name mapping)",
                path, t.name);
    report.missing.push_back(t.name);
  }

  // Nothing has changed yet, and nothing below can fail on the file's account.
  for (const auto& [r, t] : copies) {
    t->tensor.copy_from(source_tensor(file.bytes(), *r, t->tensor.dtype()));
    report.loaded.push_back(t->name);
  }
  return report;
}

}  // namespace samba
