#include "eval/perplexity.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "compute/batch.h"
#include "compute/kv_cache.h"
#include "model/tokenizer.h"

namespace specula {

namespace {

// -log softmax(row)[token], in double precision.
double negative_log_likelihood(std::span<const float> row, int token) {
  const float top = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - top);
  return std::log(sum) - (static_cast<double>(row[static_cast<size_t>(token)]) - top);
}

}  // namespace

double PerplexityResult::perplexity() const { return scored > 0 ? std::exp(nll_sum / static_cast<double>(scored)) : 0.0; }

PerplexityResult perplexity(Backend& backend, const Model& model, std::span<const int> text_tokens,
                            const PerplexityOptions& o) {
  const int context_limit = model.config.context_length;
  if (o.context < 2 || o.context > context_limit) {
    throw std::invalid_argument("the perplexity context must be from 2 to the model's " + std::to_string(context_limit) +
                                " positions, not " + std::to_string(o.context));
  }
  const bool bos = model.tokenizer && model.tokenizer->vocabulary().add_bos && model.tokenizer->bos() >= 0;
  const size_t per_window = static_cast<size_t>(o.context - (bos ? 1 : 0));  // text tokens a window holds
  const size_t n = text_tokens.size();
  if (n < (bos ? 1u : 2u)) throw std::invalid_argument("the text has too few tokens to score");
  const int vocab = model.config.vocab_size;
  const int chunk = std::max(1, o.chunk);

  PerplexityResult out;
  out.tokens = static_cast<long>(n);
  const long total = static_cast<long>((n + per_window - 1) / per_window) * o.context;
  long done = 0;
  std::unique_ptr<KvCache> cache = backend.create_cache(model, o.context);
  std::vector<int32_t> window;
  std::vector<float> logits;
  for (size_t start = 0; start < n; start += per_window) {
    window.clear();
    if (bos) window.push_back(model.tokenizer->bos());
    const size_t end = std::min(n, start + per_window);
    window.insert(window.end(), text_tokens.begin() + static_cast<long>(start), text_tokens.begin() + static_cast<long>(end));
    if (window.size() < 2) break;  // a lone last token without BOS: nothing predicts it
    const int seq = cache->create();
    for (size_t at = 0; at < window.size(); at += static_cast<size_t>(chunk)) {
      const size_t count = std::min(window.size() - at, static_cast<size_t>(chunk));
      RaggedBatch batch;
      batch.add(seq, std::span<const int32_t>(window).subspan(at, count), true);
      backend.forward(model, *cache, batch, logits);
      // row r predicts position at + r + 1
      for (size_t r = 0; r < count && at + r + 1 < window.size(); ++r) {
        const std::span<const float> row(logits.data() + r * static_cast<size_t>(vocab), static_cast<size_t>(vocab));
        out.nll_sum += negative_log_likelihood(row, window[at + r + 1]);
        ++out.scored;
      }
      done += static_cast<long>(count);
      if (o.progress && !o.progress(done, total)) {
        out.stopped = true;
        cache->release(seq);
        ++out.windows;
        return out;
      }
    }
    cache->release(seq);
    ++out.windows;
  }
  return out;
}

}  // namespace specula
