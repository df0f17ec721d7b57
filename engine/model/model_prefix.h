// The weights a layers:K self-draft reads, narrowed.
//
// A layers:K draft runs its target's first K layers, final norm and output matrix once per
// drafted token. At the batch sizes drafts run (one token per sequence) those forwards read
// every weight they multiply by and little else: their time is the bytes of the K layers
// and of the output matrix over the memory's bandwidth (15 % of a forward per drafted token
// for layers:2 of the 1.1B shape in Q8_0, of which the output matrix is 43 %). The draft's
// tokens are only proposals, which the target checks at its own precision, so the draft
// may read those matrices narrower: a copy requantized to 4.5 bits per weight reads half
// the bytes of Q8_0, 0.69 of Q6_K and 0.28 of F16, and leaves the output bit for bit as it
// was (every kept token is the target's). What it changes is which tokens the draft
// proposes, as any 4-bit quantization of a model does: a little.
#pragma once

#include <cstdint>
#include <memory>

#include "model/model.h"

namespace specula {

// The type a self-draft's matrices are narrowed to.
inline constexpr TensorType kSelfDraftType = TensorType::Q4_0;

// Bytes of the matrices a forward of `target`'s first `n_layers` layers reads, as stored:
// those layers' and the output matrix.
uint64_t prefix_matrix_bytes(const Model& target, int n_layers);

// Bytes a narrowed prefix of `target` (its first `n_layers` layers and its output matrix)
// would own: the matrices stored wider than `type` whose rows are whole blocks of it, at
// `type`; 0 when no matrix is wider (a Q4_0 or Q4_K model: its layers:K runs its own).
uint64_t narrowed_prefix_bytes(const Model& target, int n_layers, TensorType type = kSelfDraftType);

// A model of `target`'s first `n_layers` layers (config.n_layers = n_layers), its final norm
// and output matrix, with each matrix narrowed_prefix_bytes counts requantized to `type`
// (dequantized, then quantized as quantize_row does); every other tensor (norms, biases,
// the token embedding, matrices already as narrow) is a view of the target's. It owns only
// its copies: views of the target's are valid while the target lives. Its path, format and
// tokenizer are the target's, so that its measured cost is kept in a file of its own
// (cost_model_key names its layers and types). Requantizes on every core.
std::shared_ptr<const Model> narrowed_prefix(const Model& target, int n_layers, TensorType type = kSelfDraftType);

}  // namespace specula
