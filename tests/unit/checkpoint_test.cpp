#include "engine/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "engine/checkpoint/checkpoint_format.h"
#include "engine/core/error.h"
#include "fifo_guard.h"

using namespace samba;
namespace fs = std::filesystem;

namespace {

fs::path temp_dir(const std::string& name) {
  auto d =
      fs::temp_directory_path() / ("samba_checkpoint_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& b) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

// The bytes of every element in row-major order, walked by hand from the
// shape, strides and offset (independent of Tensor::contiguous).
std::vector<uint8_t> logical_bytes(const Tensor& t) {
  const size_t es = element_size(t.dtype());
  std::vector<uint8_t> out(static_cast<size_t>(t.numel()) * es);
  if (out.empty()) return out;
  const uint8_t* base = static_cast<const uint8_t*>(t.impl()->storage->data());
  Dims idx(t.shape().size(), 0);
  for (int64_t n = 0; n < t.numel(); ++n) {
    int64_t off = t.offset();
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
    std::memcpy(out.data() + static_cast<size_t>(n) * es, base + off * static_cast<int64_t>(es),
                es);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.shape()[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Random bit patterns (NaNs and all) except for bool, whose bytes must be 0 or 1.
Tensor random_tensor(const Dims& shape, DType dt, uint32_t seed) {
  Tensor t = Tensor::empty(shape, dt);
  std::mt19937 gen(seed);
  auto* p = static_cast<uint8_t*>(t.numel() ? t.raw_data() : nullptr);
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = static_cast<uint8_t>(dt == DType::Bool ? gen() & 1 : gen());
  return t;
}

Tensor filled(const Dims& shape, DType dt, uint8_t byte) {
  Tensor t = Tensor::empty(shape, dt);
  if (t.nbytes()) std::memset(t.raw_data(), dt == DType::Bool ? (byte & 1) : byte, t.nbytes());
  return t;
}

// A transposed view of a fresh tensor of shape [cols, rows]: shape [rows, cols], not contiguous.
Tensor transposed(int64_t rows, int64_t cols, DType dt, uint32_t seed) {
  Tensor base = random_tensor({cols, rows}, dt, seed);
  return base.as_strided({rows, cols}, {1, rows}, 0);
}

const std::vector<DType> kAllDTypes = {
    DType::Float32, DType::BFloat16, DType::Float16, DType::Float64, DType::Int64,
    DType::Int32,   DType::Int16,    DType::Int8,    DType::UInt8,   DType::Bool};

template <typename F>
Error expect_error(F&& f, const std::string& what) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected an error: " << what;
  return Error(Status::Ok, "");
}

// A small checkpoint with several tensors of several frames each (block
// size 4 KiB), and targets to load it into.
struct Fixture {
  std::vector<CheckpointEntry> entries;
  CheckpointMetadata metadata = {{"program", "ffn"}, {"step", "42"}};
  SaveOptions options{.compression_level = 1, .block_bytes = 4096};

  Fixture() {
    entries.push_back(
        {"w1", CheckpointKind::Parameter, random_tensor({64, 40}, DType::Float32, 1)});
    entries.push_back({"b1", CheckpointKind::Parameter, random_tensor({40}, DType::Float32, 2)});
    entries.push_back(
        {"w1.momentum", CheckpointKind::OptimizerState, filled({64, 40}, DType::Float32, 0)});
    entries.push_back({"steps", CheckpointKind::Buffer, random_tensor({}, DType::Int64, 3)});
    entries.push_back(
        {"emb", CheckpointKind::Parameter, random_tensor({100, 30}, DType::BFloat16, 4)});
  }
  // Targets of the same shapes and dtypes holding a sentinel byte.
  std::vector<CheckpointTarget> targets(uint8_t sentinel = 0x5A) const {
    std::vector<CheckpointTarget> t;
    for (const auto& e : entries)
      t.push_back({e.name, filled(e.tensor.shape(), e.tensor.dtype(), sentinel)});
    return t;
  }
};

void expect_unchanged(const std::vector<CheckpointTarget>& targets, uint8_t sentinel,
                      const std::string& context) {
  for (const auto& t : targets) {
    std::vector<uint8_t> b = logical_bytes(t.tensor);
    const uint8_t expected = t.tensor.dtype() == DType::Bool ? (sentinel & 1) : sentinel;
    for (uint8_t x : b)
      if (x != expected) {
        ADD_FAILURE() << "target '" << t.name << "' was changed by a failed load (" << context
                      << ")";
        return;
      }
  }
}

std::vector<std::string> leftovers(const fs::path& dir) {
  std::vector<std::string> out;
  for (auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp") != std::string::npos)
      out.push_back(e.path().string());
  return out;
}

// Removes every file the tests wrote (one directory per process).
class TempRoot : public ::testing::Environment {
 public:
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(std::filesystem::temp_directory_path() /
                                    ("samba_checkpoint_test_" + std::to_string(::getpid())),
                                ec);
  }
};
const auto* const kTempRoot = ::testing::AddGlobalTestEnvironment(new TempRoot);

}  // namespace

TEST(Checkpoint, RoundTripsEveryDTypeAndShape) {
  auto dir = temp_dir("roundtrip");
  const std::vector<Dims> shapes = {{},
                                    {0},
                                    {1},
                                    {7},
                                    {3, 5},
                                    {2, 0, 4},
                                    {1, 1, 1, 13},
                                    {33, 17},
                                    Dims(16, 1),
                                    {2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1}};
  std::vector<CheckpointEntry> entries;
  uint32_t seed = 10;
  for (DType dt : kAllDTypes) {
    for (size_t s = 0; s < shapes.size(); ++s)
      entries.push_back({fmt::format("{}_{}", dtype_name(dt), s),
                         static_cast<CheckpointKind>(s % kNumCheckpointKinds),
                         random_tensor(shapes[s], dt, ++seed)});
    entries.push_back({fmt::format("{}_transposed", dtype_name(dt)), CheckpointKind::Parameter,
                       transposed(37, 29, dt, ++seed)});
  }
  CheckpointMetadata md = {{"program", "round trip"}, {"empty", ""}, {"utf8", "π≈3.14"}};
  const std::string path = (dir / "all.ckpt").string();
  save_checkpoint(path, entries, md, {.compression_level = 1, .block_bytes = 4096});

  Checkpoint c = read_checkpoint(path);
  EXPECT_EQ(c.format_major, kCheckpointFormatMajor);
  EXPECT_EQ(c.format_minor, kCheckpointFormatMinor);
  EXPECT_EQ(c.metadata, md);
  ASSERT_EQ(c.entries.size(), entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    const CheckpointEntry& got = c.entries[i];
    SCOPED_TRACE(entries[i].name);
    EXPECT_EQ(got.name, entries[i].name);
    EXPECT_EQ(got.kind, entries[i].kind);
    EXPECT_EQ(got.tensor.dtype(), entries[i].tensor.dtype());
    EXPECT_EQ(got.tensor.shape(), entries[i].tensor.shape());
    EXPECT_TRUE(got.tensor.numel() == 0 || got.tensor.is_contiguous());
    EXPECT_EQ(logical_bytes(got.tensor), logical_bytes(entries[i].tensor));
  }
  ASSERT_NE(c.metadata_value("program"), nullptr);
  EXPECT_EQ(*c.metadata_value("program"), "round trip");
  EXPECT_EQ(c.metadata_value("missing"), nullptr);
  ASSERT_NE(c.find("int8_4"), nullptr);
  EXPECT_EQ(c.find("int8_4")->tensor.shape(), (Dims{3, 5}));

  // Loading into strided targets writes through their views.
  std::vector<CheckpointTarget> targets;
  for (const auto& e : entries)
    if (e.name.ends_with("_transposed"))
      targets.push_back({e.name, transposed(37, 29, e.tensor.dtype(), 999)});
  LoadReport r = load_checkpoint(path, targets, {.strict = false});
  EXPECT_EQ(r.loaded.size(), kAllDTypes.size());
  EXPECT_TRUE(r.missing.empty());
  EXPECT_EQ(r.unused.size(), entries.size() - kAllDTypes.size());
  for (const auto& t : targets)
    EXPECT_EQ(logical_bytes(t.tensor), logical_bytes(c.find(t.name)->tensor)) << t.name;
}

TEST(Checkpoint, InspectGivesTheTableWithoutData) {
  auto dir = temp_dir("inspect");
  Fixture f;
  const std::string path = (dir / "a.ckpt").string();
  save_checkpoint(path, f.entries, f.metadata, f.options);
  Checkpoint c = inspect_checkpoint(path);
  ASSERT_EQ(c.entries.size(), f.entries.size());
  for (size_t i = 0; i < c.entries.size(); ++i) {
    EXPECT_EQ(c.entries[i].name, f.entries[i].name);
    EXPECT_EQ(c.entries[i].kind, f.entries[i].kind);
    EXPECT_EQ(c.entries[i].tensor.shape(), f.entries[i].tensor.shape());
    EXPECT_FALSE(c.entries[i].tensor.has_data());
  }
  EXPECT_EQ(c.metadata, f.metadata);
}

TEST(Checkpoint, LoadFillsTargetsAndReports) {
  auto dir = temp_dir("load");
  Fixture f;
  const std::string path = (dir / "a.ckpt").string();
  save_checkpoint(path, f.entries, f.metadata, f.options);
  auto targets = f.targets();
  LoadReport r = load_checkpoint(path, targets);
  EXPECT_EQ(r.loaded.size(), f.entries.size());
  EXPECT_TRUE(r.missing.empty());
  EXPECT_TRUE(r.unused.empty());
  for (size_t i = 0; i < targets.size(); ++i)
    EXPECT_EQ(logical_bytes(targets[i].tensor), logical_bytes(f.entries[i].tensor))
        << targets[i].name;
}

TEST(Checkpoint, FifosAndDirectoriesAreRefusedWithoutBlocking) {
  auto dir = temp_dir("fifo");
  Fixture f;
  const std::string fifo = (dir / "a.ckpt").string();
  const std::string message = testing_support::refused_fifo_message(fifo, [&](const std::string& p) {
    auto targets = f.targets();
    load_checkpoint(p, targets);
  });
  EXPECT_NE(message.find(fifo), std::string::npos) << message;
  EXPECT_NE(message.find("a FIFO"), std::string::npos) << message;
  auto targets = f.targets();
  Error e = expect_error([&] { load_checkpoint(dir.string(), targets); }, "directory");
  EXPECT_NE(std::string(e.what()).find("a directory"), std::string::npos) << e.what();
}

TEST(Checkpoint, SaveRemovesTempFilesOfKilledSaves) {
  auto dir = temp_dir("orphans");
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  const fs::path orphan = dir / fmt::format(".a.ckpt.tmp.{}.0", dead);
  const fs::path in_flight = dir / fmt::format(".a.ckpt.tmp.{}.999999", ::getpid());
  const fs::path other_target = dir / fmt::format(".b.ckpt.tmp.{}.0", dead);
  for (const auto& p : {orphan, in_flight, other_target}) write_bytes(p, std::vector<uint8_t>(64, 1));
  Fixture f;
  save_checkpoint((dir / "a.ckpt").string(), f.entries, f.metadata, f.options);
  EXPECT_FALSE(fs::exists(orphan)) << "the temp file of a killed save survived the next save";
  EXPECT_TRUE(fs::exists(in_flight)) << "a live process's save in flight was removed";
  EXPECT_TRUE(fs::exists(other_target)) << "a save removed another file's temp file";
}

TEST(Checkpoint, CorruptFramesOfKindsNotLoadedAreRefused) {
  auto dir = temp_dir("other_kinds");
  Fixture f;
  CheckpointKind loaded = f.entries.back().kind;
  for (const CheckpointEntry& e : f.entries)
    if (e.kind != f.entries.back().kind) loaded = e.kind;
  ASSERT_NE(loaded, f.entries.back().kind);
  const std::string path = (dir / "a.ckpt").string();
  save_checkpoint(path, f.entries, f.metadata, f.options);
  std::vector<uint8_t> bytes = read_bytes(path);
  bytes.back() ^= 0x40;  // in the last entry's last frame
  write_bytes(path, bytes);
  std::vector<CheckpointTarget> params;
  for (const CheckpointEntry& e : f.entries)
    if (e.kind == loaded)
      params.push_back({e.name, filled(e.tensor.shape(), e.tensor.dtype(), 0x5A)});
  Error e = expect_error(
      [&] {
        load_checkpoint(path, params, {.strict = false, .kinds = kind_bit(loaded)});
      },
      "a corrupt frame of a kind not loaded");
  EXPECT_EQ(e.code(), Status::CorruptFile);
  EXPECT_NE(std::string(e.what()).find(f.entries.back().name), std::string::npos) << e.what();
  expect_unchanged(params, 0x5A, "corrupt frame of another kind");
}

TEST(Checkpoint, KindsSelectWhatStrictLoadingNeeds) {
  auto dir = temp_dir("kinds");
  Fixture f;
  const std::string path = (dir / "a.ckpt").string();
  save_checkpoint(path, f.entries, f.metadata, f.options);
  std::vector<CheckpointTarget> params;
  for (size_t i = 0; i < f.entries.size(); ++i)
    if (f.entries[i].kind == CheckpointKind::Parameter)
      params.push_back({f.entries[i].name,
                        filled(f.entries[i].tensor.shape(), f.entries[i].tensor.dtype(), 0x5A)});
  ASSERT_EQ(params.size(), 3u);

  // All kinds, strict: the optimizer state and buffer have no target.
  Error e = expect_error([&] { load_checkpoint(path, params); }, "strict load with unused entries");
  EXPECT_EQ(e.code(), Status::InvalidArgument);
  EXPECT_NE(std::string(e.what()).find("w1.momentum"), std::string::npos) << e.what();
  expect_unchanged(params, 0x5A, "unused entries");

  LoadReport r =
      load_checkpoint(path, params, {.strict = true, .kinds = kind_bit(CheckpointKind::Parameter)});
  EXPECT_EQ(r.loaded, (std::vector<std::string>{"w1", "b1", "emb"}));
  EXPECT_EQ(logical_bytes(params[0].tensor), logical_bytes(f.entries[0].tensor));

  // A target whose entry is of an unselected kind is not found.
  std::vector<CheckpointTarget> momentum = {
      {"w1.momentum", filled({64, 40}, DType::Float32, 0x5A)}};
  e = expect_error(
      [&] {
        load_checkpoint(path, momentum,
                        {.strict = true, .kinds = kind_bit(CheckpointKind::Parameter)});
      },
      "target of an unselected kind");
  EXPECT_EQ(e.code(), Status::NotFound);
  expect_unchanged(momentum, 0x5A, "unselected kind");
}

TEST(Checkpoint, MismatchedTargetsAreRefusedAndLeftUnchanged) {
  auto dir = temp_dir("mismatch");
  Fixture f;
  const std::string path = (dir / "a.ckpt").string();
  save_checkpoint(path, f.entries, f.metadata, f.options);

  {  // a target the file does not have
    auto targets = f.targets();
    targets.push_back({"w2", filled({3}, DType::Float32, 0x5A)});
    Error e = expect_error([&] { load_checkpoint(path, targets); }, "missing tensor");
    EXPECT_EQ(e.code(), Status::NotFound);
    EXPECT_NE(std::string(e.what()).find("'w2'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    expect_unchanged(targets, 0x5A, "missing tensor");

    LoadReport r = load_checkpoint(path, targets, {.strict = false});
    EXPECT_EQ(r.missing, (std::vector<std::string>{"w2"}));
    EXPECT_EQ(r.loaded.size(), f.entries.size());
  }
  {  // wrong dtype, after targets that match (which must not be written either)
    auto targets = f.targets();
    targets[3] = {"steps", filled({}, DType::Int32, 0x5A)};
    Error e =
        expect_error([&] { load_checkpoint(path, targets, {.strict = false}); }, "dtype mismatch");
    EXPECT_EQ(e.code(), Status::DTypeMismatch);
    const std::string m = e.what();
    EXPECT_NE(m.find("'steps'"), std::string::npos) << m;
    EXPECT_NE(m.find("int64"), std::string::npos) << m;
    EXPECT_NE(m.find("int32"), std::string::npos) << m;
    expect_unchanged(targets, 0x5A, "dtype mismatch");
  }
  {  // wrong shape
    auto targets = f.targets();
    targets[4] = {"emb", filled({30, 100}, DType::BFloat16, 0x5A)};
    Error e =
        expect_error([&] { load_checkpoint(path, targets, {.strict = false}); }, "shape mismatch");
    EXPECT_EQ(e.code(), Status::ShapeMismatch);
    const std::string m = e.what();
    EXPECT_NE(m.find("'emb'"), std::string::npos) << m;
    EXPECT_NE(m.find("[100, 30]"), std::string::npos) << m;
    EXPECT_NE(m.find("[30, 100]"), std::string::npos) << m;
    expect_unchanged(targets, 0x5A, "shape mismatch");
  }
  {  // the same target twice, and a target without data
    auto targets = f.targets();
    targets.push_back(targets[0]);
    EXPECT_EQ(expect_error([&] { load_checkpoint(path, targets); }, "duplicate target").code(),
              Status::InvalidArgument);
    std::vector<CheckpointTarget> symbolic = {{"w1", Tensor::symbolic({64, 40}, DType::Float32)}};
    EXPECT_EQ(
        expect_error([&] { load_checkpoint(path, symbolic, {.strict = false}); }, "symbolic target")
            .code(),
        Status::InvalidState);
  }
}

// Every byte of the header and table and many of the data, flipped one at a
// time: each is refused with a message naming the file, and no target changes.
TEST(Checkpoint, FlippedBytesAreRefused) {
  auto dir = temp_dir("flip");
  Fixture f;
  const fs::path good = dir / "good.ckpt";
  save_checkpoint(good.string(), f.entries, f.metadata, f.options);
  const std::vector<uint8_t> bytes = read_bytes(good);
  // Every byte of the header and table, the first 32 bytes of every frame
  // (zstd's frame and block headers, some of which can change without
  // changing what the frame decodes to) and every 37th byte of the rest.
  const std::span<const uint8_t, 64> header_bytes(bytes.data(), 64);
  const auto header = checkpoint_format::decode_header(header_bytes, bytes.size(), good.string());
  const size_t table_end = 64 + static_cast<size_t>(header.table_bytes);
  const auto table = checkpoint_format::decode_table(
      header, header_bytes, std::span<const uint8_t>(bytes.data() + 64, header.table_bytes),
      bytes.size(), good.string());
  std::set<size_t> positions;
  for (size_t i = 0; i < table_end; ++i) positions.insert(i);
  for (const auto& e : table.entries) {
    size_t at = table_end + e.data_offset;
    for (const auto& fr : e.frames) {
      for (size_t i = 0; i < std::min<size_t>(32, fr.stored_bytes); ++i) positions.insert(at + i);
      at += fr.stored_bytes;
    }
  }
  for (size_t i = table_end; i < bytes.size(); i += 37) positions.insert(i);
  positions.insert(bytes.size() - 1);

  const fs::path bad = dir / "bad.ckpt";
  int refused = 0;
  std::set<Status> codes;
  for (size_t pos : positions) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}}) {
      std::vector<uint8_t> b = bytes;
      b[pos] ^= mask;
      write_bytes(bad, b);
      auto targets = f.targets();
      try {
        load_checkpoint(bad.string(), targets);
        ADD_FAILURE() << "a flip of bit mask " << int(mask) << " at byte " << pos << " of "
                      << bytes.size() << " was not detected";
      } catch (const Error& e) {
        ++refused;
        codes.insert(e.code());
        EXPECT_TRUE(e.code() == Status::CorruptFile || e.code() == Status::VersionMismatch ||
                    e.code() == Status::Unsupported)
            << "byte " << pos << ": " << e.what();
        EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
      }
      expect_unchanged(targets, 0x5A, fmt::format("flip at {}", pos));
      if (::testing::Test::HasFailure()) return;
    }
  }
  EXPECT_EQ(refused, static_cast<int>(positions.size()) * 2);
  EXPECT_TRUE(codes.count(Status::VersionMismatch)) << "flipping the version must name versions";
}

TEST(Checkpoint, TruncatedFilesAreRefused) {
  auto dir = temp_dir("truncate");
  Fixture f;
  const fs::path good = dir / "good.ckpt";
  save_checkpoint(good.string(), f.entries, f.metadata, f.options);
  const std::vector<uint8_t> bytes = read_bytes(good);
  const fs::path bad = dir / "bad.ckpt";
  for (int k = 0; k < 16; ++k) {
    const size_t n = bytes.size() * k / 16;
    write_bytes(
        bad, std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n)));
    auto targets = f.targets();
    Error e = expect_error([&] { load_checkpoint(bad.string(), targets); },
                           fmt::format("truncated to {}", n));
    EXPECT_EQ(e.code(), Status::CorruptFile) << e.what();
    EXPECT_NE(std::string(e.what()).find("truncated"), std::string::npos)
        << n << " bytes: " << e.what();
    EXPECT_NE(std::string(e.what()).find(bad.string()), std::string::npos) << e.what();
    expect_unchanged(targets, 0x5A, fmt::format("truncated to {}", n));
    EXPECT_THROW(read_checkpoint(bad.string()), Error);
  }
  // One byte too many is as wrong as one too few.
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  write_bytes(bad, longer);
  Error e = expect_error([&] { read_checkpoint(bad.string()); }, "extended file");
  EXPECT_NE(std::string(e.what()).find("extended"), std::string::npos) << e.what();
}

TEST(Checkpoint, VersionsAreCheckedAndNamed) {
  auto dir = temp_dir("version");
  Fixture f;
  const fs::path path = dir / "a.ckpt";
  save_checkpoint(path.string(), f.entries, f.metadata, f.options);
  const std::vector<uint8_t> bytes = read_bytes(path);

  // Rewrites the header with `edit` applied and a correct checksum.
  auto with_header = [&](auto edit) {
    std::vector<uint8_t> b = bytes;
    auto h = checkpoint_format::decode_header(std::span<const uint8_t, 64>(b.data(), 64), b.size(),
                                              path.string());
    edit(h);
    auto enc = checkpoint_format::encode_header(h);
    h.checksum = checkpoint_format::table_checksum(
        enc, std::span<const uint8_t>(b.data() + 64, static_cast<size_t>(h.table_bytes)));
    enc = checkpoint_format::encode_header(h);
    std::memcpy(b.data(), enc.data(), 64);
    return b;
  };

  const fs::path other = dir / "other.ckpt";
  write_bytes(other, with_header([](auto& h) { h.format_major = 2; }));
  Error e = expect_error([&] { read_checkpoint(other.string()); }, "newer major");
  EXPECT_EQ(e.code(), Status::VersionMismatch);
  EXPECT_NE(std::string(e.what()).find("format 2.0"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("format 1.x"), std::string::npos) << e.what();

  write_bytes(other, with_header([](auto& h) { h.format_minor = 7; }));
  Checkpoint c = read_checkpoint(other.string());  // a newer minor of the same major is readable
  EXPECT_EQ(c.format_minor, 7u);
  EXPECT_EQ(c.entries.size(), f.entries.size());

  write_bytes(other, with_header([](auto& h) { h.flags = 4; }));
  EXPECT_EQ(expect_error([&] { read_checkpoint(other.string()); }, "unknown flag").code(),
            Status::Unsupported);

  std::vector<uint8_t> not_ckpt(200, 'x');
  write_bytes(other, not_ckpt);
  e = expect_error([&] { read_checkpoint(other.string()); }, "not a checkpoint");
  EXPECT_NE(std::string(e.what()).find("not a Samba checkpoint"), std::string::npos) << e.what();

  EXPECT_EQ(expect_error([&] { read_checkpoint((dir / "absent.ckpt").string()); }, "absent").code(),
            Status::IoError);
  EXPECT_EQ(expect_error([&] { read_checkpoint(dir.string()); }, "directory").code(),
            Status::IoError);
}

// Tables with a valid checksum but impossible contents (as a buggy or
// hostile writer could produce) are refused by the field checks themselves.
TEST(Checkpoint, ImpossibleTablesAreRefused) {
  auto dir = temp_dir("hostile");
  using namespace checkpoint_format;
  auto make_file = [&](std::vector<EntryRecord> recs, uint64_t data_bytes) {
    std::vector<uint8_t> table = encode_table(recs, {});
    Header h;
    h.entry_count = static_cast<uint32_t>(recs.size());
    h.block_bytes = 4096;
    h.table_bytes = table.size();
    h.data_bytes = data_bytes;
    h.file_bytes = 64 + table.size() + data_bytes;
    auto enc = encode_header(h);
    h.checksum = table_checksum(enc, table);
    enc = encode_header(h);
    std::vector<uint8_t> b(enc.begin(), enc.end());
    b.insert(b.end(), table.begin(), table.end());
    b.resize(b.size() + data_bytes, 0);
    const fs::path p = dir / "h.ckpt";
    write_bytes(p, b);
    return p.string();
  };
  auto expect_corrupt = [&](const std::string& p, const std::string& needle) {
    Error e = expect_error([&] { read_checkpoint(p); }, needle);
    EXPECT_EQ(e.code(), Status::CorruptFile) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  };
  EntryRecord ok;
  ok.name = "t";
  ok.shape = {2};
  ok.raw_bytes = 8;
  ok.stored_bytes = 20;
  ok.frames = {{20, 0, 0}};

  EntryRecord r = ok;
  r.dtype = static_cast<DType>(99);
  expect_corrupt(make_file({r}, 20), "dtype code 99");
  r = ok;
  r.kind = static_cast<CheckpointKind>(9);
  expect_corrupt(make_file({r}, 20), "kind code 9");
  r = ok;
  r.shape = Dims(17, 1);
  r.raw_bytes = 4;
  expect_corrupt(make_file({r}, 20), "rank 17");
  r = ok;
  r.shape = {-2};
  expect_corrupt(make_file({r}, 20), "dimension 0 = -2");
  r = ok;
  r.shape = {int64_t{1} << 40, int64_t{1} << 40};
  expect_corrupt(make_file({r}, 20), "overflows");
  r = ok;
  r.raw_bytes = 12;
  expect_corrupt(make_file({r}, 20), "needs 8");
  r = ok;
  r.data_offset = 4;
  expect_corrupt(make_file({r}, 24), "starts at data offset 4");
  r = ok;
  r.stored_bytes = 1000;
  r.frames = {{1000, 0, 0}};
  expect_corrupt(make_file({r}, 20), "past the 20-byte data section");
  r = ok;
  r.frames = {};
  expect_corrupt(make_file({r}, 20), "0 frames");
  r = ok;
  r.stored_bytes = 5000;
  r.frames = {{5000, 0, 0}};
  expect_corrupt(make_file({r}, 5000), "frame 0 of entry 0 ('t') is 5000 bytes");
  EntryRecord second = ok;
  second.data_offset = 20;
  expect_corrupt(make_file({ok, second}, 40), "appears twice");
  r = ok;
  r.name = "";
  expect_corrupt(make_file({r}, 20), "empty name");
  expect_corrupt(make_file({ok}, 30), "data ends at 20");
  // The checksummed fields are fine; the frame's bytes (zeros) are not its data.
  expect_corrupt(make_file({ok}, 20), "fail their checksum");
}

TEST(Checkpoint, SaveRefusesBadEntriesBeforeWriting) {
  auto dir = temp_dir("badsave");
  const std::string path = (dir / "a.ckpt").string();
  Tensor t = random_tensor({4}, DType::Float32, 1);
  auto refused = [&](std::vector<CheckpointEntry> entries, CheckpointMetadata md, SaveOptions opt,
                     Status code, const std::string& needle) {
    Error e = expect_error([&] { save_checkpoint(path, entries, md, opt); }, needle);
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_FALSE(fs::exists(path));
    EXPECT_TRUE(leftovers(dir).empty());
  };
  refused({{"a", CheckpointKind::Parameter, t}, {"a", CheckpointKind::Buffer, t}}, {}, {},
          Status::InvalidArgument, "'a' is given twice");
  refused({{"", CheckpointKind::Parameter, t}}, {}, {}, Status::InvalidArgument, "name of 0 bytes");
  refused({{"a", CheckpointKind::Parameter, Tensor::symbolic({4}, DType::Float32)}}, {}, {},
          Status::InvalidState, "'a'");
  refused({{"a", CheckpointKind::Parameter, Tensor()}}, {}, {}, Status::NullPointer, "'a'");
  refused({{"a", static_cast<CheckpointKind>(7), t}}, {}, {}, Status::InvalidArgument,
          "kind code 7");
  refused({{"a", CheckpointKind::Parameter, t}}, {{"k", "1"}, {"k", "2"}}, {},
          Status::InvalidArgument, "metadata key 'k'");
  refused({{"a", CheckpointKind::Parameter, t}}, {}, {.compression_level = 1000},
          Status::InvalidArgument, "compression level 1000");
  refused({{"a", CheckpointKind::Parameter, t}}, {}, {.block_bytes = 10}, Status::InvalidArgument,
          "block size 10");
}

// A save that fails, before or in the middle of writing, leaves the
// previous checkpoint intact and no temporary file behind.
TEST(Checkpoint, FailedSavesLeaveTheOldFileIntact) {
  auto dir = temp_dir("atomic");
  Fixture f;
  const fs::path path = dir / "a.ckpt";
  save_checkpoint(path.string(), f.entries, f.metadata, f.options);
  const std::vector<uint8_t> before = read_bytes(path);

  std::vector<CheckpointEntry> big = {
      {"big", CheckpointKind::Parameter,
       random_tensor({1 << 20}, DType::Float32, 5)}};  // 4 MiB, incompressible

  // Mid-write: the file size limit stops the write after 1 MiB (EFBIG).
  {
    struct rlimit old_limit;
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
    auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = old_limit;
    small.rlim_cur = 1 << 20;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    Error e = expect_error(
        [&] { save_checkpoint(path.string(), big, {}, {.compression_level = 1}); }, "EFBIG");
    ::setrlimit(RLIMIT_FSIZE, &old_limit);
    std::signal(SIGXFSZ, old_handler);
    EXPECT_EQ(e.code(), Status::IoError) << e.what();
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    EXPECT_EQ(read_bytes(path), before);
    EXPECT_TRUE(leftovers(dir).empty()) << leftovers(dir)[0];
  }
  // The target is a directory.
  {
    const fs::path sub = dir / "sub.ckpt";
    fs::create_directories(sub);
    Error e = expect_error([&] { save_checkpoint(sub.string(), big); }, "directory target");
    EXPECT_EQ(e.code(), Status::IoError);
    EXPECT_NE(std::string(e.what()).find(sub.string()), std::string::npos) << e.what();
    EXPECT_TRUE(fs::is_directory(sub));
    EXPECT_TRUE(leftovers(dir).empty());
  }
  // The directory does not exist, or cannot hold new files (/proc).
  {
    EXPECT_EQ(expect_error([&] { save_checkpoint((dir / "none" / "a.ckpt").string(), big); },
                           "missing dir")
                  .code(),
              Status::IoError);
    EXPECT_EQ(expect_error([&] { save_checkpoint("/proc/samba_test.ckpt", big); }, "/proc").code(),
              Status::IoError);
  }
  // A read-only directory (only meaningful when not running as root).
  if (::geteuid() != 0) {
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_EQ(expect_error([&] { save_checkpoint(path.string(), big); }, "read-only dir").code(),
              Status::IoError);
    fs::permissions(dir, fs::perms::owner_all);
    EXPECT_EQ(read_bytes(path), before);
  }
  // And the old file still loads.
  auto targets = f.targets();
  load_checkpoint(path.string(), targets);
  EXPECT_EQ(logical_bytes(targets[0].tensor), logical_bytes(f.entries[0].tensor));

  // A successful save replaces it.
  save_checkpoint(path.string(), big);
  EXPECT_EQ(read_checkpoint(path.string()).entries.size(), 1u);
  EXPECT_TRUE(leftovers(dir).empty());
}

TEST(Checkpoint, BigTensorRoundTrip) {
  auto dir = temp_dir("big");
  const int64_t n = int64_t{16} << 20;  // 64 MiB of float32
  Tensor w = Tensor::empty({n}, DType::Float32);
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  float* p = w.data<float>();
  for (int64_t i = 0; i < n; ++i) p[i] = normal(gen);
  Tensor zeros = Tensor::zeros({n}, DType::Float32);
  std::vector<CheckpointEntry> entries = {{"w", CheckpointKind::Parameter, w},
                                          {"w.exp_avg", CheckpointKind::OptimizerState, zeros}};
  const std::string path = (dir / "big.ckpt").string();
  save_checkpoint(path, entries, {{"step", "1000"}});
  const auto size = fs::file_size(path);
  EXPECT_LT(size, uint64_t(n) * 4 * 2) << "the zero tensor should compress to almost nothing";
  EXPECT_GT(size, uint64_t(n) * 4 / 2);

  std::vector<CheckpointTarget> targets = {
      {"w", Tensor::empty({n}, DType::Float32)},
      {"w.exp_avg", Tensor::empty({n}, DType::Float32, false)}};
  std::memset(targets[1].tensor.raw_data(), 0xFF, targets[1].tensor.nbytes());
  load_checkpoint(path, targets);
  EXPECT_EQ(std::memcmp(targets[0].tensor.raw_data(), w.raw_data(), w.nbytes()), 0);
  EXPECT_EQ(std::memcmp(targets[1].tensor.raw_data(), zeros.raw_data(), zeros.nbytes()), 0);
}

TEST(Checkpoint, EmptyCheckpointRoundTrips) {
  auto dir = temp_dir("empty");
  const std::string path = (dir / "e.ckpt").string();
  save_checkpoint(path, {});
  Checkpoint c = read_checkpoint(path);
  EXPECT_TRUE(c.entries.empty());
  EXPECT_TRUE(c.metadata.empty());
  EXPECT_EQ(fs::file_size(path), checkpoint_format::kHeaderBytes);
  LoadReport r = load_checkpoint(path, {});
  EXPECT_TRUE(r.loaded.empty());
}
