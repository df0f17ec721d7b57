// Drafts whose embedding tables have another number of rows than the target's (padding, as
// Qwen2.5-Coder-0.5B's 151,936 against the 7B's 152,064), on the CPU backend with random
// models: accepted when the tokenizers agree on every id both have, greedy speculative output
// equal to plain greedy output, no id the target lacks ever proposed; a tokenizer that differs
// is refused naming the first differing id.
#include <QtTest>

#include <algorithm>
#include <numeric>

#include "compute/backend.h"
#include "decode/decoder.h"
#include "model/random_model.h"
#include "model/tokenizer.h"

using namespace specula;

namespace {

constexpr int kPieces = 97;  // pieces of the shared vocabulary
constexpr int kPadded = 100; // rows of the padded table

// A byte-level vocabulary: the printable ASCII characters, "Ġ" (space), "Ċ" (newline),
// <|endoftext|>, then [PADn] pieces up to `size`, as llama.cpp's converter pads tables.
Vocabulary vocabulary(int size) {
  Vocabulary v;
  v.model = TokenizerModel::ByteLevelBpe;
  v.pre = "gpt-2";
  v.bos = -1;
  v.unk = -1;
  v.add_bos = v.add_dummy_prefix = v.byte_fallback = false;
  for (char c = '!'; c <= '~'; ++c) v.pieces.emplace_back(1, c);
  v.pieces.push_back("\xC4\xA0");
  v.pieces.push_back("\xC4\x8A");
  v.kinds.assign(v.pieces.size(), TokenKind::Normal);
  v.pieces.push_back("<|endoftext|>");
  v.kinds.push_back(TokenKind::Control);
  v.eos = kPieces - 1;
  for (int id = kPieces; id < size; ++id) {
    v.pieces.push_back("[PAD" + std::to_string(id) + "]");
    v.kinds.push_back(TokenKind::Unused);
  }
  v.scores.assign(v.pieces.size(), 0.0f);
  return v;
}

// A random model with `rows` embedding rows whose padding rows (kPieces and up) have their
// output weights scaled by `boost` (above 1: greedy decoding picks them more often).
std::shared_ptr<Model> padded_model(int rows, uint64_t seed, float boost = 1.0f) {
  ModelConfig config = random_model_config("tiny");
  config.vocab_size = rows;
  const auto random = make_random_model(config, TensorType::F32, seed, 1);
  auto model = std::make_shared<Model>(*random);
  model->storage.push_back(random);
  const TensorView& out = random->weights.output;
  auto boosted = std::make_shared<std::vector<float>>(static_cast<const float*>(out.data),
                                                      static_cast<const float*>(out.data) + out.rows * out.cols);
  for (int64_t r = kPieces; r < out.rows; ++r)
    for (int64_t c = 0; c < out.cols; ++c) (*boosted)[static_cast<size_t>(r * out.cols + c)] *= boost;
  model->weights.output = TensorView{TensorType::F32, out.cols, out.rows, boosted->data()};
  model->storage.push_back(boosted);
  model->tokenizer = create_tokenizer(vocabulary(rows));
  return model;
}

// The same weights cut to their first `rows` rows: the same model over fewer ids.
std::shared_ptr<Model> cut_to(const std::shared_ptr<Model>& model, int rows) {
  auto cut = std::make_shared<Model>(*model);
  cut->storage.push_back(model);
  cut->config.vocab_size = rows;
  cut->weights.token_embedding.rows = rows;
  cut->weights.output.rows = rows;
  cut->tokenizer = create_tokenizer(vocabulary(rows));
  return cut;
}

DecodeResult run(Backend& backend, const Model& target, std::shared_ptr<const Model> draft, const std::string& kind,
                 const std::vector<int>& prompt, const DecodeOptions& o) {
  const int tokens = decode_cache_tokens(static_cast<int>(prompt.size()), target.config.context_length, o);
  auto cache = backend.create_cache(target, tokens);
  auto drafter = create_drafter(kind, backend, target, std::move(draft), o.sampling, o.n_seqs, tokens);
  auto policy = create_draft_policy("fixed:4", o.n_seqs);
  return decode(backend, target, *cache, *drafter, *policy, prompt, o);
}

std::string error_of(const Model& target, std::shared_ptr<const Model> draft, Backend& backend) {
  try {
    create_drafter("model", backend, target, std::move(draft), SamplingParams{}, 1, 64);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return {};
}

}  // namespace

class TestDraftVocabulary : public QObject {
  Q_OBJECT

 private slots:
  // The target has 100 rows, the draft (its own weights) 97: accepted, and greedy
  // speculation gives plain greedy output, with the draft right where the target picks
  // shared ids, and when the target picks padding ids the draft has no row for (a sequence
  // holding one gets no more drafts).
  void fewerRowsSameTokenizer_data() {
    QTest::addColumn<float>("boost");
    QTest::newRow("padding rows as trained") << 1.0f;
    QTest::newRow("padding rows picked often") << 1.8f;
  }
  void fewerRowsSameTokenizer() {
    QFETCH(float, boost);
    auto backend = create_cpu_backend(1);
    const auto target = padded_model(kPadded, 7, boost);
    const auto draft = cut_to(target, kPieces);
    DecodeOptions o;
    o.n_seqs = 3;
    o.max_new_tokens = 48;
    const std::vector<int> prompt = {5, 17, 33, 60, 2};
    const DecodeResult plain = run(*backend, *target, nullptr, "none", prompt, o);
    const DecodeResult spec = run(*backend, *target, draft, "model", prompt, o);
    const std::vector<int>& expected = plain.seqs[0].tokens;
    QCOMPARE(expected.size(), size_t(48));
    const bool padding = std::any_of(expected.begin(), expected.end(), [](int t) { return t >= kPieces; });
    QCOMPARE(padding, boost > 1.0f);
    int accepted = 0;
    for (const SequenceOutput& seq : spec.seqs) {
      QCOMPARE(seq.tokens, expected);
      accepted += seq.accepted;
    }
    if (!padding) QVERIFY(accepted > 0);
  }

  // The draft has more rows than the target: its extra ids are masked out of every proposal,
  // greedy and sampled, and sampled drafts come with distributions over the target's ids.
  void moreRowsNeverProposed() {
    auto backend = create_cpu_backend(1);
    const auto big = padded_model(kPadded, 11, 1.8f);
    const auto target = cut_to(big, kPieces);
    for (const float temperature : {0.0f, 1.0f}) {
      SamplingParams sampling;
      sampling.temperature = temperature;
      sampling.seed = 3;
      auto drafter = create_drafter("model", *backend, *target, big, sampling, 2, 256);
      const std::vector<int> prompt = {1, 40, 41, 42};
      auto target_cache = backend->create_cache(*target, 256);
      drafter->prepare(prompt, 2, *target_cache);
      std::vector<int> tokens = prompt;
      int proposed = 0;
      for (int step = 0; step < 12; ++step) {
        std::vector<DraftRequest> requests = {{0, tokens, 4}, {1, tokens, 4}};
        std::vector<Draft> drafts;
        drafter->propose(requests, drafts);
        for (const Draft& d : drafts) {
          for (const int t : d.tokens) QVERIFY2(t >= 0 && t < kPieces, qPrintable(QString::number(t)));
          proposed += static_cast<int>(d.tokens.size());
          if (temperature > 0) {
            QCOMPARE(d.probs.size(), d.tokens.size() * size_t(kPieces));
            const float sum = std::accumulate(d.probs.begin(), d.probs.begin() + kPieces, 0.0f);
            QVERIFY(std::abs(sum - 1.0f) < 1e-4f);
          }
        }
        // accept the first draft as it is, as a decoder would after verification
        tokens.insert(tokens.end(), drafts[0].tokens.begin(), drafts[0].tokens.end());
        drafter->sync(0, tokens);
        drafter->sync(1, tokens);
      }
      QCOMPARE(proposed, 12 * 2 * 4);
      drafter->finish(0);
      drafter->finish(1);
    }
  }

  void differentTokenizerRefused() {
    auto backend = create_cpu_backend(1);
    const auto target = padded_model(kPadded, 5);
    auto draft = cut_to(target, kPieces);
    QVERIFY(error_of(*target, draft, *backend).empty());
    Vocabulary other = vocabulary(kPieces);
    std::swap(other.pieces[40], other.pieces[41]);
    draft->tokenizer = create_tokenizer(other);
    const std::string error = error_of(*target, draft, *backend);
    QVERIFY2(error.find("token 40 ") != std::string::npos, error.c_str());
    other = vocabulary(kPieces);
    other.eos = 3;
    draft->tokenizer = create_tokenizer(other);
    QVERIFY(error_of(*target, draft, *backend).find("BOS/EOS") != std::string::npos);
    // without tokenizers only equal tables can be trusted
    auto bare_target = std::make_shared<Model>(*target);
    auto bare_draft = std::make_shared<Model>(*draft);
    bare_target->tokenizer = nullptr;
    bare_draft->tokenizer = nullptr;
    QVERIFY(error_of(*bare_target, bare_draft, *backend).find("embedding rows") != std::string::npos);
    QVERIFY(error_of(*target, bare_draft, *backend).find("only one") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestDraftVocabulary)
#include "test_draft_vocabulary.moc"
