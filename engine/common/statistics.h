// Summaries of repeated measurements, one definition for every benchmark and the cost model.
#pragma once

#include <vector>

namespace specula {

// The median of `values`: the middle one, or the mean of the two middle ones; 0 for none.
double median(std::vector<double> values);

}  // namespace specula
