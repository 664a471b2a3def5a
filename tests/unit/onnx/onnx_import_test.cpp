// The ONNX importer through the C ABI: models built with the ONNX protobuf
// API are imported, run eagerly, compiled to a PEF and run; bad models are
// refused with a status and a message naming what is wrong.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <samba.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "onnx_test_models.h"

namespace om = samba::testing::onnx_models;

namespace {

struct ModelDeleter {
  void operator()(samba_onnx_model* m) const { samba_onnx_model_release(m); }
};
using ModelPtr = std::unique_ptr<samba_onnx_model, ModelDeleter>;

std::string last_error() { return samba_last_error_message(); }

ModelPtr load(const onnx::ModelProto& m) {
  const std::string b = om::bytes(m);
  samba_onnx_model* out = nullptr;
  EXPECT_EQ(samba_onnx_model_load(b.data(), b.size(), &out), SAMBA_OK) << last_error();
  return ModelPtr(out);
}

// Status and message of a refused load.
std::pair<samba_status, std::string> refuse(const onnx::ModelProto& m) {
  const std::string b = om::bytes(m);
  samba_onnx_model* out = nullptr;
  const samba_status st = samba_onnx_model_load(b.data(), b.size(), &out);
  EXPECT_EQ(out, nullptr);
  samba_onnx_model_release(out);
  return {st, last_error()};
}

samba_tensor* floats(const std::vector<int64_t>& shape, const std::vector<float>& v,
                     const char* name) {
  samba_tensor* t = nullptr;
  EXPECT_EQ(samba_tensor_create(SAMBA_FLOAT32, shape.data(), shape.size(), &t), SAMBA_OK);
  EXPECT_EQ(samba_tensor_copy_from(t, v.data(), v.size() * sizeof(float)), SAMBA_OK);
  EXPECT_EQ(samba_tensor_set_name(t, name), SAMBA_OK);
  return t;
}

std::vector<float> values(const samba_tensor* t) {
  int64_t n = 0;
  EXPECT_EQ(samba_tensor_numel(t, &n), SAMBA_OK);
  std::vector<float> v(static_cast<size_t>(n));
  EXPECT_EQ(samba_tensor_copy_to(t, v.data(), v.size() * sizeof(float)), SAMBA_OK) << last_error();
  return v;
}

// x (2, 3) -> Gemm(W1, b1) -> Relu -> Gemm(W2, b2) -> Softmax: the layout
// torch.nn.Linear layers export.
const std::vector<float> kW1 = {0.5f,   -1.f, 0.25f, 1.f,  0.f,  -0.5f,
                                -0.75f, 0.5f, 1.f,   0.2f, 0.3f, -0.1f};
const std::vector<float> kB1 = {0.1f, -0.2f, 0.f, 0.3f};
const std::vector<float> kW2 = {1.f, -1.f, 0.5f, 0.f, -0.5f, 0.25f, 1.f, 2.f};
const std::vector<float> kB2 = {0.f, 0.5f};
const std::vector<float> kX = {1.f, 2.f, -1.f, 0.5f, -0.5f, 3.f};

onnx::ModelProto mlp(int64_t opset = 13) {
  onnx::ModelProto m = om::model(opset);
  om::input(m, "x", {2, 3});
  om::initializer(m, "fc1.weight", {4, 3}, kW1);
  om::initializer(m, "fc1.bias", {4}, kB1);
  om::initializer(m, "fc2.weight", {2, 4}, kW2);
  om::initializer(m, "fc2.bias", {2}, kB2);
  om::attr_int(om::node(m, "Gemm", {"x", "fc1.weight", "fc1.bias"}, {"h"}), "transB", 1);
  om::node(m, "Relu", {"h"}, {"r"});
  om::attr_int(om::node(m, "Gemm", {"r", "fc2.weight", "fc2.bias"}, {"logits"}), "transB", 1);
  om::attr_int(om::node(m, "Softmax", {"logits"}, {"y"}), "axis", 1);
  om::output(m, "y", {2, 2});
  return m;
}

std::vector<float> mlp_reference() {
  std::vector<float> y;
  for (int r = 0; r < 2; ++r) {
    float h[4], z[2];
    for (int j = 0; j < 4; ++j) {
      h[j] = kB1[j];
      for (int k = 0; k < 3; ++k) h[j] += kX[r * 3 + k] * kW1[j * 3 + k];
      h[j] = std::max(h[j], 0.f);
    }
    for (int j = 0; j < 2; ++j) {
      z[j] = kB2[j];
      for (int k = 0; k < 4; ++k) z[j] += h[k] * kW2[j * 4 + k];
    }
    const float m = std::max(z[0], z[1]);
    const float e0 = std::exp(z[0] - m), e1 = std::exp(z[1] - m);
    y.push_back(e0 / (e0 + e1));
    y.push_back(e1 / (e0 + e1));
  }
  return y;
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

std::vector<float> forward1(samba_onnx_model* m, std::vector<samba_tensor*> in) {
  samba_tensor* out[4] = {};
  size_t n = 0;
  EXPECT_EQ(samba_onnx_model_forward(m, in.data(), in.size(), out, 4, &n), SAMBA_OK)
      << last_error();
  EXPECT_EQ(n, 1u);
  std::vector<float> v = n ? values(out[0]) : std::vector<float>();
  for (size_t i = 0; i < n; ++i) samba_tensor_release(out[i]);
  return v;
}

TEST(OnnxImport, MlpRunsEagerlyAsTheGraphSays) {
  ModelPtr m = load(mlp());
  ASSERT_TRUE(m);
  size_t n_in = 0, n_out = 0;
  ASSERT_EQ(samba_onnx_model_input_count(m.get(), &n_in), SAMBA_OK);
  ASSERT_EQ(samba_onnx_model_output_count(m.get(), &n_out), SAMBA_OK);
  EXPECT_EQ(n_in, 1u);  // initializers are not inputs
  EXPECT_EQ(n_out, 1u);
  const char* name = nullptr;
  const int64_t* shape = nullptr;
  size_t ndim = 0;
  ASSERT_EQ(samba_onnx_model_input_info(m.get(), 0, &name, nullptr, &shape, &ndim), SAMBA_OK);
  EXPECT_STREQ(name, "x");
  ASSERT_EQ(ndim, 2u);
  EXPECT_EQ(shape[1], 3);
  samba_tensor* x = floats({2, 3}, kX, "x");
  expect_near(forward1(m.get(), {x}), mlp_reference());
  samba_tensor_release(x);
}

TEST(OnnxImport, InitializersAreParametersNamedAfterThem) {
  ModelPtr m = load(mlp());
  size_t n = 0;
  ASSERT_EQ(samba_onnx_model_initializer_count(m.get(), &n), SAMBA_OK);
  ASSERT_EQ(n, 4u);
  samba_tensor* w = nullptr;
  ASSERT_EQ(samba_onnx_model_initializer(m.get(), 0, &w), SAMBA_OK);
  const char* name = nullptr;
  ASSERT_EQ(samba_tensor_name(w, &name), SAMBA_OK);
  EXPECT_STREQ(name, "fc1.weight");
  int32_t rg = 0;
  ASSERT_EQ(samba_tensor_requires_grad(w, &rg), SAMBA_OK);
  EXPECT_EQ(rg, 1);
  expect_near(values(w), kW1, 0);
  samba_tensor_release(w);
  EXPECT_EQ(samba_onnx_model_initializer(m.get(), 4, &w), SAMBA_ERR_OUT_OF_RANGE);
}

TEST(OnnxImport, MlpCompilesToAPefAndRunsLikeEager) {
  ModelPtr m = load(mlp());
  samba_session* s = nullptr;
  ASSERT_EQ(samba_session_create(nullptr, &s), SAMBA_OK);
  samba_compile_options* co = nullptr;
  ASSERT_EQ(samba_compile_options_create(&co), SAMBA_OK);
  const std::string pef = ::testing::TempDir() + "onnx_mlp.pef";
  ASSERT_EQ(samba_compile_options_set_pef_path(co, pef.c_str()), SAMBA_OK);
  ASSERT_EQ(samba_compile_options_set_inference(co, 1), SAMBA_OK);
  samba_tensor* x = floats({2, 3}, kX, "x");
  ASSERT_EQ(samba_session_compile(s, samba_onnx_model_forward, m.get(), &x, 1, nullptr, 0, co),
            SAMBA_OK)
      << last_error();
  samba_tensor* traced[1] = {};
  size_t n = 0;
  ASSERT_EQ(samba_session_trace_graph(s, samba_onnx_model_forward, m.get(), &x, 1, nullptr, 0,
                                      pef.c_str(), nullptr, traced, 1, &n),
            SAMBA_OK)
      << last_error();
  samba_run_options* ro = nullptr;
  ASSERT_EQ(samba_run_options_create(&ro), SAMBA_OK);
  samba_tensor* out[1] = {};
  ASSERT_EQ(samba_session_run(s, &x, 1, traced, 1, ro, out, 1, &n), SAMBA_OK) << last_error();
  ASSERT_EQ(n, 1u);
  expect_near(values(out[0]), mlp_reference());
  // The weights are on the device under their initializers' names.
  const char* names[] = {"fc2.bias"};
  samba_tensor* b2 = nullptr;
  ASSERT_EQ(samba_session_get_tensors_by_name(s, names, 1, &b2), SAMBA_OK) << last_error();
  expect_near(values(b2), kB2, 0);
  samba_tensor_release(b2);
  samba_tensor_release(out[0]);
  samba_tensor_release(traced[0]);
  samba_tensor_release(x);
  samba_run_options_release(ro);
  samba_compile_options_release(co);
  samba_session_release(s);
}

// Conv (3x3, pad 1) -> Relu -> MaxPool 2x2 -> GlobalAveragePool -> Flatten.
TEST(OnnxImport, ConvNetMatchesADirectComputation) {
  onnx::ModelProto m = om::model(13);
  om::input(m, "img", {1, 1, 4, 4});
  std::vector<float> w(9);
  for (int i = 0; i < 9; ++i) w[i] = static_cast<float>(i % 3) - 1.f;
  om::initializer(m, "conv.weight", {1, 1, 3, 3}, w);
  om::initializer(m, "conv.bias", {1}, {0.25f});
  auto* conv = om::node(m, "Conv", {"img", "conv.weight", "conv.bias"}, {"c"});
  om::attr_ints(conv, "pads", {1, 1, 1, 1});
  om::attr_ints(conv, "kernel_shape", {3, 3});
  om::node(m, "Relu", {"c"}, {"r"});
  auto* pool = om::node(m, "MaxPool", {"r"}, {"p"});
  om::attr_ints(pool, "kernel_shape", {2, 2});
  om::attr_ints(pool, "strides", {2, 2});
  om::node(m, "GlobalAveragePool", {"p"}, {"g"});
  om::node(m, "Flatten", {"g"}, {"y"});
  om::output(m, "y", {1, 1});
  ModelPtr model = load(m);
  std::vector<float> img(16);
  for (int i = 0; i < 16; ++i) img[i] = static_cast<float>((i * 7) % 5) - 2.f;
  float c[4][4];
  for (int y = 0; y < 4; ++y)
    for (int x = 0; x < 4; ++x) {
      float acc = 0.25f;
      for (int ky = 0; ky < 3; ++ky)
        for (int kx = 0; kx < 3; ++kx) {
          const int iy = y + ky - 1, ix = x + kx - 1;
          if (iy >= 0 && iy < 4 && ix >= 0 && ix < 4) acc += img[iy * 4 + ix] * w[ky * 3 + kx];
        }
      c[y][x] = std::max(acc, 0.f);
    }
  float mean = 0;
  for (int py = 0; py < 2; ++py)
    for (int px = 0; px < 2; ++px)
      mean += std::max({c[2 * py][2 * px], c[2 * py][2 * px + 1], c[2 * py + 1][2 * px],
                        c[2 * py + 1][2 * px + 1]}) /
              4;
  samba_tensor* t = floats({1, 1, 4, 4}, img, "img");
  expect_near(forward1(model.get(), {t}), {mean});
  samba_tensor_release(t);
}

// Shape arithmetic on constants is computed at import, so Reshape gets its
// shape even while traced; Slice, Unsqueeze, Transpose with constant inputs.
TEST(OnnxImport, ConstantShapeInputsAreFoldedAtImport) {
  onnx::ModelProto m = om::model(17);
  om::input(m, "x", {2, 6});
  om::int64_initializer(m, "shape", {3, 4});
  om::int64_initializer(m, "starts", {1});
  om::int64_initializer(m, "ends", {100});
  om::int64_initializer(m, "axes", {0});
  om::node(m, "Reshape", {"x", "shape"}, {"r"});
  om::node(m, "Slice", {"r", "starts", "ends", "axes"}, {"s"});
  om::attr_ints(om::node(m, "Transpose", {"s"}, {"t"}), "perm", {1, 0});
  om::node(m, "Unsqueeze", {"t", "axes"}, {"y"});
  om::output(m, "y", {1, 4, 2});
  ModelPtr model = load(m);
  std::vector<float> x(12);
  for (int i = 0; i < 12; ++i) x[i] = static_cast<float>(i);
  samba_tensor* t = floats({2, 6}, x, "x");
  // rows 1..2 of the 3x4 view, transposed: [[4,8],[5,9],[6,10],[7,11]]
  expect_near(forward1(model.get(), {t}), {4, 8, 5, 9, 6, 10, 7, 11});
  samba_tensor_release(t);
}

// ---- refusals ---------------------------------------------------------------

TEST(OnnxImportRefuses, BytesThatAreNotAModel) {
  const unsigned char junk[] = {0xff, 0xff, 0xff, 0xff, 0x0f, 0x00};
  samba_onnx_model* out = nullptr;
  EXPECT_EQ(samba_onnx_model_load(junk, sizeof junk, &out), SAMBA_ERR_CORRUPT_FILE);
  EXPECT_NE(last_error().find("not a valid ONNX ModelProto"), std::string::npos) << last_error();
  EXPECT_EQ(out, nullptr);
}

TEST(OnnxImportRefuses, ATruncatedFile) {
  const std::string b = om::bytes(mlp());
  const std::string path = ::testing::TempDir() + "onnx_truncated.onnx";
  std::ofstream(path, std::ios::binary).write(b.data(), static_cast<std::streamsize>(b.size() / 2));
  samba_onnx_model* out = nullptr;
  EXPECT_EQ(samba_onnx_model_load_file(path.c_str(), &out), SAMBA_ERR_CORRUPT_FILE) << last_error();
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(samba_onnx_model_load_file((path + ".missing").c_str(), &out), SAMBA_ERR_IO);
}

class OnnxExternalData : public ::testing::Test {
 protected:
  // The MLP with fc1.weight's 12 floats in "weights.bin" beside the model.
  std::string write_model() {
    // One directory per test and process: ctest runs this fixture's tests
    // side by side, and one writes the weights file another expects missing.
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("onnx_external_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::filesystem::remove(dir_ / "weights.bin");
    onnx::ModelProto m = mlp();
    auto* w = m.mutable_graph()->mutable_initializer(0);
    w->clear_float_data();
    w->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = w->add_external_data();
    loc->set_key("location");
    loc->set_value("weights.bin");
    auto* off = w->add_external_data();
    off->set_key("offset");
    off->set_value("8");
    const std::string path = (dir_ / "model.onnx").string();
    std::ofstream(path, std::ios::binary) << om::bytes(m);
    return path;
  }
  void write_weights(size_t n_floats) {
    std::vector<float> v(2 + n_floats, 0.f);
    for (size_t i = 0; i < n_floats && i < kW1.size(); ++i) v[2 + i] = kW1[i];
    std::ofstream(dir_ / "weights.bin", std::ios::binary)
        .write(reinterpret_cast<const char*>(v.data()),
               static_cast<std::streamsize>(v.size() * sizeof(float)));
  }
  void TearDown() override {
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
  }
  std::filesystem::path dir_;
};

TEST_F(OnnxExternalData, IsReadFromBesideTheModel) {
  const std::string path = write_model();
  write_weights(12);
  samba_onnx_model* out = nullptr;
  ASSERT_EQ(samba_onnx_model_load_file(path.c_str(), &out), SAMBA_OK) << last_error();
  ModelPtr m(out);
  samba_tensor* x = floats({2, 3}, kX, "x");
  expect_near(forward1(m.get(), {x}), mlp_reference());
  samba_tensor_release(x);
}

TEST_F(OnnxExternalData, MissingFileIsRefused) {
  const std::string path = write_model();
  samba_onnx_model* out = nullptr;
  EXPECT_EQ(samba_onnx_model_load_file(path.c_str(), &out), SAMBA_ERR_IO);
  EXPECT_NE(last_error().find("weights.bin"), std::string::npos) << last_error();
}

TEST_F(OnnxExternalData, ShortFileIsRefused) {
  const std::string path = write_model();
  write_weights(5);
  samba_onnx_model* out = nullptr;
  EXPECT_EQ(samba_onnx_model_load_file(path.c_str(), &out), SAMBA_ERR_CORRUPT_FILE);
  EXPECT_NE(last_error().find("fc1.weight"), std::string::npos) << last_error();
  EXPECT_NE(last_error().find("48 are needed at offset 8"), std::string::npos) << last_error();
}

TEST_F(OnnxExternalData, FromBytesIsRefusedWithTheReason) {
  write_model();
  std::ifstream in(dir_ / "model.onnx", std::ios::binary);
  const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  samba_onnx_model* out = nullptr;
  EXPECT_EQ(samba_onnx_model_load(b.data(), b.size(), &out), SAMBA_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("load the model from its path"), std::string::npos) << last_error();
}

TEST(OnnxImportRefuses, AnOpOutsideTheTableNamingNodeOpOpsetAndWhatIsSupported) {
  onnx::ModelProto m = om::model(13);
  om::input(m, "x", {2, 3});
  om::node(m, "Acos", {"x"}, {"y"}, "the_acos");
  om::output(m, "y", {2, 3});
  auto [st, msg] = refuse(m);
  EXPECT_EQ(st, SAMBA_ERR_UNSUPPORTED);
  EXPECT_NE(msg.find("node 'the_acos' (Acos, opset 13)"), std::string::npos) << msg;
  EXPECT_NE(msg.find("supported: Abs, Add"), std::string::npos) << msg;
}

TEST(OnnxImportRefuses, AnOpOnnxDoesNotKnow) {
  onnx::ModelProto m = om::model(13);
  om::input(m, "x", {2});
  om::node(m, "NoSuchOp", {"x"}, {"y"});
  om::output(m, "y", {2});
  auto [st, msg] = refuse(m);
  EXPECT_EQ(st, SAMBA_ERR_CORRUPT_FILE);
  EXPECT_NE(msg.find("NoSuchOp"), std::string::npos) << msg;
}

TEST(OnnxImport, AnOlderOpsetWhoseOpsAreUnchangedImportsAsOpset13) {
  // Sin is the same op from opset 7 to 17; Relu only gained bfloat16 at 13.
  onnx::ModelProto m = om::model(7);
  om::input(m, "x", {2});
  om::node(m, "Sin", {"x"}, {"s"});
  om::node(m, "Relu", {"s"}, {"y"});
  om::output(m, "y", {2});
  ModelPtr model = load(m);
  ASSERT_TRUE(model);
  int64_t opset = 0;
  ASSERT_EQ(samba_onnx_model_opset(model.get(), &opset), SAMBA_OK);
  EXPECT_EQ(opset, 13);
  samba_tensor* x = floats({2}, {-1.f, 1.f}, "x");
  expect_near(forward1(model.get(), {x}), {0.f, std::sin(1.f)});
  samba_tensor_release(x);
}

TEST(OnnxImportRefuses, AnOlderOpsetWhoseOpsChangedNamingTheNode) {
  // Gemm and Relu only widened their types at 13; Softmax's axis default
  // (and meaning) changed.
  auto [st, msg] = refuse(mlp(12));
  EXPECT_EQ(st, SAMBA_ERR_UNSUPPORTED);
  EXPECT_NE(msg.find("node 'Softmax_y' (Softmax) changed at opset 13"), std::string::npos) << msg;
}

TEST(OnnxImportRefuses, AConvWhoseComputedInputHasALowerRankThanItsWeight) {
  // The input's rank is known only from shape inference, where libonnx 1.12
  // read out of bounds (the reproducer is in the fuzz corpus).
  onnx::ModelProto m = om::model(13);
  om::input(m, "x", {1, 1, 3});
  om::initializer(m, "w", {1, 1, 1, 1}, {1.f});
  om::node(m, "Relu", {"x"}, {"r"});
  om::node(m, "Conv", {"r", "w"}, {"y"}, "conv0");
  om::output(m, "y", {1, 1, 3, 1});
  auto [st, msg] = refuse(m);
  EXPECT_EQ(st, SAMBA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("node name: conv0"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the input has rank 3 but the weight has rank 4"), std::string::npos) << msg;
}

TEST(OnnxImportRefuses, OpsetsOutOfRange) {
  for (int64_t opset : {12, 18}) {
    auto [st, msg] = refuse(mlp(opset));
    EXPECT_EQ(st, SAMBA_ERR_UNSUPPORTED);
    EXPECT_NE(msg.find(fmt::format("opset {}; supported: opsets 13 to {}", opset,
                                   samba_onnx_max_opset())),
              std::string::npos)
        << msg;
  }
  EXPECT_EQ(samba_onnx_max_opset(), 17);
}

TEST(OnnxImportRefuses, ADimOfTwoToTheFortieth) {
  const int64_t huge = int64_t{1} << 40;
  onnx::ModelProto m = om::model(13);
  om::input(m, "x", {huge});
  om::node(m, "Relu", {"x"}, {"y"});
  om::output(m, "y", {huge});
  auto [st, msg] = refuse(m);
  EXPECT_EQ(st, SAMBA_ERR_OUT_OF_RANGE);
  EXPECT_NE(msg.find("'x' has a dim of 1099511627776"), std::string::npos) << msg;

  onnx::ModelProto w = mlp();
  w.mutable_graph()->mutable_initializer(1)->set_dims(0, huge);
  std::tie(st, msg) = refuse(w);
  EXPECT_NE(st, SAMBA_OK);
  EXPECT_NE(msg.find("fc1.bias"), std::string::npos) << msg;
}

TEST(OnnxImportRefuses, AGraphWithACycle) {
  onnx::ModelProto m = om::model(13);
  om::input(m, "x", {2});
  om::node(m, "Add", {"x", "b"}, {"a"});
  om::node(m, "Relu", {"a"}, {"b"});
  om::output(m, "b", {2});
  auto [st, msg] = refuse(m);
  EXPECT_EQ(st, SAMBA_ERR_CORRUPT_FILE);
  EXPECT_NE(msg.find("topologically sorted"), std::string::npos) << msg;
}

// ONNX's own shape inference divides by these without checking them (a fuzzed
// model with strides 0 stopped the process there): refused before it runs.
TEST(OnnxImportRefuses, WindowAttributesThatAreNotPositive) {
  for (const char* attr : {"strides", "dilations", "kernel_shape"}) {
    onnx::ModelProto m = om::model(13);
    om::input(m, "img", {1, 1, 4, 4});
    om::initializer(m, "w", {1, 1, 3, 3}, std::vector<float>(9, 1.f));
    om::attr_ints(om::node(m, "Conv", {"img", "w"}, {"y"}, "conv0"), attr, {0, 1});
    om::output(m, "y", {1, 1, 2, 4});
    auto [st, msg] = refuse(m);
    EXPECT_EQ(st, SAMBA_ERR_INVALID_ARGUMENT) << attr;
    EXPECT_NE(msg.find(std::string("node 'conv0' (Conv): attribute '") + attr +
                       "' must be positive, got [0, 1]"),
              std::string::npos)
        << msg;
  }
}

TEST(OnnxImportRefuses, AnAttributeValueTheRegistryLacks) {
  onnx::ModelProto m = om::model(13);
  om::input(m, "img", {1, 1, 4, 4});
  // Pads only after, as wide as the window: explicit padding would add
  // windows of padding alone.
  auto* pool = om::node(m, "MaxPool", {"img"}, {"y"}, "pool0");
  om::attr_ints(pool, "kernel_shape", {2, 2});
  om::attr_ints(pool, "pads", {0, 0, 2, 2});
  om::output(m, "y", {1, 1, 5, 5});
  ModelPtr model = load(m);
  samba_tensor* t = floats({1, 1, 4, 4}, std::vector<float>(16, 1.f), "img");
  samba_tensor* out[1] = {};
  size_t n = 0;
  EXPECT_EQ(samba_onnx_model_forward(model.get(), &t, 1, out, 1, &n), SAMBA_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("node 'pool0' (MaxPool, opset 13): pads 0 and 2 of spatial dim 0 "
                              "reach past the window of 2; supported: pads smaller than the "
                              "window"),
            std::string::npos)
      << last_error();
  EXPECT_EQ(n, 0u);
  samba_tensor_release(t);
}

TEST(OnnxImport, ConvWithPadsTheRegistryLacksPadsExplicitly) {
  // Pads only at the bottom and right; a window of ones over ones counts
  // the input cells each window covers.
  onnx::ModelProto m = om::model(13);
  om::input(m, "img", {1, 1, 4, 4});
  om::initializer(m, "w", {1, 1, 3, 3}, std::vector<float>(9, 1.f));
  om::attr_ints(om::node(m, "Conv", {"img", "w"}, {"y"}, "conv0"), "pads", {0, 0, 1, 1});
  om::output(m, "y", {1, 1, 3, 3});
  ModelPtr model = load(m);
  samba_tensor* x = floats({1, 1, 4, 4}, std::vector<float>(16, 1.f), "img");
  expect_near(forward1(model.get(), {x}), {9, 9, 6, 9, 9, 6, 6, 6, 4});
  samba_tensor_release(x);
}

TEST(OnnxImport, OneDimensionalConvRunsAsTwoDimensional) {
  onnx::ModelProto m = om::model(13);
  om::input(m, "seq", {1, 1, 5});
  om::initializer(m, "w", {1, 1, 2}, {1.f, -1.f});
  om::node(m, "Conv", {"seq", "w"}, {"y"}, "conv1d");
  om::output(m, "y", {1, 1, 4});
  ModelPtr model = load(m);
  samba_tensor* x = floats({1, 1, 5}, {1, 2, 4, 7, 11}, "seq");
  expect_near(forward1(model.get(), {x}), {-1, -2, -3, -4});
  samba_tensor_release(x);
}

TEST(OnnxImportRefuses, AThreeDimensionalConvNamingTheNode) {
  onnx::ModelProto m = om::model(13);
  om::input(m, "vol", {1, 1, 3, 3, 3});
  om::initializer(m, "w", {1, 1, 1, 1, 1}, {1.f});
  om::node(m, "Conv", {"vol", "w"}, {"y"}, "conv3d");
  om::output(m, "y", {1, 1, 3, 3, 3});
  ModelPtr model = load(m);
  samba_tensor* x = floats({1, 1, 3, 3, 3}, std::vector<float>(27, 1.f), "vol");
  samba_tensor* out[1] = {};
  size_t n = 0;
  EXPECT_EQ(samba_onnx_model_forward(model.get(), &x, 1, out, 1, &n), SAMBA_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("node 'conv3d' (Conv, opset 13): input of rank 5"), std::string::npos)
      << last_error();
  samba_tensor_release(x);
}

TEST(OnnxImportRefuses, AShapeComputedFromTheInputs) {
  onnx::ModelProto m = om::model(13);
  om::input(m, "x", {2, 3});
  om::input(m, "shape", {2}, onnx::TensorProto::INT64);
  om::node(m, "Reshape", {"x", "shape"}, {"y"}, "reshape0");
  om::output(m, "y", {-1, -1});
  ModelPtr model = load(m);
  samba_tensor* x = floats({2, 3}, std::vector<float>(6, 1.f), "x");
  const int64_t dims[] = {2};
  samba_tensor* shape = nullptr;
  ASSERT_EQ(samba_tensor_create(SAMBA_INT64, dims, 1, &shape), SAMBA_OK);
  int64_t* p = nullptr;
  ASSERT_EQ(samba_tensor_data(shape, reinterpret_cast<void**>(&p)), SAMBA_OK);
  p[0] = 3;
  p[1] = 2;
  samba_tensor* session_compile_inputs[] = {x, shape};
  // A graph input is symbolic while the model is traced, so its values are
  // not known when the Reshape is recorded: compiling refuses it.
  samba_session* s = nullptr;
  ASSERT_EQ(samba_session_create(nullptr, &s), SAMBA_OK);
  samba_compile_options* co = nullptr;
  ASSERT_EQ(samba_compile_options_create(&co), SAMBA_OK);
  ASSERT_EQ(samba_compile_options_set_inference(co, 1), SAMBA_OK);
  const std::string pef = ::testing::TempDir() + "onnx_reshape.pef";
  ASSERT_EQ(samba_compile_options_set_pef_path(co, pef.c_str()), SAMBA_OK);
  EXPECT_EQ(samba_session_compile(s, samba_onnx_model_forward, model.get(), session_compile_inputs,
                                  2, nullptr, 0, co),
            SAMBA_ERR_UNSUPPORTED);
  EXPECT_NE(last_error().find("node 'reshape0' (Reshape, opset 13): input 'shape' must be known"),
            std::string::npos)
      << last_error();
  samba_compile_options_release(co);
  samba_session_release(s);
  samba_tensor_release(shape);
  samba_tensor_release(x);
}

}  // namespace

TEST(OnnxImport, MaxPoolIndicesCountOverTheWholeTensor) {
  // Two planes of 2x3, windows 2x2 with stride 2 and one column of padding in
  // front, which never wins: indices are ((n * C + c) * H + h) * W + w of the
  // unpadded input.
  onnx::ModelProto m = om::model(13);
  om::input(m, "img", {2, 1, 2, 3});
  auto* pool = om::node(m, "MaxPool", {"img"}, {"y", "at"}, "pool0");
  om::attr_ints(pool, "kernel_shape", {2, 2});
  om::attr_ints(pool, "strides", {2, 2});
  om::attr_ints(pool, "pads", {0, 1, 0, 0});
  om::output(m, "y", {2, 1, 1, 2});
  om::output(m, "at", {2, 1, 1, 2}, onnx::TensorProto::INT64);
  ModelPtr model = load(m);
  samba_tensor* x = floats({2, 1, 2, 3}, {1, 5, -2, 3, 0, -1, 7, 7, 2, 7, 0, 4}, "img");
  samba_tensor* out[2] = {};
  size_t n = 0;
  ASSERT_EQ(samba_onnx_model_forward(model.get(), &x, 1, out, 2, &n), SAMBA_OK) << last_error();
  ASSERT_EQ(n, 2u);
  expect_near(values(out[0]), {3, 5, 7, 7});
  std::vector<int64_t> at(4);
  EXPECT_EQ(samba_tensor_copy_to(out[1], at.data(), at.size() * sizeof(int64_t)), SAMBA_OK);
  EXPECT_EQ(at, (std::vector<int64_t>{3, 1, 6, 7}));  // ties: the first in window order
  for (samba_tensor* t : {x, out[0], out[1]}) samba_tensor_release(t);
}
