// SentencePiece tokenization for every model format.
//
// All tokenizers run on the real SentencePiece library. A `tokenizer.model` file is
// loaded as it is; vocabularies from GGUF, llama2.c's tokenizer.bin and Llama-style
// tokenizer.json are turned into a SentencePiece ModelProto in memory and loaded with
// LoadFromSerializedProto.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/vocabulary.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace specula {

class Tokenizer {
 public:
  // Builds the SentencePiece model from `vocab` (or loads vocab.serialized_model).
  // Throws std::runtime_error with a readable message when the vocabulary is unusable.
  explicit Tokenizer(Vocabulary vocab);
  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  std::vector<int> encode(std::string_view text, bool add_bos) const;
  std::string decode(std::span<const int> ids) const;

  const Vocabulary& vocabulary() const { return vocab_; }
  int size() const { return vocab_.size(); }
  int bos() const { return vocab_.bos; }
  int eos() const { return vocab_.eos; }
  const std::string& piece(int id) const { return vocab_.pieces.at(static_cast<size_t>(id)); }

 private:
  Vocabulary vocab_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
};

// Reads a vocabulary from a standalone tokenizer file: SentencePiece `tokenizer.model`,
// llama2.c `tokenizer.bin`, or a Llama-style Hugging Face `tokenizer.json`.
Vocabulary load_vocabulary(const std::string& path);

// Serializes `vocab` as a SentencePiece ModelProto (BPE, byte fallback), protobuf wire format.
std::string serialize_sentencepiece_model(const Vocabulary& vocab);

// Turns a growing token sequence into text deltas without ever splitting a UTF-8
// character or losing SentencePiece's leading-space handling.
class IncrementalDecoder {
 public:
  // `prefix`: ids already shown (the prompt); their text is not emitted again.
  explicit IncrementalDecoder(const Tokenizer& tokenizer, std::vector<int> prefix = {});
  // Appends tokens; returns the text that became final.
  std::string push(std::span<const int> tokens);
  // Returns the held-back rest (an unfinished UTF-8 character at the end of the stream), so
  // that the concatenated deltas equal the decode of prefix + tokens minus the prefix text.
  // Ends the stream: push after finish is not meaningful.
  std::string finish();
  const std::string& text() const { return emitted_; }

 private:
  // The text of tokens_[window_, end) that follows the anchor.
  std::string window_text(size_t end) const;
  void advance_window(size_t final_ids);
  std::string take(size_t final_ids);

  const Tokenizer& tokenizer_;
  std::vector<int> tokens_;       // (prefix + pushed) every id seen so far
  // Only tokens_[window_, end) are decoded again on each push. When window_ > 0,
  // tokens_[window_] is an anchor: a final piece with visible text of its own, after which
  // SentencePiece decodes independently of everything before it.
  size_t window_ = 0;
  size_t window_offset_ = 0;      // bytes of the full text up to and including the anchor
  size_t anchor_text_size_ = 0;   // bytes the anchor decodes to when it comes first
  size_t prefix_text_size_ = 0;   // bytes of the prefix's final text, never emitted
  std::string emitted_;           // concatenation of every delta returned
};

}  // namespace specula
