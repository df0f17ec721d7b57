#include "decode/drafter.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <stdexcept>

#include "model/draft_vocabulary.h"

namespace specula {

namespace {

// Proposes nothing: every step verifies just the last token (plain batched decoding).
class NoDrafter : public Drafter {
 public:
  std::string name() const override { return "none"; }
  void prepare(std::span<const int>, int, KvCache&) override {}
  void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) override {
    drafts.assign(requests.size(), Draft{});
  }
  void sync(int, std::span<const int>) override {}
  void finish(int) override {}
};

// Prompt lookup: the latest earlier occurrence of the sequence's last n tokens (n = 3, 2,
// 1, longest first) predicts that what followed it then follows now. Code repeats
// identifiers and whole phrases of its prompt, so this is cheap and often right.
class NgramDrafter : public Drafter {
 public:
  static constexpr int kMaxNgram = 3;

  std::string name() const override { return "ngram"; }
  void prepare(std::span<const int>, int, KvCache&) override {}
  void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) override {
    drafts.assign(requests.size(), Draft{});
    for (size_t r = 0; r < requests.size(); ++r) {
      const auto& req = requests[r];
      if (req.max_tokens > 0) drafts[r].tokens = lookup(req.tokens, req.max_tokens);
    }
  }
  void sync(int, std::span<const int>) override {}
  void finish(int) override {}
  int proposable(int, std::span<const int> tokens, int most) const override {
    const int from = match_end(tokens);
    return from < 0 ? 0 : std::min(most, static_cast<int>(tokens.size()) - from);
  }

 private:
  static std::vector<int> lookup(std::span<const int> t, int max_tokens) {
    const int from = match_end(t);
    if (from < 0) return {};
    const int to = std::min(static_cast<int>(t.size()), from + max_tokens);
    return {t.begin() + from, t.begin() + to};
  }
  // Where the tokens after the latest earlier occurrence of the longest suffix (up to
  // kMaxNgram tokens) begin; -1 when no suffix occurred before.
  static int match_end(std::span<const int> t) {
    const int len = static_cast<int>(t.size());
    for (int n = std::min(kMaxNgram, len - 1); n >= 1; --n) {
      const auto pattern = t.subspan(static_cast<size_t>(len - n));
      // latest start j < len - n whose n tokens equal the pattern
      for (int j = len - n - 1; j >= 0; --j) {
        if (std::equal(pattern.begin(), pattern.end(), t.begin() + j)) return j + n;
      }
    }
    return -1;
  }
};

// What a drafter that runs a model shares: one forward per draft position over a batch of
// every drafting sequence, and each row's token drawn the way the session samples.
class ForwardDrafter : public Drafter {
 public:
  ForwardDrafter(std::string name, Backend& backend, const Model& model, int n_layers, int target_vocab,
                 const SamplingParams& sampling, int n_seqs)
      : model_(model),
        backend_(backend),
        n_layers_(n_layers),
        name_(std::move(name)),
        target_vocab_(target_vocab),
        sampling_(sampling) {
    rngs_.reserve(static_cast<size_t>(n_seqs));
    for (int i = 0; i < n_seqs; ++i) {
      // a stream of its own, apart from the candidate's acceptance RNG
      rngs_.emplace_back((sampling.seed + static_cast<uint64_t>(i)) ^ 0xd1b54a32d192ed03ULL);
    }
  }

  std::string name() const override { return name_; }
  const Model* forward_model() const override { return &model_; }
  int forward_layers() const override { return n_layers_; }
  // As many as asked, cut to the model's context.
  int proposable(int, std::span<const int> tokens, int most) const override {
    return std::max(0, std::min(most, model_.config.context_length - static_cast<int>(tokens.size()) + 1));
  }

 protected:

  // Drafts want[r] tokens for requests[r] through `cache`, where its sequence is ids[r]:
  // round 0 feeds first[r] (the tokens the cache has not seen, the last one included),
  // each later round the token drawn in the one before; the last drawn token is never fed.
  void draft(KvCache& cache, std::span<const DraftRequest> requests, std::span<const int> want,
             std::span<const int> ids, std::span<const std::span<const int>> first, std::vector<Draft>& drafts) {
    drafts.assign(requests.size(), Draft{});
    const int rounds = want.empty() ? 0 : *std::max_element(want.begin(), want.end());
    const int vocab = model_.config.vocab_size;
    std::vector<int> rows;  // request index of each logits row
    for (int round = 0; round < rounds; ++round) {
      RaggedBatch batch;
      rows.clear();
      for (size_t r = 0; r < requests.size(); ++r) {
        if (want[r] <= round) continue;
        if (round == 0) {
          batch.add(ids[r], first[r], false);
        } else {
          batch.add(ids[r], std::span<const int>(&drafts[r].tokens.back(), 1), false);
        }
        rows.push_back(static_cast<int>(r));
      }
      run(cache, batch);
      for (size_t row = 0; row < rows.size(); ++row) {
        const size_t r = static_cast<size_t>(rows[row]);
        // only ids the target has: rows beyond its vocabulary are masked out
        const std::span<const float> lg(logits_.data() + row * static_cast<size_t>(vocab),
                                        static_cast<size_t>(std::min(vocab, target_vocab_)));
        if (sampling_.greedy()) {
          drafts[r].tokens.push_back(argmax(lg));
        } else {
          sampling_distribution(sampling_, lg, probs_);
          drafts[r].tokens.push_back(sample_from(probs_, rngs_.at(static_cast<size_t>(requests[r].seq))));
          // a distribution over the target's ids, zero where the draft has no row
          probs_.resize(static_cast<size_t>(target_vocab_), 0.0f);
          drafts[r].probs.insert(drafts[r].probs.end(), probs_.begin(), probs_.end());
        }
      }
    }
  }

  void run(KvCache& cache, const RaggedBatch& batch) {
    backend_.forward(model_, cache, batch, logits_, n_layers_);
    ++forwards_;
  }

  const Model& model_;

 private:
  Backend& backend_;
  int n_layers_;
  std::string name_;
  int target_vocab_;            // ids the target scores: proposals stay below it
  SamplingParams sampling_;
  std::vector<Rng> rngs_;       // (n_seqs) each candidate's draft tokens when sampling
  std::vector<float> logits_;   // (rows, vocab) of the last draft forward
  std::vector<float> probs_;    // (vocab) scratch
};

// Self-speculation: the target's first K layers, final norm and output matrix (narrowed to
// 4.5 bits per weight where the target stores them wider: Backend::self_draft_model), run
// through the target's own KV cache. Those layers' keys and values of every verified token
// are the target's, which the draft attends to as they are, so the draft has nothing to
// catch up on: no prefill, no backlog, no cache of its own. Its drafted positions are
// written past the end of each sequence and cut off again before the target verifies
// (which writes them anew, every layer, at its own precision).
class SelfDrafter : public ForwardDrafter {
 public:
  SelfDrafter(std::string name, Backend& backend, const Model& target, int n_layers, const SamplingParams& sampling,
              int n_seqs)
      : ForwardDrafter(std::move(name), backend, backend.self_draft_model(target, n_layers), n_layers,
                       target.config.vocab_size, sampling, n_seqs) {}

  void prepare(std::span<const int>, int, KvCache& target_cache) override { cache_ = &target_cache; }

  void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) override {
    if (!cache_) throw std::logic_error("self-drafter used before prepare()");
    std::vector<int> want, ids, lengths;
    std::vector<std::span<const int>> first;
    for (const DraftRequest& r : requests) {
      const int length = static_cast<int>(r.tokens.size()) - 1;  // all but the last token are cached
      if (r.cache_seq < 0 || cache_->length(r.cache_seq) != length) {
        throw std::logic_error("self-drafter: the target's cache does not hold the sequence it is asked to draft");
      }
      want.push_back(proposable(r.seq, r.tokens, r.max_tokens));
      ids.push_back(r.cache_seq);
      lengths.push_back(length);
      first.push_back(r.tokens.last(1));
    }
    // the target's cache is left as it was found, even when a forward throws
    struct Restore {
      KvCache& cache;
      std::span<const int> ids, lengths;
      ~Restore() {
        for (size_t r = 0; r < ids.size(); ++r) cache.truncate(ids[r], lengths[r]);
      }
    } restore{*cache_, ids, lengths};
    draft(*cache_, requests, want, ids, first, drafts);
  }
  void sync(int, std::span<const int>) override {}
  void finish(int) override {}

 private:
  KvCache* cache_ = nullptr;  // the target's, set by prepare()
};

// A separate draft model run autoregressively over a KV cache of its own.
class ModelDrafter : public ForwardDrafter {
 public:
  ModelDrafter(Backend& backend, std::shared_ptr<const Model> model, int target_vocab, const SamplingParams& sampling,
               int n_seqs, int max_tokens)
      : ForwardDrafter("model", backend, *model, -1, target_vocab, sampling, n_seqs),
        keep_alive_(std::move(model)),
        cache_(backend.create_cache(model_, max_tokens)),
        seqs_(static_cast<size_t>(n_seqs)) {}

  int blocks_in_use() const override { return cache_->blocks_in_use(); }
  // Before the shared prefill the prompt (but its last token) counts as seen: it is fed
  // once for all sequences, at a cost eager prefilling would have paid anyway.
  int backlog(int seq, std::span<const int> tokens) const override {
    const size_t seen = prefilled_ ? seqs_.at(static_cast<size_t>(seq)).cached.size() : prompt_.size() - 1;
    return static_cast<int>(tokens.size() - seen);
  }
  int setup_tokens() const override { return prefilled_ ? 0 : static_cast<int>(prefill_tokens().size()); }
  double setup_seconds() const override { return setup_seconds_; }
  // A sequence holding an id the draft has no row for (a padding id of a larger target
  // vocabulary) cannot run through the draft: it gets no drafts from then on.
  int proposable(int seq, std::span<const int> tokens, int most) const override {
    const Seq& s = seqs_.at(static_cast<size_t>(seq));
    if (!has_rows(tokens.subspan(std::min(s.cached.size(), tokens.size())))) return 0;
    return ForwardDrafter::proposable(seq, tokens, most);
  }

  // The draft cache is filled when a first draft is asked for, so that a decode whose
  // policy never drafts runs no draft forward at all.
  void prepare(std::span<const int> prompt, int n_seqs, KvCache&) override {
    if (n_seqs != static_cast<int>(seqs_.size())) throw std::logic_error("drafter prepared for another count");
    prompt_.assign(prompt.begin(), prompt.end());
    prefilled_ = false;
  }

  void propose(std::span<const DraftRequest> requests, std::vector<Draft>& drafts) override {
    std::vector<int> want, ids;
    std::vector<std::span<const int>> first;
    for (const DraftRequest& r : requests) {
      if (seqs_.at(static_cast<size_t>(r.seq)).finished) throw std::logic_error("draft for a finished sequence");
      want.push_back(proposable(r.seq, r.tokens, r.max_tokens));
    }
    if (std::any_of(want.begin(), want.end(), [](int w) { return w > 0; })) prefill();
    for (size_t r = 0; r < requests.size(); ++r) {
      const Seq& s = seqs_[static_cast<size_t>(requests[r].seq)];
      ids.push_back(s.id);
      first.push_back(want[r] > 0 ? requests[r].tokens.subspan(s.cached.size()) : std::span<const int>{});
    }
    draft(*cache_, requests, want, ids, first, drafts);
    for (size_t r = 0; r < requests.size(); ++r) {
      if (want[r] == 0) continue;
      Seq& s = seqs_[static_cast<size_t>(requests[r].seq)];
      s.cached.insert(s.cached.end(), first[r].begin(), first[r].end());
      s.cached.insert(s.cached.end(), drafts[r].tokens.begin(), drafts[r].tokens.end() - 1);
    }
  }

  void sync(int seq, std::span<const int> tokens) override {
    Seq& s = seqs_.at(static_cast<size_t>(seq));
    if (s.id < 0) return;  // finished, or not prefilled yet
    // keep the common prefix, and always leave the last token to be fed next time
    size_t keep = 0;
    const size_t limit = std::min(s.cached.size(), tokens.empty() ? 0 : tokens.size() - 1);
    while (keep < limit && s.cached[keep] == tokens[keep]) ++keep;
    if (keep < s.cached.size()) {
      cache_->truncate(s.id, static_cast<int>(keep));
      s.cached.resize(keep);
    }
  }

  void finish(int seq) override {
    Seq& s = seqs_.at(static_cast<size_t>(seq));
    if (s.id >= 0) cache_->release(s.id);
    s.id = -1;
    s.cached.clear();
    s.finished = true;
  }

 private:
  struct Seq {
    int id = -1;              // sequence in the draft cache; -1 before the prefill and once finished
    std::vector<int> cached;  // tokens whose keys/values the draft cache holds
    bool finished = false;    // finish() was called: it takes no part in the prefill
  };

  // Runs all but the last prompt token through the draft once, and forks every live
  // sequence from it (propose() always feeds at least one token). Its time is the run's
  // setup, not a step's (setup_seconds).
  void prefill() {
    if (prefilled_) return;
    prefilled_ = true;
    const auto start = std::chrono::steady_clock::now();
    const int root = cache_->create();
    const std::span<const int> prefix = prefill_tokens();
    const std::vector<int> cached(prefix.begin(), prefix.end());
    if (!cached.empty()) {
      RaggedBatch batch;
      batch.add(root, cached, false);
      run(*cache_, batch);
    }
    for (Seq& s : seqs_) {
      if (s.finished) continue;
      s.id = cache_->fork(root);
      s.cached = cached;
    }
    cache_->release(root);
    setup_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

  // What the prefill runs: the prompt but its last token, or nothing where it holds an id
  // the draft has no row for (propose() then never drafts for it).
  std::span<const int> prefill_tokens() const {
    if (prompt_.empty()) return {};
    const std::span<const int> prefix(prompt_.data(), prompt_.size() - 1);
    return has_rows(prefix) ? prefix : std::span<const int>{};
  }

  bool has_rows(std::span<const int> tokens) const {
    return std::all_of(tokens.begin(), tokens.end(), [&](int t) { return t < model_.config.vocab_size; });
  }

  std::shared_ptr<const Model> keep_alive_;  // the draft model
  std::unique_ptr<KvCache> cache_;
  std::vector<Seq> seqs_;         // (n_seqs)
  std::vector<int> prompt_;       // every sequence's start
  bool prefilled_ = false;        // the draft cache holds the prompt
  double setup_seconds_ = 0;      // spent prefilling the prompt
};

// K of a "layers:K" draft kind, nothing for the other kinds; throws std::invalid_argument
// when K is not a whole number (create_drafter checks it against the model).
std::optional<int> self_draft_layers(std::string_view kind) {
  if (!kind.starts_with("layers:")) return std::nullopt;
  const std::string_view digits = kind.substr(7);
  int k = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), k);
  if (ec != std::errc() || end != digits.data() + digits.size()) {
    throw std::invalid_argument("draft 'layers:K' needs a whole number K, got '" + std::string(kind) + "'");
  }
  return k;
}

}  // namespace

const Model* self_draft_weights(Backend& backend, const Model& target, std::string_view kind) {
  const std::optional<int> k = self_draft_layers(kind);
  if (!k || *k < 1 || *k > target.config.n_layers) return nullptr;
  const Model& weights = backend.self_draft_model(target, *k);
  return &weights == &target ? nullptr : &weights;
}

std::unique_ptr<Drafter> create_drafter(const std::string& kind, Backend& backend,
                                        const Model& target,
                                        std::shared_ptr<const Model> draft_model,
                                        const SamplingParams& sampling, int n_seqs,
                                        int max_tokens) {
  if (kind == "none") return std::make_unique<NoDrafter>();
  if (kind == "ngram") return std::make_unique<NgramDrafter>();
  if (const std::optional<int> parsed = self_draft_layers(kind)) {
    const int k = *parsed;
    const int layers = target.config.n_layers;
    if (k < 1 || k > layers) {
      throw std::invalid_argument("draft 'layers:" + std::to_string(k) + "': K must be between 1 and the target's " +
                                  std::to_string(layers) + " layers");
    }
    return std::make_unique<SelfDrafter>(kind, backend, target, k, sampling, n_seqs);
  }
  if (kind == "model") {
    if (!draft_model) throw std::invalid_argument("draft 'model' needs a draft model file (-d)");
    check_tokenizers_match(target, *draft_model);
    return std::make_unique<ModelDrafter>(backend, std::move(draft_model), target.config.vocab_size, sampling, n_seqs,
                                          max_tokens);
  }
  throw std::invalid_argument("unknown draft kind '" + kind + "': use none, ngram, layers:K or model");
}

}  // namespace specula
