// Writing a loaded Model as a GGUF file that llama.cpp and this engine both read.
#pragma once

#include <string>

#include "model/model.h"

namespace specula {

// Writes `model` as GGUF (architecture "llama", llama.cpp's tensor names, the vocabulary
// as tokenizer.ggml.* with model "llama"). Weight matrices are stored as `type` when their
// rows are whole blocks of it and keep their stored type otherwise; norms stay f32. A
// matrix already of `type` is copied byte for byte.
void write_gguf_model(const Model& model, const std::string& path, TensorType type);

}  // namespace specula
