// Writing a loaded Model as a GGUF file that llama.cpp and this engine both read.
#pragma once

#include <string>

#include "model/model.h"

namespace specula {

// Writes `model` as GGUF (its architecture, llama, qwen2, qwen3 or qwen3moe, with llama.cpp's
// keys and tensor names, a mixture of experts' as 3-D ffn_*_exps tensors; rope scaling as
// rope.scaling.* and rope_freqs.weight, the vocabulary as tokenizer.ggml.* with model "llama"
// or, byte-level BPE, "gpt2" with its merges and pre-tokenizer name). Weight matrices are
// stored as `type` when their rows are whole blocks of it and keep their stored type
// otherwise; norms and biases stay f32, a router keeps its type (as llama-quantize does). A matrix
// already of `type` is copied byte for byte. Throws ModelError for a model whose rope style
// is not its architecture's GGUF layout, or whose pre-tokenizer rules have no GGUF name.
void write_gguf_model(const Model& model, const std::string& path, TensorType type);

}  // namespace specula
