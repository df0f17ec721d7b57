// The byte-level BPE tokenizer (GPT-2 style): a regex pre-tokenizer on PCRE2 splits the text,
// each pre-token's bytes start as one token each, and the adjacent pair with the lowest merge
// rank is joined until no pair of the merges list is left (Hugging Face's and llama.cpp's rule).
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <algorithm>
#include <array>
#include <stdexcept>
#include <unordered_map>

#include "model/tokenizer_internal.h"

namespace specula {

namespace {

// ---------------------------------------------------------------------------------------
// Pre-tokenizer patterns, as the models' tokenizer.json files and llama.cpp (llama-vocab.cpp)
// give them.

const char* const kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char* const kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// tiktoken's o200k_base (GPT-4o, gpt-oss): cased letter runs with an optional contraction,
// digits by threes, punctuation runs that take trailing newlines and slashes.
const char* const kGpt4o =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?)"
    R"(|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char* const kCjk = "[\xE4\xB8\x80-\xE9\xBE\xA5\xE0\xA0\x80-\xE4\xB8\x80\xEA\xB0\x80-\xED\x9F\xBF]+";  // [一-龥ࠀ-一가-퟿]+

struct KnownPreTokenizer {
  std::vector<const char*> names;  // tokenizer.ggml.pre values with these rules
  PreTokenizerSpec spec;
};

const std::vector<KnownPreTokenizer>& known_pre_tokenizers() {
  static const std::vector<KnownPreTokenizer> known = {
      {{"gpt-2", "phi-2", "roberta-bpe", "mpt", "olmo", "jais"}, {{kGpt2}}},
      {{"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone", "minerva-7b"}, {{R"(\p{N})", kGpt2}}},
      {{"qwen2", "stablelm2", "megrez"}, {{kQwen2}}},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3"}, {{kLlama3}, true}},
      {{"dbrx", "smaug-bpe"}, {{kLlama3}}},
      {{"gpt-4o", "llama4"}, {{kGpt4o}}},
      {{"deepseek-coder"}, {{"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}}},
      {{"deepseek-llm"},
       {{"[\r\n]",
         "\\s?[A-Za-z\xC2\xB5\xC3\x80-\xC3\x96\xC3\x98-\xC3\xB6\xC3\xB8-\xC6\xBA\xC6\xBC-\xC6\xBF\xC7\x84-\xCA\x93"
         "\xCA\x95-\xCA\xAF\xCD\xB0-\xCD\xB3\xCD\xB6\xCD\xB7\xCD\xBB-\xCD\xBD\xCD\xBF\xCE\x86\xCE\x88-\xCE\x8A\xCE\x8C"
         "\xCE\x8E-\xCE\xA1\xCE\xA3-\xCF\xB5\xCF\xB7-\xD2\x81\xD2\x8A-\xD4\xAF\xD4\xB1-\xD5\x96\xE1\x82\xA0-\xE1\x83\x85"
         "\xE1\x8E\xA0-\xE1\x8F\xB5\xE1\x8F\xB8-\xE1\x8F\xBD\xE1\xB2\x90-\xE1\xB2\xBA\xE1\xB2\xBD-\xE1\xB2\xBF"
         "\xE1\xB4\x80-\xE1\xB4\xAB\xE1\xB5\xAB-\xE1\xB5\xB7\xE1\xB5\xB9-\xE1\xB6\x9A\xE1\xB8\x80-\xE1\xBC\x95"
         "\xE1\xBC\x98-\xE1\xBC\x9D\xE1\xBC\xA0-\xE1\xBD\x85\xE1\xBD\x88-\xE1\xBD\x8D\xE1\xBD\x90-\xE1\xBD\x97"
         "\xE1\xBD\x99\xE1\xBD\x9B\xE1\xBD\x9D\xE1\xBD\x9F-\xE1\xBD\xBD\xE1\xBE\x80-\xE1\xBE\xB4\xE1\xBE\xB6-\xE1\xBE\xBC"
         "\xE1\xBE\xBE\xE1\xBF\x82-\xE1\xBF\x84\xE1\xBF\x86-\xE1\xBF\x8C\xE1\xBF\x90-\xE1\xBF\x93\xE1\xBF\x96-\xE1\xBF\x9B"
         "\xE1\xBF\xA0-\xE1\xBF\xAC\xE1\xBF\xB2-\xE1\xBF\xB4\xE1\xBF\xB6-\xE1\xBF\xBC\xE2\x84\x82\xE2\x84\x87"
         "\xE2\x84\x8A-\xE2\x84\x93\xE2\x84\x95\xE2\x84\x99-\xE2\x84\x9D\xE2\x84\xA4\xE2\x84\xA6\xE2\x84\xA8"
         "\xE2\x84\xAA-\xE2\x84\xAD\xE2\x84\xAF-\xE2\x84\xB4\xE2\x84\xB9\xE2\x84\xBC-\xE2\x84\xBF\xE2\x85\x85-\xE2\x85\x89"
         "\xE2\x85\x8E\xE2\x86\x83\xE2\x86\x84\xE2\xB0\x80-\xE2\xB1\xBB\xE2\xB1\xBE-\xE2\xB3\xA4\xE2\xB3\xAB-\xE2\xB3\xAE"
         "\xE2\xB3\xB2\xE2\xB3\xB3\xEA\x99\x80-\xEA\x99\xAD\xEA\x9A\x80-\xEA\x9A\x9B\xEA\x9C\xA2-\xEA\x9D\xAF"
         "\xEA\x9D\xB1-\xEA\x9E\x87\xEA\x9E\x8B-\xEA\x9E\x8E\xEA\xAD\xB0-\xEA\xAE\xBF\xEF\xAC\x80-\xEF\xAC\x86"
         "\xEF\xAC\x93-\xEF\xAC\x97\xEF\xBC\xA1-\xEF\xBC\xBA\xEF\xBD\x81-\xEF\xBD\x9A\xF0\x90\x90\x80-\xF0\x90\x91\x8F"
         "\xF0\x90\x92\xB0-\xF0\x90\x93\x93\xF0\x90\x93\x98-\xF0\x90\x93\xBB\xF0\x90\xB2\x80-\xF0\x90\xB2\xB2"
         "\xF0\x90\xB3\x80-\xF0\x90\xB3\xB2\xF0\x91\xA2\xA0-\xF0\x91\xA3\x9F\xF0\x9E\xA4\x80-\xF0\x9E\xA5\x83]+",
         "\\s?[!-/:-~\xEF\xBC\x81-\xEF\xBC\x8F\xEF\xBC\x9A-\xEF\xBD\x9E\xE2\x80\x98-\xE2\x80\x9F\xE3\x80\x80-\xE3\x80\x82]+",
         R"(\s+$)", kCjk, R"(\p{N}+)"}}},
  };
  return known;
}

// White_Space as Hugging Face (Oniguruma) and tiktoken (Rust regex) read \s. PCRE2's \s
// under UCP also takes U+180E, which Unicode stopped calling a space in 6.3.
const char* const kWhiteSpace =
    R"(\t\n\x{0B}\f\r\x{20}\x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

// `pattern` with \s and \S spelled out as kWhiteSpace, inside and outside character classes.
std::string with_unicode_white_space(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t at = 0; at < pattern.size(); ++at) {
    const char c = pattern[at];
    if (c == '\\' && at + 1 < pattern.size()) {
      const char e = pattern[++at];
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpace) : "[" + std::string(kWhiteSpace) + "]";
      } else if (e == 'S') {
        if (in_class) throw std::runtime_error("pre-tokenizer pattern uses \\S inside a character class: " + pattern);
        out += "[^" + std::string(kWhiteSpace) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      // a ']' right after '[' or '[^' is a literal
      if (at + 1 < pattern.size() && pattern[at + 1] == '^') out += pattern[++at];
      if (at + 1 < pattern.size() && pattern[at + 1] == ']') out += pattern[++at];
      continue;
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

// One compiled pre-tokenizer pattern.
class Regex {
 public:
  explicit Regex(const std::string& pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    const std::string translated = with_unicode_white_space(pattern);
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(translated.data()), translated.size(),
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
    if (code_ == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof message);
      throw std::runtime_error("pre-tokenizer pattern " + pattern + " does not compile at offset " +
                               std::to_string(offset) + ": " + reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter if JIT is unavailable
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Appends to `out` the pieces of `text` (a pre-token so far): every match and every gap
  // between matches, in order (Hugging Face's Split with behaviour "Isolated").
  void split(std::string_view text, pcre2_match_data* match, pcre2_match_context* context,
             std::vector<std::string_view>& out) const {
    const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    size_t done = 0, from = 0;
    while (from < text.size()) {
      const int rc = pcre2_match(code_, subject, text.size(), from, 0, match, context);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(rc, message, sizeof message);
        throw std::runtime_error(std::string("pre-tokenizer match failed: ") + reinterpret_cast<const char*>(message));
      }
      const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match);
      const size_t begin = span[0], end = span[1];
      if (end == begin) {  // an empty match takes nothing: step over one character
        from = begin + 1;
        while (from < text.size() && (static_cast<uint8_t>(text[from]) & 0xC0) == 0x80) ++from;
        continue;
      }
      if (begin > done) out.push_back(text.substr(done, begin - done));
      out.push_back(text.substr(begin, end - begin));
      done = from = end;
    }
    if (done < text.size()) out.push_back(text.substr(done));
  }

 private:
  pcre2_code* code_ = nullptr;
};

// Match data and a JIT stack for one thread: a long run of spaces or digits takes more than
// PCRE2's default 32 KiB of JIT stack.
struct MatchScratch {
  pcre2_match_data* data = pcre2_match_data_create(4, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
  MatchScratch() { pcre2_jit_stack_assign(context, nullptr, stack); }
  ~MatchScratch() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

// `text` in Unicode normalization form C (ICU), as a tokenizer.json "NFC" normalizer makes it.
// ASCII and text that is not UTF-8 are left as they are.
std::string nfc(std::string_view text) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<uint8_t>(c) < 0x80; }) || !is_utf8(text))
    return std::string(text);
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* normalizer = icu::Normalizer2::getNFCInstance(status);
  std::string out;
  icu::StringByteSink<std::string> sink(&out);
  if (U_SUCCESS(status))
    normalizer->normalizeUTF8(0, icu::StringPiece(text.data(), static_cast<int32_t>(text.size())), sink, nullptr, status);
  if (U_FAILURE(status)) throw std::runtime_error(std::string("Unicode NFC normalization failed: ") + u_errorName(status));
  return out;
}

// ---------------------------------------------------------------------------------------
// The tokenizer

struct TransparentHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct Merge {
  int rank = 0;    // position in the merges list: lower merges first
  int result = 0;  // id of the joined piece
};

uint64_t pair_key(int left, int right) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
}

class BpeTokenizer : public Tokenizer {
 public:
  explicit BpeTokenizer(Vocabulary vocab) : Tokenizer(std::move(vocab), true) {
    if (vocab_.pre_regexes.empty()) {
      if (vocab_.pre.empty())
        throw std::runtime_error("the byte-level BPE vocabulary names no pre-tokenizer (tokenizer.ggml.pre)");
      PreTokenizerSpec spec = pre_tokenizer_spec(vocab_.pre);
      vocab_.pre_regexes = std::move(spec.regexes);
      vocab_.ignore_merges = spec.ignore_merges;
    }
    for (const std::string& pattern : vocab_.pre_regexes) regexes_.push_back(std::make_unique<Regex>(pattern));
    index_pieces();
    index_merges();
  }

  std::string decode(std::span<const int> ids) const override {
    check_ids(ids);
    std::string bytes;
    for (const int id : ids) bytes += token_bytes_[static_cast<size_t>(id)];
    return repair_utf8(bytes);
  }

  std::unique_ptr<DecodeStream> decode_stream(std::vector<int> prefix) const override;

  // The bytes an id adds to decoded text: nothing for control and unused tokens.
  const std::string& token_bytes(int id) const { return token_bytes_[static_cast<size_t>(id)]; }

 protected:
  void encode_text(std::string_view raw, bool, std::vector<int>& out) const override {
    thread_local MatchScratch scratch;
    const std::string normalized = vocab_.nfc ? nfc(raw) : std::string();
    const std::string_view text = vocab_.nfc ? std::string_view(normalized) : raw;
    std::vector<std::string_view> pieces = {text}, next;
    for (const auto& regex : regexes_) {
      next.clear();
      for (const std::string_view piece : pieces) regex->split(piece, scratch.data, scratch.context, next);
      pieces.swap(next);
    }
    for (const std::string_view word : pieces) encode_word(word, out);
  }

 private:
  // The bytes of every piece, the id of every piece text and of every byte.
  void index_pieces() {
    const size_t n = vocab_.pieces.size();
    token_bytes_.resize(n);
    id_of_piece_.reserve(n);
    for (size_t id = 0; id < n; ++id) {
      const std::string& piece = vocab_.pieces[id];
      const TokenKind kind = vocab_.kinds[id];
      if (kind == TokenKind::Normal || kind == TokenKind::Byte) {
        // a piece outside the byte mapping stands for its own text (Hugging Face's decoder)
        if (!byte_level_bytes(piece, token_bytes_[id])) token_bytes_[id] = piece;
      } else if (kind == TokenKind::UserDefined) {
        token_bytes_[id] = piece;
      }
    }
    // normal pieces first: a user-defined piece may repeat one's text
    for (const bool normal : {true, false})
      for (size_t id = 0; id < n; ++id)
        if ((vocab_.kinds[id] == TokenKind::Normal) == normal) id_of_piece_.emplace(vocab_.pieces[id], static_cast<int>(id));
    for (int b = 0; b < 256; ++b) {
      const auto it = id_of_piece_.find(byte_level_piece(std::string(1, static_cast<char>(b))));
      byte_ids_[static_cast<size_t>(b)] = it == id_of_piece_.end() ? -1 : it->second;
    }
    if (vocab_.ignore_merges)
      for (size_t id = 0; id < n; ++id)
        if (vocab_.kinds[id] == TokenKind::Normal) id_of_bytes_.emplace(token_bytes_[id], static_cast<int>(id));
  }

  void index_merges() {
    merges_.reserve(vocab_.merges.size());
    for (size_t rank = 0; rank < vocab_.merges.size(); ++rank) {
      const std::string& merge = vocab_.merges[rank];
      const size_t space = merge.find(' ');
      if (space == std::string::npos || merge.find(' ', space + 1) != std::string::npos)
        throw std::runtime_error("merge " + std::to_string(rank) + " \"" + merge + "\" is not two pieces");
      const int left = id_of(merge.substr(0, space), merge);
      const int right = id_of(merge.substr(space + 1), merge);
      const int result = id_of(merge.substr(0, space) + merge.substr(space + 1), merge);
      merges_.emplace(pair_key(left, right), Merge{static_cast<int>(rank), result});  // the first rank wins
    }
  }

  int id_of(const std::string& piece, const std::string& merge) const {
    const auto it = id_of_piece_.find(piece);
    if (it == id_of_piece_.end())
      throw std::runtime_error("merge \"" + merge + "\" names \"" + piece + "\", which is not in the vocabulary");
    return it->second;
  }

  int byte_id(uint8_t b) const {
    const int id = byte_ids_[b];
    if (id < 0) throw std::runtime_error("byte 0x" + std::string(1, "0123456789ABCDEF"[b >> 4]) +
                                         "0123456789ABCDEF"[b & 15] + " has no token in this vocabulary");
    return id;
  }

  // BPE over one pre-token: a linked list of symbols and a queue of candidate pairs, lowest
  // rank first and leftmost among equal ranks; a candidate whose symbols changed is skipped.
  void encode_word(std::string_view word, std::vector<int>& out) const {
    if (word.size() == 1) {
      out.push_back(byte_id(static_cast<uint8_t>(word[0])));
      return;
    }
    if (vocab_.ignore_merges) {
      const auto whole = id_of_bytes_.find(word);
      if (whole != id_of_bytes_.end()) {
        out.push_back(whole->second);
        return;
      }
    }
    struct Symbol {
      int id;    // -1 once joined into the symbol before it
      int next;  // index of the next live symbol, -1 at the end
      int prev;
    };
    struct Candidate {
      int rank, left, left_id, right_id, result;
      bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    const int n = static_cast<int>(word.size());
    thread_local std::vector<Symbol> symbols;  // reused: a text has many short words
    thread_local std::vector<Candidate> queue; // a min-heap
    symbols.resize(static_cast<size_t>(n));
    queue.clear();
    for (int i = 0; i < n; ++i)
      symbols[static_cast<size_t>(i)] = {byte_id(static_cast<uint8_t>(word[static_cast<size_t>(i)])),
                                         i + 1 < n ? i + 1 : -1, i - 1};
    const auto consider = [&](int left) {
      if (left < 0) return;
      const int right = symbols[static_cast<size_t>(left)].next;
      if (right < 0) return;
      const int a = symbols[static_cast<size_t>(left)].id, b = symbols[static_cast<size_t>(right)].id;
      const auto it = merges_.find(pair_key(a, b));
      if (it == merges_.end()) return;
      queue.push_back({it->second.rank, left, a, b, it->second.result});
      std::push_heap(queue.begin(), queue.end(), std::greater<>());
    };
    for (int i = 0; i + 1 < n; ++i) consider(i);
    while (!queue.empty()) {
      std::pop_heap(queue.begin(), queue.end(), std::greater<>());
      const Candidate c = queue.back();
      queue.pop_back();
      Symbol& left = symbols[static_cast<size_t>(c.left)];
      if (left.id != c.left_id || left.next < 0) continue;
      Symbol& right = symbols[static_cast<size_t>(left.next)];
      if (right.id != c.right_id) continue;
      left.id = c.result;
      right.id = -1;
      left.next = right.next;
      if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = c.left;
      consider(left.prev);
      consider(c.left);
    }
    for (int i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next) out.push_back(symbols[static_cast<size_t>(i)].id);
  }

  std::vector<std::unique_ptr<Regex>> regexes_;
  std::vector<std::string> token_bytes_;             // (vocab) raw bytes each id decodes to
  std::unordered_map<std::string, int> id_of_piece_; // piece text -> id, normal pieces first
  // raw bytes -> id of normal pieces (ignore_merges only), looked up by string_view
  std::unordered_map<std::string, int, TransparentHash, std::equal_to<>> id_of_bytes_;
  std::array<int, 256> byte_ids_{};                  // id of each single byte, -1 where none
  std::unordered_map<uint64_t, Merge> merges_;       // (left id, right id) -> rank and result
};

// Streaming decode: the bytes of every id in order, held back only over an unfinished UTF-8
// character at the end, so each delta is exactly what decode() adds.
class ByteStream : public DecodeStream {
 public:
  ByteStream(const BpeTokenizer& tokenizer, std::span<const int> prefix) : tokenizer_(tokenizer) {
    append(prefix);
    pending_.erase(0, complete_utf8_prefix(pending_));  // the prefix's final text is never emitted
  }

  std::string push(std::span<const int> tokens) override {
    append(tokens);
    const size_t n = complete_utf8_prefix(pending_);
    std::string text = repair_utf8(std::string_view(pending_).substr(0, n));
    pending_.erase(0, n);
    return text;
  }

  std::string finish() override {
    std::string text = repair_utf8(pending_);
    pending_.clear();
    return text;
  }

 private:
  void append(std::span<const int> ids) {
    tokenizer_.check_ids(ids);
    for (const int id : ids) pending_ += tokenizer_.token_bytes(id);
  }

  const BpeTokenizer& tokenizer_;
  std::string pending_;  // bytes not emitted yet, starting where the emitted text ended
};

std::unique_ptr<DecodeStream> BpeTokenizer::decode_stream(std::vector<int> prefix) const {
  return std::make_unique<ByteStream>(*this, prefix);
}

}  // namespace

PreTokenizerSpec pre_tokenizer_spec(const std::string& pre) {
  std::string names;
  for (const KnownPreTokenizer& known : known_pre_tokenizers()) {
    for (const char* name : known.names) {
      if (pre == name) return known.spec;
      names += names.empty() ? "" : ", ";
      names += name;
    }
  }
  throw std::runtime_error("pre-tokenizer '" + pre + "' (tokenizer.ggml.pre) is not supported; known: " + names);
}

std::string pre_tokenizer_name(const std::vector<std::string>& regexes, bool ignore_merges) {
  for (const KnownPreTokenizer& known : known_pre_tokenizers())
    if (known.spec.regexes == regexes && known.spec.ignore_merges == ignore_merges) return known.names.front();
  return {};
}

std::unique_ptr<Tokenizer> create_bpe_tokenizer(Vocabulary vocab) {
  return std::make_unique<BpeTokenizer>(std::move(vocab));
}

}  // namespace specula
