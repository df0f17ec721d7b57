// Models with random weights, built in memory: for tests (odd shapes, GQA, untied
// output) and for benchmarks at real sizes without model files.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "model/model.h"

namespace specula {

// The named shapes: "tiny" (llama, 3 layers, dim 64, 4 heads, 2 KV heads, FFN 160, vocab
// 97), "tiny-qwen2" (the same as qwen2), "tiny-qwen3" (the same as qwen3, with heads 32
// wide: q is 128 wide), "tiny-qwen3moe" (that attention, 8 experts of FFN 32, 2 used per
// token), "110m" (12 layers, dim 768, 12 heads, FFN 2048, vocab 32000),
// "1.1b" (TinyLlama: 22 layers, dim 2048, 32 heads, 4 KV heads, FFN 5632, vocab 32000),
// "7b" (32 layers, dim 4096, 32 heads, FFN 11008, vocab 32000). Each has its
// architecture's rope style. Throws std::invalid_argument for other names.
ModelConfig random_model_config(std::string_view shape);

// A model of `config` whose matrices are stored as `type` (norms stay f32), with an
// untied output matrix, no tokenizer, and the optional tensors of its architecture:
// q, k, v biases for qwen2 (uniform in ±0.5), q/k norms for qwen3 and qwen3moe, a router and
// experts for a mixture of experts (the router and each expert's gate and up of `type`, its
// down of `second`). Weights are uniform in ±sqrt(3 / cols) (unit
// variance outputs for unit variance inputs), norms near 1, embeddings uniform in ±1;
// the same seed gives the same model. Quantized types are encoded with quantize_row; Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_XS, IQ4_NL and MXFP4, which it cannot write, with a plain encoder of this file (valid
// blocks, not llama.cpp's search for the best ones). Other types (random_model_type) and matrices whose width is not a
// whole number of blocks throw std::invalid_argument. `threads`
// workers generate rows in parallel (0: one per core); the result does not depend on it.
std::shared_ptr<const Model> make_random_model(const ModelConfig& config, TensorType type,
                                               uint64_t seed, int threads = 0);
// Whether make_random_model writes matrices of `type`.
bool random_model_type(TensorType type);
// Their names, "f32, f16, ...", for messages.
std::string random_model_type_names();

// The same with the mix of llama.cpp's Q4_K_M files: `second` (Q6_K there) for wv, w_down
// and the output matrix, `type` for the rest.
std::shared_ptr<const Model> make_random_model(const ModelConfig& config, TensorType type, TensorType second,
                                               uint64_t seed, int threads = 0);

}  // namespace specula
