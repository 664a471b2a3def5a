// The AVX-512 level's float32 sigmoid and tanh (wide_float_math.h). Raw
// intrinsics in an anonymous namespace: an Eigen or shared inline function
// compiled here with AVX-512 flags could be the one the linker keeps for the
// baseline code as well.
#include <immintrin.h>

#include <initializer_list>

#include "engine/kernels/wide_float_math.h"

namespace samba::ops::ew {
namespace {

// e^x as exp8 in elementwise_math.h computes it: Cody-Waite reduction, the
// degree-7 Taylor polynomial, 2^k built in two halves.
__m512 exp16(__m512 x) {
  const __m512 xc = _mm512_max_ps(_mm512_set1_ps(-104.0f), _mm512_min_ps(_mm512_set1_ps(88.8f), x));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fmadd_ps(k, _mm512_set1_ps(-0.693359375f), xc);
  r = _mm512_fmadd_ps(k, _mm512_set1_ps(2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  for (float c : {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f})
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
  const __m512i ki = _mm512_cvtps_epi32(k);
  const __m512i k1 = _mm512_srai_epi32(ki, 1), k2 = _mm512_sub_epi32(ki, k1);
  const __m512i bias = _mm512_set1_epi32(127);
  const __m512 s1 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k1, bias), 23));
  const __m512 s2 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_add_epi32(k2, bias), 23));
  return _mm512_mul_ps(_mm512_mul_ps(p, s1), s2);
}

__m512 sigmoid16(__m512 x) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp16(_mm512_sub_ps(_mm512_setzero_ps(), x));
  return _mm512_div_ps(one, _mm512_add_ps(one, e));
}

// Eigen's generic_fast_tanh_float (its FMA clamp), operand order kept so that
// NaN passes through min and max.
__m512 tanh16(__m512 a) {
  const __m512 x = _mm512_max_ps(_mm512_set1_ps(-7.99881172180175781f),
                                 _mm512_min_ps(_mm512_set1_ps(7.99881172180175781f), a));
  const __mmask16 tiny = _mm512_cmp_ps_mask(_mm512_abs_ps(a), _mm512_set1_ps(0.0004f), _CMP_LT_OQ);
  const __m512 x2 = _mm512_mul_ps(x, x);
  __m512 p = _mm512_fmadd_ps(x2, _mm512_set1_ps(-2.76076847742355e-16f),
                             _mm512_set1_ps(2.00018790482477e-13f));
  for (float c : {-8.60467152213735e-11f, 5.12229709037114e-08f, 1.48572235717979e-05f,
                  6.37261928875436e-04f, 4.89352455891786e-03f})
    p = _mm512_fmadd_ps(x2, p, _mm512_set1_ps(c));
  p = _mm512_mul_ps(x, p);
  __m512 q = _mm512_fmadd_ps(x2, _mm512_set1_ps(1.19825839466702e-06f),
                             _mm512_set1_ps(1.18534705686654e-04f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(2.26843463243900e-03f));
  q = _mm512_fmadd_ps(x2, q, _mm512_set1_ps(4.89352518554385e-03f));
  return _mm512_mask_blend_ps(tiny, _mm512_div_ps(p, q), x);
}

// o = f(x) 16 lanes at a time; the ragged end through masked loads and stores.
template <__m512 (*F)(__m512)>
void map16(int64_t n, float* o, const float* x) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(o + i, F(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const auto m = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(o + i, m, F(_mm512_maskz_loadu_ps(m, x + i)));
  }
}

}  // namespace

const WideFloatMath& wide_float_math_avx512() {
  static const WideFloatMath m{&map16<sigmoid16>, &map16<tanh16>};
  return m;
}

}  // namespace samba::ops::ew
