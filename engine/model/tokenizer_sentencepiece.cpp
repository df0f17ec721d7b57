// The SentencePiece tokenizer: the SentencePiece library, the ModelProto writer and its
// streaming decode.
#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <stdexcept>
#include <unordered_set>

#include "model/tokenizer_internal.h"

namespace specula {

namespace {

// Protobuf wire format: every field is a key (field number << 3 | wire type) and a value.
// Wire type 0 is a base-128 little-endian varint, 2 is length-prefixed bytes, 5 is 4 bytes.
void put_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type));
}

// int32 and enum fields; a negative int32 is sign-extended to 10 bytes, as protobuf does.
void put_int(std::string& out, int field, int64_t value) {
  put_key(out, field, 0);
  put_varint(out, static_cast<uint64_t>(value));
}

void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

void put_float(std::string& out, int field, float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  put_key(out, field, 5);
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

// Field numbers of SentencePiece's sentencepiece_model.proto.
namespace proto {
constexpr int kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr int kPiecePiece = 1, kPieceScore = 2, kPieceType = 3;
constexpr int kTrainerModelType = 3, kTrainerVocabSize = 4, kTrainerByteFallback = 35;
constexpr int kTrainerUnkId = 40, kTrainerBosId = 41, kTrainerEosId = 42, kTrainerPadId = 43;
constexpr int kTrainerUnkPiece = 45, kTrainerBosPiece = 46, kTrainerEosPiece = 47,
              kTrainerPadPiece = 48;
constexpr int kNormalizerName = 1, kNormalizerAddDummyPrefix = 3,
              kNormalizerRemoveExtraWhitespaces = 4, kNormalizerEscapeWhitespaces = 5;
constexpr int kModelTypeBpe = 2;
}  // namespace proto

// An id field of TrainerSpec: SentencePiece uses -1 for "absent".
int id_or_absent(const Vocabulary& vocab, int id) { return id >= 0 && id < vocab.size() ? id : -1; }

// The byte a `<0xNN>` piece stands for (0 for a malformed piece, which SentencePiece rejects).
uint8_t byte_of_piece(const std::string& piece) {
  if (piece.size() != 6 || piece.compare(0, 3, "<0x") != 0 || piece[5] != '>') return 0;
  return static_cast<uint8_t>(std::strtoul(piece.substr(3, 2).c_str(), nullptr, 16));
}

// Reads protobuf wire format: the fields of one message, in order.
struct WireReader {
  std::string_view data;
  size_t at = 0;

  bool varint(uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64 && at < data.size(); shift += 7) {
      const auto byte = static_cast<uint8_t>(data[at++]);
      value |= static_cast<uint64_t>(byte & 0x7F) << shift;
      if (byte < 0x80) return true;
    }
    return false;
  }

  // The next field: its number, wire type, and the varint value or the bytes it holds.
  bool next(uint64_t& field, uint64_t& wire_type, uint64_t& value, std::string_view& bytes) {
    uint64_t key;
    if (at >= data.size() || !varint(key)) return false;
    field = key >> 3;
    wire_type = key & 7;
    switch (wire_type) {
      case 0: return varint(value);
      case 1: case 5: {
        const size_t size = wire_type == 1 ? 8 : 4;
        if (data.size() - at < size) return false;
        at += size;
        return true;
      }
      case 2:
        if (!varint(value) || data.size() - at < value) return false;
        bytes = data.substr(at, value);
        at += value;
        return true;
      default: return false;
    }
  }
};

// NormalizerSpec.add_dummy_prefix of a serialized ModelProto (true when absent, as in proto).
bool adds_dummy_prefix(std::string_view model) {
  uint64_t field, wire_type, value;
  std::string_view bytes;
  for (WireReader top{model}; top.next(field, wire_type, value, bytes);) {
    if (field != proto::kModelNormalizerSpec || wire_type != 2) continue;
    for (WireReader spec{bytes}; spec.next(field, wire_type, value, bytes);)
      if (field == proto::kNormalizerAddDummyPrefix && wire_type == 0) return value != 0;
  }
  return true;
}

// SentencePiece.type of every piece of a serialized ModelProto (NORMAL when absent). The
// processor's API cannot tell user-defined pieces from normal ones; the proto can.
std::vector<TokenKind> piece_kinds(std::string_view model) {
  std::vector<TokenKind> kinds;
  uint64_t field, wire_type, value;
  std::string_view bytes;
  for (WireReader top{model}; top.next(field, wire_type, value, bytes);) {
    if (field != proto::kModelPieces || wire_type != 2) continue;
    TokenKind kind = TokenKind::Normal;
    for (WireReader piece{bytes}; piece.next(field, wire_type, value, bytes);)
      if (field == proto::kPieceType && wire_type == 0 && value >= 1 && value <= 6)
        kind = static_cast<TokenKind>(value);
    kinds.push_back(kind);
  }
  return kinds;
}

// The same serialized ModelProto with NormalizerSpec.add_dummy_prefix off: for text that
// continues after a token, which SentencePiece must not give a leading "▁".
std::string without_dummy_prefix(std::string_view model) {
  std::string out;
  bool rewrote = false;
  uint64_t field, wire_type, value;
  std::string_view bytes;
  WireReader top{model};
  for (size_t start = top.at; top.next(field, wire_type, value, bytes); start = top.at) {
    if (field != proto::kModelNormalizerSpec || wire_type != 2) {
      out.append(model.substr(start, top.at - start));
      continue;
    }
    std::string spec;
    uint64_t inner_field, inner_type, inner_value;
    std::string_view inner_bytes;
    WireReader inner{bytes};
    for (size_t from = inner.at; inner.next(inner_field, inner_type, inner_value, inner_bytes); from = inner.at)
      if (inner_field != proto::kNormalizerAddDummyPrefix) spec.append(bytes.substr(from, inner.at - from));
    put_int(spec, proto::kNormalizerAddDummyPrefix, 0);
    put_bytes(out, proto::kModelNormalizerSpec, spec);
    rewrote = true;
  }
  if (!rewrote) {
    std::string spec;
    put_int(spec, proto::kNormalizerAddDummyPrefix, 0);
    put_bytes(out, proto::kModelNormalizerSpec, spec);
  }
  return out;
}

// A piece of spaces alone (Gemma's user-defined pieces of 2-31 spaces, stored in GGUF with
// real spaces): SentencePiece turns every space of the text into "▁" before matching, so as
// stored such a piece could never match.
bool spaces_only(const std::string& piece) {
  return piece.find_first_not_of(' ') == std::string::npos;
}

// How a piece goes into the ModelProto: spelled, typed and scored for SentencePiece.
struct ProtoPiece {
  std::string piece;
  float score;
  TokenKind kind;
};

// The pieces as SentencePiece must see them to tokenize as Hugging Face does. Pieces of spaces
// alone are respelled with "▁" and made normal pieces that merge before every other: transformers'
// GGUF builder for Gemma (GemmaTokenizer) respells them so and ranks its BPE merges by vocabulary
// order, where they come before every normal piece (whose scores fall with the id), so a run of
// spaces merges first ("    return" is "    " + "return", 40 spaces are 16 + 24). A respelling
// that another piece already has is left as stored. The unknown id's piece is typed UNKNOWN, as
// SentencePiece needs: Gemma's GGUF files type their <unk> (tokenizer.ggml.unknown_token_id 3)
// as a control token, as llama.cpp accepts.
std::vector<ProtoPiece> proto_pieces(const Vocabulary& vocab) {
  std::vector<ProtoPiece> out;
  out.reserve(vocab.pieces.size());
  float top_normal = -std::numeric_limits<float>::infinity();
  std::unordered_set<std::string_view> spellings;
  for (size_t i = 0; i < vocab.pieces.size(); ++i) {
    spellings.insert(vocab.pieces[i]);
    if (vocab.kinds[i] == TokenKind::Normal) top_normal = std::max(top_normal, vocab.scores[i]);
  }
  std::vector<size_t> respelled;
  for (int id = 0; id < vocab.size(); ++id) {
    const size_t i = static_cast<size_t>(id);
    ProtoPiece p{.piece = vocab.pieces[i],
                 .score = vocab.scores[i],
                 .kind = id == vocab.unk ? TokenKind::Unknown : vocab.kinds[i]};
    if (spaces_only(p.piece) && p.kind != TokenKind::Unknown) {
      std::string escaped;
      for (size_t c = 0; c < p.piece.size(); ++c) escaped += "\xE2\x96\x81";  // ▁
      if (!spellings.contains(escaped)) {
        p.piece = std::move(escaped);
        p.kind = TokenKind::Normal;
        respelled.push_back(i);
      }
    }
    out.push_back(std::move(p));
  }
  if (top_normal == -std::numeric_limits<float>::infinity()) top_normal = 0.0f;
  for (size_t k = 0; k < respelled.size(); ++k) {  // above every normal piece, in id order
    out[respelled[k]].score = top_normal + static_cast<float>(respelled.size() - k);
  }
  return out;
}

}  // namespace

std::string serialize_sentencepiece_model(const Vocabulary& vocab) {
  if (vocab.empty()) throw std::runtime_error("tokenizer vocabulary is empty");
  if (vocab.scores.size() != vocab.pieces.size() || vocab.kinds.size() != vocab.pieces.size())
    throw std::runtime_error("tokenizer vocabulary is inconsistent: " +
                             std::to_string(vocab.pieces.size()) + " pieces, " +
                             std::to_string(vocab.scores.size()) + " scores, " +
                             std::to_string(vocab.kinds.size()) + " kinds");
  for (int id = 0; id < vocab.size(); ++id)
    if (vocab.pieces[static_cast<size_t>(id)].empty())
      throw std::runtime_error("tokenizer vocabulary has an empty piece at id " +
                               std::to_string(id));

  std::string model;
  for (const ProtoPiece& p : proto_pieces(vocab)) {
    std::string piece;
    put_bytes(piece, proto::kPiecePiece, p.piece);
    put_float(piece, proto::kPieceScore, p.score);
    put_int(piece, proto::kPieceType, static_cast<int32_t>(p.kind));
    put_bytes(model, proto::kModelPieces, piece);
  }

  std::string trainer;
  put_int(trainer, proto::kTrainerModelType, proto::kModelTypeBpe);
  put_int(trainer, proto::kTrainerVocabSize, vocab.size());
  put_int(trainer, proto::kTrainerByteFallback, vocab.byte_fallback ? 1 : 0);
  const int ids[4] = {id_or_absent(vocab, vocab.unk), id_or_absent(vocab, vocab.bos),
                      id_or_absent(vocab, vocab.eos), id_or_absent(vocab, vocab.pad)};
  const int id_fields[4] = {proto::kTrainerUnkId, proto::kTrainerBosId, proto::kTrainerEosId,
                            proto::kTrainerPadId};
  const int piece_fields[4] = {proto::kTrainerUnkPiece, proto::kTrainerBosPiece,
                               proto::kTrainerEosPiece, proto::kTrainerPadPiece};
  for (int k = 0; k < 4; ++k) {
    put_int(trainer, id_fields[k], ids[k]);
    if (ids[k] >= 0) put_bytes(trainer, piece_fields[k], vocab.pieces[static_cast<size_t>(ids[k])]);
  }
  put_bytes(model, proto::kModelTrainerSpec, trainer);

  // "identity": no Unicode normalization and whitespace kept exactly (only ' ' -> '▁').
  std::string normalizer;
  put_bytes(normalizer, proto::kNormalizerName, "identity");
  put_int(normalizer, proto::kNormalizerAddDummyPrefix, vocab.add_dummy_prefix ? 1 : 0);
  put_int(normalizer, proto::kNormalizerRemoveExtraWhitespaces, 0);
  put_int(normalizer, proto::kNormalizerEscapeWhitespaces, 1);
  put_bytes(model, proto::kModelNormalizerSpec, normalizer);
  return model;
}

std::unique_ptr<sentencepiece::SentencePieceProcessor> load_sentencepiece(
    std::string_view serialized, const std::string& what) {
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = processor->LoadFromSerializedProto(serialized);
  if (!status.ok())
    throw std::runtime_error(what + ": SentencePiece cannot load the model: " +
                             status.ToString());
  return processor;
}

Vocabulary vocabulary_from_processor(const sentencepiece::SentencePieceProcessor& processor,
                                     std::string serialized) {
  Vocabulary vocab;
  const int n = processor.GetPieceSize();
  vocab.pieces.reserve(static_cast<size_t>(n));
  vocab.scores.reserve(static_cast<size_t>(n));
  for (int id = 0; id < n; ++id) {
    vocab.pieces.push_back(processor.IdToPiece(id));
    vocab.scores.push_back(processor.GetScore(id));
  }
  vocab.kinds = piece_kinds(serialized);
  if (vocab.kinds.size() != vocab.pieces.size())
    throw std::runtime_error("tokenizer model lists " + std::to_string(vocab.kinds.size()) +
                             " piece types for " + std::to_string(n) + " pieces");
  const auto byte_pieces = std::count(vocab.kinds.begin(), vocab.kinds.end(), TokenKind::Byte);
  vocab.unk = processor.unk_id();
  vocab.bos = processor.bos_id();
  vocab.eos = processor.eos_id();
  vocab.pad = processor.pad_id();
  vocab.add_bos = vocab.bos >= 0;
  vocab.byte_fallback = byte_pieces == 256;
  vocab.add_dummy_prefix = adds_dummy_prefix(serialized);
  vocab.serialized_model = std::move(serialized);
  return vocab;
}


namespace {

// How many leading ids of `ids` decode to text that no later id can change. SentencePiece
// turns a run of byte pieces into UTF-8 as a whole, so a trailing run that ends inside a
// multi-byte character is held back until the character completes (or proves invalid).
size_t final_prefix_length(const Vocabulary& vocab, std::span<const int> ids) {
  size_t run_start = ids.size();
  while (run_start > 0 && vocab.kinds[static_cast<size_t>(ids[run_start - 1])] == TokenKind::Byte)
    --run_start;
  const size_t n = ids.size() - run_start;
  // The last byte that is not a continuation byte (10xxxxxx) among the last four.
  for (size_t back = 1; back <= std::min<size_t>(n, 4); ++back) {
    const size_t at = ids.size() - back;
    const uint8_t b = byte_of_piece(vocab.pieces[static_cast<size_t>(ids[at])]);
    if ((b & 0xC0) == 0x80) continue;
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return need > back ? at : ids.size();
  }
  return ids.size();
}

class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(Vocabulary vocab) : Tokenizer(std::move(vocab), false) {
    if (!vocab_.serialized_model.empty()) {
      processor_ = load_sentencepiece(vocab_.serialized_model, "tokenizer model");
      if (processor_->GetPieceSize() != vocab_.size())
        throw std::runtime_error("tokenizer model has " + std::to_string(processor_->GetPieceSize()) +
                                 " pieces but the vocabulary lists " + std::to_string(vocab_.size()));
    } else {
      processor_ = load_sentencepiece(serialize_sentencepiece_model(vocab_), "tokenizer vocabulary");
    }
  }

  std::string decode(std::span<const int> ids) const override {
    check_ids(ids);
    std::string text;
    const auto status = processor_->Decode(std::vector<int>(ids.begin(), ids.end()), &text);
    if (!status.ok()) throw std::runtime_error("tokenizer cannot decode ids: " + status.ToString());
    return text;
  }

  std::unique_ptr<DecodeStream> decode_stream(std::vector<int> prefix) const override;

 protected:
  void encode_text(std::string_view text, bool continuation, std::vector<int>& out) const override {
    std::vector<int> pieces;
    const auto status = processor(continuation).Encode(text, &pieces);
    if (!status.ok()) throw std::runtime_error("tokenizer cannot encode text: " + status.ToString());
    out.insert(out.end(), pieces.begin(), pieces.end());
  }

 private:
  // The processor for text that starts the input, or for text that continues after a token
  // (made on first use: only fill-in-the-middle prompts need it).
  const sentencepiece::SentencePieceProcessor& processor(bool continuation) const {
    if (!continuation || !vocab_.add_dummy_prefix) return *processor_;
    std::call_once(continuation_once_, [&] {
      const std::string model = vocab_.serialized_model.empty() ? serialize_sentencepiece_model(vocab_)
                                                                : vocab_.serialized_model;
      continuation_ = load_sentencepiece(without_dummy_prefix(model), "tokenizer model without dummy prefix");
    });
    return *continuation_;
  }

  std::unique_ptr<sentencepiece::SentencePieceProcessor> processor_;
  mutable std::once_flag continuation_once_;
  mutable std::unique_ptr<sentencepiece::SentencePieceProcessor> continuation_;
};

// Streaming decode over the SentencePiece library: only the ids after the last anchor are
// decoded again on each push, so a push costs the same however long the text grows.
class SentencePieceStream : public DecodeStream {
 public:
  SentencePieceStream(const Tokenizer& tokenizer, std::vector<int> prefix)
      : tokenizer_(tokenizer), tokens_(std::move(prefix)) {
    const size_t final_ids = final_prefix_length(tokenizer_.vocabulary(), tokens_);
    prefix_text_size_ = window_text(final_ids).size();
    advance_window(final_ids);
  }

  std::string push(std::span<const int> tokens) override {
    tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
    return take(final_prefix_length(tokenizer_.vocabulary(), tokens_));
  }

  std::string finish() override { return take(tokens_.size()); }

 private:
  // The text of tokens_[window_, end) that follows the anchor.
  std::string window_text(size_t end) const {
    const auto window = std::span<const int>(tokens_).subspan(window_, end - window_);
    return tokenizer_.decode(window).substr(anchor_text_size_);
  }

  // Moves the window to the last anchor among the final ids: a normal piece that decodes to
  // text on its own. Byte runs and the leading-space rule of the first piece end before it.
  void advance_window(size_t final_ids) {
    const Vocabulary& vocab = tokenizer_.vocabulary();
    for (size_t at = final_ids; at-- > window_ + 1;) {
      const TokenKind kind = vocab.kinds[static_cast<size_t>(tokens_[at])];
      if (kind != TokenKind::Normal && kind != TokenKind::UserDefined) continue;
      const size_t anchor_size = tokenizer_.decode(std::span<const int>(tokens_).subspan(at, 1)).size();
      if (anchor_size == 0) continue;
      window_offset_ += window_text(at + 1).size();
      window_ = at;
      anchor_text_size_ = anchor_size;
      return;
    }
  }

  std::string take(size_t final_ids) {
    const std::string text = window_text(final_ids);
    const size_t done = prefix_text_size_ + emitted_size_ - window_offset_;  // of `text`
    std::string delta = text.size() > done ? text.substr(done) : std::string();
    emitted_size_ += delta.size();
    advance_window(final_ids);
    return delta;
  }

  const Tokenizer& tokenizer_;
  std::vector<int> tokens_;       // (prefix + pushed) every id seen so far
  // Only tokens_[window_, end) are decoded again on each push. When window_ > 0,
  // tokens_[window_] is an anchor: a final piece with visible text of its own, after which
  // SentencePiece decodes independently of everything before it.
  size_t window_ = 0;
  size_t window_offset_ = 0;      // bytes of the full text up to and including the anchor
  size_t anchor_text_size_ = 0;   // bytes the anchor decodes to when it comes first
  size_t prefix_text_size_ = 0;   // bytes of the prefix's final text, never emitted
  size_t emitted_size_ = 0;       // bytes of every delta returned
};

std::unique_ptr<DecodeStream> SentencePieceTokenizer::decode_stream(std::vector<int> prefix) const {
  check_ids(prefix);
  return std::make_unique<SentencePieceStream>(*this, std::move(prefix));
}

}  // namespace

std::unique_ptr<Tokenizer> create_sentencepiece_tokenizer(Vocabulary vocab) {
  // A tokenizer.model given alone: its pieces, scores and kinds come from the model itself.
  if (!vocab.serialized_model.empty() && vocab.empty()) {
    std::string serialized = std::move(vocab.serialized_model);
    vocab = vocabulary_from_processor(*load_sentencepiece(serialized, "tokenizer model"), std::move(serialized));
  }
  return std::make_unique<SentencePieceTokenizer>(std::move(vocab));
}

}  // namespace specula
