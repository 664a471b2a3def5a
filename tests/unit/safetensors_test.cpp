#include "engine/checkpoint/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/core/error.h"
#include "error_test_util.h"
#include "fifo_guard.h"

using namespace samba;
namespace fs = std::filesystem;
using samba::testing::message_of;
using samba::testing::status_of;

namespace {

fs::path temp_dir(const std::string& name) {
  auto d =
      fs::temp_directory_path() / ("samba_safetensors_test_" + std::to_string(::getpid())) / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

Tensor filled(const Dims& shape, DType dtype, float start) {
  Tensor f = Tensor::empty(shape, DType::Float32);
  float* p = f.data<float>();
  for (int64_t i = 0; i < f.numel(); ++i) p[i] = start + static_cast<float>(i);
  return f.to(dtype);
}

std::vector<float> values(const Tensor& t) {
  Tensor f = t.to(DType::Float32);
  return {f.data<float>(), f.data<float>() + f.numel()};
}

// A file built by hand: `header` as the JSON text and `data` after it.
std::string file_of(const std::string& header, const std::string& data, uint64_t declared_length) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &declared_length, 8);
  return out + header + data;
}
std::string file_of(const nlohmann::json& header, const std::string& data) {
  const std::string text = header.dump();
  return file_of(text, data, text.size());
}

SafetensorsHeader parse(const std::string& bytes) {
  return parse_safetensors({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                           "test.safetensors");
}

// Two F32 tensors of 2 elements each, back to back.
nlohmann::json two_tensors() {
  return {{"a", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {0, 8}}}},
          {"b", {{"dtype", "F32"}, {"shape", {2}}, {"data_offsets", {8, 16}}}}};
}

// The parse of `header` over 16 data bytes must fail with `code` and a message holding `expected`.
void expect_refused(const std::string& bytes, Status code, const std::string& expected) {
  EXPECT_EQ(status_of([&] { parse(bytes); }), code) << message_of([&] { parse(bytes); });
  EXPECT_NE(message_of([&] { parse(bytes); }).find(expected), std::string::npos)
      << message_of([&] { parse(bytes); });
}

}  // namespace

TEST(Safetensors, RoundTripKeepsNamesDtypesShapesValuesAndMetadata) {
  const auto dir = temp_dir("round_trip");
  const std::string path = (dir / "w.safetensors").string();
  std::vector<CheckpointEntry> entries = {
      {"h.0.bias", CheckpointKind::Parameter, filled({3}, DType::BFloat16, 1)},
      {"h.0.weight", CheckpointKind::Parameter, filled({2, 3}, DType::Float32, 5)},
      {"steps", CheckpointKind::OptimizerState, filled({}, DType::Int64, 7)},
      {"empty", CheckpointKind::Buffer, filled({0, 4}, DType::Float16, 0)}};
  save_safetensors(path, entries, {{"format", "pt"}});

  std::ifstream in(path, std::ios::binary);
  const std::string bytes{std::istreambuf_iterator<char>(in), {}};
  const SafetensorsHeader h = parse(bytes);
  EXPECT_EQ(h.metadata.at("format"), "pt");
  ASSERT_EQ(h.records.size(), 4u);
  for (const SafetensorsRecord& r : h.records)  // every tensor aligned to its element size
    EXPECT_EQ(r.begin % element_size(r.dtype), 0u) << r.name;

  std::vector<CheckpointTarget> targets;
  for (const CheckpointEntry& e : entries)
    targets.push_back({e.name, Tensor::zeros(e.tensor.shape(), e.tensor.dtype())});
  const LoadReport report = load_safetensors(path, targets);
  EXPECT_EQ(report.loaded.size(), 4u);
  for (size_t i = 0; i < entries.size(); ++i)
    EXPECT_EQ(values(targets[i].tensor), values(entries[i].tensor));
}

TEST(Safetensors, NameMapAndConversionAndNonStrictLoading) {
  const auto dir = temp_dir("name_map");
  const std::string path = (dir / "w.safetensors").string();
  save_safetensors(
      path,
      std::vector<CheckpointEntry>{
          {"transformer.wte", CheckpointKind::Parameter, filled({2}, DType::Float32, 1)},
          {"lm_head", CheckpointKind::Parameter, filled({2}, DType::Float32, 3)},
          {"extra", CheckpointKind::Parameter, filled({1}, DType::Float32, 9)}},
      {});
  EXPECT_EQ(
      map_safetensors_name("transformer.h.1", {{"transformer.", ""}, {"transformer.h", "blocks"}}),
      "blocks.1");
  EXPECT_EQ(map_safetensors_name("lm_head", {{"lm", "x"}, {"lm_head", "head"}}), "head");

  Tensor wte = Tensor::zeros({2}, DType::BFloat16), head = Tensor::zeros({2}, DType::Float32);
  Tensor other = Tensor::zeros({4}, DType::Float32);
  std::vector<CheckpointTarget> targets = {{"wte", wte}, {"head", head}, {"other", other}};
  SafetensorsLoadOptions options;
  options.name_map = {{"transformer.", ""}, {"lm_head", "head"}};
  EXPECT_EQ(status_of([&] { load_safetensors(path, targets, options); }),
            Status::InvalidArgument);                  // 'extra'
  EXPECT_EQ(values(wte), std::vector<float>({0, 0}));  // a refused load changes nothing
  options.strict = false;
  const LoadReport report = load_safetensors(path, targets, options);
  EXPECT_EQ(values(wte),
            std::vector<float>({1, 2}));  // F32 in the file, converted to the target's BF16
  EXPECT_EQ(values(head), std::vector<float>({3, 4}));
  EXPECT_EQ(report.missing, std::vector<std::string>{"other"});
  EXPECT_EQ(report.unused, std::vector<std::string>{"extra"});

  options.name_map = {{"transformer.wte", "wte"}, {"lm_head", "wte"}};
  EXPECT_NE(
      message_of([&] { load_safetensors(path, targets, options); }).find("both mapped to 'wte'"),
      std::string::npos);
  Tensor wrong = Tensor::zeros({3}, DType::Float32);
  options.name_map = {{"transformer.", ""}};
  const std::vector<CheckpointTarget> mismatched = {{"wte", wrong}};
  EXPECT_EQ(status_of([&] { load_safetensors(path, mismatched, options); }), Status::ShapeMismatch);
}

TEST(Safetensors, MalformedFilesAreRefusedNamingTheProblem) {
  const std::string data(16, '\1');
  EXPECT_NO_THROW(parse(file_of(two_tensors(), data)));

  expect_refused("abc", Status::CorruptFile, "expected at least 8");
  const std::string text = two_tensors().dump();
  expect_refused(file_of(text, data, text.size() + 100), Status::CorruptFile,
                 "goes beyond the file");
  expect_refused(file_of(text, data, kMaxSafetensorsHeaderBytes + 1), Status::CorruptFile,
                 "above the limit");
  expect_refused(file_of("{\"a\": [", "", 7), Status::CorruptFile, "not valid JSON");
  expect_refused(file_of(nlohmann::json::array(), ""), Status::CorruptFile, "expected an object");
  const std::string dup =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
  expect_refused(file_of(dup, data, dup.size()), Status::CorruptFile, "tensor 'a' appears twice");

  auto with = [&](const char* tensor, const char* field, nlohmann::json value) {
    nlohmann::json h = two_tensors();
    h[tensor][field] = std::move(value);
    return file_of(h, data);
  };
  expect_refused(with("b", "data_offsets", {4, 12}), Status::CorruptFile,
                 "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a'");
  expect_refused(with("b", "data_offsets", {8, 24}), Status::CorruptFile,
                 "'b' has data_offsets [8, 24]; expected begin <= end <= 16");
  expect_refused(with("b", "data_offsets", {12, 8}), Status::CorruptFile, "expected begin <= end");
  expect_refused(with("b", "shape", {3}), Status::CorruptFile,
                 "tensor 'b' is F32 of shape [3], 12 bytes, but its data_offsets [8, 16] span 8");
  expect_refused(with("b", "dtype", "F64"), Status::CorruptFile,
                 "tensor 'b' is F64 of shape [2], 16 bytes");
  expect_refused(with("b", "dtype", "U32"), Status::Unsupported,
                 "tensor 'b' has dtype 'U32', which Samba does not have");
  expect_refused(with("b", "dtype", 3), Status::CorruptFile, "expected a string");
  expect_refused(with("b", "shape", {-2}), Status::CorruptFile,
                 "expected non-negative integer dimensions");
  expect_refused(with("b", "shape", {uint64_t{1} << 62, 16}), Status::CorruptFile,
                 "beyond 64 bits");
  expect_refused(with("b", "data_offsets", {8}), Status::CorruptFile, "expected [begin, end]");

  const std::string deep = R"({"a":{"dtype":"F32","shape":[[[2]]],"data_offsets":[0,8]}})";
  expect_refused(file_of(deep, data, deep.size()), Status::CorruptFile,
                 "nests objects or arrays deeper than 3 levels");
  nlohmann::json flags = two_tensors();
  flags["b"] = {{"dtype", "BOOL"}, {"shape", {8}}, {"data_offsets", {8, 16}}};
  expect_refused(file_of(flags, std::string(8, '\1') + std::string("\0\1\2\0\0\0\0\0", 8)),
                 Status::CorruptFile, "tensor 'b' is BOOL but its element 2 is byte 2");
  nlohmann::json missing = two_tensors();
  missing["a"].erase("shape");
  expect_refused(file_of(missing, data), Status::CorruptFile, "tensor 'a' has no 'shape'");
  nlohmann::json hole = two_tensors();
  hole["b"]["data_offsets"] = {12, 20};
  expect_refused(file_of(hole, data + "1234"), Status::CorruptFile,
                 "'b' starts at data offset 12; expected 8");
  expect_refused(file_of(two_tensors(), data + "tail"), Status::CorruptFile,
                 "expected it to cover the data's 20 bytes");
  nlohmann::json bad_metadata = two_tensors();
  bad_metadata["__metadata__"] = {{"step", 3}};
  expect_refused(file_of(bad_metadata, data), Status::CorruptFile, "__metadata__ 'step' is number");
}

TEST(Safetensors, RefusedLoadChangesNoTargetAndNonRegularFilesDoNotBlock) {
  const auto dir = temp_dir("refused");
  const std::string path = (dir / "bad.safetensors").string();
  {  // 'a' is valid, 'b' overlaps it: the whole file is refused before 'a' is copied
    nlohmann::json h = two_tensors();
    h["b"]["data_offsets"] = {4, 12};
    std::ofstream(path, std::ios::binary) << file_of(h, std::string(16, '\1'));
  }
  Tensor a = Tensor::zeros({2}, DType::Float32), b = Tensor::zeros({2}, DType::Float32);
  const std::vector<CheckpointTarget> targets = {{"a", a}, {"b", b}};
  EXPECT_EQ(status_of([&] { load_safetensors(path, targets); }), Status::CorruptFile);
  EXPECT_EQ(values(a), std::vector<float>({0, 0}));

  EXPECT_EQ(status_of([&] { load_safetensors(dir.string(), targets); }), Status::IoError);
  const std::string message = testing_support::refused_fifo_message(
      (dir / "fifo.safetensors").string(),
      [&](const std::string& p) { load_safetensors(p, targets); });
  EXPECT_NE(message.find("safetensors"), std::string::npos) << message;
}
