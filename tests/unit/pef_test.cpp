// PEF round trips, determinism, the readable log, and untrusted files:
// corrupt, truncated, hand-crafted and semantically wrong programs are
// refused with messages that name what is wrong, never a crash.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zstd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>

#include "engine/core/error.h"
#include "engine/core/parallel.h"
#include "engine/io/file_io.h"
#include "engine/pef/blob_codec.h"
#include "engine/pef/pef_generated.h"
#include "engine/pef/pef_log.h"
#include "engine/pef/reader.h"
#include "engine/pef/verify.h"
#include "engine/pef/writer.h"
#include "fifo_guard.h"
#include "pef_sample_program.h"

namespace samba::pef {
namespace {

namespace fs = std::filesystem;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            fmt::format("samba_pef_test_{}_{}", ::getpid(),
                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// The status and message a parse ends with ("" and Ok when it succeeds).
struct Outcome {
  Status status = Status::Ok;
  std::string message;
};
Outcome parse_outcome(std::span<const uint8_t> bytes) {
  try {
    parse_pef(bytes);
    return {};
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
}

void expect_refused(std::span<const uint8_t> bytes, Status status, const std::string& needle) {
  Outcome o = parse_outcome(bytes);
  EXPECT_EQ(o.status, status) << o.message;
  EXPECT_NE(o.message.find(needle), std::string::npos)
      << "message: " << o.message << "\nexpected: " << needle;
}

const ProgramDesc& sample() {
  static const ProgramDesc p = sample::resffn_program();
  return p;
}

int32_t tensor_index(const ProgramDesc& p, const std::string& name) {
  for (size_t i = 0; i < p.tensors.size(); ++i)
    if (p.tensors[i].name == name) return static_cast<int32_t>(i);
  ADD_FAILURE() << "no tensor " << name;
  return -1;
}

// ---- round trips ----------------------------------------------------------------

TEST(PefRoundTrip, SampleIsValidAndRealistic) {
  const ProgramDesc& p = sample();
  ASSERT_NO_THROW(verify_program(p));
  // The sample covers what the format must carry.
  std::set<TensorRole> roles;
  for (const auto& t : p.tensors) roles.insert(t.role);
  EXPECT_EQ(roles.size(), static_cast<size_t>(kNumTensorRoles));
  std::set<SectionType> types;
  for (const auto& s : p.sections) types.insert(s.type);
  EXPECT_GE(types.size(), 4u);
  EXPECT_EQ(p.graphs.size(), 2u);
  size_t bound = 0, fused = 0;
  for (const auto& k : p.kernels) {
    fused += k.ops.size() > 1;
    for (const auto& c : k.ops) bound += c.bindings.size();
  }
  EXPECT_GE(fused, 3u);
  EXPECT_GE(bound, 4u);
  EXPECT_GE(p.blobs.size(), 4u);
  EXPECT_GE(p.materializers.size(), 3u);
}

TEST(PefFile, FifosAndDirectoriesAreRefusedWithoutBlocking) {
  TempDir dir;
  const std::string fifo = dir.file("model.pef");
  const std::string message =
      testing_support::refused_fifo_message(fifo, [](const std::string& p) { read_pef(p); });
  EXPECT_NE(message.find(fifo), std::string::npos) << message;
  EXPECT_NE(message.find("a FIFO"), std::string::npos) << message;
  try {
    read_pef(dir.path().string());
    ADD_FAILURE() << "a directory was read as a PEF";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a directory"), std::string::npos) << e.what();
  }
}

TEST(PefRoundTrip, ParseGivesAnEqualProgram) {
  std::vector<uint8_t> bytes = serialize_pef(sample());
  ProgramDesc back = parse_pef(bytes);
  EXPECT_TRUE(back == sample());
  // Field by field too, so a failure says where.
  EXPECT_EQ(back.tensors, sample().tensors);
  EXPECT_EQ(back.kernels, sample().kernels);
  EXPECT_EQ(back.sections, sample().sections);
  EXPECT_EQ(back.schedule, sample().schedule);
  EXPECT_EQ(back.argins, sample().argins);
  EXPECT_EQ(back.blobs, sample().blobs);
  EXPECT_EQ(back.materializers, sample().materializers);
  EXPECT_EQ(back.graphs, sample().graphs);
  EXPECT_EQ(back.memory, sample().memory);
  EXPECT_EQ(back.metadata, sample().metadata);
}

TEST(PefRoundTrip, SameProgramSameBytes) {
  std::vector<uint8_t> a = serialize_pef(sample());
  std::vector<uint8_t> b = serialize_pef(sample::resffn_program());
  EXPECT_EQ(a, b);
  EXPECT_EQ(serialize_pef(parse_pef(a)), a);
}

TEST(PefRoundTrip, BytesDoNotDependOnTheThreadCount) {
  ProgramDesc big = sample::large_program(400, 100, 4u << 20);
  ASSERT_NO_THROW(verify_program(big));
  std::vector<uint8_t> many = serialize_pef(big);
  ThreadPool one(1);
  ThreadPool::Scope scope(&one);
  std::vector<uint8_t> single = serialize_pef(big);
  EXPECT_EQ(many, single);
  EXPECT_TRUE(parse_pef(single) == big);
}

TEST(PefRoundTrip, FileRoundTripAndAtomicOverwrite) {
  TempDir dir;
  std::string path = dir.file("resffn.pef");
  write_pef(sample(), path);
  EXPECT_TRUE(read_pef(path) == sample());
  // Overwriting replaces the file whole and leaves no temporary behind.
  ProgramDesc other = sample();
  other.metadata.emplace_back("run", "2");
  write_pef(other, path);
  EXPECT_TRUE(read_pef(path) == other);
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path())) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(PefRoundTrip, EmptyAndEdgeValues) {
  ProgramDesc p;
  p.name = "empty";
  EXPECT_TRUE(parse_pef(serialize_pef(p)) == p);
  // Extreme attribute values, an empty blob and a zero-size tensor survive.
  sample::ProgramBuilder b("edges");
  int32_t t = b.tensor("z", TensorRole::Constant, DType::Float64, {0, 3});
  b.at(t).blob = b.blob({});
  b.tensor("big", TensorRole::Buffer, DType::Int64, {2});
  // Unused by any tensor, so only its encoding is checked, not its kind.
  b.materializer("full", {{"value", -0.0},
                                                   {"max", INT64_MAX},
                                                   {"min", INT64_MIN},
                                                   {"inf", std::numeric_limits<double>::infinity()},
                                                   {"empty", std::vector<int64_t>{}},
                                                   {"s", std::string("")}});
  ProgramDesc e = b.finish();
  ASSERT_NO_THROW(verify_program(e));
  EXPECT_TRUE(parse_pef(serialize_pef(e)) == e);
}

TEST(PefRoundTrip, BlobsCompressOnlyWhenThatHelps) {
  std::vector<uint8_t> bytes = serialize_pef(sample());
  const fb::Program* root = fb::GetProgram(bytes.data());
  const ProgramDesc& p = sample();
  ASSERT_EQ(root->blobs()->size(), p.blobs.size());
  for (size_t i = 0; i < p.blobs.size(); ++i) {
    const fb::Blob* b = root->blobs()->Get(static_cast<uint32_t>(i));
    EXPECT_EQ(b->uncompressed_size(), p.blobs[i].data.size());
    // XXH64 of the empty input with seed 0 is a published constant; others
    // are compared with the codec's own hash of the original bytes.
    EXPECT_EQ(b->checksum(), blob_checksum(p.blobs[i].data));
    if (b->compression() == fb::Compression::Zstd) {
      EXPECT_LT(b->data()->size(), p.blobs[i].data.size());
    }
  }
  EXPECT_EQ(blob_checksum({}), 0xEF46DB3751D8E999ull);
  // The zeros blob shrinks; the noise blob is stored as it is.
  int32_t zeros = p.tensors[static_cast<size_t>(tensor_index(p, "norm1.running_mean"))].blob;
  int32_t noise = p.tensors[static_cast<size_t>(tensor_index(p, "embed.weight"))].blob;
  EXPECT_EQ(root->blobs()->Get(zeros)->compression(), fb::Compression::Zstd);
  EXPECT_EQ(root->blobs()->Get(noise)->compression(), fb::Compression::None);
}

TEST(PefRoundTrip, MisalignedInputIsCopiedNotMisread) {
  std::vector<uint8_t> bytes = serialize_pef(sample());
  std::vector<uint8_t> shifted(bytes.size() + 1);
  std::copy(bytes.begin(), bytes.end(), shifted.begin() + 1);
  EXPECT_TRUE(parse_pef(std::span<const uint8_t>(shifted).subspan(1)) == sample());
}

// ---- versions -----------------------------------------------------------------------

TEST(PefFormatVersion, NewerMajorRefusedNamingBoth) {
  ProgramDesc p = sample();
  p.format_major = 2;
  p.format_minor = 0;
  std::vector<uint8_t> bytes = serialize_pef(p);
  expect_refused(bytes, Status::VersionMismatch, "file has PEF format 2.0; this runtime reads 1.x");
  PefVersion v = peek_pef_version(bytes);
  EXPECT_EQ(v.major, 2u);
  EXPECT_EQ(v.minor, 0u);
  p.format_major = 0;
  expect_refused(serialize_pef(p), Status::VersionMismatch, "file has PEF format 0.0");
}

TEST(PefFormatVersion, OtherMinorOfThisMajorAccepted) {
  for (uint32_t minor : {0u, 7u, 4000000000u}) {
    ProgramDesc p = sample();
    p.format_minor = minor;
    ProgramDesc back = parse_pef(serialize_pef(p));
    EXPECT_EQ(back.format_minor, minor);
  }
}

// ---- damaged files ----------------------------------------------------------------------

TEST(PefCorrupt, NotAPefFile) {
  expect_refused({}, Status::CorruptFile, "not a PEF file: 0 bytes");
  std::vector<uint8_t> three = {1, 2, 3};
  expect_refused(three, Status::CorruptFile, "not a PEF file: 3 bytes");
  std::vector<uint8_t> bytes = serialize_pef(sample());
  bytes[4] = 'X';
  expect_refused(bytes, Status::CorruptFile, "file identifier 'XPEF', expected 'SPEF'");
  std::string text = "this is a text file, not a PEF at all";
  expect_refused({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, Status::CorruptFile,
                 "not a PEF file");
}

// Every byte flipped in turn, three ways: each parse either succeeds (the
// byte was padding or a value nothing constrains) into a program that
// passes verification, or is refused as corrupt. Nothing else may happen.
TEST(PefCorrupt, FlippedBytesEverywhere) {
  std::vector<uint8_t> good = serialize_pef(sample());
  size_t refused = 0, accepted = 0;
  for (uint8_t mask : {uint8_t{0xff}, uint8_t{0x01}, uint8_t{0x80}}) {
    for (size_t i = 0; i < good.size(); ++i) {
      std::vector<uint8_t> bad = good;
      bad[i] ^= mask;
      Outcome o = parse_outcome(bad);
      if (o.status == Status::Ok) {
        ++accepted;
        continue;
      }
      ++refused;
      ASSERT_TRUE(o.status == Status::CorruptFile || o.status == Status::VersionMismatch)
          << "byte " << i << " mask " << int(mask) << ": status " << int(o.status) << ": "
          << o.message;
      ASSERT_FALSE(o.message.empty());
    }
  }
  // Most of a PEF is structure, indices and checksummed data.
  EXPECT_GT(refused, accepted) << refused << " refused, " << accepted << " accepted";
}

TEST(PefCorrupt, TruncatedAtEverySixteenth) {
  std::vector<uint8_t> good = serialize_pef(sample());
  for (int k = 0; k < 16; ++k) {
    size_t n = good.size() * k / 16;
    Outcome o = parse_outcome(std::span<const uint8_t>(good).first(n));
    EXPECT_EQ(o.status, Status::CorruptFile)
        << "cut at " << n << " of " << good.size() << ": " << o.message;
  }
  // One byte short, too.
  EXPECT_EQ(parse_outcome(std::span<const uint8_t>(good).first(good.size() - 1)).status,
            Status::CorruptFile);
}

TEST(PefCorrupt, BadBlobChecksum) {
  std::vector<uint8_t> bytes = serialize_pef(sample());
  // The noise blob is stored raw: find its bytes in the file and change one.
  const auto& raw =
      sample()
          .blobs[static_cast<size_t>(sample().tensors[tensor_index(sample(), "embed.weight")].blob)]
          .data;
  auto at = std::search(bytes.begin(), bytes.end(), raw.begin(), raw.end());
  ASSERT_NE(at, bytes.end());
  at[100] ^= 0x10;
  expect_refused(bytes, Status::CorruptFile, "checksum mismatch");
}

TEST(PefCorrupt, ReadPefNamesThePathAndIoErrors) {
  TempDir dir;
  std::string path = dir.file("cut.pef");
  std::vector<uint8_t> bytes = serialize_pef(sample());
  bytes.resize(bytes.size() / 2);
  FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  try {
    read_pef(path);
    FAIL() << "a cut file was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::CorruptFile);
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
  }
  try {
    read_pef(dir.file("missing.pef"));
    FAIL() << "a missing file was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::IoError);
    EXPECT_NE(std::string(e.what()).find("missing.pef"), std::string::npos);
  }
  EXPECT_THROW(read_pef(dir.path().string()), Error);
  try {
    write_pef(sample(), dir.file("no/such/dir/x.pef"));
    FAIL() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::IoError);
  }
}

}  // namespace
}  // namespace samba::pef

namespace samba::pef {
namespace {

// ---- the readable log ---------------------------------------------------------------------

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos || text.rfind(line + "\n", 0) == 0;
}

TEST(PefLog, ListsEverythingOneLineEach) {
  std::string log = format_pef_log(sample());
  EXPECT_TRUE(has_line(log, "PEF 'resffn'"));
  EXPECT_TRUE(has_line(log, fmt::format("format          1.{}", kFormatMinor)));
  EXPECT_TRUE(has_line(log, "compiler        samba 0.1.0"));
  EXPECT_TRUE(has_line(log, "opt level       o1"));
  EXPECT_TRUE(has_line(
      log,
      "graph 0 'train': batch 8, micro-batch 4, mapping section, training, gradient accumulation"));
  EXPECT_TRUE(
      has_line(log, "graph 1 'predict': batch 8, micro-batch -, mapping spatial, inference"));
  EXPECT_TRUE(has_line(log, "  outputs     loss (grad loss.grad)"));
  // Sections with their kernels, ops, FLOPs and bytes (the builder counts
  // 2 FLOPs per element written and the bytes of every tensor touched).
  EXPECT_TRUE(
      has_line(log, "section 3 'opt' id 3 type OPT graph 0: 1 kernels, 2.05K FLOPs, 10.25K bytes"));
  EXPECT_TRUE(
      has_line(log, "  kernel 0 'gemm1_tanh' contraction, 2 ops, 1.02K FLOPs, 4.74K bytes"));
  EXPECT_TRUE(has_line(log, "      linear(x, gemm1.weight, gemm1.bias) -> h1  activation='none'"));
  EXPECT_TRUE(has_line(log, "      zeros() -> gemm1.bias.grad  shape=[32] dtype=float32"));
  EXPECT_NE(log.find("[lr <- argin 'sgd.lr']"), std::string::npos);
  EXPECT_TRUE(has_line(log, "call 4 -> section 4 'predict_fwd' (FWD, id 10)"));
  EXPECT_TRUE(has_line(log, "argin 3 'dropout_0.seed' dropout_seed default 1234"));
  // Tensor rows: gemm1.weight is the first tensor of the DDR state area.
  EXPECT_NE(log.find(" 2  gemm1.weight "), std::string::npos);
  size_t row = log.find(" 2  gemm1.weight ");
  std::string line = log.substr(row, log.find('\n', row) - row);
  for (const char* cell : {"parameter", "float32", "[32, 16]", "DDR", " 0 ", "2048",
                           "materializer 0 'kaiming_uniform'"})
    EXPECT_NE(line.find(cell), std::string::npos) << cell << " not in: " << line;
  EXPECT_NE(log.find("alias of logits strides [1, 4] offset 0"), std::string::npos);
  EXPECT_TRUE(has_line(log, "state HBM       1024 bytes (1.0 KiB)"));
  EXPECT_NE(log.find("lower bound     "), std::string::npos);
  EXPECT_TRUE(has_line(log, "model = ResFFNLogReg"));
}

TEST(PefLog, WrittenBesideThePef) {
  TempDir dir;
  write_pef_log(sample(), dir.file("resffn.pef.log"));
  std::vector<uint8_t> bytes = read_file_bytes(dir.file("resffn.pef.log"));
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), format_pef_log(sample()));
}

TEST(PefNames, EnumNamesAndParsing) {
  EXPECT_EQ(section_type_from_name("bckwd"), SectionType::BCKWD);
  EXPECT_EQ(section_type_from_name("ZeroGrad"), SectionType::ZEROGRAD);
  try {
    section_type_from_name("forward");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Status::NotFound);
    EXPECT_NE(std::string(e.what()).find("FWD, BCKWD, GRADNORM, OPT, ZEROGRAD, REDUCE"),
              std::string::npos);
  }
  EXPECT_EQ(mem_type_name(MemType::HBM), "HBM");
  EXPECT_EQ(tensor_role_name(TensorRole::OptimizerState), "optimizer_state");
  EXPECT_EQ(tensor_role_name(static_cast<TensorRole>(200)), "?");
  EXPECT_EQ(mapping_name(Mapping::Spatial), "spatial");
  EXPECT_EQ(argin_kind_name(ArginKind::DropoutRate), "dropout_rate");
}

}  // namespace
}  // namespace samba::pef
