#include "model/model_prefix.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

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

// The matrices of the prefix, in the order a forward reads them.
std::vector<TensorView*> prefix_matrices(Weights& w, int n_layers) {
  std::vector<TensorView*> matrices;
  for (int l = 0; l < n_layers; ++l) {
    LayerWeights& lw = w.layers[static_cast<size_t>(l)];
    for (TensorView* m : {&lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.w_gate, &lw.w_up, &lw.w_down}) matrices.push_back(m);
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

// Rows [first, last) of `from`, requantized to `to` into `dst`.
void requantize_rows(const TensorView& from, TensorType to, uint8_t* dst, int64_t first, int64_t last) {
  std::vector<float> values(static_cast<size_t>(from.cols));
  const size_t out_row = row_bytes(to, from.cols);
  for (int64_t r = first; r < last; ++r) {
    dequantize_row(from.type, from.row(r), values.data(), from.cols);
    quantize_row(to, values.data(), dst + static_cast<size_t>(r) * out_row, from.cols);
  }
}

}  // namespace

uint64_t prefix_matrix_bytes(const Model& target, int n_layers) {
  check_prefix(target, n_layers);
  Weights weights = target.weights;
  uint64_t bytes = 0;
  for (const TensorView* m : prefix_matrices(weights, n_layers)) bytes += m->bytes();
  return bytes;
}

uint64_t narrowed_prefix_bytes(const Model& target, int n_layers, TensorType type) {
  check_prefix(target, n_layers);
  Weights weights = target.weights;
  uint64_t bytes = 0;
  for (const TensorView* m : prefix_matrices(weights, n_layers)) {
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
  // every matrix's rows, split evenly over the cores: (matrix, first row, last row, offset)
  struct Piece {
    TensorView from;
    uint8_t* dst;
    int64_t first, last;
  };
  std::vector<Piece> pieces;
  const int64_t workers = std::max(1u, std::thread::hardware_concurrency());
  uint8_t* next = buffer.get();
  for (TensorView* m : prefix_matrices(prefix->weights, n_layers)) {
    if (!narrows(*m, type)) continue;
    const int64_t step = (m->rows + workers - 1) / workers;
    for (int64_t first = 0; first < m->rows; first += step) pieces.push_back({*m, next, first, std::min(m->rows, first + step)});
    m->type = type;
    m->data = next;
    next += m->bytes();
  }
  std::vector<std::thread> threads;
  for (int64_t w = 0; w < workers; ++w) {
    threads.emplace_back([&pieces, w, workers, type] {
      for (size_t i = static_cast<size_t>(w); i < pieces.size(); i += static_cast<size_t>(workers)) {
        requantize_rows(pieces[i].from, type, pieces[i].dst, pieces[i].first, pieces[i].last);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return prefix;
}

}  // namespace specula
