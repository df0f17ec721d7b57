// A SentencePiece vocabulary as model files carry it: pieces, scores and kinds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specula {

// SentencePiece's ModelProto.SentencePiece.Type values (GGUF's token_type uses the same).
enum class TokenKind : int32_t {
  Normal = 1,
  Unknown = 2,
  Control = 3,
  UserDefined = 4,
  Unused = 5,
  Byte = 6,
};

struct Vocabulary {
  std::vector<std::string> pieces;  // (vocab) piece text, "▁" for spaces, "<0x0A>" for bytes
  std::vector<float> scores;        // (vocab) merge priority / log-probability
  std::vector<TokenKind> kinds;     // (vocab)
  int bos = 1;
  int eos = 2;
  int unk = 0;
  int pad = -1;
  bool add_bos = true;
  bool add_dummy_prefix = true;      // SentencePiece's leading "▁" on the input
  bool byte_fallback = true;
  // The original tokenizer.model bytes when the vocabulary came from one; empty otherwise.
  std::string serialized_model;

  int size() const { return static_cast<int>(pieces.size()); }
  bool empty() const { return pieces.empty(); }
};

}  // namespace specula
