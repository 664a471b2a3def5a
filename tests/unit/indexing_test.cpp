// Indexing ops: slice/select/narrow views and their backward ops, and the ops
// that index through a tensor (index_select, index_put, gather, scatter_add).
#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

using Ints = std::vector<int64_t>;

Tensor ints(const std::vector<double>& v, const Dims& shape, DType dt = DType::Int64) {
  return make(v, shape, dt);
}

const char* base_of(const Tensor& t) {
  return static_cast<const char*>(t.raw_data()) -
         t.offset() * static_cast<int64_t>(element_size(t.dtype()));
}

}  // namespace

// ---- slice ------------------------------------------------------------------------------

TEST(Slice, PythonBoundsAsAView) {
  Tensor x = iota({3, 5});
  Tensor s = call1("slice", {x}, {{"dim", 1}, {"start", 1}, {"end", 5}, {"step", 2}});
  EXPECT_EQ(s.shape(), (Dims{3, 2}));
  EXPECT_EQ(s.strides(), (Dims{5, 2}));
  EXPECT_EQ(s.offset(), 1);
  EXPECT_EQ(base_of(s), base_of(x));
  expect_values(s, {1, 3, 6, 8, 11, 13});
  // Negative bounds count from the end; out-of-range ones clamp.
  expect_values(call1("slice", {x}, {{"dim", -1}, {"start", -2}}), {3, 4, 8, 9, 13, 14});
  expect_values(call1("slice", {x}, {{"dim", 0}, {"start", -10}, {"end", 1}}), {0, 1, 2, 3, 4});
  EXPECT_EQ(call1("slice", {x}, {{"dim", 1}, {"start", 4}, {"end", 2}}).shape(), (Dims{3, 0}));
  EXPECT_EQ(call1("slice", {x}, {{"dim", 1}, {"start", 7}}).shape(), (Dims{3, 0}));
  EXPECT_EQ(call1("slice", {x}, {{"dim", 0}, {"end", 100}}).shape(), (Dims{3, 5}));
  EXPECT_EQ(call1("slice", {x}, {{"dim", 1}, {"step", 3}}).shape(), (Dims{3, 2}));
  // A slice of a non-contiguous tensor composes strides.
  Tensor t = call1("t", {x});  // [5, 3]
  expect_values(call1("slice", {t}, {{"dim", 0}, {"start", 1}, {"end", 3}}), {1, 6, 11, 2, 7, 12});
  Tensor b = call1("slice", {iota({4}, DType::Bool)}, {{"start", 1}, {"end", 3}});
  expect_values(b, {1, 1});
}

TEST(Slice, ErrorsAndGradients) {
  Tensor x = iota({3, 5});
  EXPECT_EQ(status_of([&] {
              call1("slice", {x}, {{"dim", 1}, {"step", 0}});
            }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { call1("slice", {x}, {{"dim", 2}}); }), Status::OutOfRange);
  EXPECT_EQ(status_of([&] { call1("slice", {Tensor::scalar(1, DType::Float32)}); }),
            Status::InvalidArgument);
  check_gradients("slice", {rand_tensor({3, 5})},
                  {{"dim", 1}, {"start", -4}, {"end", 5}, {"step", 2}});
  check_gradients("slice", {noncontiguous(rand_tensor({4, 3}))}, {{"dim", 0}, {"start", 1}});
  // slice_backward places the gradient in zeros; its own gradient slices.
  Tensor g = call1("slice_backward", {make({1, 2}, {2})},
                   {{"shape", Ints{5}}, {"dim", 0}, {"start", 1}, {"step", 3}});
  expect_values(g, {0, 1, 0, 0, 2});
  EXPECT_EQ(status_of([&] {
              call1("slice_backward", {make({1, 2, 3}, {3})},
                    {{"shape", Ints{5}}, {"dim", 0}, {"start", 1}, {"step", 3}});
            }),
            Status::ShapeMismatch);
  check_gradients("slice_backward", {rand_tensor({2, 2})},
                  {{"shape", Ints{2, 5}}, {"dim", 1}, {"start", 0}, {"end", 4}, {"step", 2}});
}

// ---- narrow / select ----------------------------------------------------------------------

TEST(Narrow, ViewAndBounds) {
  Tensor x = iota({4, 3}, DType::Float32);
  Tensor n = call1("narrow", {x}, {{"dim", 0}, {"start", 1}, {"length", 2}});
  EXPECT_EQ(n.shape(), (Dims{2, 3}));
  EXPECT_EQ(base_of(n), base_of(x));
  expect_values(n, {3, 4, 5, 6, 7, 8});
  expect_values(call1("narrow", {x}, {{"dim", 1}, {"start", -1}, {"length", 1}}), {2, 5, 8, 11});
  EXPECT_EQ(call1("narrow", {x}, {{"dim", 0}, {"start", 4}, {"length", 0}}).shape(), (Dims{0, 3}));
  EXPECT_EQ(status_of([&] {
              call1("narrow", {x}, {{"dim", 0}, {"start", 3}, {"length", 2}});
            }),
            Status::OutOfRange);
  EXPECT_EQ(status_of([&] {
              call1("narrow", {x}, {{"dim", 0}, {"start", -5}, {"length", 1}});
            }),
            Status::OutOfRange);
  EXPECT_EQ(status_of([&] {
              call1("narrow", {x}, {{"dim", 0}, {"start", 0}, {"length", -1}});
            }),
            Status::InvalidArgument);
  check_gradients("narrow", {rand_tensor({4, 3})}, {{"dim", 1}, {"start", 1}, {"length", 2}});
}

TEST(Select, RemovesDim) {
  Tensor x = iota({2, 3, 2});
  Tensor s = call1("select", {x}, {{"dim", 1}, {"index", 2}});
  EXPECT_EQ(s.shape(), (Dims{2, 2}));
  EXPECT_EQ(s.strides(), (Dims{6, 1}));
  EXPECT_EQ(s.offset(), 4);
  EXPECT_EQ(base_of(s), base_of(x));
  expect_values(s, {4, 5, 10, 11});
  expect_values(call1("select", {x}, {{"dim", -1}, {"index", -1}}), {1, 3, 5, 7, 9, 11});
  Tensor e = call1("select", {iota({3}, DType::Int32)}, {{"dim", 0}, {"index", 1}});
  EXPECT_EQ(e.shape(), (Dims{}));
  EXPECT_EQ(e.item_int(), 1);
  EXPECT_EQ(status_of([&] {
              call1("select", {x}, {{"dim", 1}, {"index", 3}});
            }),
            Status::OutOfRange);
  EXPECT_EQ(status_of([&] {
              call1("select", {x}, {{"dim", 1}, {"index", -4}});
            }),
            Status::OutOfRange);
  EXPECT_NE(message_of([&] {
              call1("select", {x}, {{"dim", 1}, {"index", 3}});
            }).find("size 3"),
            std::string::npos);
  EXPECT_EQ(status_of([&] {
              call1("select", {x}, {{"dim", 3}, {"index", 0}});
            }),
            Status::OutOfRange);
  check_gradients("select", {rand_tensor({2, 3, 2})}, {{"dim", 1}, {"index", -2}});
  check_gradients("select", {noncontiguous(rand_tensor({3, 2}))}, {{"dim", 1}, {"index", 1}});
  check_gradients("select_backward", {rand_tensor({2})},
                  {{"shape", Ints{2, 3}}, {"dim", 1}, {"index", 2}});
}

// ---- index_select ---------------------------------------------------------------------------

TEST(IndexSelect, PicksAlongDim) {
  Tensor x = iota({3, 4});
  Tensor r = call1("index_select", {x, ints({2, 0, 2}, {3})}, {{"dim", 0}});
  EXPECT_EQ(r.shape(), (Dims{3, 4}));
  expect_values(r, {8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11});
  Tensor c = call1("index_select", {x, ints({3, -4}, {2}, DType::Int32)}, {{"dim", 1}});
  expect_values(c, {3, 0, 7, 4, 11, 8});
  Tensor nc = call1("index_select", {noncontiguous(iota({2, 3}, DType::BFloat16)), ints({1}, {})},
                    {{"dim", 1}});
  EXPECT_EQ(nc.shape(), (Dims{2, 1}));
  expect_values(nc, {1, 4});
  EXPECT_EQ(call1("index_select", {x, ints({}, {0})}, {{"dim", 1}}).shape(), (Dims{3, 0}));
  expect_values(call1("index_select", {iota({3}, DType::Bool), ints({0, 2}, {2})}, {{"dim", 0}}),
                {0, 1});
}

TEST(IndexSelect, ErrorsAndGradients) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(status_of([&] {
              call1("index_select", {x, ints({3}, {1})}, {{"dim", 0}});
            }),
            Status::OutOfRange);
  std::string msg = message_of([&] {
    call1("index_select", {x, ints({0, 7}, {2})}, {{"dim", 1}});
  });
  EXPECT_NE(msg.find("index 7"), std::string::npos) << msg;
  EXPECT_NE(msg.find("size 4"), std::string::npos) << msg;
  EXPECT_EQ(status_of([&] {
              call1("index_select", {x, make({0}, {1})}, {{"dim", 0}});
            }),
            Status::DTypeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("index_select", {x, ints({0}, {1, 1})}, {{"dim", 0}});
            }),
            Status::ShapeMismatch);
  // Repeated indices accumulate their gradients.
  check_gradients("index_select", {rand_tensor({3, 4}), ints({2, 0, 2, 2}, {4})}, {{"dim", 1}});
  check_gradients("index_select", {noncontiguous(rand_tensor({3, 2})), ints({1, 1}, {2})},
                  {{"dim", 0}});
}

// ---- index_put --------------------------------------------------------------------------------

TEST(IndexPut, SetsAndAccumulates) {
  Tensor x = iota({3, 2});
  Tensor v = make({10, 11, 12, 13}, {2, 2});
  Tensor r = call1("index_put", {x, ints({2, 0}, {2}), v});
  expect_values(r, {12, 13, 2, 3, 10, 11});
  expect_values(x, {0, 1, 2, 3, 4, 5});  // out of place
  // values broadcast; negative indices count from the end; last write wins.
  expect_values(call1("index_put", {x, ints({-1, 0, 2}, {3}), make({7}, {1})}), {7, 7, 2, 3, 7, 7});
  expect_values(call1("index_put", {x, ints({1, 1}, {2}), make({5, 6}, {2, 1})}, {{"dim", 0}}),
                {0, 1, 6, 6, 4, 5});
  Tensor acc = call1("index_put", {x, ints({1, 1, 0}, {3}), make({1, 2, 3}, {3})},
                     {{"dim", 1}, {"accumulate", true}});
  expect_values(acc, {3, 4, 5, 6, 7, 8});
  Tensor i32 = call1("index_put", {iota({4}, DType::Int32), ints({3}, {1}), make({2.5}, {1})},
                     {{"accumulate", true}});
  EXPECT_EQ(i32.dtype(), DType::Int32);
  expect_values(i32, {0, 1, 2, 5});
  Tensor bf = call1("index_put", {iota({3}, DType::BFloat16), ints({0}, {}), make({9}, {})});
  expect_values(bf, {9, 1, 2});
  expect_values(
      call1("index_put", {noncontiguous(x), ints({1}, {1}), make({8, 9}, {2})}, {{"dim", 0}}),
      {0, 1, 8, 9, 4, 5});
}

TEST(IndexPut, ErrorsAndGradients) {
  Tensor x = iota({3, 2});
  EXPECT_EQ(status_of([&] {
              call1("index_put", {x, ints({3}, {1}), make({1}, {1})});
            }),
            Status::OutOfRange);
  EXPECT_EQ(status_of([&] {
              call1("index_put", {x, ints({0, 1}, {2}), make({1, 2, 3}, {3})});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("index_put", {x, make({1, 0, 1}, {3}, DType::Bool), make({1}, {1})});
            }),
            Status::DTypeMismatch);
  check_gradients("index_put",
                  {rand_tensor({3, 2}), ints({2, 0}, {2}), rand_tensor({2, 2}, DType::Float64, 2)});
  check_gradients("index_put",
                  {rand_tensor({3, 4}), ints({1, 3, 1}, {3}), rand_tensor({3}, DType::Float64, 3)},
                  {{"dim", 1}, {"accumulate", true}});
  check_gradients("index_put",
                  {rand_tensor({3, 2}), ints({1}, {1}), rand_tensor({1}, DType::Float64, 4)});
}

// ---- gather / scatter_add
// ------------------------------------------------------------------------

TEST(Gather, AgainstReferenceLoop) {
  Tensor x = iota({3, 4});
  Tensor idx = ints({3, 0, 1, 1, 2, 2}, {3, 2});
  Tensor g1 = call1("gather", {x, idx}, {{"dim", 1}});
  EXPECT_EQ(g1.shape(), (Dims{3, 2}));
  expect_values(g1, {3, 0, 5, 5, 10, 10});
  Tensor idx0 = ints({2, 0, 1, 0}, {1, 4});
  expect_values(call1("gather", {x, idx0}, {{"dim", 0}}), {8, 1, 6, 3});
  // A 3-D case with an index smaller than x outside dim, against a naive loop.
  Tensor x3 = rand_tensor({3, 4, 5}, DType::Float32);
  std::vector<double> iv;
  for (int i = 0; i < 2 * 3 * 4; ++i) iv.push_back((i * 7) % 4);
  Tensor i3 = ints(iv, {2, 3, 4});
  Tensor g3 = call1("gather", {noncontiguous(x3), i3}, {{"dim", 1}});
  auto vx = values(x3), vg = values(g3);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 4; ++c) {
        const int64_t k = static_cast<int64_t>(iv[(a * 3 + b) * 4 + c]);
        EXPECT_EQ(vg[(a * 3 + b) * 4 + c], vx[(a * 4 + k) * 5 + c]);
      }
  expect_values(call1("gather", {iota({4}, DType::Int16), ints({3, 3}, {2})}, {{"dim", 0}}),
                {3, 3});
}

TEST(Gather, ErrorsAndGradients) {
  Tensor x = iota({3, 4});
  EXPECT_EQ(status_of([&] {
              call1("gather", {x, ints({4}, {1, 1})}, {{"dim", 1}});
            }),
            Status::OutOfRange);
  EXPECT_EQ(status_of([&] {
              call1("gather", {x, ints({0}, {1})}, {{"dim", 1}});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("gather", {x, ints({0, 0, 0, 0}, {4, 1})}, {{"dim", 1}});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("gather", {x, make({0}, {1, 1})}, {{"dim", 1}});
            }),
            Status::DTypeMismatch);
  check_gradients("gather", {rand_tensor({3, 4}), ints({3, 0, 1, 1, 3, 3}, {3, 2})}, {{"dim", 1}});
  check_gradients("gather", {rand_tensor({3, 2}), ints({2, 0, 2, 2}, {2, 2})}, {{"dim", 0}});
}

TEST(ScatterAdd, AgainstReferenceLoop) {
  Tensor x = make({1, 1, 1, 1, 1, 1}, {2, 3});
  Tensor idx = ints({0, 2, 2, 1, 1, 1}, {2, 3});
  Tensor src = make({1, 2, 3, 4, 5, 6}, {2, 3});
  expect_values(call1("scatter_add", {x, idx, src}, {{"dim", 1}}), {2, 1, 6, 1, 16, 1});
  expect_values(call1("scatter_add", {x, ints({1, 0, 1}, {1, 3}), src}, {{"dim", 0}}),
                {1, 3, 1, 2, 1, 4});
  // 3-D, src larger than the index, duplicates along dim 0 (one task's writes).
  Tensor x3 = rand_tensor({3, 4, 2});
  Tensor s3 = rand_tensor({4, 4, 3}, DType::Float64, 5);
  std::vector<double> iv;
  for (int i = 0; i < 4 * 3 * 2; ++i) iv.push_back((i * 5) % 3);
  Tensor i3 = ints(iv, {4, 3, 2});
  Tensor r = call1("scatter_add", {x3, i3, noncontiguous(s3)}, {{"dim", 0}});
  auto want = values(x3);
  auto vs = values(s3);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 3; ++b)
      for (int c = 0; c < 2; ++c) {
        const int64_t k = static_cast<int64_t>(iv[(a * 3 + b) * 2 + c]);
        want[(k * 4 + b) * 2 + c] += vs[(a * 4 + b) * 3 + c];
      }
  expect_values(r, want, 1e-12);
  Tensor ri = call1("scatter_add",
                    {iota({3}, DType::Int64), ints({0, 0}, {2}), make({5, 6}, {2}, DType::Int64)},
                    {{"dim", 0}});
  expect_values(ri, {11, 1, 2});
  Tensor rh = call1("scatter_add",
                    {iota({3}, DType::Float16), ints({2}, {1}), make({0.5}, {1}, DType::Float16)},
                    {{"dim", 0}});
  expect_values(rh, {0, 1, 2.5}, 1e-3);
}

TEST(ScatterAdd, ErrorsAndGradients) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(status_of([&] {
              call1("scatter_add", {x, ints({3}, {1, 1}), make({1}, {1, 1})}, {{"dim", 1}});
            }),
            Status::OutOfRange);
  EXPECT_EQ(status_of([&] {
              call1("scatter_add", {x, ints({0, 0}, {1, 2}), make({1}, {1, 1})}, {{"dim", 1}});
            }),
            Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] {
              call1("scatter_add", {x, ints({0}, {1, 1}), make({1}, {1})}, {{"dim", 1}});
            }),
            Status::ShapeMismatch);
  check_gradients(
      "scatter_add",
      {rand_tensor({2, 3}), ints({0, 2, 2, 1}, {2, 2}), rand_tensor({2, 2}, DType::Float64, 2)},
      {{"dim", 1}});
  check_gradients(
      "scatter_add",
      {rand_tensor({3, 2}), ints({2, 0}, {1, 2}), rand_tensor({2, 3}, DType::Float64, 3)},
      {{"dim", 0}});
}
