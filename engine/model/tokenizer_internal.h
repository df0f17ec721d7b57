// Shared by the tokenizer's translation units: loading SentencePiece models.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "model/vocabulary.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace specula {

// Loads a serialized ModelProto; throws std::runtime_error naming `what` when it fails.
std::unique_ptr<sentencepiece::SentencePieceProcessor> load_sentencepiece(
    std::string_view serialized, const std::string& what);

// Pieces, scores, kinds and special ids as the loaded model reports them.
Vocabulary vocabulary_from_processor(const sentencepiece::SentencePieceProcessor& processor,
                                     std::string serialized);

}  // namespace specula
