// specula-cli tokenize -m MODEL_OR_VOCAB (-p TEXT | -f FILE): the ids of a text, as
// llama.cpp's `llama-tokenize --no-bos --no-parse-special --ids` prints them; --bench times it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "model/tokenizer.h"
#include "common/statistics.h"

namespace specula::cli {

namespace {

struct Options {
  std::string model;      // GGUF (vocabulary-only too), Hugging Face directory or tokenizer file
  std::string tokenizer;  // read instead of the model's vocabulary
  std::string pre;        // pre-tokenizer for vocabularies that name none (tiktoken ranks)
  std::string prompt;
  std::string file;
  bool add_special = false;
  bool parse_special = false;
  bool json = false;
  bool bench = false;
  int repeats = 5;
};

// CPU time of this process: the machine may be shared, wall time would count the others.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// Encodes and decodes the whole text `repeats` times; medians of the CPU time per pass.
nlohmann::json bench(const Tokenizer& tokenizer, const std::string& text, const Options& o) {
  std::vector<double> encode_s, decode_s;
  size_t tokens = 0;
  for (int r = 0; r < o.repeats; ++r) {
    double start = cpu_seconds();
    const std::vector<int> ids = tokenizer.encode(text, o.add_special, o.parse_special);
    encode_s.push_back(cpu_seconds() - start);
    start = cpu_seconds();
    const std::string back = tokenizer.decode(ids);
    decode_s.push_back(cpu_seconds() - start);
    tokens = ids.size();
    if (back.size() < text.size() / 2) throw CommandFailed("decode lost most of the text", 1);
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  const double enc = median(encode_s), dec = median(decode_s);
  return {{"tokenizer", tokenizer.model_name()},
          {"pre", tokenizer.vocabulary().pre},
          {"bytes", text.size()},
          {"tokens", tokens},
          {"repeats", o.repeats},
          {"encode_seconds", enc},
          {"decode_seconds", dec},
          {"encode_mb_per_s", enc > 0 ? mb / enc : 0.0},
          {"decode_mb_per_s", dec > 0 ? mb / dec : 0.0},
          {"clock", "process CPU time, median of repeats"}};
}

void run(const Options& o) {
  if (o.prompt.empty() == o.file.empty()) throw CommandFailed("give the text with exactly one of -p and -f", 2);
  if (o.repeats < 1) throw CommandFailed("--repeat must be at least 1", 2);
  std::unique_ptr<Tokenizer> tokenizer;
  try {
    Vocabulary vocab = load_vocabulary_of(o.model, o.tokenizer);
    if (!o.pre.empty()) {
      if (vocab.model != TokenizerModel::ByteLevelBpe) throw CommandFailed("--pre applies to byte-level BPE vocabularies only", 2);
      vocab.pre = o.pre;
      vocab.pre_regexes.clear();
    }
    tokenizer = create_tokenizer(std::move(vocab));
  } catch (const CommandFailed&) {
    throw;
  } catch (const std::exception& e) {
    throw CommandFailed(e.what(), 2);
  }
  const std::string text = o.file.empty() ? o.prompt : read_input_file(o.file);

  if (o.bench) {
    const nlohmann::json j = bench(*tokenizer, text, o);
    if (o.json) {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("%s%s%s: %zu bytes -> %zu tokens; encode %.2f MB/s, decode %.2f MB/s (CPU time, median of %d)\n",
                  tokenizer->model_name(), tokenizer->vocabulary().pre.empty() ? "" : " ",
                  tokenizer->vocabulary().pre.c_str(), text.size(), j["tokens"].get<size_t>(),
                  j["encode_mb_per_s"].get<double>(), j["decode_mb_per_s"].get<double>(), o.repeats);
    }
    return;
  }

  const std::vector<int> ids = tokenizer->encode(text, o.add_special, o.parse_special);
  if (o.json) {
    nlohmann::json pieces = nlohmann::json::array();
    for (const int id : ids) pieces.push_back(tokenizer->piece(id));
    const nlohmann::json j = {{"tokenizer", tokenizer->model_name()}, {"ids", ids}, {"pieces", pieces}};
    std::printf("%s\n", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    return;
  }
  std::string line;
  for (const int id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
  std::printf("%s\n", line.c_str());
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text (no weights are loaded)");
  cmd->add_option("-m,--model", o->model,
                  "GGUF file (vocabulary-only ones too), Hugging Face directory or tokenizer file")->required();
  cmd->add_option("-p,--prompt", o->prompt, "Text to tokenize");
  cmd->add_option("-f,--file", o->file, "File whose content to tokenize");
  cmd->add_option("--tokenizer", o->tokenizer, "Tokenizer file to use instead of the model's vocabulary");
  cmd->add_option("--pre", o->pre, "Pre-tokenizer (GGUF name, e.g. qwen2) for vocabularies that name none");
  cmd->add_flag("--add-special", o->add_special, "Add BOS/EOS where the vocabulary asks for them");
  cmd->add_flag("--parse-special", o->parse_special, "Turn special-token text (<|endoftext|>, </s>) into those tokens");
  cmd->add_flag("--json", o->json, "Print JSON: the ids and their pieces");
  cmd->add_flag("--bench", o->bench, "Time encoding and decoding the text instead (MB/s of CPU time)");
  cmd->add_option("--repeat", o->repeats, "Passes over the text for --bench (the median is reported)");
  cmd->callback([o] { run(*o); });
}

}  // namespace specula::cli
