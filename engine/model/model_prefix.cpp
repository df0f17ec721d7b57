#include "model/model_prefix.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "common/thread_pool.h"

namespace specula {

namespace {

// Bits a value of `type` takes, blocks' scales included.
double bits_per_value(TensorType type) {
  const TypeTraits& t = type_traits(type);
  return 8.0 * static_cast<double>(t.block_bytes) / static_cast<double>(t.block_elements);
}

// Whether the prefix narrows `w`: stored wider than `type`, and its rows whole blocks of it.
bool narrows(const TensorView& w, TensorType type) {
  return !w.empty() && bits_per_value(w.type) > bits_per_value(type) &&
         w.cols % type_traits(type).block_elements == 0;
}

// The matrices of the prefix, in the order a forward reads them (W: Weights or const Weights).
template <class W>
auto prefix_matrices(W& w, int n_layers) {
  std::vector<decltype(&w.output)> matrices;
  for (int l = 0; l < n_layers; ++l) {
    for (auto* m : w.layers[static_cast<size_t>(l)].matrices()) matrices.push_back(m);
  }
  matrices.push_back(&w.output);
  return matrices;
}

void check_prefix(const Model& target, int n_layers) {
  if (n_layers < 1 || n_layers > target.config.n_layers) {
    throw std::invalid_argument("a prefix of " + std::to_string(n_layers) + " layers of a " +
                                std::to_string(target.config.n_layers) + "-layer model");
  }
}

}  // namespace

uint64_t prefix_matrix_bytes(const Model& target, int n_layers) {
  check_prefix(target, n_layers);
  uint64_t bytes = 0;
  for (const TensorView* m : prefix_matrices(target.weights, n_layers)) bytes += m->bytes();
  return bytes;
}

uint64_t narrowed_prefix_bytes(const Model& target, int n_layers, TensorType type) {
  check_prefix(target, n_layers);
  uint64_t bytes = 0;
  for (const TensorView* m : prefix_matrices(target.weights, n_layers)) {
    if (narrows(*m, type)) bytes += row_bytes(type, m->cols) * static_cast<uint64_t>(m->rows);
  }
  return bytes;
}

std::shared_ptr<const Model> narrowed_prefix(const Model& target, int n_layers, TensorType type) {
  const uint64_t bytes = narrowed_prefix_bytes(target, n_layers, type);
  auto prefix = std::make_shared<Model>();
  prefix->config = target.config;
  prefix->config.n_layers = n_layers;
  prefix->weights = target.weights;
  prefix->weights.layers.resize(static_cast<size_t>(n_layers));
  prefix->tokenizer = target.tokenizer;
  prefix->path = target.path;
  prefix->format = target.format;

  auto buffer = std::shared_ptr<uint8_t[]>(new uint8_t[std::max<uint64_t>(bytes, 1)]);
  prefix->storage.push_back(buffer);
  ThreadPool pool;
  uint8_t* next = buffer.get();
  for (TensorView* m : prefix_matrices(prefix->weights, n_layers)) {
    if (!narrows(*m, type)) continue;
    const TensorView from = *m;
    uint8_t* const to = next;
    const size_t to_row = row_bytes(type, from.cols);
    m->type = type;
    m->data = to;
    next += m->bytes();
    pool.parallel_for(from.rows, [&](int64_t begin, int64_t end, int) {
      std::vector<float> values(static_cast<size_t>(from.cols));
      for (int64_t r = begin; r < end; ++r) {
        dequantize_row(from.type, from.row(r), values.data(), from.cols);
        quantize_row(type, values.data(), to + static_cast<size_t>(r) * to_row, from.cols);
      }
    });
  }
  return prefix;
}

}  // namespace specula
