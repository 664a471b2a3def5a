// The fused scaled_dot_product_attention against a naive double reference
// (sizes that cross the kernel's 64-row and 64-key blocks, causal masks with
// fewer queries than keys, bool and float masks broadcast over the batch,
// rows that attend nothing), bf16 computed in float, and the ordering ops
// against std::stable_sort.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "error_test_util.h"
#include "op_test_util.h"

using namespace samba;
using namespace samba::testing;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

struct Reference {
  std::vector<double> out, lse;
};

// Two passes per query row; mask(b, i, j) is -inf, 0 or a bias.
template <typename M>
Reference reference(const Tensor& q, const Tensor& k, const Tensor& v, double scale, M mask) {
  const auto qv = values(q), kv = values(k), vv = values(v);
  const int64_t batch = q.shape()[0], rows = q.shape()[1], keys = k.shape()[1];
  const int64_t e = q.shape()[2], ev = v.shape()[2];
  Reference r{std::vector<double>(batch * rows * ev), std::vector<double>(batch * rows)};
  std::vector<double> s(keys);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t i = 0; i < rows; ++i) {
      double m = -kInf;
      for (int64_t j = 0; j < keys; ++j) {
        double d = 0;
        for (int64_t x = 0; x < e; ++x)
          d += qv[(b * rows + i) * e + x] * kv[(b * keys + j) * e + x];
        s[j] = d * scale + mask(b, i, j);
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < keys; ++j) sum += s[j] == -kInf ? 0.0 : std::exp(s[j] - m);
      for (int64_t x = 0; x < ev; ++x) {
        double acc = 0;
        for (int64_t j = 0; j < keys; ++j)
          if (s[j] != -kInf) acc += std::exp(s[j] - m) / sum * vv[(b * keys + j) * ev + x];
        r.out[(b * rows + i) * ev + x] = sum == 0 ? std::nan("") : acc;
      }
      r.lse[b * rows + i] = sum == 0 ? -kInf : m + std::log(sum);
    }
  return r;
}

std::vector<Tensor> attention(std::initializer_list<Tensor> in, const Attrs& attrs = {}) {
  return call("scaled_dot_product_attention", in, attrs);
}

// q (batch, rows, dim), k (batch, keys, dim), v (batch, keys, vdim) of seeds seed..seed+2.
std::vector<Tensor> operands(int64_t batch, int64_t rows, int64_t keys, int64_t dim, int64_t vdim,
                             uint32_t seed) {
  return {rand_tensor({batch, rows, dim}, DType::Float64, seed),
          rand_tensor({batch, keys, dim}, DType::Float64, seed + 1),
          rand_tensor({batch, keys, vdim}, DType::Float64, seed + 2)};
}

// Both outputs of the op on `in` (q, k, v and maybe a mask) against the reference.
template <typename M>
void expect_reference(std::initializer_list<Tensor> in, const Attrs& attrs, double scale, M mask) {
  const std::vector<Tensor> t(in);
  auto got = attention(in, attrs);
  auto want = reference(t[0], t[1], t[2], scale, mask);
  expect_close(got[0], want.out, 1e-12);
  expect_close(got[1], want.lse, 1e-12);
}

TEST(Attention, MatchesReferenceAcrossBlocks) {
  auto t = operands(2, 150, 130, 7, 5, 1);
  expect_reference({t[0], t[1], t[2]}, {}, 1 / std::sqrt(7.0),
                   [](int64_t, int64_t, int64_t) { return 0.0; });
}

TEST(Attention, CausalMaskIsTopLeftAligned) {
  // 70 queries and 140 keys: query i sees keys 0..i, as torch's tril(ones(L, S)).
  auto t = operands(1, 70, 140, 4, 3, 4);
  expect_reference({t[0], t[1], t[2]}, {{"is_causal", true}, {"scale", 0.5}}, 0.5,
                   [](int64_t, int64_t i, int64_t j) { return j <= i ? 0.0 : -kInf; });
}

TEST(Attention, BroadcastMasksAndRowsThatAttendNothing) {
  auto t = operands(3, 4, 6, 5, 2, 7);
  // One (4, 6) bool mask for every batch entry; row 2 keeps no key.
  std::vector<double> keep(24);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) keep[i * 6 + j] = i != 2 && (i + j) % 3 != 0;
  expect_reference({t[0], t[1], t[2], make(keep, {4, 6}, DType::Bool)}, {}, 1 / std::sqrt(5.0),
                   [&](int64_t, int64_t i, int64_t j) {
                     return keep[i * 6 + j] != 0 ? 0.0 : -kInf;
                   });
  // A float bias of shape (3, 1, 6): one row per batch entry, shared by the queries.
  const Tensor bias = rand_tensor({3, 1, 6}, DType::Float64, 10, -2, 2);
  const auto bv = values(bias);
  expect_reference({t[0], t[1], t[2], bias}, {}, 1 / std::sqrt(5.0),
                   [&](int64_t b, int64_t, int64_t j) { return bv[b * 6 + j]; });
}

TEST(Attention, NoKeysGiveZerosAndNoQueriesNothing) {
  auto t = operands(2, 3, 0, 4, 2, 20);
  auto got = attention({t[0], t[1], t[2]});
  expect_close(got[0], std::vector<double>(12, 0.0), 0);
  expect_close(got[1], std::vector<double>(6, -kInf), 0);
  t = operands(2, 0, 5, 4, 2, 30);
  EXPECT_EQ(attention({t[0], t[1], t[2]})[0].shape(), (Dims{2, 0, 2}));
}

TEST(Attention, HalfPrecisionIsComputedInFloat) {
  const Tensor q = rand_tensor({2, 70, 8}, DType::Float32, 11);
  const Tensor k = rand_tensor({2, 70, 8}, DType::Float32, 12);
  const Tensor v = rand_tensor({2, 70, 8}, DType::Float32, 13);
  auto full = attention({q, k, v}, {{"is_causal", true}});
  auto half = attention({q.to(DType::BFloat16), k.to(DType::BFloat16), v.to(DType::BFloat16)},
                        {{"is_causal", true}});
  ASSERT_EQ(half[0].dtype(), DType::BFloat16);
  expect_values(half[0], values(full[0]), 3e-2);
}

TEST(Attention, RefusesBadOperands) {
  const Tensor q = rand_tensor({2, 3, 4}), k = rand_tensor({2, 5, 4}), v = rand_tensor({2, 5, 3});
  EXPECT_EQ(status_of([&] { attention({q, k, v, rand_tensor({3, 5})}, {{"is_causal", true}}); }),
            Status::InvalidArgument);
  EXPECT_EQ(status_of([&] { attention({q, k, v, rand_tensor({4, 5})}); }), Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] { attention({q, rand_tensor({2, 5, 3}), v}); }), Status::ShapeMismatch);
  EXPECT_EQ(status_of([&] { attention({q, k, v.to(DType::Float32)}); }), Status::DTypeMismatch);
}

// The permutation std::stable_sort gives, ascending or descending, NaN largest.
std::vector<int64_t> stable_order(const std::vector<double>& x, bool descending) {
  std::vector<int64_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto key = [&](int64_t i) { return std::isnan(x[i]) ? kInf : x[i]; };
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    const bool na = std::isnan(x[a]), nb = std::isnan(x[b]);
    if (na != nb) return descending ? na : nb;
    return descending ? key(a) > key(b) : key(a) < key(b);
  });
  return idx;
}

TEST(Ordering, SortTopkAndKthvalueFollowAStableOrder) {
  const std::vector<double> x{3, 1, std::nan(""), 2, 1, 3, -4, 2};
  const Tensor t = make(x, {8});
  for (bool descending : {false, true}) {
    auto order = stable_order(x, descending);
    auto s = call("sort", {t}, {{"descending", descending}});
    std::vector<double> want_i(order.begin(), order.end()), want_v;
    for (int64_t i : order) want_v.push_back(x[i]);
    expect_close(s[0], want_v, 0);
    expect_values(s[1], want_i, 0);
    auto top = call("topk", {t}, {{"k", int64_t{3}}, {"largest", descending}});
    expect_close(top[0], {want_v.begin(), want_v.begin() + 3}, 0);
    expect_values(top[1], {want_i.begin(), want_i.begin() + 3}, 0);
  }
  auto ascending = stable_order(x, false);
  for (int64_t k = 1; k <= 8; ++k) {
    auto kth = call("kthvalue", {t}, {{"k", k}});
    EXPECT_EQ(kth[1].dim(), 0);
    expect_values(kth[1], {static_cast<double>(ascending[k - 1])}, 0);
  }
}

TEST(Ordering, WorksAlongAnInnerDimAndKeepsDims) {
  // (2, 3, 2) sorted along dim 1: each of the four lines on its own.
  const Tensor t = make({5, 0, 1, 9, 3, 4, 2, 2, 8, 1, 0, 7}, {2, 3, 2});
  auto s = call("sort", {t}, {{"dim", int64_t{1}}});
  expect_values(s[0], {1, 0, 3, 4, 5, 9, 0, 1, 2, 2, 8, 7}, 0);
  expect_values(s[1], {1, 0, 2, 2, 0, 1, 2, 1, 0, 0, 1, 2}, 0);
  auto kth = call("kthvalue", {t}, {{"k", int64_t{3}}, {"dim", int64_t{1}}, {"keepdim", true}});
  EXPECT_EQ(kth[0].shape(), (Dims{2, 1, 2}));
  expect_values(kth[0], {5, 9, 8, 7}, 0);
  EXPECT_EQ(status_of([&] { call("topk", {t}, {{"k", int64_t{4}}, {"dim", int64_t{1}}}); }),
            Status::OutOfRange);
}

}  // namespace
