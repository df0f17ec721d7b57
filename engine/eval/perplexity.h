// Perplexity of a model on a text: the quality check llama.cpp users know from
// llama-perplexity, for telling whether a model file (a quantization, a converted model)
// computes what it should.
//
// The text is tokenized whole, without BOS, and cut into consecutive windows of `context`
// positions. Each window starts with BOS where the model's vocabulary adds one (then holds
// context - 1 tokens of the text), and every token of a window but its first is scored:
// -log p(token | the window's tokens before it), from the logits of the position before it,
// in double precision. Each token of the text after the first window's first is scored once;
// a last window shorter than `context` is scored too.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "compute/backend.h"
#include "decode/top_logprobs.h"
#include "model/model.h"

namespace specula {

struct PerplexityOptions {
  int context = 512;       // positions per window, BOS included; at most the model's context
  int chunk = 64;          // positions per forward: the logits of that many rows at once
  // Called after each forward with the positions done and in all; returning false stops.
  std::function<bool(long done, long total)> progress;
};

struct PerplexityResult {
  long tokens = 0;         // of the text (BOS not counted)
  long scored = 0;         // tokens whose log-probability was summed
  int windows = 0;
  double nll_sum = 0.0;    // sum of -log p over the scored tokens (natural log)
  bool stopped = false;    // progress() said stop: the figures cover the windows done
  double perplexity() const;  // exp(nll_sum / scored); 0 when nothing was scored
};

// Scores one window: -log p of each of its tokens after the first (TokenScores::nll, from
// decode/top_logprobs.h), calling `advanced(positions done)` as it goes (false: stop).
using WindowScorer = std::function<TokenScores(std::span<const int> window, const std::function<bool(long)>& advanced)>;

// `text_tokens`: the text's ids, no BOS; `bos`: the id each window starts with, or -1 for
// none; the windows scored by `score` (this process's backend, or a server's: serve/remote_generator.h).
// Throws std::invalid_argument for a context under 2 and when there is nothing to score.
PerplexityResult perplexity(const WindowScorer& score, std::span<const int> text_tokens, int bos,
                            const PerplexityOptions& options);

// On this process's backend: BOS where the model's vocabulary adds one; a context over the
// model's is refused too.
PerplexityResult perplexity(Backend& backend, const Model& model, std::span<const int> text_tokens,
                            const PerplexityOptions& options);

}  // namespace specula
