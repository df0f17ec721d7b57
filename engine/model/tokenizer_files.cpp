// Standalone tokenizer files, recognised by their content: SentencePiece tokenizer.model,
// llama2.c tokenizer.bin, Hugging Face tokenizer.json (Llama-style or byte-level BPE) and
// tiktoken ranks; and the vocabulary of a model file or directory.
#include <sentencepiece_processor.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "model/gguf.h"
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

// The files beside a tokenizer.json that name its special tokens.
struct TokenizerConfigs {
  json tokenizer_config = json::object();   // tokenizer_config.json: bos/eos names, add_bos_token
  json generation_config = json::object();  // generation_config.json: eos_token_id (one or a list)
};

TokenizerConfigs read_configs(const std::string& path) {
  TokenizerConfigs configs;
  const auto dir = std::filesystem::path(path).parent_path();
  for (auto [name, target] : {std::pair{"tokenizer_config.json", &configs.tokenizer_config},
                              std::pair{"generation_config.json", &configs.generation_config}}) {
    std::ifstream in(dir / name);
    if (!in) continue;
    json value = json::parse(in, nullptr, false);
    if (!value.is_discarded() && value.is_object()) *target = std::move(value);
  }
  return configs;
}

// generation_config.json's end-of-generation ids: "eos_token_id": 2 or [128001, 128009].
std::vector<int> generation_eos(const json& config, size_t n) {
  std::vector<int> ids;
  const json value = config.value("eos_token_id", json());
  for (const json& id : value.is_array() ? value : json::array({value}))
    if (id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<size_t>() < n) ids.push_back(id.get<int>());
  return ids;
}

// The pieces of model.vocab by id. `added` tokens may extend the ids beyond the vocab;
// ids neither names become "[PADn]" (unused), as llama.cpp's converter writes them.
std::vector<std::string> pieces_by_id(const json& model, const json& added, bool allow_gaps) {
  const json& by_name = model.at("vocab");
  size_t n = by_name.size();
  for (const json& token : added) n = std::max(n, token.at("id").get<size_t>() + 1);
  std::vector<std::string> pieces(n);
  std::vector<bool> named(n, false);
  for (const auto& [piece, id_value] : by_name.items()) {
    const int64_t id = id_value.get<int64_t>();
    if (id < 0 || static_cast<size_t>(id) >= n || named[static_cast<size_t>(id)])
      throw std::runtime_error("vocabulary ids are not 0.." + std::to_string(n - 1) +
                               " without repeats (piece \"" + piece + "\")");
    pieces[static_cast<size_t>(id)] = piece;
    named[static_cast<size_t>(id)] = true;
  }
  for (const json& token : added) named[token.at("id").get<size_t>()] = true;
  for (size_t id = 0; id < n; ++id) {
    if (named[id]) continue;
    if (!allow_gaps) throw std::runtime_error("vocabulary ids have a gap at " + std::to_string(id));
    pieces[id] = "[PAD" + std::to_string(id) + "]";
  }
  return pieces;
}

// A merges entry as "left right": the string form, or the pair form of newer files.
std::string merge_text(const json& merge) {
  if (merge.is_string()) return merge.get<std::string>();
  if (merge.is_array() && merge.size() == 2) return merge.at(0).get<std::string>() + " " + merge.at(1).get<std::string>();
  throw std::runtime_error("merge " + merge.dump() + " is neither \"a b\" nor [\"a\", \"b\"]");
}

// BOS/EOS ids: tokenizer_config.json names them; otherwise the tokens the post-processor's
// template puts before and after the text; EOS also from generation_config.json.
void special_ids(const json& doc, const TokenizerConfigs& configs, const std::unordered_map<std::string, int>& id_of,
                 Vocabulary& vocab) {
  auto id_named = [&](const std::optional<std::string>& name) {
    return name && id_of.contains(*name) ? id_of.at(*name) : -1;
  };
  int template_bos = -1, template_eos = -1;
  auto visit = [&](const json& node, auto&& self) -> void {
    if (!node.is_object()) return;
    if (node.value("type", "") == "TemplateProcessing" && node.contains("single")) {
      const json& single = node.at("single");
      if (!single.empty() && single.front().contains("SpecialToken"))
        template_bos = id_named(single.front().at("SpecialToken").value("id", ""));
      if (single.size() > 1 && single.back().contains("SpecialToken"))
        template_eos = id_named(single.back().at("SpecialToken").value("id", ""));
    }
    for (const json& child : node.value("processors", json::array())) self(child, self);
  };
  visit(doc.value("post_processor", json()), visit);

  const json& config = configs.tokenizer_config;
  const int named_bos = id_named(special_token_name(config, "bos_token"));
  const int named_eos = id_named(special_token_name(config, "eos_token"));
  const std::vector<int> generation = generation_eos(configs.generation_config, vocab.pieces.size());
  vocab.bos = named_bos >= 0 ? named_bos : template_bos;
  vocab.eos = named_eos >= 0 ? named_eos : template_eos >= 0 ? template_eos : generation.empty() ? -1 : generation.front();
  vocab.extra_eos = generation;
  vocab.pad = id_named(special_token_name(config, "pad_token"));
  vocab.add_bos = config.value("add_bos_token", template_bos >= 0) && vocab.bos >= 0;
  vocab.add_eos = config.value("add_eos_token", template_eos >= 0) && vocab.eos >= 0;
}

// A Llama-style Hugging Face tokenizer.json: BPE over "▁"-escaped text with byte fallback.
// SentencePiece's BPE merges the adjacent pair whose result has the highest score, so the
// score of a piece is minus the rank of the merge that creates it: merge order is preserved.
Vocabulary sentencepiece_tokenizer_json(const json& doc, const TokenizerConfigs& configs) {
  const json& model = doc.at("model");
  const json added = doc.value("added_tokens", json::array());
  Vocabulary vocab;
  vocab.pieces = pieces_by_id(model, json::array(), false);
  const size_t n = vocab.pieces.size();
  std::unordered_map<std::string, int> id_of;
  for (size_t id = 0; id < n; ++id) id_of.emplace(vocab.pieces[id], static_cast<int>(id));

  vocab.scores.assign(n, 0.0f);
  std::vector<bool> scored(n, false);
  const json& merges = model.at("merges");
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string text = merge_text(merges[rank]);
    const size_t space = text.find(' ');
    if (space == std::string::npos) throw std::runtime_error("merge \"" + text + "\" has no space");
    const std::string merged = text.substr(0, space) + text.substr(space + 1);
    const auto it = id_of.find(merged);
    if (it == id_of.end())
      throw std::runtime_error("merge " + merges[rank].dump() + " makes a piece not in the vocabulary");
    const size_t id = static_cast<size_t>(it->second);
    if (!scored[id]) {
      vocab.scores[id] = -static_cast<float>(rank);
      scored[id] = true;
    }
  }

  vocab.kinds.assign(n, TokenKind::Normal);
  for (size_t id = 0; id < n; ++id)
    if (is_byte_piece(vocab.pieces[id])) vocab.kinds[id] = TokenKind::Byte;
  for (const json& token : added) {
    const size_t id = token.at("id").get<size_t>();
    if (id >= n) throw std::runtime_error("added token id " + std::to_string(id) + " is outside the vocabulary");
    vocab.kinds[id] = token.value("special", false) ? TokenKind::Control : TokenKind::UserDefined;
  }
  const std::string unk = model.value("unk_token", json()).is_string() ? model.at("unk_token").get<std::string>() : "";
  if (!id_of.contains(unk)) throw std::runtime_error("no unknown token (model.unk_token)");
  vocab.unk = id_of.at(unk);
  vocab.kinds[static_cast<size_t>(vocab.unk)] = TokenKind::Unknown;

  special_ids(doc, configs, id_of, vocab);
  // without names anywhere, the conventional "<s>" / "</s>"
  if (vocab.bos < 0 && id_of.contains("<s>")) vocab.bos = id_of.at("<s>");
  if (vocab.eos < 0 && id_of.contains("</s>")) vocab.eos = id_of.at("</s>");
  vocab.add_bos = configs.tokenizer_config.value("add_bos_token", vocab.bos >= 0) && vocab.bos >= 0;
  vocab.add_dummy_prefix = prepends_space(doc);
  // SentencePiece falls back to bytes only with all 256 <0xNN> pieces; without them
  // (as in vocabularies that set the flag but have no byte pieces) it gives <unk>, as
  // Hugging Face does.
  vocab.byte_fallback = model.value("byte_fallback", false) &&
                        std::count(vocab.kinds.begin(), vocab.kinds.end(), TokenKind::Byte) == 256;
  return vocab;
}

// The regexes of a byte-level BPE pre-tokenizer node, appended in the order they apply.
// Split (Isolated), Digits, ByteLevel and Sequences of them are what these files use.
void pre_tokenizer_regexes(const json& node, std::vector<std::string>& regexes) {
  const std::string type = node.value("type", "");
  if (type == "Sequence") {
    for (const json& child : node.value("pretokenizers", json::array())) pre_tokenizer_regexes(child, regexes);
  } else if (type == "ByteLevel") {
    if (node.value("add_prefix_space", false))
      throw std::runtime_error("the ByteLevel pre-tokenizer's add_prefix_space is not supported");
    if (node.value("use_regex", true)) regexes.push_back(pre_tokenizer_spec("gpt-2").regexes.front());
  } else if (type == "Digits") {
    regexes.push_back(node.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else if (type == "Split") {
    if (node.value("behavior", "") != "Isolated" || node.value("invert", false))
      throw std::runtime_error("Split pre-tokenizers other than behavior \"Isolated\" (not inverted) are not supported");
    const json& pattern = node.at("pattern");
    if (pattern.contains("Regex")) {
      regexes.push_back(pattern.at("Regex").get<std::string>());
    } else {
      std::string literal;  // every character escaped that a regex would read as syntax
      for (const char c : pattern.at("String").get<std::string>()) {
        if (std::strchr("\\^$.|?*+()[]{}-", c) != nullptr) literal += '\\';
        literal += c;
      }
      regexes.push_back(literal);
    }
  } else {
    throw std::runtime_error("pre-tokenizer \"" + type + "\" is not supported in a byte-level BPE tokenizer.json");
  }
}

// A byte-level BPE tokenizer.json (Qwen, Llama 3, DeepSeek-Coder, StarCoder, GPT-2): the
// pieces and merges as GGUF would hold them, the added tokens, and the pre-tokenizer's regexes.
Vocabulary bpe_tokenizer_json(const json& doc, const TokenizerConfigs& configs) {
  const json& model = doc.at("model");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix", "dropout"})
    if (model.contains(key) && !model.at(key).is_null() && model.at(key) != "")
      throw std::runtime_error(std::string("BPE option \"") + key + "\" is not supported with byte-level pieces");
  const json added = doc.value("added_tokens", json::array());
  Vocabulary vocab;
  vocab.model = TokenizerModel::ByteLevelBpe;
  vocab.pieces = pieces_by_id(model, added, true);
  const size_t n = vocab.pieces.size();
  vocab.scores.assign(n, 0.0f);
  vocab.kinds.assign(n, TokenKind::Unused);  // ids nothing names stay [PADn]
  for (const auto& [piece, id] : model.at("vocab").items()) vocab.kinds[id.get<size_t>()] = TokenKind::Normal;
  for (const json& token : added) {
    const size_t id = token.at("id").get<size_t>();
    vocab.pieces[id] = token.at("content").get<std::string>();
    vocab.kinds[id] = token.value("special", false) ? TokenKind::Control : TokenKind::UserDefined;
  }
  for (const json& merge : model.at("merges")) vocab.merges.push_back(merge_text(merge));
  vocab.ignore_merges = model.value("ignore_merges", false);

  const json& normalizer = doc.value("normalizer", json());
  if (!normalizer.is_null()) {
    if (normalizer.value("type", "") != "NFC")
      throw std::runtime_error("normalizer \"" + normalizer.value("type", "") +
                               "\" is not supported in a byte-level BPE tokenizer.json (only NFC)");
    vocab.nfc = true;
  }
  pre_tokenizer_regexes(doc.value("pre_tokenizer", json::object()), vocab.pre_regexes);
  if (vocab.pre_regexes.empty()) throw std::runtime_error("the byte-level BPE tokenizer.json has no pre-tokenizer regex");
  vocab.pre = pre_tokenizer_name(vocab.pre_regexes, vocab.ignore_merges);

  std::unordered_map<std::string, int> id_of;
  for (size_t id = 0; id < n; ++id) id_of.emplace(vocab.pieces[id], static_cast<int>(id));
  vocab.unk = -1;
  special_ids(doc, configs, id_of, vocab);
  vocab.add_dummy_prefix = false;
  vocab.byte_fallback = false;
  return vocab;
}

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
    const std::string type = doc.at("model").value("type", "");
    if (type != "BPE") throw std::runtime_error("model type \"" + type + "\" is not supported (only BPE)");
    const TokenizerConfigs configs = read_configs(path);
    // byte-level files say so in the pre-tokenizer (or only in the decoder when the splits
    // are all Split nodes)
    const bool byte_level = mentions_type(doc.value("pre_tokenizer", json()), "ByteLevel") ||
                            mentions_type(doc.value("decoder", json()), "ByteLevel");
    return byte_level ? bpe_tokenizer_json(doc, configs) : sentencepiece_tokenizer_json(doc, configs);
  } catch (const json::exception& e) {
    throw std::runtime_error(path + ": malformed tokenizer.json: " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(path + ": " + e.what());
  }
}

// tiktoken's ranks file: every line "base64(bytes) rank".
bool looks_like_tiktoken(const std::string& bytes) {
  const size_t end = bytes.find('\n');
  const std::string_view line = std::string_view(bytes).substr(0, end);
  const size_t space = line.find(' ');
  if (space == std::string_view::npos || space == 0 || space + 1 == line.size()) return false;
  const auto base64 = line.substr(0, space), rank = line.substr(space + 1);
  return std::all_of(base64.begin(), base64.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' || c == '='; }) &&
         std::all_of(rank.begin(), rank.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string decode_base64(std::string_view text) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
  };
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (const char c : text) {
    if (c == '=') break;
    const int v = value(c);
    if (v < 0) throw std::runtime_error("invalid base64 \"" + std::string(text) + "\"");
    bits = (bits << 6) | static_cast<uint32_t>(v);
    count += 6;
    if (count >= 8) {
      count -= 8;
      out.push_back(static_cast<char>((bits >> count) & 0xFF));
    }
  }
  return out;
}

// The two parts rank BPE stops at for `token`: repeatedly join the adjacent pair whose
// concatenation has the lowest rank below `rank` (the token's own), as Hugging Face's
// tiktoken converter does. Empty when it does not end in exactly two tokens.
std::vector<std::string> rank_bpe_parts(const std::string& token, int rank,
                                        const std::unordered_map<std::string, int>& ranks) {
  std::vector<std::string> parts;
  for (const char c : token) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    int best = rank;
    size_t at = 0;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const auto it = ranks.find(parts[i] + parts[i + 1]);
      if (it != ranks.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == rank) break;
    parts[at] += parts[at + 1];
    parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  const bool tokens = std::all_of(parts.begin(), parts.end(), [&](const std::string& p) { return ranks.contains(p); });
  return parts.size() == 2 && tokens ? parts : std::vector<std::string>{};
}

}  // namespace

Vocabulary tiktoken_vocabulary(std::string_view ranks_text, const std::string& pre) {
  std::vector<std::string> tokens;  // (n) bytes by rank
  std::unordered_map<std::string, int> ranks;
  size_t line_number = 0;
  for (size_t at = 0; at < ranks_text.size(); ++line_number) {
    size_t end = ranks_text.find('\n', at);
    if (end == std::string_view::npos) end = ranks_text.size();
    const std::string_view line = ranks_text.substr(at, end - at);
    at = end + 1;
    if (line.empty()) continue;
    const size_t space = line.find(' ');
    int rank = -1;
    if (space != std::string_view::npos) {
      const auto digits = line.substr(space + 1);
      const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
      if (ec != std::errc() || ptr != digits.data() + digits.size()) rank = -1;
    }
    if (rank < 0) throw std::runtime_error("tiktoken line " + std::to_string(line_number + 1) + " is not \"base64 rank\"");
    std::string bytes = decode_base64(line.substr(0, space));
    if (bytes.empty() || static_cast<size_t>(rank) != tokens.size() || !ranks.emplace(bytes, rank).second)
      throw std::runtime_error("tiktoken line " + std::to_string(line_number + 1) +
                               ": ranks must be 0, 1, 2, ... with distinct non-empty tokens");
    tokens.push_back(std::move(bytes));
  }
  if (tokens.empty()) throw std::runtime_error("the tiktoken file has no ranks");

  Vocabulary vocab;
  vocab.model = TokenizerModel::ByteLevelBpe;
  vocab.pre = pre;
  vocab.bos = vocab.eos = vocab.unk = -1;
  vocab.add_bos = vocab.add_dummy_prefix = vocab.byte_fallback = false;
  for (size_t rank = 0; rank < tokens.size(); ++rank) {
    vocab.pieces.push_back(byte_level_piece(tokens[rank]));
    if (tokens[rank].size() < 2) continue;
    const std::vector<std::string> parts = rank_bpe_parts(tokens[rank], static_cast<int>(rank), ranks);
    if (parts.empty())
      throw std::runtime_error("tiktoken rank " + std::to_string(rank) + " is not the join of two lower-ranked tokens");
    vocab.merges.push_back(byte_level_piece(parts[0]) + " " + byte_level_piece(parts[1]));
  }
  vocab.scores.assign(vocab.pieces.size(), 0.0f);
  vocab.kinds.assign(vocab.pieces.size(), TokenKind::Normal);
  return vocab;
}

Vocabulary load_vocabulary(const std::string& path) {
  const std::string bytes = read_file(path);
  if (bytes.empty()) throw std::runtime_error(path + ": tokenizer file is empty");
  if (bytes.compare(0, 4, "GGUF") == 0)
    throw std::runtime_error(path + ": is a GGUF model file, not a tokenizer file; its vocabulary "
                                    "is read together with the model");
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && bytes[first] == '{') return parse_tokenizer_json(bytes, path);
  if (looks_like_tiktoken(bytes)) {
    try {
      return tiktoken_vocabulary(bytes, "");
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(path + ": " + e.what());
    }
  }
  if (auto vocab = parse_llama2c(bytes)) return *std::move(vocab);
  auto processor = std::make_unique<sentencepiece::SentencePieceProcessor>();
  if (const auto status = processor->LoadFromSerializedProto(bytes); !status.ok())
    throw std::runtime_error(path +
                             ": not a tokenizer file (expected a SentencePiece tokenizer.model, "
                             "a llama2.c tokenizer.bin, a tokenizer.json or tiktoken ranks); as a "
                             "SentencePiece model: " + status.ToString());
  return vocabulary_from_processor(*processor, bytes);
}

Vocabulary load_vocabulary_of(const std::string& model_or_vocab, const std::string& tokenizer_path) {
  namespace fs = std::filesystem;
  if (!tokenizer_path.empty()) return load_vocabulary(tokenizer_path);
  if (fs::is_directory(model_or_vocab)) {
    for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
      const fs::path file = fs::path(model_or_vocab) / name;
      if (fs::exists(file)) return load_vocabulary(file.string());
    }
    throw std::runtime_error(model_or_vocab + ": the directory has no tokenizer.model or tokenizer.json");
  }
  std::ifstream in(model_or_vocab, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + model_or_vocab);
  char magic[4] = {};
  in.read(magic, 4);
  if (in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0) {
    // the vocabulary is metadata: the tensor table (whatever its types) and weights are not read
    Vocabulary vocab = gguf_vocabulary(GgufFile::read_header(model_or_vocab, GgufPart::Metadata));
    if (vocab.empty()) throw std::runtime_error(model_or_vocab + ": the GGUF file carries no vocabulary (tokenizer.ggml.tokens)");
    return vocab;
  }
  try {
    return load_vocabulary(model_or_vocab);
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(std::string(e.what()) + " (a model file without a vocabulary needs a tokenizer file)");
  }
}

}  // namespace specula
