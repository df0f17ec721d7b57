// Shared by the tokenizer's translation units: the two implementations' factories, streaming
// decode, UTF-8 repair, GPT-2's byte mapping and SentencePiece model loading.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer.h"
#include "model/vocabulary.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace specula {

// The state of one streaming decode (see IncrementalDecoder, which owns one).
class DecodeStream {
 public:
  virtual ~DecodeStream() = default;
  virtual std::string push(std::span<const int> tokens) = 0;
  virtual std::string finish() = 0;
};

std::unique_ptr<Tokenizer> create_sentencepiece_tokenizer(Vocabulary vocab);
std::unique_ptr<Tokenizer> create_bpe_tokenizer(Vocabulary vocab);

// UTF-8 as the decoders emit it: well-formed sequences are kept, every byte of an ill-formed
// one becomes U+FFFD (as SentencePiece's decoder does).
std::string repair_utf8(std::string_view bytes);
// How many leading bytes of `bytes` repair_utf8 can turn into final text: all but a trailing
// sequence that is well-formed so far and only lacks its last bytes.
size_t complete_utf8_prefix(std::string_view bytes);
// Whether `text` is well-formed UTF-8; `bad_at` gets the offset of the first ill-formed byte.
bool is_utf8(std::string_view text, size_t* bad_at = nullptr);

// GPT-2's byte-to-unicode mapping: the printable bytes stand for themselves, the other 68
// (controls, space, 0x7F-0xA0, 0xAD) for U+0100 onwards, so "Ġ" is a space and "Ċ" a newline.
std::string byte_level_piece(std::string_view bytes);
// The bytes a piece stands for; false when a character of it is outside the mapping.
bool byte_level_bytes(std::string_view piece, std::string& bytes);

// Loads a serialized ModelProto; throws std::runtime_error naming `what` when it fails.
std::unique_ptr<sentencepiece::SentencePieceProcessor> load_sentencepiece(
    std::string_view serialized, const std::string& what);

// Pieces, scores, kinds and special ids as the loaded model reports them.
Vocabulary vocabulary_from_processor(const sentencepiece::SentencePieceProcessor& processor,
                                     std::string serialized);

}  // namespace specula
