// Built-in materializers: torch.nn.init's bounds and standard deviations
// recomputed here from the formulas, distributions checked on large tensors,
// bit-identical values for any init_threads, independent of other tensors,
// bf16 rounding as asked, custom materializers, and bad descriptors refused
// with messages before anything is written.
#include "engine/rng/materializer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "distribution_test_util.h"
#include "engine/core/error.h"
#include "engine/rng/init_math.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::rng;
using pef::MaterializerDesc;
using samba::testing::bytes_of;
using samba::testing::ks_limit;
using samba::testing::ks_statistic;
using samba::testing::phi;
using samba::testing::values;

namespace {

MaterializeOptions opts(const std::string& name, int threads = 2, bool inverse = false,
                        Bf16Rounding r = Bf16Rounding::NearestEven) {
  return {1234, name, threads, inverse, r};
}

Tensor made(const MaterializerDesc& d, const Dims& shape, const std::string& name = "w",
            DType dt = DType::Float32, const MaterializeOptions* o = nullptr) {
  Tensor t = Tensor::empty(shape, dt);
  materialize(d, t, o ? *o : opts(name));
  return t;
}

// The same stream filled directly with U(-bound, bound) / N(mean, std): a
// materializer must be exactly that fill with the formula's parameters, up to
// the last bit of the parameter (formulas may associate differently).
std::vector<double> uniform_ref(const Dims& shape, const std::string& name, double lo, double hi) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  materializer_rng(opts(name)).uniform(t, lo, hi);
  return values(t);
}
std::vector<double> normal_ref(const Dims& shape, const std::string& name, double mean,
                               double std) {
  Tensor t = Tensor::empty(shape, DType::Float32);
  materializer_rng(opts(name)).normal(t, mean, std);
  return values(t);
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double scale) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-6 * scale) << i;
}

// All values within [-bound, bound], and the extremes near it: with n
// uniforms, max |v| < bound (1 - 10 / n) has probability e^-10.
void expect_uniform_bound(const std::vector<double>& v, double bound) {
  double m = 0;
  for (double x : v) m = std::max(m, std::abs(x));
  EXPECT_LE(m, bound * (1 + 1e-7));
  EXPECT_GE(m, bound * (1 - 10.0 / static_cast<double>(v.size())));
}

double sample_std(const std::vector<double>& v) {
  double mean = 0, s = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) s += (x - mean) * (x - mean);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

struct Failure {
  Status code = Status::Ok;
  std::string message;
};
Failure failure_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  return {};
}

}  // namespace

// ---- torch.nn.init's arithmetic ------------------------------------------------------

TEST(InitMath, GainsAndFans) {
  for (const char* unit : {"linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
                           "conv_transpose2d", "conv_transpose3d", "sigmoid"})
    EXPECT_EQ(calculate_gain(unit), 1.0) << unit;
  EXPECT_DOUBLE_EQ(calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(calculate_gain("selu"), 0.75);
  EXPECT_DOUBLE_EQ(calculate_gain("leaky_relu"), std::sqrt(2.0 / (1.0 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(calculate_gain("leaky_relu", std::sqrt(5.0)), std::sqrt(1.0 / 3.0));
  EXPECT_THROW(calculate_gain("gelu"), Error);

  EXPECT_EQ(calculate_fans({10, 20}).fan_in, 20);
  EXPECT_EQ(calculate_fans({10, 20}).fan_out, 10);
  EXPECT_EQ(calculate_fans({8, 4, 3, 5}).fan_in, 4 * 15);
  EXPECT_EQ(calculate_fans({8, 4, 3, 5}).fan_out, 8 * 15);
  EXPECT_THROW(calculate_fans({10}), Error);
}

// ---- each kind is its formula ----------------------------------------------------------

TEST(Materializer, UniformAndNormal) {
  const Dims s{100, 70};
  expect_close(values(made({"uniform", {{"a", -0.5}, {"b", 2.0}}}, s)),
               uniform_ref(s, "w", -0.5, 2.0), 2.0);
  expect_close(values(made({"uniform", {}}, s)), uniform_ref(s, "w", 0.0, 1.0), 1.0);
  expect_close(values(made({"normal", {{"mean", 3.0}, {"std", int64_t{2}}}}, s)),
               normal_ref(s, "w", 3.0, 2.0), 10.0);
  expect_close(values(made({"normal", {}}, s)), normal_ref(s, "w", 0.0, 1.0), 1.0);
}

TEST(Materializer, XavierBoundsAndStds) {
  const Dims s{30, 20, 5};  // fan_in 100, fan_out 150
  const double bound = 2.0 * std::sqrt(6.0 / 250.0);
  const auto u = values(made({"xavier_uniform", {{"gain", 2.0}}}, s));
  expect_close(u, uniform_ref(s, "w", -bound, bound), bound);
  expect_uniform_bound(u, bound);
  const double std = 0.5 * std::sqrt(2.0 / 250.0);
  expect_close(values(made({"xavier_normal", {{"gain", 0.5}}}, s)), normal_ref(s, "w", 0.0, std),
               std);
  // gain defaults to 1.
  expect_close(values(made({"xavier_uniform", {}}, s)),
               uniform_ref(s, "w", -std::sqrt(6.0 / 250.0), std::sqrt(6.0 / 250.0)), 1.0);
}

TEST(Materializer, KaimingBoundsAndStds) {
  const Dims s{64, 32, 3, 3};  // fan_in 288, fan_out 576
  struct Case {
    Attrs params;
    double gain;
    double fan;
  } cases[] = {
      {{}, std::sqrt(2.0), 288},  // a = 0, leaky_relu: sqrt(2 / (1 + 0))
      {{{"a", 0.2}}, std::sqrt(2.0 / 1.04), 288},
      {{{"mode", std::string("fan_out")}, {"nonlinearity", std::string("relu")}, {"a", 7.0}},
       std::sqrt(2.0),
       576},  // a only matters for leaky_relu
      {{{"nonlinearity", std::string("tanh")}}, 5.0 / 3.0, 288},
      {{{"nonlinearity", std::string("selu")}}, 0.75, 288},
      {{{"nonlinearity", std::string("conv_transpose2d")}}, 1.0, 288},
      {{{"nonlinearity", std::string("sigmoid")}, {"mode", std::string("fan_out")}}, 1.0, 576},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.gain);
    const double bound = c.gain * std::sqrt(3.0 / c.fan);
    const auto u = values(made({"kaiming_uniform", c.params}, s));
    expect_close(u, uniform_ref(s, "w", -bound, bound), bound);
    expect_uniform_bound(u, bound);
    const double std = c.gain / std::sqrt(c.fan);
    expect_close(values(made({"kaiming_normal", c.params}, s)), normal_ref(s, "w", 0.0, std), std);
  }
}

TEST(Materializer, LayerDefaults) {
  // Linear(in 50 -> out 40): weight U(+-1/sqrt(50)), bias U(+-1/sqrt(50)).
  const auto w = values(made({"linear_weight", {}}, {40, 50}));
  expect_close(w, uniform_ref({40, 50}, "w", -1 / std::sqrt(50.0), 1 / std::sqrt(50.0)), 1.0);
  expect_uniform_bound(w, 1 / std::sqrt(50.0));
  const auto b = values(made({"linear_bias", {{"fan_in", int64_t{50}}}}, {40}));
  expect_close(b, uniform_ref({40}, "w", -1 / std::sqrt(50.0), 1 / std::sqrt(50.0)), 1.0);
  // Conv2d(3 -> 16, kernel 5x5): fan_in 75.
  const auto cw = values(made({"conv_weight", {}}, {16, 3, 5, 5}));
  expect_close(cw, uniform_ref({16, 3, 5, 5}, "w", -1 / std::sqrt(75.0), 1 / std::sqrt(75.0)), 1.0);
  expect_uniform_bound(cw, 1 / std::sqrt(75.0));
  expect_close(
      values(made({"conv_bias", {{"fan_in", 75.0}}}, {16})),  // an integral float is accepted
      uniform_ref({16}, "w", -1 / std::sqrt(75.0), 1 / std::sqrt(75.0)), 1.0);
  EXPECT_EQ(values(made({"conv_bias", {{"fan_in", int64_t{0}}}}, {16})),
            std::vector<double>(16, 0.0));
  // Embedding: N(0, 1), the padding row zero.
  Tensor e = made({"embedding", {{"padding_idx", int64_t{-2}}}}, {10, 8});
  auto ev = values(e), ref = normal_ref({10, 8}, "w", 0.0, 1.0);
  for (int64_t i = 0; i < 80; ++i) EXPECT_EQ(ev[i], i / 8 == 8 ? 0.0 : ref[i]) << i;
  EXPECT_EQ(values(made({"embedding", {}}, {10, 8})), ref);
  EXPECT_EQ(values(made({"norm_weight", {}}, {3, 4})), std::vector<double>(12, 1.0));
  EXPECT_EQ(values(made({"norm_bias", {}}, {12})), std::vector<double>(12, 0.0));
}

TEST(Materializer, ConstantsIntoEveryDtype) {
  for (DType dt : {DType::Float32, DType::BFloat16, DType::Float64, DType::Int64, DType::Int32,
                   DType::Int8, DType::UInt8}) {
    SCOPED_TRACE(dtype_name(dt));
    EXPECT_EQ(values(made({"zeros", {}}, {5, 7}, "w", dt)), std::vector<double>(35, 0.0));
    EXPECT_EQ(values(made({"ones", {}}, {5, 7}, "w", dt)), std::vector<double>(35, 1.0));
    EXPECT_EQ(values(made({"constant", {{"val", int64_t{-3}}}}, {4}, "w",
                          dt == DType::UInt8 ? DType::Int8 : dt)),
              std::vector<double>(4, -3.0));
  }
  EXPECT_EQ(values(made({"constant", {{"val", 0.25}}}, {3})), std::vector<double>(3, 0.25));
  EXPECT_EQ(values(made({"ones", {}}, {3}, "w", DType::Bool)), std::vector<double>(3, 1.0));
  // A strided view is filled element by element, leaving the gaps alone.
  Tensor buf = Tensor::zeros({4, 6}, DType::Float32);
  materialize({"constant", {{"val", 2.0}}}, buf.as_strided({4, 3}, {6, 2}, 0), opts("w"));
  const auto v = values(buf);
  for (int i = 0; i < 24; ++i) EXPECT_EQ(v[i], i % 2 == 0 ? 2.0 : 0.0) << i;
}

// ---- distributions on large tensors ----------------------------------------------------

TEST(Materializer, DistributionsOfLargeTensors) {
  const Dims s{1024, 1024};  // fan_in = fan_out = 1024
  const double n = 1024.0 * 1024.0;
  for (bool inverse : {false, true}) {
    SCOPED_TRACE(inverse ? "inverse transform" : "box-muller");
    const MaterializeOptions o = opts("big", 2, inverse);
    const double std = std::sqrt(2.0) / 32.0;
    const auto v = values(made({"kaiming_normal", {{"nonlinearity", std::string("relu")}}}, s,
                               "big", DType::Float32, &o));
    EXPECT_NEAR(sample_std(v), std, 5 * std / std::sqrt(2 * n));  // 5 standard errors
    EXPECT_LT(ks_statistic(v, [&](double x) { return phi(x / std); }), ks_limit(v.size()));
    const auto t =
        values(made({"trunc_normal", {{"mean", 0.1}, {"std", 0.02}, {"a", 0.07}, {"b", 0.2}}}, s,
                    "big", DType::Float32, &o));
    EXPECT_GE(*std::min_element(t.begin(), t.end()), 0.07f);
    EXPECT_LE(*std::max_element(t.begin(), t.end()), 0.2f);
    const double lo = phi(-1.5), hi = phi(5.0);
    // float rounding of the values moves the CDF by at most 1e-5 here.
    EXPECT_LT(ks_statistic(t, [&](double x) { return (phi((x - 0.1) / 0.02) - lo) / (hi - lo); }),
              ks_limit(t.size()) + 1e-5);
  }
  const double bound = std::sqrt(6.0 / 2048.0);
  const auto u = values(made({"xavier_uniform", {}}, s, "big"));
  EXPECT_LT(
      ks_statistic(u, [&](double x) { return std::clamp((x + bound) / (2 * bound), 0.0, 1.0); }),
      ks_limit(u.size()));
}

// ---- reproducibility -------------------------------------------------------------------

TEST(Materializer, BitIdenticalForAnyInitThreads) {
  const Dims s{777, 1031};
  for (const MaterializerDesc& d :
       {MaterializerDesc{"kaiming_uniform", {}}, MaterializerDesc{"normal", {}},
        MaterializerDesc{"trunc_normal", {{"std", 0.02}}}}) {
    for (bool inverse : {false, true}) {
      for (DType dt : {DType::Float32, DType::BFloat16}) {
        SCOPED_TRACE(d.kind + (inverse ? " inverse " : " ") + std::string(dtype_name(dt)));
        std::vector<unsigned char> first;
        for (int threads : {1, 2, 8, 0}) {
          const MaterializeOptions o = opts("enc.weight", threads, inverse);
          const auto b = bytes_of(made(d, s, "", dt, &o));
          if (first.empty())
            first = b;
          else
            EXPECT_EQ(b, first) << threads;
        }
      }
    }
  }
}

TEST(Materializer, IndependentOfOtherTensors) {
  const MaterializerDesc d{"kaiming_uniform", {}};
  const auto a = bytes_of(made(d, {64, 64}, "layer1.weight"));
  made(d, {128, 64}, "layer2.weight");  // other tensors in between change nothing
  made({"normal", {}}, {1000}, "layer1.bias");
  EXPECT_EQ(bytes_of(made(d, {64, 64}, "layer1.weight")), a);
  EXPECT_NE(bytes_of(made(d, {64, 64}, "layer2.weight")), a);
  // The stream name falls back to the tensor's own name.
  Tensor named = Tensor::empty({64, 64}, DType::Float32);
  named.impl()->name = "layer1.weight";
  materialize(d, named, opts(""));
  EXPECT_EQ(bytes_of(named), a);
}

TEST(Materializer, Bf16RoundingIsAnOption) {
  const Dims s{100, 123};
  const auto f32 = made({"kaiming_normal", {}}, s);
  for (Bf16Rounding r : {Bf16Rounding::NearestEven, Bf16Rounding::Truncation}) {
    const MaterializeOptions o = opts("w", 2, false, r);
    const Tensor b = made({"kaiming_normal", {}}, s, "w", DType::BFloat16, &o);
    for (int64_t i = 0; i < b.numel(); ++i)
      ASSERT_EQ(std::bit_cast<uint16_t>(b.data<bf16>()[i]), bf16_bits(f32.data<float>()[i], r))
          << i;
  }
}

// ---- custom materializers ------------------------------------------------------------------

TEST(Materializer, CustomCallableGetsTheTensorsStream) {
  Tensor t = Tensor::empty({50, 20}, DType::Float32);
  int calls = 0;
  materialize(
      [&](const Tensor& out, const MultithreadedRng& rng) {
        ++calls;
        EXPECT_EQ(out.impl(), t.impl());
        EXPECT_EQ(rng.stream().seed, 1234u);
        EXPECT_EQ(rng.stream().stream, stream_of("custom.w"));
        EXPECT_EQ(rng.options().threads, 2);
        rng.normal(out, 0.0, 0.5);
      },
      t, opts("custom.w"));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(values(t), normal_ref({50, 20}, "custom.w", 0.0, 0.5));
  EXPECT_EQ(failure_of([&] { materialize(MaterializerFn{}, t, opts("w")); }).code,
            Status::NullPointer);
  EXPECT_EQ(failure_of([&] {
              materialize([](const Tensor&, const MultithreadedRng&) {},
                          Tensor::symbolic({2}, DType::Float32), opts("w"));
            }).code,
            Status::InvalidState);
}

// ---- bad descriptors -----------------------------------------------------------------------

TEST(Materializer, BadDescriptorsAreRefusedWithMessages) {
  struct Case {
    MaterializerDesc desc;
    Dims shape;
    DType dtype;
    Status code;
    std::vector<std::string> mentions;
  } cases[] = {
      {{"kaiming", {}},
       {4, 4},
       DType::Float32,
       Status::NotFound,
       {"'kaiming'", "kaiming_uniform", "fc.w"}},
      {{"uniform", {{"c", 1.0}}}, {4}, DType::Float32, Status::InvalidArgument, {"'c'", "a, b"}},
      {{"zeros", {{"val", 1.0}}},
       {4},
       DType::Float32,
       Status::InvalidArgument,
       {"'val'", "no parameters"}},
      {{"constant", {}}, {4}, DType::Float32, Status::InvalidArgument, {"missing", "'val'"}},
      {{"linear_bias", {}}, {4}, DType::Float32, Status::InvalidArgument, {"missing", "'fan_in'"}},
      {{"normal", {{"std", std::string("big")}}},
       {4},
       DType::Float32,
       Status::InvalidArgument,
       {"'std'", "number"}},
      {{"kaiming_uniform", {{"mode", 1.0}}},
       {4, 4},
       DType::Float32,
       Status::InvalidArgument,
       {"'mode'", "string"}},
      {{"linear_bias", {{"fan_in", 2.5}}},
       {4},
       DType::Float32,
       Status::InvalidArgument,
       {"'fan_in'", "integer"}},
      {{"normal", {{"std", -1.0}}},
       {4},
       DType::Float32,
       Status::InvalidArgument,
       {"'std'", ">= 0"}},
      {{"normal", {{"mean", NAN}}},
       {4},
       DType::Float32,
       Status::InvalidArgument,
       {"'mean'", "finite"}},
      {{"uniform", {{"a", 2.0}, {"b", 1.0}}},
       {4},
       DType::Float32,
       Status::InvalidArgument,
       {"'a'", "'b'"}},
      {{"trunc_normal", {{"a", 3.0}}}, {4}, DType::Float32, Status::InvalidArgument, {"a <= b"}},
      {{"trunc_normal", {{"a", INFINITY}, {"b", INFINITY}}},
       {4},
       DType::Float32,
       Status::InvalidArgument,
       {"finite value"}},
      {{"xavier_normal", {{"gain", -1.0}}},
       {4, 4},
       DType::Float32,
       Status::InvalidArgument,
       {"'gain'"}},
      {{"kaiming_normal", {{"mode", std::string("fan_avg")}}},
       {4, 4},
       DType::Float32,
       Status::InvalidArgument,
       {"'fan_avg'", "fan_in", "fan_out"}},
      {{"kaiming_normal", {{"nonlinearity", std::string("gelu")}}},
       {4, 4},
       DType::Float32,
       Status::InvalidArgument,
       {"'gelu'", "leaky_relu"}},
      {{"kaiming_uniform", {}},
       {4},
       DType::Float32,
       Status::InvalidArgument,
       {"[4]", "fewer than 2"}},
      {{"xavier_uniform", {}}, {}, DType::Float32, Status::InvalidArgument, {"[]"}},
      {{"linear_weight", {}},
       {4, 4, 4},
       DType::Float32,
       Status::InvalidArgument,
       {"[4, 4, 4]", "linear weight"}},
      {{"conv_weight", {}},
       {4, 4},
       DType::Float32,
       Status::InvalidArgument,
       {"[4, 4]", "convolution"}},
      {{"embedding", {}}, {4}, DType::Float32, Status::InvalidArgument, {"embedding table"}},
      {{"embedding", {{"padding_idx", int64_t{4}}}},
       {4, 2},
       DType::Float32,
       Status::InvalidArgument,
       {"'padding_idx' 4"}},
      {{"linear_bias", {{"fan_in", int64_t{-1}}}},
       {4},
       DType::Float32,
       Status::InvalidArgument,
       {"'fan_in'"}},
      {{"constant", {{"val", 300.0}}},
       {4},
       DType::UInt8,
       Status::InvalidArgument,
       {"300", "uint8"}},
      {{"constant", {{"val", 2.5}}},
       {4},
       DType::Int32,
       Status::InvalidArgument,
       {"2.5", "integer"}},
      {{"constant", {{"val", 2.0}}}, {4}, DType::Bool, Status::InvalidArgument, {"bool"}},
      {{"normal", {}}, {4}, DType::Int32, Status::DTypeMismatch, {"int32", "floating"}},
      {{"uniform", {{"a", 0.0}, {"a", 1.0}}},
       {4},
       DType::Float32,
       Status::InvalidArgument,
       {"twice"}},
      {{"zeros", {}}, {4, -1}, DType::Float32, Status::InvalidArgument, {}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.desc.kind + " " + dims_str(c.shape));
    const Failure f = failure_of([&] { check_materializer(c.desc, c.dtype, c.shape, "fc.w"); });
    EXPECT_EQ(f.code, c.code) << f.message;
    for (const auto& m : c.mentions) EXPECT_NE(f.message.find(m), std::string::npos) << f.message;
    if (c.code != Status::NotFound && !c.mentions.empty()) {
      EXPECT_NE(f.message.find("materializer '" + c.desc.kind + "' for tensor 'fc.w'"),
                std::string::npos)
          << f.message;
    }
    // materialize refuses the same descriptor without writing anything.
    bool valid_shape = true;
    for (int64_t d : c.shape) valid_shape &= d >= 0;
    if (!valid_shape) continue;
    Tensor t = Tensor::empty(c.shape, c.dtype);
    t.copy_from(Tensor::scalar(7.0, c.dtype));
    const auto before = bytes_of(t);
    EXPECT_EQ(failure_of([&] { materialize(c.desc, t, opts("fc.w")); }).code, c.code);
    EXPECT_EQ(bytes_of(t), before);
  }
  EXPECT_EQ(failure_of([&] {
              materialize({"zeros", {}}, Tensor::symbolic({2}, DType::Float32), opts("w"));
            }).code,
            Status::InvalidState);
}

TEST(Materializer, KindsAreListed) {
  const auto kinds = materializer_kinds();
  for (const char* k :
       {"uniform", "normal", "zeros", "ones", "constant", "xavier_uniform", "xavier_normal",
        "kaiming_uniform", "kaiming_normal", "trunc_normal", "linear_weight", "linear_bias",
        "conv_weight", "conv_bias", "embedding", "norm_weight", "norm_bias"})
    EXPECT_NE(std::find(kinds.begin(), kinds.end(), k), kinds.end()) << k;
  EXPECT_EQ(kinds.size(), 17u);
  // Every listed kind accepts a descriptor with its defaults on a shape it handles.
  for (auto k : kinds) {
    MaterializerDesc d{std::string(k), {}};
    if (k == "constant") d.params.set("val", 1.0);
    if (k == "linear_bias" || k == "conv_bias") d.params.set("fan_in", int64_t{3});
    const Dims shape = k == "conv_weight" ? Dims{2, 3, 3} : Dims{2, 3};
    EXPECT_NO_THROW(check_materializer(d, DType::BFloat16, shape)) << k;
    EXPECT_NO_THROW(made(d, shape, "w", DType::BFloat16)) << k;
  }
  // An empty tensor: parameters are checked, nothing is drawn.
  EXPECT_NO_THROW(made({"kaiming_uniform", {}}, {0, 5}));
}
