// Tokenization for every model format, behind one interface with two implementations:
//   SentencePiece  Llama 2, CodeLlama, TinyLlama, Mistral: run on the real SentencePiece
//                  library. A `tokenizer.model` is loaded as it is; vocabularies from GGUF,
//                  llama2.c's tokenizer.bin and Llama-style tokenizer.json become a
//                  SentencePiece ModelProto in memory.
//   byte-level BPE Qwen, DeepSeek-Coder, Llama 3, StarCoder, GPT-2: bytes mapped to printable
//                  code points, a regex pre-tokenizer (PCRE2), merges by rank.
// What both share lives here: special tokens matched in the text, BOS/EOS, the
// end-of-generation set, the fill-in-the-middle tokens, and streaming decode.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/vocabulary.h"

namespace specula {

class DecodeStream;

class Tokenizer {
 public:
  virtual ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // `add_special`: BOS (and EOS) where the vocabulary asks for them. `parse_special`: the text
  // of control tokens (<|endoftext|>, <|im_end|>, FIM tokens, </s>) becomes those tokens;
  // otherwise it is plain text. User-defined tokens (byte-level BPE) are always matched, as
  // Hugging Face and llama.cpp do.
  std::vector<int> encode(std::string_view text, bool add_special, bool parse_special = false) const;
  // Text of `ids`; control tokens decode to nothing, bytes that are not UTF-8 to U+FFFD.
  // Throws std::runtime_error for an id outside the vocabulary.
  virtual std::string decode(std::span<const int> ids) const = 0;

  const Vocabulary& vocabulary() const { return vocab_; }
  TokenizerModel model() const { return vocab_.model; }
  const char* model_name() const;  // "sentencepiece" or "bpe"
  int size() const { return vocab_.size(); }
  int bos() const { return vocab_.bos; }
  int eos() const { return vocab_.eos; }
  const std::string& piece(int id) const { return vocab_.pieces.at(static_cast<size_t>(id)); }

  // Ids that end a generation: EOS, EOT/EOM from the metadata, generation_config.json's
  // list, and pieces known to end a turn or a document (<|endoftext|>, <|im_end|>,
  // <|eot_id|>, <|fim_pad|>, ...). Sorted, without duplicates.
  const std::vector<int>& end_of_generation() const { return end_of_generation_; }
  bool ends_generation(int id) const;
  // Fill-in-the-middle tokens from the metadata, else by their known piece names.
  const FimTokens& fim() const { return fim_; }

  // The ids of a fill-in-the-middle prompt in the layout of the model's family: BOS where the
  // vocabulary adds one, the prefix token, the prefix, the suffix token, the suffix, the
  // middle token (PSM), or suffix first for a model trained so (fim().spm: the suffix token,
  // the suffix, the prefix token, the prefix, the middle token). CodeLlama's suffix is encoded
  // without SentencePiece's leading space, as Meta's reference does. Throws
  // std::runtime_error when the vocabulary has no FIM tokens.
  std::vector<int> fim_prompt(std::string_view prefix, std::string_view suffix) const;
  // The prefix's and the suffix's ids as fim_prompt encodes them, for callers that cut or
  // surround them (repository-level prompts): fim_prompt is BOS, then append_fim_parts.
  struct FimParts {
    std::vector<int> prefix;
    std::vector<int> suffix;
  };
  FimParts fim_parts(std::string_view prefix, std::string_view suffix) const;

  // For IncrementalDecoder: a stream that has already shown `prefix`.
  virtual std::unique_ptr<DecodeStream> decode_stream(std::vector<int> prefix) const = 0;
  // Throws std::runtime_error when an id is outside the vocabulary.
  void check_ids(std::span<const int> ids) const;

 protected:
  // `split_user_defined`: encode() cuts user-defined pieces out of the text itself (the
  // SentencePiece library matches them on its own).
  Tokenizer(Vocabulary vocab, bool split_user_defined);
  // Appends the ids of plain text (no special tokens in it) to `out`. `continuation`: the
  // text follows a token rather than starting the input (no SentencePiece dummy prefix).
  virtual void encode_text(std::string_view text, bool continuation, std::vector<int>& out) const = 0;

  Vocabulary vocab_;

 private:
  struct SpecialMatch {
    size_t at = 0;    // byte offset in the text
    size_t size = 0;  // bytes
    int id = -1;
  };
  // The leftmost-longest special token at or after `from`; id -1 when there is none.
  SpecialMatch find_special(std::string_view text, size_t from, bool parse_special) const;

  // A trie of the pieces encode() may match in the text (control, unknown and, where this
  // tokenizer splits them itself, user-defined ones).
  struct TrieNode {
    std::vector<std::pair<uint8_t, int>> children;  // (byte, node index)
    int id = -1;                                     // the piece that ends here, -1: none
  };
  void add_special(const std::string& piece, int id);

  std::vector<int> end_of_generation_;
  FimTokens fim_;
  std::vector<TrieNode> special_trie_;  // node 0 is the root
  std::array<int, 256> special_roots_;  // the root's child for each byte, -1: none
};

// Appends the FIM sentinels and the parts in the order `spm` says (Tokenizer::fim_prompt's
// layout after BOS): the prefix's and the suffix's tokens with their parts, the middle token.
void append_fim_parts(std::vector<int>& ids, const FimTokens& fim, const Tokenizer::FimParts& parts, bool spm);

// The tokenizer for `vocab`'s model. Throws std::runtime_error with a readable message when
// the vocabulary is unusable (inconsistent arrays, an unknown pre-tokenizer, bad merges).
std::unique_ptr<Tokenizer> create_tokenizer(Vocabulary vocab);

// Reads a vocabulary from a standalone tokenizer file, recognised by its content:
// SentencePiece `tokenizer.model`, llama2.c `tokenizer.bin`, a Hugging Face `tokenizer.json`
// (SentencePiece-style or byte-level BPE; `tokenizer_config.json` and
// `generation_config.json` beside it are read too), or a tiktoken ranks file
// (`base64(bytes) rank` lines; it names no pre-tokenizer: set Vocabulary::pre).
Vocabulary load_vocabulary(const std::string& path);

// The vocabulary of a model or vocabulary file without loading any weights: a GGUF (also
// vocabulary-only ones), a Hugging Face directory (its tokenizer.model or tokenizer.json), or
// a tokenizer file; `tokenizer_path`, when given, is read instead. Throws std::runtime_error.
Vocabulary load_vocabulary_of(const std::string& model_or_vocab, const std::string& tokenizer_path = {});

// A byte-level BPE vocabulary from tiktoken ranks (`base64(bytes) rank` lines, ranks 0..n-1):
// the piece of rank r is its bytes in GPT-2's byte-to-unicode mapping, and the merges are
// derived from the ranks as Hugging Face's converter does (the two parts the rank BPE of a
// token's bytes stops at, in rank order). `pre` names the pre-tokenizer.
Vocabulary tiktoken_vocabulary(std::string_view ranks, const std::string& pre);

// A GGUF pre-tokenizer (tokenizer.ggml.pre) as llama.cpp and the models' tokenizer.json
// define it.
struct PreTokenizerSpec {
  std::vector<std::string> regexes;  // PCRE2 patterns applied in turn (Vocabulary::pre_regexes)
  bool ignore_merges = false;        // Vocabulary::ignore_merges
};
// "gpt-2", "starcoder", "qwen2", "llama-bpe", "deepseek-coder", "deepseek-llm" and the names
// llama.cpp gives the same rules. Throws std::runtime_error naming an unknown one.
PreTokenizerSpec pre_tokenizer_spec(const std::string& pre);
// The name of the known pre-tokenizer with exactly these rules; empty when there is none.
std::string pre_tokenizer_name(const std::vector<std::string>& regexes, bool ignore_merges);

// Serializes `vocab` as a SentencePiece ModelProto (BPE, byte fallback), protobuf wire format.
std::string serialize_sentencepiece_model(const Vocabulary& vocab);

// Turns a growing token sequence into text deltas without ever splitting a UTF-8 character
// (bytes of an unfinished character are held back until it completes or proves invalid) or
// losing SentencePiece's leading-space handling.
class IncrementalDecoder {
 public:
  // `prefix`: ids already shown (the prompt); their text is not emitted again.
  explicit IncrementalDecoder(const Tokenizer& tokenizer, std::vector<int> prefix = {});
  ~IncrementalDecoder();
  IncrementalDecoder(IncrementalDecoder&&) noexcept;
  // Appends tokens; returns the text that became final.
  std::string push(std::span<const int> tokens);
  // Returns the held-back rest (an unfinished UTF-8 character at the end of the stream), so
  // that the concatenated deltas equal the decode of prefix + tokens minus the prefix text.
  // Ends the stream: push after finish is not meaningful.
  std::string finish();
  const std::string& text() const { return emitted_; }

 private:
  std::unique_ptr<DecodeStream> stream_;
  std::string emitted_;  // concatenation of every delta returned
};

}  // namespace specula
