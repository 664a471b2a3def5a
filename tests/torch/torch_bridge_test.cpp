// The LibTorch bridge (include/samba/torch.hpp) from a LibTorch user's side:
// tensors cross both ways without copies (same data pointers, writes seen
// on the other side), the memory lives until the last holder on either side
// lets go (in any order: under AddressSanitizer a use after free or a leak
// fails these tests), what cannot be shared is refused with Samba's status
// and a message, and a PEF runs on at::Tensors.
#include <gtest/gtest.h>

#include <samba/torch.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace {

using samba::libtorch::to_samba;
using samba::libtorch::to_torch;

void* samba_data(const samba::Tensor& t) {
  void* p = nullptr;
  samba::check(samba_tensor_data(t.get(), &p));
  return p;
}

// A float tensor over `buffer` whose deleter records that LibTorch let go
// of the memory: the end of its lifetime is observable.
at::Tensor watched_tensor(std::vector<float>& buffer, bool& freed) {
  freed = false;
  const int64_t n = static_cast<int64_t>(buffer.size());
  return at::from_blob(buffer.data(), {n}, [&freed](void*) { freed = true; }, at::kFloat);
}

// A Samba tensor over `buffer` whose at::Tensor handle is already gone:
// Samba alone holds the memory, and `freed` tells when it lets go.
samba::Tensor shared_with_samba_only(std::vector<float>& buffer, bool& freed) {
  at::Tensor t = watched_tensor(buffer, freed);
  samba::Tensor s = to_samba(t);
  t.reset();
  EXPECT_FALSE(freed) << "LibTorch freed memory Samba still views";
  return s;
}

// Runs `call` and returns the samba::Error it throws.
template <typename F>
samba::Error error_of(F&& call) {
  try {
    call();
  } catch (const samba::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no samba::Error was thrown";
  return samba::Error(SAMBA_OK, "");
}

TEST(ZeroCopy, TorchToSambaViewsTheSameBytes) {
  at::Tensor t = at::arange(12, at::kFloat).reshape({3, 4});
  samba::Tensor s = to_samba(t, "x");
  EXPECT_EQ(samba_data(s), t.data_ptr());
  EXPECT_EQ(s.shape(), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(s.dtype(), SAMBA_FLOAT32);
  EXPECT_EQ(s.name(), "x");
  t.index_put_({1, 2}, 42.0f);
  EXPECT_EQ(s.to_vector<float>()[6], 42.0f);
  const std::vector<float> ones(12, 1.0f);
  samba::check(samba_tensor_copy_from(s.get(), ones.data(), ones.size() * sizeof(float)));
  EXPECT_TRUE(t.eq(1.0f).all().item<bool>());
}

TEST(ZeroCopy, SambaToTorchViewsTheSameBytes) {
  samba::Tensor s = samba::Tensor::from(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  at::Tensor t = to_torch(s);
  EXPECT_EQ(t.data_ptr(), samba_data(s));
  EXPECT_EQ(t.sizes(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.scalar_type(), at::kLong);
  t.mul_(10);
  EXPECT_EQ(s.to_vector<int64_t>(), (std::vector<int64_t>{10, 20, 30, 40, 50, 60}));
}

TEST(ZeroCopy, AContiguousSliceKeepsItsOffset) {
  at::Tensor t = at::arange(20, at::kInt).reshape({5, 4});
  at::Tensor rows = t.slice(0, 2, 4);
  samba::Tensor s = to_samba(rows);
  EXPECT_EQ(samba_data(s), rows.data_ptr());
  EXPECT_EQ(s.to_vector<int32_t>(), (std::vector<int32_t>{8, 9, 10, 11, 12, 13, 14, 15}));
}

TEST(ZeroCopy, EverySambaDtypeCrossesBothWays) {
  const std::vector<std::pair<at::ScalarType, samba_dtype>> pairs = {
      {at::kFloat, SAMBA_FLOAT32}, {at::kDouble, SAMBA_FLOAT64}, {at::kHalf, SAMBA_FLOAT16},
      {at::kBFloat16, SAMBA_BFLOAT16}, {at::kChar, SAMBA_INT8}, {at::kShort, SAMBA_INT16},
      {at::kInt, SAMBA_INT32}, {at::kLong, SAMBA_INT64}, {at::kByte, SAMBA_UINT8},
      {at::kBool, SAMBA_BOOL}};
  for (const auto& [torch_dtype, samba_dtype_expected] : pairs) {
    SCOPED_TRACE(c10::toString(torch_dtype));
    const at::Tensor t = at::arange(6).remainder(2).to(torch_dtype).reshape({2, 3});
    samba::Tensor s = to_samba(t);
    EXPECT_EQ(s.dtype(), samba_dtype_expected);
    EXPECT_EQ(samba_data(s), t.data_ptr());
    EXPECT_EQ(s.to_vector<double>(), (std::vector<double>{0, 1, 0, 1, 0, 1}));
    const at::Tensor back = to_torch(s);
    EXPECT_EQ(back.scalar_type(), torch_dtype);
    EXPECT_EQ(back.data_ptr(), t.data_ptr());
    EXPECT_TRUE(back.equal(t));
  }
}

TEST(ZeroCopy, EmptyTensorsCross) {
  // Their data pointer is null: a path of its own, where a deleter that is
  // never called would leak (LeakSanitizer reports it).
  for (at::ScalarType dtype : {at::kFloat, at::kBool}) {
    const at::Tensor t = at::zeros({0, 3}, dtype);
    samba::Tensor s = to_samba(t);
    EXPECT_EQ(s.shape(), (std::vector<int64_t>{0, 3}));
    EXPECT_EQ(s.numel(), 0);
    const at::Tensor back = to_torch(s);
    EXPECT_EQ(back.sizes(), t.sizes());
    EXPECT_EQ(back.scalar_type(), dtype);
  }
}

TEST(Lifetime, SambaKeepsTorchMemoryUntilItsLastView) {
  std::vector<float> buffer = {1, 2, 3, 4, 5, 6};
  bool freed = false;
  samba::Tensor s = shared_with_samba_only(buffer, freed);
  samba::Tensor view = s.reshape({2, 3});
  s = samba::Tensor();
  EXPECT_FALSE(freed) << "released with a Samba view still alive";
  EXPECT_EQ(view.to_vector<float>(), buffer);
  view = samba::Tensor();
  EXPECT_TRUE(freed) << "the last Samba view did not give the memory back";
}

TEST(Lifetime, TorchFirstOrSambaFirstBothFreeOnce) {
  std::vector<float> buffer(4, 2.0f);
  bool freed = false;
  at::Tensor t = watched_tensor(buffer, freed);
  samba::Tensor s = to_samba(t);
  s = samba::Tensor();
  EXPECT_FALSE(freed);
  EXPECT_EQ(t.sum().item<float>(), 8.0f);
  t.reset();
  EXPECT_TRUE(freed);
}

TEST(Lifetime, TheLastReleaseMayComeFromAnotherThread) {
  std::vector<float> buffer(64, 3.0f);
  bool freed = false;
  samba::Tensor s = shared_with_samba_only(buffer, freed);
  float sum = 0;
  std::thread worker([&sum, held = std::move(s)]() mutable {
    for (float v : held.to_vector<float>()) sum += v;
    held = samba::Tensor();
  });
  worker.join();
  EXPECT_EQ(sum, 192.0f);
  EXPECT_TRUE(freed);
}

TEST(Lifetime, ClearingSambaDataDropsItsHoldOnTorch) {
  std::vector<float> buffer(3, 1.0f);
  bool freed = false;
  samba::Tensor s = shared_with_samba_only(buffer, freed);
  samba::check(samba_tensor_clear_data(s.get()));
  EXPECT_TRUE(freed);
  EXPECT_EQ(error_of([&] { to_torch(s); }).status(), SAMBA_ERR_INVALID_STATE);
}

TEST(Lifetime, TorchKeepsSambaMemoryAfterTheSambaHandleGoes) {
  // torch -> samba -> torch: the outer at::Tensor holds Samba's storage,
  // which holds the inner at::Tensor; only the last release frees.
  std::vector<float> buffer = {7, 8, 9};
  bool freed = false;
  at::Tensor original = watched_tensor(buffer, freed);
  samba::Tensor s = to_samba(original);
  at::Tensor back = to_torch(s);
  original.reset();
  s = samba::Tensor();
  EXPECT_FALSE(freed) << "Samba's storage went while an at::Tensor views it";
  EXPECT_EQ(back.data_ptr(), static_cast<void*>(buffer.data()));
  EXPECT_EQ(back.sum().item<float>(), 24.0f);
  back.reset();
  EXPECT_TRUE(freed);
}

TEST(Lifetime, SambaOwnedMemoryOutlivesItsHandle) {
  at::Tensor t;
  {
    samba::Tensor s = samba::Tensor::from(std::vector<float>{0.5f, 1.5f}, {2});
    t = to_torch(s);
  }
  EXPECT_EQ(t.sum().item<float>(), 2.0f);
}

TEST(Refusals, NonContiguousTensorsAreNotShared) {
  const at::Tensor m = at::zeros({3, 4});
  for (const at::Tensor& t : {m.t(), m.slice(1, 0, 4, 2), at::zeros({4, 1}).expand({4, 3})}) {
    const samba::Error e = error_of([&] { to_samba(t); });
    EXPECT_EQ(e.status(), SAMBA_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("not contiguous"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(".contiguous()"), std::string::npos) << e.what();
  }
}

TEST(Refusals, OtherDevicesLayoutsAndDtypes) {
  const samba::Error meta = error_of([] { to_samba(at::empty({2, 2}, at::device(at::kMeta))); });
  EXPECT_EQ(meta.status(), SAMBA_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(meta.what()).find("device meta"), std::string::npos) << meta.what();

  const samba::Error sparse = error_of([] { to_samba(at::eye(3).to_sparse()); });
  EXPECT_EQ(sparse.status(), SAMBA_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(sparse.what()).find("strided"), std::string::npos) << sparse.what();

  const samba::Error complex = error_of([] { to_samba(at::zeros({2}, at::kComplexFloat)); });
  EXPECT_EQ(complex.status(), SAMBA_ERR_UNSUPPORTED);
  EXPECT_NE(std::string(complex.what()).find("ComplexFloat"), std::string::npos) << complex.what();

  EXPECT_EQ(error_of([] { to_samba(at::Tensor()); }).status(), SAMBA_ERR_NULL_POINTER);
  EXPECT_EQ(error_of([] { to_torch(samba::Tensor()); }).status(), SAMBA_ERR_NULL_POINTER);
}

TEST(Refusals, ARefusedImportGivesTheMemoryBack) {
  // Rank 17 passes the bridge's checks and is refused by Samba itself: the
  // DLPack export must then be released by the bridge, not leaked.
  std::vector<float> buffer(1, 0.0f);
  bool freed = false;
  at::Tensor t = watched_tensor(buffer, freed).reshape(std::vector<int64_t>(17, 1));
  const samba::Error e = error_of([&] { to_samba(t); });
  EXPECT_EQ(e.status(), SAMBA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(e.what()).find("16"), std::string::npos) << e.what();
  t.reset();
  EXPECT_TRUE(freed) << "the refused export still holds the tensor";
}

// A PEF of y = linear(a, w, bias) - b, compiled from weights made in LibTorch.
class RunOnTorchTensors : public ::testing::Test {
 protected:
  void SetUp() override {
    // One file per test and process: ctest runs this fixture's tests side
    // by side, and one's TearDown would remove the PEF another is loading.
    pef_ = ::testing::TempDir() + "torch_bridge_linear_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name() + "_" + std::to_string(::getpid()) +
           ".pef";
    const samba::Tensor w = to_samba(weight_, "fc.weight");
    const samba::Tensor bias = to_samba(bias_, "fc.bias");
    samba::Model model = [&](const std::vector<samba::Tensor>& in) {
      samba::Tensor y = samba::op1("linear", {in[0], w, bias});
      return std::vector<samba::Tensor>{samba::op1("sub", {y, in[1]})};
    };
    const samba::Tensor a = to_samba(at::zeros({2, 4}), "a");
    const samba::Tensor b = to_samba(at::zeros({2, 3}), "b");
    session_.compile(model, {a, b}, {}, samba::CompileOptions().pef_path(pef_).inference(true));
    session_.load_pef(pef_);
  }
  void TearDown() override {
    std::remove(pef_.c_str());
    std::remove((pef_ + ".log").c_str());
  }
  // The PEF on inputs (a, b), in the order of its model inputs.
  std::vector<at::Tensor> run(const at::Tensor& a, const at::Tensor& b) {
    return samba::libtorch::run(session_, std::vector<at::Tensor>{a, b});
  }

  at::Tensor weight_ = at::randn({3, 4}, at::kFloat);
  at::Tensor bias_ = at::randn({3}, at::kFloat);
  samba::Session session_;
  std::string pef_;
};

TEST_F(RunOnTorchTensors, PositionalAndNamedInputsGiveTorchsResult) {
  const at::Tensor a = at::randn({2, 4});
  const at::Tensor b = at::randn({2, 3});
  const at::Tensor want = at::linear(a, weight_, bias_) - b;
  const std::vector<at::Tensor> positional = run(a, b);
  ASSERT_EQ(positional.size(), 1u);
  // Float32 rounding differs with summation order and FMA use, both of
  // which differ between LibTorch's and Samba's kernels and between CPUs:
  // a relative tolerance of a few ulps, not an absolute one.
  EXPECT_TRUE(at::allclose(positional[0], want, 1e-5, 1e-6))
      << "max |difference| " << (positional[0] - want).abs().max().item<float>() << "\n"
      << positional[0] << want;
  const std::vector<at::Tensor> named = samba::libtorch::run(session_, {{"b", b}, {"a", a}});
  ASSERT_EQ(named.size(), 1u);
  EXPECT_TRUE(named[0].equal(positional[0]));
  // The output is Samba's host tensor, now owned by the at::Tensor alone.
  EXPECT_NE(positional[0].data_ptr(), named[0].data_ptr());
}

TEST_F(RunOnTorchTensors, BadInputsAreRefusedWithSambasStatus) {
  const samba::Error count = error_of(
      [&] { samba::libtorch::run(session_, std::vector<at::Tensor>{at::zeros({2, 4})}); });
  EXPECT_EQ(count.status(), SAMBA_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(count.what()).find("takes 2 inputs (a, b), got 1"), std::string::npos)
      << count.what();
  const samba::Error shape = error_of([&] { run(at::zeros({2, 5}), at::zeros({2, 3})); });
  EXPECT_EQ(shape.status(), SAMBA_ERR_SHAPE_MISMATCH);
  const samba::Error dtype =
      error_of([&] { run(at::zeros({2, 4}, at::kDouble), at::zeros({2, 3})); });
  EXPECT_EQ(dtype.status(), SAMBA_ERR_DTYPE_MISMATCH);
  // The session still runs after the refusals.
  EXPECT_EQ(run(at::zeros({2, 4}), at::zeros({2, 3})).size(), 1u);
}

}  // namespace
