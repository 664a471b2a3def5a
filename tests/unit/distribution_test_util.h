// Helpers for tests of random number distributions: the Kolmogorov-Smirnov
// statistic of a sample against a CDF, its critical value, and the standard
// normal CDF.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

namespace samba::testing {

// Kolmogorov-Smirnov statistic of a sample against a continuous CDF.
inline double ks_statistic(std::vector<double> x, const std::function<double(double)>& cdf) {
  std::sort(x.begin(), x.end());
  const double n = static_cast<double>(x.size());
  double d = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double f = cdf(x[i]);
    d = std::max({d, (static_cast<double>(i) + 1) / n - f, f - static_cast<double>(i) / n});
  }
  return d;
}

// The KS critical value at significance 0.001: the test rejects a correct
// generator once in a thousand seeds (and the seeds here are fixed).
inline double ks_limit(size_t n) { return 1.949 / std::sqrt(static_cast<double>(n)); }

// The standard normal CDF.
inline double phi(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace samba::testing
