// The ```text blocks of a markdown oracle file (../shared/oracles/*.md), where the reference
// implementation's outputs are kept.
#pragma once

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace specula::test {

// Every ```text block of the file, in order, without the newline before its closing fence;
// none when the file cannot be read.
inline std::vector<std::string> oracle_text_blocks(const std::string& path) {
  std::ifstream in(path);
  const std::string md((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> blocks;
  const std::string open = "```text\n", close = "\n```";
  for (size_t at = md.find(open); at != std::string::npos; at = md.find(open, at)) {
    at += open.size();
    const size_t end = md.find(close, at);
    blocks.push_back(md.substr(at, end - at));
    at = end;
  }
  return blocks;
}

// The n-th ```text block of the file, or "" when it has fewer.
inline std::string oracle_text_block(const std::string& path, size_t n) {
  const std::vector<std::string> blocks = oracle_text_blocks(path);
  return n < blocks.size() ? blocks[n] : std::string();
}

}  // namespace specula::test
