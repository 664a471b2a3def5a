// dropout with a counter-based mask: element e is kept when the Philox
// uniform for (seed, stream = offset) at index e is >= p, so the mask is a
// pure function of (seed, offset, e) whatever the thread count, and the
// gradient is the same op applied to the incoming gradient.
#include <cmath>

#include "engine/ops/operands.h"
#include "engine/rng/distributions.h"

namespace samba::ops {
namespace {

// uniform >= p, with uniform = (word >> 8) * 2^-24, is (word >> 8) >= the
// smallest integer k with k * 2^-24 >= p: an integer compare per element.
uint32_t keep_threshold(double p) { return static_cast<uint32_t>(std::ceil(p * 0x1.0p24)); }

// Words are generated for a run of elements first (eight Philox blocks at a
// time, vectorized), then the mask is applied by a branch-free loop the
// compiler vectorizes.
constexpr int64_t kRun = 256;

template <typename T>
void masked_scale(const T* x, T* y, int64_t n, const rng::Philox& gen, uint32_t threshold,
                  double scale) {
  using A = acc_t<T>;
  const A s = static_cast<A>(scale);
  parallel_for(n, kMinGrain / 8, [x, y, gen, threshold, s](int64_t b, int64_t e) {
    uint32_t words[kRun];
    for (int64_t r = b; r < e; r += kRun) {
      const int64_t len = std::min(kRun, e - r);
      rng::generate_words(gen, static_cast<uint64_t>(r), len, words);
      const T* xr = x + r;
      T* yr = y + r;
      // x * (mask * scale) as PyTorch computes it (a dropped inf becomes NaN);
      // a select between two constants keeps the loop branch-free.
      for (int64_t i = 0; i < len; ++i) {
        const A factor = (words[i] >> 8) >= threshold ? s : A(0);
        yr[i] = convert_value<T>(static_cast<A>(xr[i]) * factor);
      }
    }
  });
}

}  // namespace

void register_dropout(OpRegistry& r) {
  r.def("dropout")
      .doc(
          "Zeroes each element with probability p and scales the kept ones by 1 / (1 - p). The "
          "mask depends only on (seed, offset, element index): element e is kept when Philox "
          "uniform e of stream `offset` under key `seed` is >= p; dropped ones are x * 0 as in "
          "PyTorch. Identity when training is false or p is 0; zeros when p is 1.")
      .input("x")
      .attr("p", AttrType::Float, 0.5, "probability of zeroing an element")
      .attr("training", AttrType::Bool, true, "false makes the op the identity")
      .attr("seed", AttrType::Int, int64_t{0}, "Philox key (its 64 bits)")
      .attr("offset", AttrType::Int, int64_t{0}, "Philox stream: use a new one for each mask")
      .range("p", AttrRange{0, 1, false, false})  // as torch: p = 1 zeroes everything
      .attr_role("p", AttrRole::DropoutRate)
      .attr_role("seed", AttrRole::DropoutSeed)
      .attr_role("offset", AttrRole::RngOffset)
      .fusion(Fusion::Elementwise)
      .seeded()
      .infer([](const InferContext& c) -> std::vector<TensorMeta> {
        const Tensor& x = c.inputs[0];
        SAMBA_CHECK(is_floating(x.dtype()), Status::DTypeMismatch,
                    "dropout: x must have a floating dtype, got {}", dtype_name(x.dtype()));
        return {meta_of(x)};
      })
      .kernel([](KernelContext& c) {
        const Tensor &x = c.inputs[0], &y = c.outputs[0];
        const double p = c.attrs.f("p");
        if (!c.attrs.b("training") || p == 0.0) {
          y.copy_from(x);
          return;
        }
        if (p == 1.0) {
          y.copy_from(Tensor::zeros({}, y.dtype()));
          return;
        }
        const rng::Philox gen{static_cast<uint64_t>(c.attrs.i("seed")),
                              static_cast<uint64_t>(c.attrs.i("offset"))};
        const double scale = 1.0 / (1.0 - p);
        SAMBA_DISPATCH_FLOAT(x.dtype(), "dropout", [&] {
          masked_scale<scalar_t>(x.data<scalar_t>(), y.data<scalar_t>(), x.numel(), gen,
                                 keep_threshold(p), scale);
        });
      })
      .grad([](const GradContext& c) -> std::vector<Tensor> {
        return {call1("dropout", {c.grad_outputs[0]}, c.attrs)};
      });
}

}  // namespace samba::ops
