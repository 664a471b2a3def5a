// Shape ops: the views (permute, transpose, t, squeeze, unsqueeze, flatten)
// and the joins and copies (cat, stack, split, chunk, repeat, pad).
#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

using Ints = std::vector<int64_t>;

// Element at `idx` of any strided tensor, read through its strides.
double at(const Tensor& t, const Ints& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides()[d];
  return SAMBA_DISPATCH_ALL(t.dtype(), "at",
                            [&] { return convert_value<double>(t.data<scalar_t>()[off]); });
}

// Base address of the storage a tensor reads from.
const char* base_of(const Tensor& t) {
  return static_cast<const char*>(t.raw_data()) -
         t.offset() * static_cast<int64_t>(element_size(t.dtype()));
}

}  // namespace

TEST(Permute, ViewWithPermutedStrides) {
  Tensor x = iota({2, 3, 4});
  Tensor p = call1("permute", {x}, {{"dims", Ints{2, 0, 1}}});
  EXPECT_EQ(p.shape(), (Dims{4, 2, 3}));
  EXPECT_EQ(p.strides(), (Dims{1, 12, 4}));
  EXPECT_EQ(base_of(p), base_of(x));
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t k = 0; k < 3; ++k) EXPECT_EQ(at(p, {i, j, k}), j * 12 + k * 4 + i);
  // Negative dims wrap.
  EXPECT_EQ(call1("permute", {x}, {{"dims", Ints{-1, 0, 1}}}).shape(), (Dims{4, 2, 3}));
  check_gradients("permute", {rand_tensor({2, 3, 2})}, {{"dims", Ints{1, 2, 0}}});
  check_gradients("permute", {noncontiguous(rand_tensor({2, 3}))}, {{"dims", Ints{1, 0}}});
}

TEST(Permute, Errors) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(status_of([&] {
              call1("permute", {x}, {{"dims", Ints{0}}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("permute", {x}, {{"dims", Ints{0, 0}}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { call1("permute", {x}, {{"dims", Ints{0, 2}}}); }), Status::OutOfRange);
  EXPECT_EQ(status_of([&] { call1("permute", {x}); }), Status::InvalidArgument);
}

TEST(Transpose, SwapsTwoDims) {
  Tensor x = iota({2, 3, 4}, DType::Float32);
  Tensor t = call1("transpose", {x}, {{"dim0", 0}, {"dim1", -1}});
  EXPECT_EQ(t.shape(), (Dims{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Dims{1, 4, 12}));
  EXPECT_EQ(base_of(t), base_of(x));
  EXPECT_EQ(at(t, {3, 1, 1}), 1 * 12 + 1 * 4 + 3);
  expect_values(call1("transpose", {iota({2, 3})}, {{"dim0", 0}, {"dim1", 1}}), {0, 3, 1, 4, 2, 5});
  EXPECT_EQ(status_of([&] {
              call1("transpose", {x}, {{"dim0", 0}, {"dim1", 3}});
            }),
            Status::OutOfRange);
  check_gradients("transpose", {rand_tensor({2, 3, 2})}, {{"dim0", 2}, {"dim1", 1}});
}

TEST(T, MatrixVectorScalar) {
  Tensor m = iota({2, 3}, DType::Int32);
  Tensor t = call1("t", {m});
  EXPECT_EQ(t.shape(), (Dims{3, 2}));
  expect_values(t, {0, 3, 1, 4, 2, 5});
  EXPECT_EQ(call1("t", {iota({5})}).shape(), (Dims{5}));
  EXPECT_EQ(call1("t", {Tensor::scalar(2, DType::Float32)}).shape(), (Dims{}));
  EXPECT_EQ(status_of([&] { call1("t", {iota({2, 2, 2})}); }), Status::InvalidArgument);
  check_gradients("t", {rand_tensor({3, 2})});
  check_gradients("t", {noncontiguous(rand_tensor({2, 3}))});
}

TEST(Squeeze, AllOrSelectedDims) {
  Tensor x = iota({1, 3, 1, 2});
  Tensor s = call1("squeeze", {x});
  EXPECT_EQ(s.shape(), (Dims{3, 2}));
  EXPECT_EQ(base_of(s), base_of(x));
  expect_values(s, values(x));
  EXPECT_EQ(call1("squeeze", {x}, {{"dim", Ints{2}}}).shape(), (Dims{1, 3, 2}));
  // A dim whose size is not 1 is left alone, as in PyTorch.
  EXPECT_EQ(call1("squeeze", {x}, {{"dim", Ints{1, -2}}}).shape(), (Dims{1, 3, 2}));
  EXPECT_EQ(call1("squeeze", {x}, {{"dim", Ints{0, 2}}}).shape(), (Dims{3, 2}));
  EXPECT_EQ(status_of([&] { call1("squeeze", {x}, {{"dim", Ints{4}}}); }), Status::OutOfRange);
  check_gradients("squeeze", {rand_tensor({1, 3, 1})});
  check_gradients("squeeze", {noncontiguous(rand_tensor({2, 1, 3}))}, {{"dim", Ints{1}}});
}

TEST(Unsqueeze, InsertsSizeOneDim) {
  Tensor x = iota({2, 3}, DType::Bool);
  EXPECT_EQ(call1("unsqueeze", {x}, {{"dim", 0}}).shape(), (Dims{1, 2, 3}));
  EXPECT_EQ(call1("unsqueeze", {x}, {{"dim", 2}}).shape(), (Dims{2, 3, 1}));
  Tensor u = call1("unsqueeze", {x}, {{"dim", -2}});
  EXPECT_EQ(u.shape(), (Dims{2, 1, 3}));
  EXPECT_TRUE(u.is_contiguous());
  EXPECT_EQ(base_of(u), base_of(x));
  EXPECT_EQ(call1("unsqueeze", {Tensor::scalar(1, DType::Float32)}, {{"dim", -1}}).shape(),
            (Dims{1}));
  EXPECT_EQ(status_of([&] { call1("unsqueeze", {x}, {{"dim", 3}}); }), Status::OutOfRange);
  check_gradients("unsqueeze", {rand_tensor({2, 3})}, {{"dim", 1}});
}

TEST(Flatten, ViewWhenMergeableCopyOtherwise) {
  Tensor x = iota({2, 3, 4});
  Tensor f = call1("flatten", {x});
  EXPECT_EQ(f.shape(), (Dims{24}));
  EXPECT_EQ(base_of(f), base_of(x));
  Tensor f12 = call1("flatten", {x}, {{"start_dim", 1}});
  EXPECT_EQ(f12.shape(), (Dims{2, 12}));
  EXPECT_EQ(base_of(f12), base_of(x));
  // Dims 1 and 2 of this permutation still merge (stride 4 then 12); all three do not.
  Tensor p = call1("permute", {x}, {{"dims", Ints{2, 0, 1}}});  // [4, 2, 3], strides [1, 12, 4]
  Tensor f12p = call1("flatten", {p}, {{"start_dim", 1}});
  EXPECT_EQ(f12p.shape(), (Dims{4, 6}));
  EXPECT_EQ(f12p.strides(), (Dims{1, 4}));
  EXPECT_EQ(base_of(f12p), base_of(x));
  Tensor fall = call1("flatten", {p});
  EXPECT_EQ(fall.shape(), (Dims{24}));
  EXPECT_NE(base_of(fall), base_of(x));
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(j * 12 + k * 4 + i);
  expect_values(fall, want);
  expect_values(f12p, want);
  EXPECT_EQ(call1("flatten", {Tensor::scalar(3, DType::Float32)}).shape(), (Dims{1}));
  EXPECT_EQ(status_of([&] {
              call1("flatten", {x}, {{"start_dim", 2}, {"end_dim", 1}});
            }),
            Status::InvalidArgument);
  check_gradients("flatten", {noncontiguous(rand_tensor({2, 2, 3}))}, {{"start_dim", 1}});
}

// ---- cat / stack --------------------------------------------------------------

TEST(Cat, JoinsAlongDim) {
  Tensor a = iota({2, 2}), b = make({10, 11, 12, 13, 14, 15}, {2, 3});
  Tensor c = call1("cat", {a, b}, {{"dim", 1}});
  EXPECT_EQ(c.shape(), (Dims{2, 5}));
  expect_values(c, {0, 1, 10, 11, 12, 2, 3, 13, 14, 15});
  Tensor d = call1("cat", {a, a, a}, {{"dim", -2}});
  EXPECT_EQ(d.shape(), (Dims{6, 2}));
  expect_values(d, {0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3});
}

TEST(Cat, PromotesAndReadsStrides) {
  Tensor a = make({1, 2}, {1, 2}, DType::Int32);
  Tensor b = make({0.5, 1.5}, {1, 2}, DType::Float32);
  Tensor c = call1("cat", {a, b});
  EXPECT_EQ(c.dtype(), DType::Float32);
  expect_values(c, {1, 2, 0.5, 1.5});
  Tensor h = call1("cat", {make({1}, {1}, DType::BFloat16), make({2}, {1}, DType::Float16)});
  EXPECT_EQ(h.dtype(), DType::Float32);
  Tensor t = call1("t", {iota({3, 2})});  // [2, 3], non-contiguous
  expect_values(call1("cat", {t, noncontiguous(iota({2, 3}))}),
                {0, 2, 4, 1, 3, 5, 0, 1, 2, 3, 4, 5});
  Tensor bools = call1("cat", {make({1, 0}, {2}, DType::Bool), make({1}, {1}, DType::Bool)});
  EXPECT_EQ(bools.dtype(), DType::Bool);
  expect_values(bools, {1, 0, 1});
}

TEST(Cat, EmptyTensorsAsPyTorch) {
  Tensor a = iota({2, 3});
  Tensor e = Tensor::zeros({0}, DType::Float64);  // legacy: ignored whatever the shapes
  Tensor c = call1("cat", {e, a, e}, {{"dim", 1}});
  EXPECT_EQ(c.shape(), (Dims{2, 3}));
  expect_values(c, values(a));
  Tensor z = Tensor::zeros({2, 0}, DType::Float64);
  EXPECT_EQ(call1("cat", {z, a}, {{"dim", 1}}).shape(), (Dims{2, 3}));
  EXPECT_EQ(call1("cat", {e, e}).shape(), (Dims{0}));
  EXPECT_EQ(status_of([&] { call1("cat", {z, a}, {{"dim", 0}}); }), Status::ShapeMismatch);
}

TEST(Cat, Errors) {
  EXPECT_EQ(status_of([&] { call("cat", std::span<const Tensor>{}, {}); }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("cat", {iota({2, 3}), iota({3, 3})}, {{"dim", 1}});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("cat", {iota({2, 3}), iota({2, 3, 1})});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] { call1("cat", {Tensor::scalar(1, DType::Float32)}); }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { call1("cat", {iota({2})}, {{"dim", 1}}); }), Status::OutOfRange);
}

TEST(Cat, Gradients) {
  check_gradients("cat", {rand_tensor({2, 2}), rand_tensor({2, 3}, DType::Float64, 2)},
                  {{"dim", 1}});
  check_gradients("cat",
                  {noncontiguous(rand_tensor({2, 3})), rand_tensor({2, 3}, DType::Float64, 3),
                   Tensor::zeros({0}, DType::Float64)});
}

TEST(Cat, LargeParallelMatchesReference) {
  Tensor a = rand_tensor({300, 70}, DType::Float32, 1),
         b = rand_tensor({300, 50}, DType::Float32, 2);
  Tensor c = call1("cat", {a, b}, {{"dim", 1}});
  auto va = values(a), vb = values(b), vc = values(c);
  for (int64_t i = 0; i < 300; ++i) {
    for (int64_t j = 0; j < 70; ++j) ASSERT_EQ(vc[i * 120 + j], va[i * 70 + j]);
    for (int64_t j = 0; j < 50; ++j) ASSERT_EQ(vc[i * 120 + 70 + j], vb[i * 50 + j]);
  }
}

TEST(Stack, NewDim) {
  Tensor a = iota({2, 2}), b = make({10, 11, 12, 13}, {2, 2});
  Tensor s0 = call1("stack", {a, b});
  EXPECT_EQ(s0.shape(), (Dims{2, 2, 2}));
  expect_values(s0, {0, 1, 2, 3, 10, 11, 12, 13});
  Tensor s2 = call1("stack", {a, b}, {{"dim", -1}});
  EXPECT_EQ(s2.shape(), (Dims{2, 2, 2}));
  expect_values(s2, {0, 10, 1, 11, 2, 12, 3, 13});
  Tensor s1 = call1("stack", {noncontiguous(a), make({10, 11, 12, 13}, {2, 2}, DType::Int64)},
                    {{"dim", 1}});
  EXPECT_EQ(s1.dtype(), DType::Float64);
  expect_values(s1, {0, 1, 10, 11, 2, 3, 12, 13});
  EXPECT_EQ(status_of([&] { call1("stack", {a, iota({4})}); }), Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] { call1("stack", {a, b}, {{"dim", 3}}); }), Status::OutOfRange);
  check_gradients("stack", {rand_tensor({2, 3}), rand_tensor({2, 3}, DType::Float64, 4)},
                  {{"dim", 1}});
}

// ---- split / chunk ----------------------------------------------------------------

TEST(Split, BySizeAndBySections) {
  Tensor x = iota({5, 2});
  auto parts = call("split", {x}, {{"split_size", 2}});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].shape(), (Dims{2, 2}));
  EXPECT_EQ(parts[2].shape(), (Dims{1, 2}));
  expect_values(parts[1], {4, 5, 6, 7});
  expect_values(parts[2], {8, 9});
  EXPECT_EQ(base_of(parts[2]), base_of(x));
  auto cols = call("split", {x}, {{"sections", Ints{1, 0, 1}}, {"dim", -1}});
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(cols[1].shape(), (Dims{5, 0}));
  expect_values(cols[2], {1, 3, 5, 7, 9});
  EXPECT_EQ(cols[2].strides(), (Dims{2, 1}));
  auto nc = call("split", {noncontiguous(iota({2, 4}))}, {{"split_size", 3}, {"dim", 1}});
  expect_values(nc[0], {0, 1, 2, 4, 5, 6});
  expect_values(nc[1], {3, 7});
}

TEST(Split, Errors) {
  Tensor x = iota({5, 2});
  EXPECT_EQ(status_of([&] { call("split", {x}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call("split", {x}, {{"split_size", 2}, {"sections", Ints{5}}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { call("split", {x}, {{"split_size", 0}}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call("split", {x}, {{"sections", Ints{2, 2}}});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call("split", {x}, {{"split_size", 1}, {"dim", 2}});
            }),
            Status::OutOfRange);
}

TEST(Split, GradientsIncludingUnusedPieces) {
  check_gradients("split", {rand_tensor({5, 2})}, {{"split_size", 2}});
  check_gradients("split", {noncontiguous(rand_tensor({2, 4}))},
                  {{"sections", Ints{3, 1}}, {"dim", 1}});
  // Only one piece reaches the loss: the others contribute zeros.
  Tensor x = rand_tensor({4, 3});
  x.impl()->requires_grad = true;
  auto parts = call("split", {x}, {{"split_size", 2}});
  autograd::backward({call1("sum", {parts[1]})}, {Tensor()}, false);
  expect_values(x.grad(), {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1});
}

TEST(Chunk, PyTorchSizes) {
  Tensor x = iota({5});
  auto c = call("chunk", {x}, {{"chunks", 3}});
  ASSERT_EQ(c.size(), 3u);  // 2, 2, 1
  expect_values(c[2], {4});
  EXPECT_EQ(call("chunk", {iota({6})}, {{"chunks", 4}}).size(), 3u);  // 2, 2, 2: fewer pieces
  EXPECT_EQ(call("chunk", {iota({2})}, {{"chunks", 5}}).size(), 2u);
  auto e = call("chunk", {Tensor::zeros({0}, DType::Float32)}, {{"chunks", 3}});
  EXPECT_EQ(e.size(), 3u);
  auto rows = call("chunk", {iota({2, 4}, DType::Int64)}, {{"chunks", 2}, {"dim", 1}});
  expect_values(rows[1], {2, 3, 6, 7});
  EXPECT_EQ(status_of([&] { call("chunk", {x}, {{"chunks", 0}}); }), Status::InvalidArgument);
  check_gradients("chunk", {rand_tensor({3, 5})}, {{"chunks", 2}, {"dim", 1}});
}

// ---- repeat -------------------------------------------------------------------------

TEST(Repeat, TilesAndAddsLeadingDims) {
  Tensor x = make({1, 2, 3}, {3});
  Tensor r = call1("repeat", {x}, {{"repeats", Ints{2, 2}}});
  EXPECT_EQ(r.shape(), (Dims{2, 6}));
  expect_values(r, {1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 3});
  Tensor m = iota({2, 2}, DType::Int16);
  Tensor rm = call1("repeat", {m}, {{"repeats", Ints{2, 1}}});
  expect_values(rm, {0, 1, 2, 3, 0, 1, 2, 3});
  Tensor t = call1("t", {iota({2, 2})});  // [[0, 2], [1, 3]]
  expect_values(call1("repeat", {t}, {{"repeats", Ints{1, 2}}}), {0, 2, 0, 2, 1, 3, 1, 3});
  EXPECT_EQ(call1("repeat", {x}, {{"repeats", Ints{0, 1}}}).shape(), (Dims{0, 3}));
  EXPECT_EQ(call1("repeat", {Tensor::scalar(7, DType::Float32)}, {{"repeats", Ints{3}}}).shape(),
            (Dims{3}));
  EXPECT_EQ(status_of([&] {
              call1("repeat", {m}, {{"repeats", Ints{2}}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("repeat", {m}, {{"repeats", Ints{2, -1}}});
            }),
            Status::InvalidArgument);
}

TEST(Repeat, Gradients) {
  check_gradients("repeat", {rand_tensor({2, 3})}, {{"repeats", Ints{2, 1, 2}}});
  check_gradients("repeat", {noncontiguous(rand_tensor({2, 2}))}, {{"repeats", Ints{3, 1}}});
}

// ---- pad ------------------------------------------------------------------------------

TEST(Pad, ConstantAndCrop) {
  Tensor x = make({1, 2, 3, 4}, {2, 2});
  Tensor p = call1("pad", {x}, {{"pad", Ints{1, 0}}, {"value", 9.0}});
  EXPECT_EQ(p.shape(), (Dims{2, 3}));
  expect_values(p, {9, 1, 2, 9, 3, 4});
  Tensor p2 = call1("pad", {x}, {{"pad", Ints{0, 1, 1, 0}}});
  EXPECT_EQ(p2.shape(), (Dims{3, 3}));
  expect_values(p2, {0, 0, 0, 1, 2, 0, 3, 4, 0});
  // Negative padding crops.
  expect_values(call1("pad", {x}, {{"pad", Ints{-1, 1}}}), {2, 0, 4, 0});
  Tensor i =
      call1("pad", {make({5, 6}, {2}, DType::Int32)}, {{"pad", Ints{2, 1}}, {"value", -1.0}});
  EXPECT_EQ(i.dtype(), DType::Int32);
  expect_values(i, {-1, -1, 5, 6, -1});
  expect_values(call1("pad", {noncontiguous(x)}, {{"pad", Ints{1, 1}}}), {0, 1, 2, 0, 0, 3, 4, 0});
  expect_values(
      call1("pad", {Tensor::zeros({0}, DType::Float32)}, {{"pad", Ints{1, 2}}, {"value", 5.0}}),
      {5, 5, 5});
  expect_values(call1("pad", {x}, {{"pad", Ints{}}}), {1, 2, 3, 4});
}

TEST(Pad, ReflectAndReplicate) {
  Tensor x = make({1, 2, 3}, {1, 3});
  expect_values(call1("pad", {x}, {{"pad", Ints{2, 1}}, {"mode", "reflect"}}), {3, 2, 1, 2, 3, 2});
  expect_values(call1("pad", {x}, {{"pad", Ints{2, 1}}, {"mode", "replicate"}}),
                {1, 1, 1, 2, 3, 3});
  // Two dims: rows mirror too.
  Tensor m = make({1, 2, 3, 4}, {1, 2, 2});
  Tensor r = call1("pad", {m}, {{"pad", Ints{1, 0, 1, 1}}, {"mode", "reflect"}});
  EXPECT_EQ(r.shape(), (Dims{1, 4, 3}));
  expect_values(r, {4, 3, 4, 2, 1, 2, 4, 3, 4, 2, 1, 2});
  Tensor rep = call1("pad", {m}, {{"pad", Ints{0, 1, 1, 0}}, {"mode", "replicate"}});
  expect_values(rep, {1, 2, 2, 1, 2, 2, 3, 4, 4});
}

TEST(Pad, Errors) {
  Tensor x = make({1, 2, 3}, {1, 3});
  EXPECT_EQ(status_of([&] { call1("pad", {x}, {{"pad", Ints{1}}}); }), Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("pad", {x}, {{"pad", Ints{1, 1, 1, 1, 1, 1}}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("pad", {x}, {{"pad", Ints{3, 0}}, {"mode", "reflect"}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("pad", {x}, {{"pad", Ints{1, 0}}, {"mode", "circular"}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("pad", {x}, {{"pad", Ints{-2, -2}}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] {
              call1("pad", {x}, {{"pad", Ints{-1, 0}}, {"mode", "replicate"}});
            }),
            Status::InvalidArgument);
}

TEST(Pad, Gradients) {
  check_gradients("pad", {rand_tensor({2, 3})}, {{"pad", Ints{1, 2, 0, 1}}, {"value", 3.0}});
  check_gradients("pad", {rand_tensor({2, 4})}, {{"pad", Ints{-1, 1}}});
  check_gradients("pad", {rand_tensor({2, 3, 3})},
                  {{"pad", Ints{2, 1, 1, 2}}, {"mode", "reflect"}});
  check_gradients("pad", {noncontiguous(rand_tensor({2, 3}))},
                  {{"pad", Ints{2, 2}}, {"mode", "replicate"}});
  check_gradients("pad", {rand_tensor({3, 2})}, {{"pad", Ints{1, 1, 2, 1}}, {"mode", "replicate"}});
}

TEST(Pad, ReducedFloatAndLarge) {
  Tensor h = call1("pad", {make({1, 2}, {2}, DType::BFloat16)},
                   {{"pad", Ints{1, 1}}, {"mode", "reflect"}});
  EXPECT_EQ(h.dtype(), DType::BFloat16);
  expect_values(h, {2, 1, 2, 1});
  // Bigger than one task: every row against a reference loop.
  Tensor x = rand_tensor({64, 40, 30}, DType::Float32);
  Tensor p = call1("pad", {x}, {{"pad", Ints{3, 2, 1, 4}}, {"mode", "reflect"}});
  ASSERT_EQ(p.shape(), (Dims{64, 45, 35}));
  auto vx = values(x), vp = values(p);
  auto refl = [](int64_t i, int64_t n) { return i < 0 ? -i : (i >= n ? 2 * (n - 1) - i : i); };
  for (int64_t a = 0; a < 64; ++a)
    for (int64_t b = 0; b < 45; ++b)
      for (int64_t c = 0; c < 35; ++c)
        ASSERT_EQ(vp[(a * 45 + b) * 35 + c], vx[(a * 40 + refl(b - 1, 40)) * 30 + refl(c - 3, 30)]);
}

TEST(Triangle, KeepsTheDiagonalsAsked) {
  Tensor x = make({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 2, 3});
  expect_values(call1("tril", {x}), {1, 0, 0, 4, 5, 0, 7, 0, 0, 10, 11, 0}, 0);
  expect_values(call1("triu", {x}, {{"diagonal", int64_t{1}}}),
                {0, 2, 3, 0, 0, 6, 0, 8, 9, 0, 0, 12}, 0);
  expect_values(call1("tril", {x}, {{"diagonal", int64_t{-1}}}),
                {0, 0, 0, 4, 0, 0, 0, 0, 0, 10, 0, 0}, 0);
  expect_values(call1("triu", {x}, {{"diagonal", int64_t{5}}}), std::vector<double>(12, 0), 0);
  Tensor mask = call1("tril", {make({1, 1, 1, 1}, {2, 2}, DType::Bool)});
  EXPECT_EQ(mask.dtype(), DType::Bool);
  expect_values(mask, {1, 0, 1, 1}, 0);
  EXPECT_EQ(status_of([&] { call1("triu", {make({1, 2}, {2})}); }), Status::ShapeMismatch);
}
