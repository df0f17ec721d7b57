// How far an engine's row of logits is from a reference row.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

namespace specula::test {

// Largest |engine - reference| over the row, relative to the row's largest |reference|.
inline double relative_error(const float* engine, const std::vector<double>& reference) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < reference.size(); ++i) {
    diff = std::max(diff, std::fabs(engine[i] - reference[i]));
    scale = std::max(scale, std::fabs(reference[i]));
  }
  return diff / scale;
}

}  // namespace specula::test
