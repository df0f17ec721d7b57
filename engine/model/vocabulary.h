// A vocabulary as model files carry it: pieces and their kinds, plus what each tokenizer
// kind needs to encode with them (SentencePiece scores, byte-level BPE merges and the
// pre-tokenizer) and the special tokens the metadata names.
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

// How the pieces turn text into ids; GGUF's tokenizer.ggml.model names them "llama" and "gpt2".
enum class TokenizerModel {
  SentencePiece,  // "▁" for spaces, <0xNN> byte fallback, merges by score (SentencePiece library)
  ByteLevelBpe,   // GPT-2 style: every byte a printable code point, merges by rank, regex pre-tokenizer
};

// The fill-in-the-middle tokens of a code model; -1 where the vocabulary has none.
struct FimTokens {
  int prefix = -1;  // opens the code before the hole: <|fim_prefix|>, <｜fim▁begin｜>, ▁<PRE>, <fim_prefix>
  int suffix = -1;  // opens the code after the hole: <|fim_suffix|>, <｜fim▁hole｜>, ▁<SUF>, <fim_suffix>
  int middle = -1;  // ends the prompt; the model writes the hole next: <|fim_middle|>, <｜fim▁end｜>, ▁<MID>
  int pad = -1;     // <|fim_pad|>: models may emit it when the middle is done
  int repo = -1;    // <|repo_name|>: repository-level prompts
  int sep = -1;     // <|file_sep|>: between files of a repository-level prompt
  bool spm = false; // the model reads the suffix first: <suffix> suffix <prefix> prefix <middle>
                    // (SPM, llama.cpp's --spm-infill; key specula.fim.order "spm"), not prefix first (PSM)

  bool complete() const { return prefix >= 0 && suffix >= 0 && middle >= 0; }
};

struct Vocabulary {
  TokenizerModel model = TokenizerModel::SentencePiece;
  std::vector<std::string> pieces;  // (vocab) piece text: "▁the", "<0x0A>" (SentencePiece);
                                    // "Ġthe" in GPT-2's byte-to-unicode mapping (BPE); control
                                    // and user-defined pieces are plain text in both
  std::vector<float> scores;        // (vocab) SentencePiece merge priority / log-probability
  std::vector<TokenKind> kinds;     // (vocab)
  int bos = 1;                      // -1: none
  int eos = 2;                      // -1: none
  int unk = 0;                      // -1: none
  int pad = -1;
  int eot = -1;                     // end of turn (<|eot_id|>, <|im_end|>), from metadata
  int eom = -1;                     // end of message (<|eom_id|>), from metadata
  std::vector<int> extra_eos;       // more ids that end generation (generation_config.json)
  FimTokens fim;                    // from metadata; unnamed ones are found by piece name
  bool add_bos = true;               // encode(text, add_special) starts with BOS
  bool add_eos = false;              // encode(text, add_special) ends with EOS
  bool add_dummy_prefix = true;      // SentencePiece's leading "▁" on the input
  bool byte_fallback = true;         // SentencePiece: unknown characters become <0xNN> pieces

  // Byte-level BPE only.
  std::vector<std::string> merges;      // (n_merges) "left right" in rank order, pieces as in `pieces`
  std::string pre;                      // GGUF's tokenizer.ggml.pre ("qwen2", "llama-bpe", ...);
                                        // empty when the regexes came from a tokenizer.json
  std::vector<std::string> pre_regexes; // the pre-tokenizer: PCRE2 patterns applied in turn, each
                                        // splitting every piece of text into matches and the gaps
  bool ignore_merges = false;           // a pre-token that is a whole piece is taken as it is (Llama 3)
  bool nfc = false;                     // text is put in Unicode NFC first (a tokenizer.json normalizer)

  // The original tokenizer.model bytes when the vocabulary came from one; empty otherwise.
  std::string serialized_model;

  int size() const { return static_cast<int>(pieces.size()); }
  bool empty() const { return pieces.empty(); }
};

}  // namespace specula
