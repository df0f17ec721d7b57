// The demo target as a code model without fill-in-the-middle tokens, for the suites that
// check what /infill does then (llama.cpp's 501, --infill-fallback): the shipped file with
// its three sentinel pieces renamed and their ids dropped, written as GGUF. The weights and
// every other piece are the demo target's, so the fallback completes real code.
#pragma once

#include <memory>
#include <string>

#include "model/demo_models.h"
#include "model/model.h"
#include "model/model_export.h"
#include "model/tokenizer.h"

namespace specula::test {

// Writes the file at `path`; throws when the demo pair is not found or has no FIM tokens.
inline void write_demo_target_without_fim(const std::string& path) {
  const auto pair = find_demo_models(SPECULA_SOURCE_DIR);
  if (!pair) throw std::runtime_error("the demo pair is not in resources/models");
  auto model = std::make_shared<Model>(*load_model(pair->target));
  Vocabulary vocab = model->tokenizer->vocabulary();
  const FimTokens fim = model->tokenizer->fim();
  if (!fim.complete()) throw std::runtime_error("the demo target has no FIM tokens to take away");
  for (const int id : {fim.prefix, fim.suffix, fim.middle}) {
    vocab.pieces[static_cast<size_t>(id)] = "<unused" + std::to_string(id) + ">";
  }
  vocab.fim = FimTokens{};
  model->tokenizer = create_tokenizer(std::move(vocab));
  write_gguf_model(*model, path, TensorType::F16);
}

}  // namespace specula::test
