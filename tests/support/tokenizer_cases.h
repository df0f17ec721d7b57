// Tokenizer test cases shared by the tokenizer suites: llama.cpp's vector files, HumanEval
// texts, texts that stress whitespace and UTF-8, and a UTF-8 check.
#pragma once

#include <zlib.h>

#include <QByteArray>
#include <QJsonDocument>
#include <QJsonObject>

#include <algorithm>
#include <fstream>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer.h"

namespace specula::test {

inline std::string readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// llama.cpp's test vectors: inputs separated by "\n__ggml_vocab_test__\n" (the file ends
// with one), expected ids one line per case, space-separated, without BOS.
struct VocabCase {
  std::string text;
  std::vector<int> ids;
};

inline std::vector<VocabCase> readVocabCases(const std::string& inp, const std::string& out) {
  const std::string separator = "\n__ggml_vocab_test__\n";
  const std::string inputs = readBytes(inp);
  std::vector<VocabCase> cases;
  for (size_t at = 0; at < inputs.size();) {
    const size_t end = inputs.find(separator, at);
    if (end == std::string::npos) break;
    cases.push_back({inputs.substr(at, end - at), {}});
    at = end + separator.size();
  }
  std::ifstream expected(out);
  std::string line;
  for (VocabCase& c : cases) {
    if (!std::getline(expected, line)) break;
    std::istringstream ids(line);
    for (int id; ids >> id;) c.ids.push_back(id);
  }
  return cases;
}

// HumanEval prompts and prompt+solution texts, from the gzip-compressed JSON lines file.
inline std::vector<std::string> humanEvalTexts(const std::string& path) {
  const std::string gz = readBytes(path);
  z_stream stream{};
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) return {};
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(gz.data()));
  stream.avail_in = static_cast<uInt>(gz.size());
  std::string jsonl;
  char chunk[1 << 16];
  int status = Z_OK;
  while (status == Z_OK) {
    stream.next_out = reinterpret_cast<Bytef*>(chunk);
    stream.avail_out = sizeof chunk;
    status = inflate(&stream, Z_NO_FLUSH);
    jsonl.append(chunk, sizeof chunk - stream.avail_out);
  }
  inflateEnd(&stream);
  std::vector<std::string> texts;
  for (const QByteArray& line : QByteArray::fromStdString(jsonl).split('\n')) {
    if (line.trimmed().isEmpty()) continue;
    const QJsonObject problem = QJsonDocument::fromJson(line).object();
    const std::string prompt = problem.value("prompt").toString().toStdString();
    texts.push_back(prompt);
    texts.push_back(prompt + problem.value("canonical_solution").toString().toStdString());
  }
  return texts;
}

inline const std::vector<std::string> kTrickyTexts = {
    "\tindented with a tab\n\t\tand two\n",
    "def f(x):\n    if x:\n\t  return 1  \n    return 2\n",
    "windows\r\nline endings\r\n\r\n",
    "trailing spaces   \nand tabs\t\t\n",
    "   leading spaces",
    " ",
    "\n",
    "a  b   c    d",
    "emoji \xF0\x9F\xA6\x99 llama \xF0\x9F\x98\x80\xF0\x9F\x91\x8D",
    "CJK \xE4\xB8\xAD\xE6\x96\x87 \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
    "controls \x01\x02\x1b[0m\x7f bell\x07",
    "mixed \xC3\xA9\xC3\xA0\xC3\xBC \xCE\xB1\xCE\xB2\xCE\xB3 \xD0\xB6\xD0\xB8\xD0\xB2",
    "print(f\"{x!r:>10}\")  # \xE2\x86\x92 arrow",
};

inline bool isValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t need = b < 0x80 ? 1 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;
    if (need == 0 || i + need > s.size()) return false;
    for (size_t k = 1; k < need; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    i += need;
  }
  return true;
}

// Pushes `stream` after `prefix` through an IncrementalDecoder in random chunks of 1 to 4
// ids: every delta must be whole UTF-8 and the deltas must add up to decode(prefix + stream)
// without the prefix's text. Returns what went wrong; empty when nothing did.
inline std::string streamingMismatch(const Tokenizer& tokenizer, const std::vector<int>& prefix,
                                     const std::vector<int>& stream, std::mt19937& rng) {
  IncrementalDecoder decoder(tokenizer, prefix);
  std::string concatenated;
  for (size_t at = 0; at < stream.size();) {
    const size_t n = std::min(stream.size() - at, size_t(1 + rng() % 4));
    const std::string delta = decoder.push(std::span<const int>(stream).subspan(at, n));
    if (!isValidUtf8(delta)) return "a delta is not whole UTF-8";
    concatenated += delta;
    at += n;
  }
  const std::string rest = decoder.finish();
  if (!isValidUtf8(rest)) return "the rest is not whole UTF-8";
  concatenated += rest;
  std::vector<int> all = prefix;
  all.insert(all.end(), stream.begin(), stream.end());
  const std::string full = tokenizer.decode(all);
  const std::string prefixText = tokenizer.decode(prefix);
  if (full.compare(0, prefixText.size(), prefixText) != 0) return "the full text does not start with the prefix's";
  if (concatenated != full.substr(prefixText.size())) return "the deltas differ from the decoded text";
  if (decoder.text() != concatenated) return "text() differs from the deltas";
  return {};
}

}  // namespace specula::test
