// A TensorView over caller-owned bytes, for tests that build weights by hand.
#pragma once

#include <cstdint>

#include "model/tensor.h"

namespace specula::test {

inline TensorView view(TensorType type, int64_t rows, int64_t cols, const void* data) {
  TensorView v;
  v.type = type;
  v.rows = rows;
  v.cols = cols;
  v.data = data;
  return v;
}

}  // namespace specula::test
