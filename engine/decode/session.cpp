#include "decode/session.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "decode/prompt_cache.h"
#include "model/model_chat.h"
#include "model/tokenizer.h"

namespace specula {

const std::vector<std::string>& code_stop_strings() {
  static const std::vector<std::string> stops{"\ndef ", "\nclass ", "\nif __name__", "\nprint("};
  return stops;
}

std::string code_prompt(std::string prompt) {
  if (!prompt.empty() && prompt.back() != '\n') prompt += '\n';
  return prompt;
}

std::vector<int> request_prompt_ids(const Tokenizer& tokenizer, const GenerationRequest& request) {
  if (!request.prompt_ids.empty()) {
    tokenizer.check_ids(request.prompt_ids);
    return request.prompt_ids;
  }
  if (request.chat_prefix && request.suffix) {
    throw std::invalid_argument("a chat prompt cannot fill in the middle: give the suffix with the raw prompt style");
  }
  if (request.chat_prefix) return encode_chat(tokenizer, *request.chat_prefix + request.prompt);
  if (!request.suffix) return tokenizer.encode(request.prompt, true);
  if (!tokenizer.fim().complete())
    throw std::invalid_argument("the model has no fill-in-the-middle tokens, so it cannot take a suffix");
  return tokenizer.fim_prompt(request.prompt, *request.suffix);
}

HealedPrompt heal_prompt(const Tokenizer& tokenizer, std::vector<int> ids) {
  HealedPrompt healed{.ids = std::move(ids)};
  if (healed.ids.size() < 2) return healed;
  const int last = healed.ids.back();
  const Vocabulary& vocab = tokenizer.vocabulary();
  const auto healable = [&vocab](int id) {
    const TokenKind kind = vocab.kinds.at(static_cast<size_t>(id));
    return kind == TokenKind::Normal || kind == TokenKind::UserDefined;
  };
  if (!healable(last)) return healed;
  // Pieces that extend the last one's are texts that begin with its text: a piece is its
  // text, bytes or "▁" spaces mapped one for one (byte tokens aside, which are not healed).
  const std::string& piece = tokenizer.piece(last);
  std::vector<int> first;
  for (int id = 0; id < tokenizer.size(); ++id)
    if (healable(id) && tokenizer.piece(id).starts_with(piece)) first.push_back(id);
  if (first.size() < 2) return healed;  // only itself: nothing would split otherwise
  healed.ids.pop_back();
  IncrementalDecoder text(tokenizer, healed.ids);
  healed.removed = text.push(std::span<const int>(&last, 1)) + text.finish();
  healed.first_tokens = std::move(first);
  return healed;
}

double Candidate::mean_logprob() const {
  if (logprobs.empty()) return 0.0;
  return std::accumulate(logprobs.begin(), logprobs.end(), 0.0) / static_cast<double>(logprobs.size());
}

double SessionTotals::tokens_per_second() const {
  return wall_seconds > 0 ? generated_tokens / wall_seconds : 0.0;
}

double SessionTotals::ms_per_token_per_sequence(int n_candidates) const {
  // every sequence advances in parallel: the wall time one sequence waits per token
  if (generated_tokens == 0) return 0.0;
  return 1000.0 * wall_seconds * n_candidates / generated_tokens;
}

double SessionTotals::acceptance_rate() const { return proposed > 0 ? static_cast<double>(accepted) / proposed : 0.0; }

namespace {

void validate(const GenerationRequest& r) {
  if (r.prompt.empty() && !r.suffix && !r.chat_prefix && r.prompt_ids.empty() && !r.allow_empty_prompt) {
    throw std::invalid_argument("the prompt is empty");
  }
  if (r.n_candidates < 1 || r.n_candidates > kMaxCandidates) {
    throw std::invalid_argument("the number of candidates must be between 1 and " + std::to_string(kMaxCandidates) +
                                ", got " + std::to_string(r.n_candidates));
  }
  if (r.max_new_tokens < 0) throw std::invalid_argument("max new tokens cannot be negative");
  if (!(r.budget_seconds >= 0) || std::isinf(r.budget_seconds)) {
    throw std::invalid_argument("the time budget must be a positive number of seconds (0: none)");
  }
  const SamplingParams& s = r.sampling;
  if (!(s.temperature >= 0) || std::isinf(s.temperature)) throw std::invalid_argument("temperature must be 0 or more");
  if (s.top_k < 0) throw std::invalid_argument("top-k must be 0 (off) or more");
  if (!(s.top_p > 0 && s.top_p <= 1)) throw std::invalid_argument("top-p must be in (0, 1]");
  if (!(s.min_p >= 0 && s.min_p <= 1)) throw std::invalid_argument("min-p must be in [0, 1]");
  for (const auto& stop : r.stop) {
    if (stop.empty()) throw std::invalid_argument("a stop string is empty");
  }
}

// One candidate's text: decodes its tokens incrementally and releases only text that can
// no longer turn out to be the start of a stop string.
class CandidateText {
 public:
  // `healed`: text the first tokens begin with that belongs to the prompt (token healing).
  // `whole_lines`: the line in progress is held back too (a text_end hook may cut at its start).
  CandidateText(const Tokenizer& tokenizer, const std::vector<int>& prompt, const std::vector<std::string>& stops,
                std::string healed = {}, bool whole_lines = false)
      : decoder_(tokenizer, prompt), stops_(stops), healed_(std::move(healed)), whole_lines_(whole_lines) {}

  // Adds tokens; returns true when a stop string appeared (the text is then cut before it).
  bool push(std::span<const int> tokens) {
    const size_t before = text_.size();
    text_ += without_healed(decoder_.push(tokens));
    size_t longest = 0;
    for (const auto& s : stops_) longest = std::max(longest, s.size());
    const size_t from = before >= longest ? before - longest + 1 : 0;
    size_t cut = std::string::npos;
    for (const auto& s : stops_) cut = std::min(cut, text_.find(s, from));
    if (cut != std::string::npos) {
      text_.resize(cut);
      final_ = cut;
      return true;
    }
    final_ = text_.size() - held_back();
    if (whole_lines_) {
      const size_t line_end = text_.rfind('\n');
      final_ = std::min(final_, line_end == std::string::npos ? 0 : line_end + 1);
    }
    return false;
  }
  // Ends the text at `at` (at the earliest where text was already streamed); false when the
  // hook said nothing.
  bool end_at(size_t at) {
    if (at == std::string::npos) return false;
    text_.resize(std::min(text_.size(), std::max(at, sent_)));
    final_ = text_.size();
    return true;
  }
  // Text that became final since the last call.
  std::string take_delta() {
    std::string delta = text_.substr(sent_, final_ - sent_);
    sent_ = final_;
    return delta;
  }
  // The stream ended without a stop string: everything left is final.
  void flush() {
    text_ += without_healed(decoder_.finish());
    final_ = text_.size();
  }
  const std::string& text() const { return text_; }

 private:
  // Length of the longest suffix of the text that is a proper prefix of some stop string.
  size_t held_back() const {
    size_t hold = 0;
    for (const auto& s : stops_) {
      for (size_t n = std::min(s.size() - 1, text_.size()); n > hold; --n) {
        if (text_.compare(text_.size() - n, n, s, 0, n) == 0) {
          hold = n;
          break;
        }
      }
    }
    return hold;
  }

  // `decoded` without what is left of the prompt's healed text at its front.
  std::string without_healed(std::string decoded) {
    size_t same = 0;
    while (same < healed_.size() && same < decoded.size() && decoded[same] == healed_[same]) ++same;
    healed_ = same < decoded.size() ? std::string() : healed_.substr(same);  // a mismatch ends it
    return decoded.substr(same);
  }

  IncrementalDecoder decoder_;
  const std::vector<std::string>& stops_;
  std::string healed_;  // the prompt's healed text that the decoded text has still to begin with
  bool whole_lines_ = false;
  std::string text_;   // decoded so far (cut at a stop string)
  size_t final_ = 0;   // text_[0, final_) can no longer change
  size_t sent_ = 0;    // text_[0, sent_) went out as deltas
};

}  // namespace

SessionResult run_session(Backend& backend, const Model& target, const GenerationRequest& request,
                          const SessionCallbacks& callbacks, const std::atomic<bool>* stop,
                          PromptCache* prompt_cache) {
  validate(request);
  if (!target.tokenizer) throw std::invalid_argument("the model has no tokenizer: name one (--tokenizer)");
  const Tokenizer& tokenizer = *target.tokenizer;
  HealedPrompt healed{.ids = request_prompt_ids(tokenizer, request)};
  if (healed.ids.empty()) throw std::invalid_argument("the prompt encodes to no tokens");
  if (request.token_healing && !request.suffix && request.prompt_ids.empty()) {
    healed = heal_prompt(tokenizer, std::move(healed.ids));
  }
  const std::vector<int>& prompt = healed.ids;

  std::vector<std::string> stops = request.stop;
  if (request.code_stops) stops.insert(stops.end(), code_stop_strings().begin(), code_stop_strings().end());

  DecodeOptions options;
  options.n_seqs = request.n_candidates;
  options.sampling = request.sampling;
  options.max_new_tokens = request.max_new_tokens;
  options.budget_seconds = request.budget_seconds;
  options.eos = tokenizer.end_of_generation();
  options.first_tokens = healed.first_tokens;

  const int cache_tokens = decode_cache_tokens(static_cast<int>(prompt.size()), target.config.context_length, options);
  auto drafter = create_drafter(request.draft.kind, backend, target, request.draft.draft_model, request.sampling,
                                request.n_candidates, cache_tokens);
  auto policy = create_draft_policy(request.draft.policy, request.n_candidates, backend, target, *drafter,
                                    request.sampling);
  std::unique_ptr<KvCache> own_cache;
  if (!prompt_cache) own_cache = backend.create_cache(target, cache_tokens);
  KvCache& cache = prompt_cache ? prompt_cache->cache_for(backend, target, cache_tokens) : *own_cache;
  options.reuse = prompt_cache;

  SessionResult result;
  result.candidates.resize(static_cast<size_t>(request.n_candidates));
  std::vector<CandidateText> texts;
  texts.reserve(static_cast<size_t>(request.n_candidates));
  for (int i = 0; i < request.n_candidates; ++i) {
    texts.emplace_back(tokenizer, prompt, stops, healed.removed, static_cast<bool>(request.text_end));
    result.candidates[static_cast<size_t>(i)].index = i;
  }

  const auto send_delta = [&](int i, const SequenceOutput& out) {
    std::string delta = texts[static_cast<size_t>(i)].take_delta();
    if (delta.empty() || !callbacks.on_delta) return;
    callbacks.on_delta(CandidateDelta{.index = i,
                                      .text = std::move(delta),
                                      .tokens = static_cast<int>(out.tokens.size()),
                                      .accepted = out.accepted,
                                      .proposed = out.proposed});
  };
  DecodeCallbacks hooks;
  hooks.on_tokens = [&](int i, const SequenceOutput& out, std::span<const int> tokens) {
    CandidateText& text = texts[static_cast<size_t>(i)];
    bool stopped = text.push(tokens);
    if (!stopped && request.text_end) stopped = text.end_at(request.text_end(i, text.text()));
    send_delta(i, out);
    return stopped;
  };
  hooks.on_finished = [&](int i, const SequenceOutput& out) {
    CandidateText& text = texts[static_cast<size_t>(i)];
    if (out.finish != FinishReason::Stop) text.flush();
    send_delta(i, out);
    Candidate& c = result.candidates[static_cast<size_t>(i)];
    c.text = text.text();
    c.tokens = out.tokens;
    c.logprobs = out.logprobs;
    c.finish = out.finish;
    c.accepted = out.accepted;
    c.proposed = out.proposed;
    c.seconds = out.seconds;
    if (callbacks.on_finished) callbacks.on_finished(c);
  };

  const DecodeResult decoded = decode(backend, target, cache, *drafter, *policy, prompt, options, hooks, stop);

  SessionTotals& t = result.totals;
  t.wall_seconds = decoded.stats.wall_seconds;
  t.steps = decoded.stats.steps;
  t.target_forwards = decoded.stats.target_forwards;
  t.target_tokens = decoded.stats.target_tokens;
  t.draft_forwards = decoded.stats.draft_forwards;
  t.prompt_tokens = decoded.stats.prompt_tokens;
  t.peak_blocks = decoded.stats.peak_blocks;
  t.prefill_seconds = decoded.stats.prefill_seconds;
  t.cached_tokens = decoded.stats.cached_tokens;
  const int kept = prompt_cache ? prompt_cache->blocks_held() : 0;  // the cache's, not the session's
  t.kv_blocks_left = cache.blocks_in_use() - kept + drafter->blocks_in_use();
  for (const Candidate& c : result.candidates) {
    t.generated_tokens += static_cast<int>(c.tokens.size());
    t.accepted += c.accepted;
    t.proposed += c.proposed;
  }
  return result;
}

}  // namespace specula
