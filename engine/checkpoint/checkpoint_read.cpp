// Reading a checkpoint: the header and table are verified first; tensor
// frames are then read a group at a time, decompressed and checked against
// their checksums in parallel into new host tensors. Loading into targets
// copies only once everything has been verified.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/checkpoint_format.h"
#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/io/file_io.h"
#include "engine/io/frame_codec.h"

namespace samba {
namespace {

using namespace checkpoint_format;

// A new contiguous host tensor to decompress into. A big one is backed by
// transparent huge pages where the system allows: every page of it is
// written once right away, and first-touch faults on 4 KiB pages would
// otherwise cost more than the decompression (measured 4x on this VM).
Tensor staging_tensor(const Dims& shape, DType dtype) {
  constexpr size_t kHugePage = size_t{2} << 20;
  const size_t nbytes = checked_nbytes(shape, dtype);
  if (nbytes < 4 * kHugePage) return Tensor::empty(shape, dtype);
  const size_t rounded = (nbytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, rounded);
  if (!p)
    fail(Status::OutOfMemory, "out of host memory allocating {} bytes to read a checkpoint tensor",
         nbytes);
  ::madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure just means small pages
  Ref<Storage> storage = Storage::adopt(p, nbytes, [p] { std::free(p); });
  return Tensor::view_of(std::move(storage), dtype, shape, contiguous_strides(shape), 0);
}

// An open checkpoint whose header and table have been verified.
class CheckpointFile {
 public:
  explicit CheckpointFile(const std::string& path) : path_(path) {
    fd_ = open_regular_file_for_read(path, "checkpoint");
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      const int err = errno;
      ::close(fd_);
      fail(Status::IoError, "cannot read checkpoint '{}': {}", path, std::strerror(err));
    }
    size_ = static_cast<uint64_t>(st.st_size);
    try {
      SAMBA_CHECK(size_ >= kHeaderBytes, Status::CorruptFile,
                  "checkpoint '{}' is {} bytes, shorter than the {}-byte header: truncated or not "
                  "a checkpoint",
                  path, size_, kHeaderBytes);
      std::array<uint8_t, kHeaderBytes> header;
      read_at(0, header.data(), header.size());
      const Header h = decode_header(header, size_, path);
      std::vector<uint8_t> table(h.table_bytes);
      read_at(kHeaderBytes, table.data(), table.size());
      table_ = decode_table(h, header, table, size_, path);
    } catch (...) {
      ::close(fd_);
      throw;
    }
  }
  ~CheckpointFile() { ::close(fd_); }
  CheckpointFile(const CheckpointFile&) = delete;
  CheckpointFile& operator=(const CheckpointFile&) = delete;

  const Table& table() const { return table_; }
  const std::string& path() const { return path_; }

  // New contiguous host tensors holding entries `which`, every frame
  // decompressed and verified.
  std::vector<Tensor> read_tensors(std::span<const size_t> which) const;
  // Checks the stored checksum of every frame of the entries not in `read`
  // (sorted), without decompressing them, so that the whole file is
  // verified even when only some kinds are loaded.
  void verify_other_frames(std::span<const size_t> read) const;

 private:
  void read_at(uint64_t offset, void* dst, size_t n) const {
    auto* p = static_cast<uint8_t*>(dst);
    while (n > 0) {
      ssize_t r = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0)
        fail(Status::IoError, "cannot read checkpoint '{}' at offset {}: {}", path_, offset,
             std::strerror(errno));
      if (r == 0)
        fail(Status::CorruptFile,
             "checkpoint '{}' ends at offset {} while {} more bytes were expected: truncated",
             path_, offset, n);
      p += r;
      offset += static_cast<uint64_t>(r);
      n -= static_cast<size_t>(r);
    }
  }

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  Table table_;
};

struct FrameJob {
  size_t entry = 0;   // index into the table
  size_t tensor = 0;  // index into the result
  uint64_t frame = 0;
  uint64_t file_offset = 0;
  size_t stored = 0;
  size_t raw = 0;
  size_t in_offset = 0;  // into the group's input buffer
  uint8_t* dst = nullptr;
  enum class Outcome : uint8_t {
    Ok,
    BadStoredChecksum,
    Undecodable,
    BadRawChecksum
  } outcome = Outcome::Ok;
  std::string decode_error;  // the codec's message when Undecodable
  uint64_t checksum = 0;     // computed
};

std::vector<Tensor> CheckpointFile::read_tensors(std::span<const size_t> which) const {
  const Table& t = table_;
  const uint32_t block = t.header.block_bytes;
  const uint64_t data_start = kHeaderBytes + t.header.table_bytes;
  std::vector<Tensor> out;
  out.reserve(which.size());
  for (size_t e : which) out.push_back(staging_tensor(t.entries[e].shape, t.entries[e].dtype));

  const uint64_t group_raw =
      uint64_t{4} * static_cast<uint64_t>(std::max(current_pool().threads(), 1)) * block;
  constexpr size_t kMaxGroupFrames = 4096;
  std::vector<FrameJob> group;
  std::vector<uint8_t> in;
  uint64_t pending_raw = 0;

  auto flush = [&] {
    if (group.empty()) return;
    // Frames of a group are usually back to back in the file: one read.
    const uint64_t first = group.front().file_offset;
    const uint64_t last = group.back().file_offset + group.back().stored;
    in.resize(last - first);
    read_at(first, in.data(), in.size());
    parallel_for(static_cast<int64_t>(group.size()), 1, [&](int64_t b, int64_t e) {
      for (int64_t j = b; j < e; ++j) {
        FrameJob& job = group[j];
        const Frame& expected = t.entries[job.entry].frames[job.frame];
        const std::span<const uint8_t> src(in.data() + job.in_offset, job.stored);
        job.checksum = xxh64(src);
        if (job.checksum != expected.stored_checksum) {
          job.outcome = FrameJob::Outcome::BadStoredChecksum;
          continue;
        }
        // The error of the first bad frame in file order is reported, so
        // failures are recorded here and raised below.
        try {
          decompress_frame(src, {job.dst, job.raw}, "its stored bytes");
        } catch (const Error& e) {
          job.outcome = FrameJob::Outcome::Undecodable;
          job.decode_error = e.what();
          continue;
        }
        job.checksum = xxh64({job.dst, job.raw});
        if (job.checksum != expected.raw_checksum) job.outcome = FrameJob::Outcome::BadRawChecksum;
      }
    });
    for (const FrameJob& job : group) {
      const EntryRecord& r = t.entries[job.entry];
      const std::string where = fmt::format(
          "checkpoint '{}': tensor '{}', frame {} of {} (raw bytes {}..{})", path_, r.name,
          job.frame, r.frames.size(), job.frame * block, job.frame * block + job.raw);
      switch (job.outcome) {
        case FrameJob::Outcome::Ok:
          break;
        case FrameJob::Outcome::BadStoredChecksum:
          fail(Status::CorruptFile,
               "{}: its stored bytes fail their checksum (stored {:016x}, computed {:016x})", where,
               r.frames[job.frame].stored_checksum, job.checksum);
        case FrameJob::Outcome::Undecodable:
          fail(Status::CorruptFile, "{}: {}", where, job.decode_error);
        case FrameJob::Outcome::BadRawChecksum:
          fail(Status::CorruptFile,
               "{}: its decompressed bytes fail their checksum (stored {:016x}, computed {:016x})",
               where, r.frames[job.frame].raw_checksum, job.checksum);
      }
    }
    group.clear();
    pending_raw = 0;
  };

  for (size_t k = 0; k < which.size(); ++k) {
    const EntryRecord& r = t.entries[which[k]];
    uint8_t* base = static_cast<uint8_t*>(r.raw_bytes ? out[k].raw_data() : nullptr);
    uint64_t file_offset = data_start + r.data_offset;
    for (uint64_t f = 0; f < r.frames.size(); ++f) {
      const size_t raw = frame_raw_bytes(r.raw_bytes, block, f);
      const size_t stored = r.frames[f].stored_bytes;
      const bool contiguous =
          !group.empty() && group.back().file_offset + group.back().stored == file_offset;
      if (!group.empty() &&
          (!contiguous || pending_raw + raw > group_raw || group.size() >= kMaxGroupFrames))
        flush();
      const size_t in_offset = group.empty() ? 0 : group.back().in_offset + group.back().stored;
      FrameJob job;
      job.entry = which[k];
      job.tensor = k;
      job.frame = f;
      job.file_offset = file_offset;
      job.stored = stored;
      job.raw = raw;
      job.in_offset = in_offset;
      job.dst = base + f * block;
      group.push_back(job);
      pending_raw += raw;
      file_offset += stored;
    }
  }
  flush();
  return out;
}

void CheckpointFile::verify_other_frames(std::span<const size_t> read) const {
  const Table& t = table_;
  const uint64_t data_start = kHeaderBytes + t.header.table_bytes;
  std::vector<uint8_t> stored;
  for (size_t e = 0; e < t.entries.size(); ++e) {
    if (std::binary_search(read.begin(), read.end(), e)) continue;
    const EntryRecord& r = t.entries[e];
    uint64_t file_offset = data_start + r.data_offset;
    for (uint64_t f = 0; f < r.frames.size(); ++f) {
      stored.resize(r.frames[f].stored_bytes);
      read_at(file_offset, stored.data(), stored.size());
      const uint64_t computed = xxh64(stored);
      SAMBA_CHECK(computed == r.frames[f].stored_checksum, Status::CorruptFile,
                  "checkpoint '{}': tensor '{}' (not being loaded), frame {} of {}: its stored bytes "
                  "fail their checksum (stored {:016x}, computed {:016x})",
                  path_, r.name, f, r.frames.size(), r.frames[f].stored_checksum, computed);
      file_offset += stored.size();
    }
  }
}

Checkpoint to_checkpoint(const Table& t, std::vector<Tensor> tensors) {
  Checkpoint c;
  c.format_major = t.header.format_major;
  c.format_minor = t.header.format_minor;
  c.metadata = t.metadata;
  c.entries.reserve(t.entries.size());
  for (size_t i = 0; i < t.entries.size(); ++i)
    c.entries.push_back({t.entries[i].name, t.entries[i].kind, std::move(tensors[i])});
  return c;
}

std::string kinds_text(CheckpointKindMask kinds) {
  std::string s;
  for (int k = 0; k < kNumCheckpointKinds; ++k)
    if (kinds & kind_bit(static_cast<CheckpointKind>(k))) {
      if (!s.empty()) s += ", ";
      s += checkpoint_kind_name(static_cast<CheckpointKind>(k));
    }
  return s;
}

}  // namespace

const CheckpointEntry* Checkpoint::find(std::string_view name) const {
  for (const CheckpointEntry& e : entries)
    if (e.name == name) return &e;
  return nullptr;
}

const std::string* Checkpoint::metadata_value(std::string_view key) const {
  for (const auto& [k, v] : metadata)
    if (k == key) return &v;
  return nullptr;
}

Checkpoint read_checkpoint(const std::string& path) {
  CheckpointFile file(path);
  std::vector<size_t> all(file.table().entries.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  return to_checkpoint(file.table(), file.read_tensors(all));
}

Checkpoint inspect_checkpoint(const std::string& path) {
  CheckpointFile file(path);
  std::vector<Tensor> shapes;
  for (const EntryRecord& r : file.table().entries)
    shapes.push_back(Tensor::symbolic(r.shape, r.dtype));
  return to_checkpoint(file.table(), std::move(shapes));
}

LoadReport load_checkpoint(const std::string& path, std::span<const CheckpointTarget> targets,
                           const LoadOptions& options) {
  SAMBA_CHECK(
      (options.kinds & ~kAllCheckpointKinds) == 0 && options.kinds != 0, Status::InvalidArgument,
      "loading checkpoint '{}': kinds {:#x} are not a non-empty subset of the known ones ({:#x})",
      path, options.kinds, kAllCheckpointKinds);
  std::unordered_set<std::string_view> target_names;
  for (const CheckpointTarget& t : targets) {
    SAMBA_CHECK(target_names.insert(t.name).second, Status::InvalidArgument,
                "loading checkpoint '{}': target '{}' is given twice", path, t.name);
    SAMBA_CHECK(t.tensor.defined(), Status::NullPointer,
                "loading checkpoint '{}': target '{}' has no tensor", path, t.name);
    SAMBA_CHECK(t.tensor.has_data(), Status::InvalidState,
                "loading checkpoint '{}': target '{}' of shape {} has no data to load into "
                "(symbolic or cleared)",
                path, t.name, dims_str(t.tensor.shape()));
  }

  CheckpointFile file(path);
  const Table& table = file.table();
  std::unordered_map<std::string_view, size_t> by_name;
  for (size_t i = 0; i < table.entries.size(); ++i)
    if (options.kinds & kind_bit(table.entries[i].kind)) by_name.emplace(table.entries[i].name, i);

  LoadReport report;
  std::vector<size_t> entries;       // file entries to read
  std::vector<const Tensor*> dests;  // their targets
  std::vector<bool> used(table.entries.size(), false);
  for (const CheckpointTarget& t : targets) {
    auto it = by_name.find(t.name);
    if (it == by_name.end()) {
      SAMBA_CHECK(!options.strict, Status::NotFound,
                  "loading checkpoint '{}': it has no tensor '{}' among its {} entries", path,
                  t.name, kinds_text(options.kinds));
      report.missing.push_back(t.name);
      continue;
    }
    const EntryRecord& r = table.entries[it->second];
    SAMBA_CHECK(r.dtype == t.tensor.dtype(), Status::DTypeMismatch,
                "loading checkpoint '{}': tensor '{}' is {} in the file; the target is {}", path,
                t.name, dtype_name(r.dtype), dtype_name(t.tensor.dtype()));
    SAMBA_CHECK(
        r.shape == t.tensor.shape(), Status::ShapeMismatch,
        "loading checkpoint '{}': tensor '{}' has shape {} in the file; the target has shape {}",
        path, t.name, dims_str(r.shape), dims_str(t.tensor.shape()));
    used[it->second] = true;
    entries.push_back(it->second);
    dests.push_back(&t.tensor);
    report.loaded.push_back(t.name);
  }
  for (size_t i = 0; i < table.entries.size(); ++i) {
    const EntryRecord& r = table.entries[i];
    if (used[i] || !(options.kinds & kind_bit(r.kind))) continue;
    SAMBA_CHECK(!options.strict, Status::InvalidArgument,
                "loading checkpoint '{}': its {} '{}' has no target; strict loading uses every {} "
                "entry of the file",
                path, checkpoint_kind_name(r.kind), r.name, kinds_text(options.kinds));
    report.unused.push_back(r.name);
  }

  // Nothing has changed yet; every check that can fail is behind us once
  // the tensors are read.
  std::vector<size_t> read = entries;
  std::sort(read.begin(), read.end());
  file.verify_other_frames(read);
  std::vector<Tensor> values = file.read_tensors(entries);
  for (size_t i = 0; i < values.size(); ++i) dests[i]->copy_from(values[i]);
  return report;
}

}  // namespace samba
