// Standalone tokenizer files: SentencePiece tokenizer.model, llama2.c tokenizer.bin and
// Llama-style Hugging Face tokenizer.json, recognised by their content.
#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "model/tokenizer.h"
#include "model/tokenizer_internal.h"

namespace specula {

namespace {

using nlohmann::json;

const std::string kSpace = "\xE2\x96\x81";  // "▁", SentencePiece's visible space

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open tokenizer file " + path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

bool is_byte_piece(std::string_view piece) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); };
  return piece.size() == 6 && piece.substr(0, 3) == "<0x" && hex(piece[3]) && hex(piece[4]) &&
         piece[5] == '>';
}

std::string replace_all(std::string text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// llama2.c's tokenizer.bin: int32 max_token_length, then per token float32 score, int32
// length, bytes. It has no token types and writes '▁' as ' '. Returns nullopt when the bytes
// are not exactly such a file (every length within 1..max_token_length, ending at EOF).
std::optional<Vocabulary> parse_llama2c(const std::string& bytes) {
  auto read_i32 = [&](size_t at) {
    int32_t v;
    std::memcpy(&v, bytes.data() + at, 4);
    return v;
  };
  if (bytes.size() < 4) return std::nullopt;
  const int32_t max_length = read_i32(0);
  if (max_length < 1 || max_length > 4096) return std::nullopt;
  Vocabulary vocab;
  size_t at = 4;
  while (at < bytes.size()) {
    if (bytes.size() - at < 8) return std::nullopt;
    float score;
    std::memcpy(&score, bytes.data() + at, 4);
    const int32_t length = read_i32(at + 4);
    at += 8;
    if (length < 1 || length > max_length || bytes.size() - at < static_cast<size_t>(length))
      return std::nullopt;
    vocab.pieces.emplace_back(bytes.data() + at, static_cast<size_t>(length));
    vocab.scores.push_back(score);
    at += static_cast<size_t>(length);
  }
  if (vocab.size() < 3) return std::nullopt;
  // Ids 0, 1, 2 are <unk>, <s>, </s> in every llama2.c export (stored as "\n<s>\n" there).
  vocab.pieces[0] = "<unk>";
  vocab.pieces[1] = "<s>";
  vocab.pieces[2] = "</s>";
  vocab.kinds = {TokenKind::Unknown, TokenKind::Control, TokenKind::Control};
  int byte_pieces = 0;
  for (size_t id = 3; id < vocab.pieces.size(); ++id) {
    std::string& piece = vocab.pieces[id];
    if (is_byte_piece(piece)) {
      vocab.kinds.push_back(TokenKind::Byte);
      ++byte_pieces;
    } else {
      piece = replace_all(piece, " ", kSpace);
      vocab.kinds.push_back(TokenKind::Normal);
    }
  }
  vocab.unk = 0;
  vocab.bos = 1;
  vocab.eos = 2;
  vocab.byte_fallback = byte_pieces == 256;
  return vocab;
}

// A special token named in tokenizer_config.json: "<s>" or {"content": "<s>", ...}.
std::optional<std::string> special_token_name(const json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const json& value = config.at(key);
  if (value.is_string()) return value.get<std::string>();
  if (value.is_object() && value.contains("content") && value.at("content").is_string())
    return value.at("content").get<std::string>();
  return std::nullopt;
}

bool mentions_type(const json& node, std::string_view type) {
  if (node.is_object()) {
    if (node.contains("type") && node.at("type") == type) return true;
    for (const auto& [key, child] : node.items())
      if (mentions_type(child, type)) return true;
  } else if (node.is_array()) {
    for (const auto& child : node)
      if (mentions_type(child, type)) return true;
  }
  return false;
}

// Whether the normalizer or pre-tokenizer prepends "▁" the way SentencePiece's dummy prefix does.
bool prepends_space(const json& doc) {
  bool found = false;
  auto visit = [&](const json& node, auto&& self) -> void {
    if (node.is_object()) {
      if (node.value("type", "") == "Prepend" && node.value("prepend", "") == kSpace) found = true;
      if (node.value("type", "") == "Metaspace" &&
          (node.value("add_prefix_space", false) ||
           (node.contains("prepend_scheme") && node.at("prepend_scheme") != "never")))
        found = true;
      for (const auto& [key, child] : node.items()) self(child, self);
    } else if (node.is_array()) {
      for (const auto& child : node) self(child, self);
    }
  };
  if (doc.contains("normalizer")) visit(doc.at("normalizer"), visit);
  if (doc.contains("pre_tokenizer")) visit(doc.at("pre_tokenizer"), visit);
  return found;
}

// A Llama-style Hugging Face tokenizer.json: BPE over "▁"-escaped text with byte fallback.
// SentencePiece's BPE merges the adjacent pair whose result has the highest score, so the
// score of a piece is minus the rank of the merge that creates it: merge order is preserved.
Vocabulary parse_tokenizer_json(const std::string& bytes, const std::string& path) {
  json doc;
  try {
    doc = json::parse(bytes);
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": not valid JSON: " + e.what());
  }
  try {
    if (!doc.is_object() || !doc.contains("model"))
      throw std::runtime_error("no \"model\" section, not a Hugging Face tokenizer.json");
    const json& model = doc.at("model");
    const std::string type = model.value("type", "");
    if (type != "BPE")
      throw std::runtime_error("model type \"" + type +
                               "\" is not supported (only SentencePiece-style BPE)");
    if (mentions_type(doc.value("pre_tokenizer", json()), "ByteLevel"))
      throw std::runtime_error(
          "byte-level BPE (GPT-2 style) is not SentencePiece-compatible; only Llama-style "
          "tokenizers with \xE2\x96\x81 pieces are supported");

    const json& pieces_by_name = model.at("vocab");
    Vocabulary vocab;
    const size_t n = pieces_by_name.size();
    vocab.pieces.assign(n, {});
    for (const auto& [piece, id_value] : pieces_by_name.items()) {
      const int64_t id = id_value.get<int64_t>();
      if (id < 0 || static_cast<size_t>(id) >= n || !vocab.pieces[static_cast<size_t>(id)].empty())
        throw std::runtime_error("vocabulary ids are not 0.." + std::to_string(n - 1) +
                                 " without gaps (piece \"" + piece + "\")");
      vocab.pieces[static_cast<size_t>(id)] = piece;
    }
    std::unordered_map<std::string, int> id_of;
    for (size_t id = 0; id < n; ++id) id_of.emplace(vocab.pieces[id], static_cast<int>(id));

    vocab.scores.assign(n, 0.0f);
    std::vector<bool> scored(n, false);
    const json& merges = model.at("merges");
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const json& merge = merges[rank];
      std::string merged;
      if (merge.is_string()) {
        const std::string text = merge.get<std::string>();
        const size_t space = text.find(' ');
        if (space == std::string::npos) throw std::runtime_error("merge \"" + text + "\" has no space");
        merged = text.substr(0, space) + text.substr(space + 1);
      } else {
        merged = merge.at(0).get<std::string>() + merge.at(1).get<std::string>();
      }
      const auto it = id_of.find(merged);
      if (it == id_of.end())
        throw std::runtime_error("merge " + merge.dump() + " makes a piece not in the vocabulary");
      const size_t id = static_cast<size_t>(it->second);
      if (!scored[id]) {
        vocab.scores[id] = -static_cast<float>(rank);
        scored[id] = true;
      }
    }

    vocab.kinds.assign(n, TokenKind::Normal);
    for (size_t id = 0; id < n; ++id)
      if (is_byte_piece(vocab.pieces[id])) vocab.kinds[id] = TokenKind::Byte;
    for (const json& added : doc.value("added_tokens", json::array())) {
      const size_t id = added.at("id").get<size_t>();
      if (id >= n) throw std::runtime_error("added token id " + std::to_string(id) + " is outside the vocabulary");
      vocab.kinds[id] = added.value("special", false) ? TokenKind::Control : TokenKind::UserDefined;
    }
    const std::string unk = model.value("unk_token", json()).is_string()
                                ? model.at("unk_token").get<std::string>() : "";
    if (!id_of.contains(unk)) throw std::runtime_error("no unknown token (model.unk_token)");
    vocab.unk = id_of.at(unk);
    vocab.kinds[static_cast<size_t>(vocab.unk)] = TokenKind::Unknown;

    // BOS/EOS: tokenizer_config.json beside the file names them; otherwise the BOS the
    // post-processor inserts, and the conventional "<s>" / "</s>".
    json config;
    const auto config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
    if (std::ifstream in(config_path); in) config = json::parse(in, nullptr, false);
    if (config.is_discarded() || !config.is_object()) config = json::object();
    auto id_named = [&](const std::optional<std::string>& name) {
      return name && id_of.contains(*name) ? id_of.at(*name) : -1;
    };
    vocab.bos = id_named(special_token_name(config, "bos_token"));
    if (vocab.bos < 0 && doc.contains("post_processor") && doc.at("post_processor").is_object()) {
      for (const json& item : doc.at("post_processor").value("single", json::array()))
        if (item.contains("SpecialToken")) {
          vocab.bos = id_named(item.at("SpecialToken").value("id", ""));
          break;
        }
    }
    if (vocab.bos < 0) vocab.bos = id_named("<s>");
    vocab.eos = id_named(special_token_name(config, "eos_token"));
    if (vocab.eos < 0) vocab.eos = id_named("</s>");
    vocab.pad = id_named(special_token_name(config, "pad_token"));
    vocab.add_bos = config.value("add_bos_token", vocab.bos >= 0);
    vocab.add_dummy_prefix = prepends_space(doc);
    // SentencePiece falls back to bytes only with all 256 <0xNN> pieces; without them
    // (as in vocabularies that set the flag but have no byte pieces) it gives <unk>, as
    // Hugging Face does.
    vocab.byte_fallback = model.value("byte_fallback", false) &&
                          std::count(vocab.kinds.begin(), vocab.kinds.end(), TokenKind::Byte) == 256;
    return vocab;
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": malformed tokenizer.json: " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

}  // namespace

Vocabulary load_vocabulary(const std::string& path) {
  const std::string bytes = read_file(path);
  if (bytes.empty()) throw std::runtime_error(path + ": tokenizer file is empty");
  if (bytes.compare(0, 4, "GGUF") == 0)
    throw std::runtime_error(path + ": is a GGUF model file, not a tokenizer file; its vocabulary "
                                    "is read together with the model");
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && bytes[first] == '{') return parse_tokenizer_json(bytes, path);
  if (auto vocab = parse_llama2c(bytes)) return *std::move(vocab);
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (const auto status = processor->LoadFromSerializedProto(bytes); !status.ok())
    throw std::runtime_error(path +
                             ": not a tokenizer file (expected a SentencePiece tokenizer.model, "
                             "a llama2.c tokenizer.bin or a tokenizer.json); as a SentencePiece "
                             "model: " + status.ToString());
  return vocabulary_from_processor(*processor, bytes);
}

}  // namespace specula
