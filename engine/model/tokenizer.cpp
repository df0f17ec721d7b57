// What both tokenizer kinds share: special tokens in the text, BOS/EOS, the end-of-generation
// set, fill-in-the-middle prompts, streaming decode, UTF-8 repair and GPT-2's byte mapping.
#include "model/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>

#include "model/tokenizer_internal.h"

namespace specula {

namespace {

// Pieces that end a turn or a document in the families Specula reads, matched by name
// because many files name only EOS in their metadata (as llama.cpp does).
constexpr std::array kEndOfGenerationPieces = {
    "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|end_of_text|>", "<|end|>",
    "<end_of_turn>", "<EOT>", "\xE2\x96\x81<EOT>", "<|EOT|>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // <｜end▁of▁sentence｜>
};

// Fill-in-the-middle pieces by family: Qwen2.5-Coder, StarCoder, DeepSeek-Coder, CodeLlama
// (SentencePiece pieces with the leading "▁"), and the bare spellings of other files.
constexpr std::array kFimPrefixPieces = {
    "<|fim_prefix|>", "<fim_prefix>", "<fim-prefix>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",  // <｜fim▁begin｜>
    "\xE2\x96\x81<PRE>", "<PRE>"};
constexpr std::array kFimSuffixPieces = {
    "<|fim_suffix|>", "<fim_suffix>", "<fim-suffix>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",  // <｜fim▁hole｜>
    "\xE2\x96\x81<SUF>", "<SUF>"};
constexpr std::array kFimMiddlePieces = {
    "<|fim_middle|>", "<fim_middle>", "<fim-middle>",
    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",  // <｜fim▁end｜>
    "\xE2\x96\x81<MID>", "<MID>"};
constexpr std::array kFimPadPieces = {"<|fim_pad|>", "<fim_pad>", "<fim-pad>"};
constexpr std::array kFimRepoPieces = {"<|repo_name|>", "<repo_name>", "<fim-repo>"};
constexpr std::array kFimSepPieces = {"<|file_sep|>", "<file_sep>"};

// The first id whose piece is one of `names` (in the order of `names`), or -1.
template <size_t N>
int find_piece(const Vocabulary& vocab, const std::array<const char*, N>& names) {
  for (const char* name : names) {
    const auto it = std::find(vocab.pieces.begin(), vocab.pieces.end(), name);
    if (it != vocab.pieces.end()) return static_cast<int>(it - vocab.pieces.begin());
  }
  return -1;
}

void check_vocabulary(const Vocabulary& vocab) {
  if (vocab.empty()) throw std::runtime_error("tokenizer vocabulary is empty");
  if (vocab.kinds.size() != vocab.pieces.size())
    throw std::runtime_error("tokenizer vocabulary is inconsistent: " + std::to_string(vocab.pieces.size()) +
                             " pieces, " + std::to_string(vocab.kinds.size()) + " kinds");
  const auto check_id = [&](const char* what, int id) {
    if (id < -1 || id >= vocab.size())
      throw std::runtime_error(std::string("tokenizer vocabulary: ") + what + " id " + std::to_string(id) +
                               " is outside the vocabulary of " + std::to_string(vocab.size()));
  };
  check_id("BOS", vocab.bos);
  check_id("EOS", vocab.eos);
  check_id("EOT", vocab.eot);
  check_id("EOM", vocab.eom);
  for (int id : vocab.extra_eos) check_id("end-of-generation", id);
  for (int id : {vocab.fim.prefix, vocab.fim.suffix, vocab.fim.middle, vocab.fim.pad, vocab.fim.repo, vocab.fim.sep})
    check_id("fill-in-the-middle", id);
  if (vocab.add_bos && vocab.bos < 0) throw std::runtime_error("tokenizer vocabulary adds a BOS token but has none");
  if (vocab.add_eos && vocab.eos < 0) throw std::runtime_error("tokenizer vocabulary adds an EOS token but has none");
}

// The id from the metadata, else the first piece of `names`.
template <size_t N>
int metadata_or_named(const Vocabulary& vocab, int id, const std::array<const char*, N>& names) {
  return id >= 0 ? id : find_piece(vocab, names);
}

// Bytes `b` starts a sequence of, and the range its second byte must lie in (Unicode's table
// of well-formed UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF).
struct Utf8Lead {
  size_t length = 0;  // 0: not a lead byte
  uint8_t second_lo = 0x80, second_hi = 0xBF;
};

Utf8Lead utf8_lead(uint8_t b) {
  if (b < 0x80) return {1};
  if (b >= 0xC2 && b <= 0xDF) return {2};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {};
}

// How many bytes of the sequence starting at `at` are well-formed so far (up to its length).
size_t utf8_valid_run(std::string_view s, size_t at, const Utf8Lead& lead) {
  size_t n = 1;
  for (; n < lead.length && at + n < s.size(); ++n) {
    const auto c = static_cast<uint8_t>(s[at + n]);
    const bool ok = n == 1 ? c >= lead.second_lo && c <= lead.second_hi : (c & 0xC0) == 0x80;
    if (!ok) break;
  }
  return n;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// UTF-8 and the byte mapping

std::string repair_utf8(std::string_view bytes) {
  std::string text;
  text.reserve(bytes.size());
  for (size_t at = 0; at < bytes.size();) {
    const Utf8Lead lead = utf8_lead(static_cast<uint8_t>(bytes[at]));
    if (lead.length > 0 && utf8_valid_run(bytes, at, lead) == lead.length) {
      text.append(bytes.substr(at, lead.length));
      at += lead.length;
    } else {
      text.append("\xEF\xBF\xBD");  // U+FFFD for this one byte
      ++at;
    }
  }
  return text;
}

size_t complete_utf8_prefix(std::string_view bytes) {
  for (size_t back = 1; back <= std::min<size_t>(3, bytes.size()); ++back) {
    const size_t at = bytes.size() - back;
    const Utf8Lead lead = utf8_lead(static_cast<uint8_t>(bytes[at]));
    if (lead.length == 0) continue;  // a continuation byte (or an invalid one): look further back
    const bool unfinished = lead.length > back && utf8_valid_run(bytes, at, lead) == back;
    return unfinished ? at : bytes.size();
  }
  return bytes.size();
}

bool is_utf8(std::string_view text, size_t* bad_at) {
  for (size_t at = 0; at < text.size();) {
    const Utf8Lead lead = utf8_lead(static_cast<uint8_t>(text[at]));
    if (lead.length == 0 || utf8_valid_run(text, at, lead) != lead.length) {
      if (bad_at) *bad_at = at;
      return false;
    }
    at += lead.length;
  }
  return true;
}

namespace {

// GPT-2's bytes_to_unicode(): code point of every byte.
const std::array<uint32_t, 256>& byte_code_points() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

void append_code_point(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else {  // the mapping stays below U+0800
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace

std::string byte_level_piece(std::string_view bytes) {
  std::string piece;
  for (const char c : bytes) append_code_point(piece, byte_code_points()[static_cast<uint8_t>(c)]);
  return piece;
}

bool byte_level_bytes(std::string_view piece, std::string& bytes) {
  static const std::array<int, 324> byte_of = [] {
    std::array<int, 324> t{};
    t.fill(-1);
    for (int b = 0; b < 256; ++b) t[byte_code_points()[static_cast<size_t>(b)]] = b;
    return t;
  }();
  bytes.clear();
  for (size_t at = 0; at < piece.size();) {
    const auto c = static_cast<uint8_t>(piece[at]);
    uint32_t cp;
    if (c < 0x80) {
      cp = c;
      at += 1;
    } else if ((c & 0xE0) == 0xC0 && at + 1 < piece.size()) {
      cp = (static_cast<uint32_t>(c & 0x1F) << 6) | (static_cast<uint8_t>(piece[at + 1]) & 0x3F);
      at += 2;
    } else {
      return false;
    }
    if (cp >= byte_of.size() || byte_of[cp] < 0) return false;
    bytes.push_back(static_cast<char>(byte_of[cp]));
  }
  return true;
}

// ---------------------------------------------------------------------------------------
// Tokenizer

Tokenizer::Tokenizer(Vocabulary vocab, bool split_user_defined) : vocab_(std::move(vocab)) {
  check_vocabulary(vocab_);

  fim_.prefix = metadata_or_named(vocab_, vocab_.fim.prefix, kFimPrefixPieces);
  fim_.suffix = metadata_or_named(vocab_, vocab_.fim.suffix, kFimSuffixPieces);
  fim_.middle = metadata_or_named(vocab_, vocab_.fim.middle, kFimMiddlePieces);
  fim_.pad = metadata_or_named(vocab_, vocab_.fim.pad, kFimPadPieces);
  fim_.repo = metadata_or_named(vocab_, vocab_.fim.repo, kFimRepoPieces);
  fim_.sep = metadata_or_named(vocab_, vocab_.fim.sep, kFimSepPieces);
  fim_.spm = vocab_.fim.spm;

  std::vector<int> eog = {vocab_.eos, vocab_.eot, vocab_.eom, fim_.pad, fim_.repo, fim_.sep};
  eog.insert(eog.end(), vocab_.extra_eos.begin(), vocab_.extra_eos.end());
  for (int id = 0; id < vocab_.size(); ++id) {
    const std::string& piece = vocab_.pieces[static_cast<size_t>(id)];
    if (std::find(kEndOfGenerationPieces.begin(), kEndOfGenerationPieces.end(), piece) != kEndOfGenerationPieces.end())
      eog.push_back(id);
  }
  std::erase(eog, -1);
  std::sort(eog.begin(), eog.end());
  eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
  end_of_generation_ = std::move(eog);

  special_trie_.resize(1);
  special_roots_.fill(-1);
  for (int id = 0; id < vocab_.size(); ++id) {
    const TokenKind kind = vocab_.kinds[static_cast<size_t>(id)];
    const bool matchable = kind == TokenKind::Control || kind == TokenKind::Unknown ||
                           (kind == TokenKind::UserDefined && split_user_defined);
    if (matchable && !piece(id).empty()) add_special(piece(id), id);
  }
}

void Tokenizer::add_special(const std::string& text, int id) {
  int node = 0;
  for (const char c : text) {
    const auto byte = static_cast<uint8_t>(c);
    auto& children = special_trie_[static_cast<size_t>(node)].children;
    const auto it = std::find_if(children.begin(), children.end(), [&](const auto& child) { return child.first == byte; });
    if (it != children.end()) {
      node = it->second;
      continue;
    }
    const int child = static_cast<int>(special_trie_.size());
    children.emplace_back(byte, child);  // before the trie grows, which moves `children`
    special_trie_.emplace_back();
    if (node == 0) special_roots_[byte] = child;
    node = child;
  }
  // the first id with a given text keeps it (pieces are unique in sane vocabularies)
  if (special_trie_[static_cast<size_t>(node)].id < 0) special_trie_[static_cast<size_t>(node)].id = id;
}

Tokenizer::~Tokenizer() = default;

const char* Tokenizer::model_name() const {
  return vocab_.model == TokenizerModel::ByteLevelBpe ? "bpe" : "sentencepiece";
}

bool Tokenizer::ends_generation(int id) const {
  return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

void Tokenizer::check_ids(std::span<const int> ids) const {
  for (const int id : ids)
    if (id < 0 || id >= vocab_.size())
      throw std::runtime_error("token id " + std::to_string(id) + " is outside the vocabulary of " +
                               std::to_string(vocab_.size()));
}

Tokenizer::SpecialMatch Tokenizer::find_special(std::string_view text, size_t from, bool parse_special) const {
  for (size_t at = from; at < text.size(); ++at) {
    SpecialMatch longest;
    int node = special_roots_[static_cast<uint8_t>(text[at])];
    for (size_t end = at + 1; node >= 0; ++end) {
      const int id = special_trie_[static_cast<size_t>(node)].id;
      if (id >= 0 && (parse_special || vocab_.kinds[static_cast<size_t>(id)] == TokenKind::UserDefined))
        longest = {at, end - at, id};
      if (end == text.size()) break;
      const auto& children = special_trie_[static_cast<size_t>(node)].children;
      const auto byte = static_cast<uint8_t>(text[end]);
      const auto it = std::find_if(children.begin(), children.end(), [&](const auto& child) { return child.first == byte; });
      node = it == children.end() ? -1 : it->second;
    }
    if (longest.id >= 0) return longest;
  }
  return {};
}

std::vector<int> Tokenizer::encode(std::string_view text, bool add_special, bool parse_special) const {
  std::vector<int> ids;
  if (add_special && vocab_.add_bos) ids.push_back(vocab_.bos);
  // Text after a special token starts afresh: SentencePiece gives it its dummy prefix again,
  // as llama.cpp does.
  for (size_t at = 0; at < text.size();) {
    const SpecialMatch match = find_special(text, at, parse_special);
    const size_t end = match.id >= 0 ? match.at : text.size();
    if (end > at) encode_text(text.substr(at, end - at), false, ids);
    if (match.id < 0) break;
    ids.push_back(match.id);
    at = match.at + match.size;
  }
  if (add_special && vocab_.add_eos) ids.push_back(vocab_.eos);
  return ids;
}

void append_fim_parts(std::vector<int>& ids, const FimTokens& fim, const Tokenizer::FimParts& parts, bool spm) {
  const auto append = [&](int sentinel, const std::vector<int>& part) {
    ids.push_back(sentinel);
    ids.insert(ids.end(), part.begin(), part.end());
  };
  if (spm) {
    append(fim.suffix, parts.suffix);
    append(fim.prefix, parts.prefix);
  } else {
    append(fim.prefix, parts.prefix);
    append(fim.suffix, parts.suffix);
  }
  ids.push_back(fim.middle);
}

Tokenizer::FimParts Tokenizer::fim_parts(std::string_view prefix, std::string_view suffix) const {
  FimParts parts;
  encode_text(prefix, false, parts.prefix);
  encode_text(suffix, true, parts.suffix);
  return parts;
}

std::vector<int> Tokenizer::fim_prompt(std::string_view prefix, std::string_view suffix) const {
  if (!fim_.complete())
    throw std::runtime_error("this vocabulary has no fill-in-the-middle tokens (prefix, suffix and middle)");
  const FimParts parts = fim_parts(prefix, suffix);
  std::vector<int> ids;
  if (vocab_.add_bos) ids.push_back(vocab_.bos);
  append_fim_parts(ids, fim_, parts, fim_.spm);
  return ids;
}

std::unique_ptr<Tokenizer> create_tokenizer(Vocabulary vocab) {
  if (vocab.model == TokenizerModel::ByteLevelBpe) return create_bpe_tokenizer(std::move(vocab));
  return create_sentencepiece_tokenizer(std::move(vocab));
}

// ---------------------------------------------------------------------------------------
// IncrementalDecoder

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, std::vector<int> prefix)
    : stream_(tokenizer.decode_stream(std::move(prefix))) {}

IncrementalDecoder::~IncrementalDecoder() = default;
IncrementalDecoder::IncrementalDecoder(IncrementalDecoder&&) noexcept = default;

std::string IncrementalDecoder::push(std::span<const int> tokens) {
  std::string delta = stream_->push(tokens);
  emitted_ += delta;
  return delta;
}

std::string IncrementalDecoder::finish() {
  std::string delta = stream_->finish();
  emitted_ += delta;
  return delta;
}

}  // namespace specula
