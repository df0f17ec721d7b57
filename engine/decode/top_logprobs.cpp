#include "decode/top_logprobs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "compute/batch.h"
#include "compute/kv_cache.h"

namespace specula {

namespace {

constexpr size_t kRowsPerForward = 64;  // logit rows at once: vocab floats each

// -log softmax(row)[token], in double precision.
double negative_log_likelihood(std::span<const float> row, int token) {
  const float top = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - top);
  return std::log(sum) - (static_cast<double>(row[static_cast<size_t>(token)]) - top);
}

}  // namespace

std::vector<TokenLogprob> most_likely(std::span<const float> row, int k) {
  const float top = *std::max_element(row.begin(), row.end());
  double sum = 0.0;
  for (float v : row) sum += std::exp(static_cast<double>(v) - top);
  const double log_sum = std::log(sum) + top;
  std::vector<int> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  const auto n = std::min<size_t>(static_cast<size_t>(std::max(k, 0)), ids.size());
  std::partial_sort(ids.begin(), ids.begin() + static_cast<long>(n), ids.end(), [&](int a, int b) {
    return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)] || (row[static_cast<size_t>(a)] == row[static_cast<size_t>(b)] && a < b);
  });
  std::vector<TokenLogprob> out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back({ids[i], static_cast<float>(row[static_cast<size_t>(ids[i])] - log_sum)});
  }
  return out;
}

TokenScores score_tokens(Backend& backend, const Model& model, std::span<const int> ids, int k,
                         const std::function<bool(long)>& advanced, int rows_per_forward) {
  if (ids.size() < 2) throw std::invalid_argument("scoring needs at least 2 tokens");
  if (k < 0) throw std::invalid_argument("scoring needs k of at least 0");
  if (static_cast<int>(ids.size()) > model.config.context_length) {
    throw std::invalid_argument("the sequence has " + std::to_string(ids.size()) + " tokens; the context holds " +
                                std::to_string(model.config.context_length));
  }
  const std::vector<int32_t> sequence(ids.begin(), ids.end());
  const size_t vocab = static_cast<size_t>(model.config.vocab_size);
  const size_t step = static_cast<size_t>(std::max(1, rows_per_forward));
  TokenScores out;
  std::unique_ptr<KvCache> cache = backend.create_cache(model, static_cast<int>(sequence.size()));
  const int seq = cache->create();
  std::vector<float> logits;
  for (size_t at = 0; at < sequence.size(); at += step) {
    const size_t count = std::min(sequence.size() - at, step);
    RaggedBatch batch;
    batch.add(seq, std::span<const int32_t>(sequence).subspan(at, count), true);
    backend.forward(model, *cache, batch, logits);
    for (size_t r = 0; r < count && at + r + 1 < sequence.size(); ++r) {  // row r predicts position at + r + 1
      const std::span<const float> row = std::span<const float>(logits).subspan(r * vocab, vocab);
      out.nll.push_back(negative_log_likelihood(row, sequence[at + r + 1]));
      if (k > 0) out.top.push_back(most_likely(row, k));
    }
    if (advanced && !advanced(static_cast<long>(at + count))) {
      out.stopped = true;
      break;
    }
  }
  cache->release(seq);
  return out;
}

std::vector<std::vector<TokenLogprob>> top_logprobs(Backend& backend, const Model& model, std::span<const int> prompt_ids,
                                                    std::span<const int> tokens, int k) {
  if (prompt_ids.empty()) throw std::invalid_argument("top log-probabilities need a prompt");
  if (k < 1) throw std::invalid_argument("top log-probabilities need k of at least 1");
  std::vector<std::vector<TokenLogprob>> out;
  if (tokens.empty()) return out;
  std::vector<int32_t> sequence(prompt_ids.begin(), prompt_ids.end());
  sequence.insert(sequence.end(), tokens.begin(), tokens.end() - 1);  // the last token predicts nothing asked for
  if (static_cast<int>(sequence.size()) > model.config.context_length) {
    throw std::invalid_argument("the sequence has " + std::to_string(sequence.size()) + " tokens; the context holds " +
                                std::to_string(model.config.context_length));
  }
  const size_t vocab = static_cast<size_t>(model.config.vocab_size);
  std::unique_ptr<KvCache> cache = backend.create_cache(model, static_cast<int>(sequence.size()));
  const int seq = cache->create();
  std::vector<float> logits;
  const size_t first_scored = prompt_ids.size() - 1;  // its row predicts tokens[0]
  for (size_t at = 0; at < sequence.size();) {
    const bool scoring = at >= first_scored;
    const size_t end = scoring ? std::min(sequence.size(), at + kRowsPerForward)
                               : std::min(first_scored, at + 8 * kRowsPerForward);  // the prompt: no rows kept
    RaggedBatch batch;
    batch.add(seq, std::span<const int32_t>(sequence).subspan(at, end - at), scoring);
    backend.forward(model, *cache, batch, logits);
    if (scoring) {
      for (size_t r = 0; r < end - at; ++r) out.push_back(most_likely(std::span<const float>(logits).subspan(r * vocab, vocab), k));
    }
    at = end;
  }
  cache->release(seq);
  return out;
}

}  // namespace specula
