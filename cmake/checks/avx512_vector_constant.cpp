// Exits 0 when the compiler builds a constant vector that mixes NaN with other
// values correctly. GCC 12.2 with AVX-512 enabled turns {NaN, NaN, NaN, 0}
// into four NaNs (a broadcast), which silently corrupts any code holding such
// a constant; cmake/SambaNativeFlags.cmake runs this to detect it.
#include <cstdio>
#include <limits>
#include <vector>

const double kNaN = std::numeric_limits<double>::quiet_NaN();

__attribute__((noinline)) double last(const std::vector<double>& v) { return v.back(); }

int main() {
  const double v = last({kNaN, kNaN, kNaN, 0});
  std::printf("%g\n", v);
  return v == 0 ? 0 : 1;
}
