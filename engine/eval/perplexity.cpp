#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/tokenizer.h"

namespace specula {

double PerplexityResult::perplexity() const { return scored > 0 ? std::exp(nll_sum / static_cast<double>(scored)) : 0.0; }

PerplexityResult perplexity(const WindowScorer& score, std::span<const int> text_tokens, int bos,
                            const PerplexityOptions& o) {
  if (o.context < 2) throw std::invalid_argument("the perplexity context must be at least 2 positions");
  const size_t per_window = static_cast<size_t>(o.context - (bos >= 0 ? 1 : 0));  // text tokens a window holds
  const size_t n = text_tokens.size();
  if (n < (bos >= 0 ? 1u : 2u)) throw std::invalid_argument("the text has too few tokens to score");

  PerplexityResult out;
  out.tokens = static_cast<long>(n);
  const long total = static_cast<long>((n + per_window - 1) / per_window) * o.context;
  long done = 0;
  std::vector<int> window;
  for (size_t start = 0; start < n; start += per_window) {
    window.clear();
    if (bos >= 0) window.push_back(bos);
    const size_t end = std::min(n, start + per_window);
    window.insert(window.end(), text_tokens.begin() + static_cast<long>(start), text_tokens.begin() + static_cast<long>(end));
    if (window.size() < 2) break;  // a lone last token without BOS: nothing predicts it
    const TokenScores scores = score(window, [&](long positions) { return !o.progress || o.progress(done + positions, total); });
    for (double nll : scores.nll) out.nll_sum += nll;
    out.scored += static_cast<long>(scores.nll.size());
    done += static_cast<long>(window.size());
    ++out.windows;
    if (scores.stopped) {
      out.stopped = true;
      break;
    }
  }
  return out;
}

PerplexityResult perplexity(Backend& backend, const Model& model, std::span<const int> text_tokens,
                            const PerplexityOptions& o) {
  const int context_limit = model.config.context_length;
  if (o.context < 2 || o.context > context_limit) {
    throw std::invalid_argument("the perplexity context must be from 2 to the model's " + std::to_string(context_limit) +
                                " positions, not " + std::to_string(o.context));
  }
  const bool adds_bos = model.tokenizer && model.tokenizer->vocabulary().add_bos && model.tokenizer->bos() >= 0;
  const WindowScorer local = [&](std::span<const int> window, const std::function<bool(long)>& advanced) {
    return score_tokens(backend, model, window, 0, advanced, o.chunk);
  };
  return perplexity(local, text_tokens, adds_bos ? model.tokenizer->bos() : -1, o);
}

}  // namespace specula
