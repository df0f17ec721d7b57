// The CPU backend's forward pass against a naive float64 forward written here, on random
// models with odd sizes, grouped-query attention and an untied output matrix, over a
// multi-step sequence through the paged cache, on every SIMD level this processor runs;
// and on the qwen2 (q, k, v biases), qwen3 (per-head q/k norms, heads wider than
// dim / n_heads, rotation of halves) and scaled-rope variants, whose reference computes
// each frequency here from its definition.
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QtTest>
#include <algorithm>
#include <cmath>
#include <vector>

#include "compute/backend.h"
#include "eval/perplexity.h"
#include "model/tokenizer.h"
#include "logit_error.h"
#include "model/random_model.h"
#include "shared_data.h"

using namespace specula;
using specula::test::relative_error;

namespace {

using Matrix = std::vector<std::vector<double>>;  // (rows, cols)

std::vector<int> ints(const QJsonArray& a) {
  std::vector<int> out;
  for (const QJsonValue& v : a) out.push_back(v.toInt());
  return out;
}

size_t common_prefix(const std::vector<int>& a, const std::vector<int>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// tests/data/smollm2_llamacpp_reference.json (tools/oracles/llamacpp_reference.py).
QJsonObject llamacpp_reference() {
  QFile file(specula::test::testDataDir() + "/smollm2_llamacpp_reference.json");
  if (!file.open(QIODevice::ReadOnly)) qFatal("cannot read %s", qPrintable(file.fileName()));
  return QJsonDocument::fromJson(file.readAll()).object();
}

// `count` greedy tokens after `prompt` (no BOS), the argmax of each forward's logits.
std::vector<int> greedy(Backend& backend, const Model& model, const std::vector<int>& prompt, int count) {
  std::unique_ptr<KvCache> cache = backend.create_cache(model, static_cast<int>(prompt.size()) + count, -1, 16);
  const int seq = cache->create();
  const std::vector<int32_t> tokens(prompt.begin(), prompt.end());
  RaggedBatch batch;
  batch.add(seq, tokens, false);
  std::vector<float> logits;
  backend.forward(model, *cache, batch, logits);
  std::vector<int> out;
  for (int i = 0; i < count; ++i) {
    const int32_t next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(next);
    RaggedBatch step;
    step.add(seq, std::span(&next, 1), true);
    backend.forward(model, *cache, step, logits);
  }
  return out;
}

Matrix decode(const TensorView& view) {
  Matrix m(static_cast<size_t>(view.rows), std::vector<double>(static_cast<size_t>(view.cols)));
  std::vector<float> row(static_cast<size_t>(view.cols));
  for (int64_t r = 0; r < view.rows; ++r) {
    dequantize_row(view.type, view.row(r), row.data(), view.cols);
    m[r].assign(row.begin(), row.end());
  }
  return m;
}

std::vector<double> matvec(const Matrix& w, const std::vector<double>& x) {
  std::vector<double> y(w.size());
  for (size_t r = 0; r < w.size(); ++r) {
    double s = 0.0;
    for (size_t c = 0; c < x.size(); ++c) s += w[r][c] * x[c];
    y[r] = s;
  }
  return y;
}

std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& weight,
                            double eps) {
  double ss = 0.0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = weight[i] * x[i] * scale;
  return out;
}

// The angle per position of pair i: theta^(-2i/d), divided by the linear factor and by
// llama3's factor for the pair's wavelength (1 short, `factor` long, blended between).
double frequency(const ModelConfig& c, int i, const std::vector<double>& llama3) {
  const int d = c.head_dim();
  double f = std::pow(double(c.rope_theta), -2.0 * i / d) / c.rope_linear_factor;
  if (!llama3.empty()) {  // factor, low_freq_factor, high_freq_factor, original context
    const double wavelength = 2 * M_PI / f, low = llama3[3] / llama3[1], high = llama3[3] / llama3[2];
    if (wavelength > low) {
      f /= llama3[0];
    } else if (wavelength >= high) {
      const double smooth = (llama3[3] / wavelength - llama3[1]) / (llama3[2] - llama3[1]);
      f = (1 - smooth) * f / llama3[0] + smooth * f;
    }
  }
  return f;
}

void rope(std::vector<double>& x, const ModelConfig& c, int position, const std::vector<double>& llama3) {
  const int head_dim = c.head_dim(), half = head_dim / 2;
  for (size_t h = 0; h < x.size() / head_dim; ++h) {
    for (int i = 0; i < half; ++i) {
      const double angle = position * frequency(c, i, llama3);
      const bool adjacent = c.rope_style == RopeStyle::Adjacent;
      double& a = x[h * head_dim + (adjacent ? 2 * i : i)];
      double& b = x[h * head_dim + (adjacent ? 2 * i + 1 : i + half)];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(angle) - b0 * std::sin(angle);
      b = a0 * std::sin(angle) + b0 * std::cos(angle);
    }
  }
}

std::vector<double> vector_or_empty(const TensorView& v) { return v.empty() ? std::vector<double>{} : decode(v)[0]; }

void add(std::vector<double>& x, const std::vector<double>& bias) {
  for (size_t i = 0; i < bias.size(); ++i) x[i] += bias[i];
}

// RMSNorm of each head of x with the same weights (qwen3's q_norm, k_norm).
void norm_heads(std::vector<double>& x, const std::vector<double>& weight, double eps) {
  if (weight.empty()) return;
  for (size_t at = 0; at < x.size(); at += weight.size()) {
    const std::vector<double> head(x.begin() + at, x.begin() + at + weight.size());
    const std::vector<double> normed = rmsnorm(head, weight, eps);
    std::copy(normed.begin(), normed.end(), x.begin() + at);
  }
}

// One sequence, one token at a time, everything in double.
class ReferenceModel {
 public:
  // `llama3`: {factor, low_freq_factor, high_freq_factor, original context} when the model
  // has llama3 scaling, empty otherwise.
  ReferenceModel(const Model& model, int n_layers, std::vector<double> llama3 = {})
      : c_(model.config), n_layers_(n_layers), llama3_(std::move(llama3)) {
    const Weights& w = model.weights;
    embedding_ = decode(w.token_embedding);
    for (int l = 0; l < n_layers; ++l) {
      const LayerWeights& lw = w.layers[l];
      layers_.push_back({decode(lw.attn_norm)[0],
                         decode(lw.wq),
                         decode(lw.wk),
                         decode(lw.wv),
                         decode(lw.wo),
                         decode(lw.ffn_norm)[0],
                         decode(lw.w_gate),
                         decode(lw.w_up),
                         decode(lw.w_down),
                         vector_or_empty(lw.bq),
                         vector_or_empty(lw.bk),
                         vector_or_empty(lw.bv),
                         vector_or_empty(lw.bo),
                         vector_or_empty(lw.q_norm),
                         vector_or_empty(lw.k_norm),
                         {},
                         {}});
    }
    final_norm_ = decode(w.final_norm)[0];
    output_ = decode(w.output);
  }

  std::vector<double> step(int token) {
    const int position = static_cast<int>(positions_++);
    const int hd = c_.head_dim(), group = c_.n_heads / c_.n_kv_heads;
    std::vector<double> x = embedding_[token];
    for (Layer& L : layers_) {
      std::vector<double> xb = rmsnorm(x, L.attn_norm, c_.norm_eps);
      std::vector<double> q = matvec(L.wq, xb), k = matvec(L.wk, xb), v = matvec(L.wv, xb);
      add(q, L.bq);
      add(k, L.bk);
      add(v, L.bv);
      norm_heads(q, L.q_norm, c_.norm_eps);
      norm_heads(k, L.k_norm, c_.norm_eps);
      rope(q, c_, position, llama3_);
      rope(k, c_, position, llama3_);
      L.keys.push_back(k);
      L.values.push_back(v);
      std::vector<double> attn(static_cast<size_t>(c_.q_dim()), 0.0);
      for (int h = 0; h < c_.n_heads; ++h) {
        const int kvh = h / group;
        std::vector<double> scores;
        double max_score = -INFINITY;
        for (size_t p = 0; p < L.keys.size(); ++p) {
          double s = 0.0;
          for (int i = 0; i < hd; ++i) s += q[h * hd + i] * L.keys[p][kvh * hd + i];
          scores.push_back(s / std::sqrt(double(hd)));
          max_score = std::max(max_score, scores.back());
        }
        double sum = 0.0;
        for (double& s : scores) sum += (s = std::exp(s - max_score));
        for (size_t p = 0; p < scores.size(); ++p) {
          for (int i = 0; i < hd; ++i)
            attn[h * hd + i] += scores[p] / sum * L.values[p][kvh * hd + i];
        }
      }
      std::vector<double> o = matvec(L.wo, attn);
      add(o, L.bo);
      for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
      xb = rmsnorm(x, L.ffn_norm, c_.norm_eps);
      std::vector<double> g = matvec(L.w_gate, xb);
      const std::vector<double> u = matvec(L.w_up, xb);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const std::vector<double> d = matvec(L.w_down, g);
      for (size_t i = 0; i < x.size(); ++i) x[i] += d[i];
    }
    return matvec(output_, rmsnorm(x, final_norm_, c_.norm_eps));
  }

 private:
  struct Layer {
    std::vector<double> attn_norm;
    Matrix wq, wk, wv, wo;
    std::vector<double> ffn_norm;
    Matrix w_gate, w_up, w_down;
    std::vector<double> bq, bk, bv, bo, q_norm, k_norm;  // empty when the model has none
    Matrix keys, values;  // (positions, kv_dim)
  };
  ModelConfig c_;
  int n_layers_;
  std::vector<double> llama3_;
  Matrix embedding_;
  std::vector<Layer> layers_;
  std::vector<double> final_norm_;
  Matrix output_;
  size_t positions_ = 0;
};

ModelConfig odd_config() {
  ModelConfig c;
  c.name = "odd";
  c.dim = 48;
  c.hidden_dim = 136;
  c.n_layers = 2;
  c.n_heads = 6;
  c.n_kv_heads = 2;
  c.vocab_size = 101;
  c.context_length = 64;
  c.rope_theta = 500.0f;
  c.norm_eps = 1e-5f;
  return c;
}

// Runs an 12-token sequence through the engine in chunks of 5, 1, 1, 1, 4 tokens (all
// logits wanted) and returns the worst relative error against the reference. On several
// threads every job is split between them, small as these models' matrices are.
double worst_error_at(const Model& model, int n_layers, int threads, SimdLevel level,
                      std::vector<double> llama3) {
  std::unique_ptr<Backend> backend = create_cpu_backend(threads, level, threads > 1);
  std::unique_ptr<KvCache> cache = backend->create_cache(model, 64, n_layers, 4);
  ReferenceModel reference(model, n_layers < 0 ? model.config.n_layers : n_layers, std::move(llama3));
  const int seq = cache->create();
  const std::vector<int32_t> tokens{1,  17, 42, 3, 99 % model.config.vocab_size, 5, 64, 8,
                                    23, 71, 0,  13};
  const std::vector<int> chunks{5, 1, 1, 1, 4};
  double worst = 0.0;
  size_t next = 0;
  for (int chunk : chunks) {
    RaggedBatch batch;
    batch.add(seq, std::span(tokens).subspan(next, chunk), true);
    std::vector<float> logits;
    backend->forward(model, *cache, batch, logits, n_layers);
    if (logits.size() != static_cast<size_t>(chunk) * model.config.vocab_size) return INFINITY;
    for (int i = 0; i < chunk; ++i) {
      worst = std::max(worst, relative_error(logits.data() + i * model.config.vocab_size,
                                             reference.step(tokens[next + i])));
    }
    next += chunk;
  }
  return worst;
}

// The worst of worst_error_at over every SIMD level.
double worst_error(const Model& model, int n_layers, int threads, std::vector<double> llama3 = {}) {
  double worst = 0.0;
  for (SimdLevel level : testable_simd_levels()) {
    worst = std::max(worst, worst_error_at(model, n_layers, threads, level, llama3));
  }
  return worst;
}

// Perplexity as eval/perplexity.h defines it, from the float64 reference, one token at a
// time: windows of `context` positions, BOS first when `bos` >= 0, every position but the
// first scored from the reference's logits before it.
double reference_perplexity(const Model& model, const std::vector<int>& text, int context, int bos, long* scored) {
  const size_t per_window = static_cast<size_t>(context - (bos >= 0 ? 1 : 0));
  double nll = 0.0;
  *scored = 0;
  for (size_t start = 0; start < text.size(); start += per_window) {
    std::vector<int> window;
    if (bos >= 0) window.push_back(bos);
    for (size_t i = start; i < std::min(text.size(), start + per_window); ++i) window.push_back(text[i]);
    ReferenceModel reference(model, model.config.n_layers);
    std::vector<double> logits = reference.step(window[0]);
    for (size_t p = 1; p < window.size(); ++p) {
      double top = -INFINITY, sum = 0.0;
      for (double v : logits) top = std::max(top, v);
      for (double v : logits) sum += std::exp(v - top);
      nll += std::log(sum) - (logits[static_cast<size_t>(window[p])] - top);
      ++*scored;
      logits = reference.step(window[p]);
    }
  }
  return std::exp(nll / static_cast<double>(*scored));
}

}  // namespace

class TestForwardReference : public QObject {
  Q_OBJECT

 private slots:
  // f32 weights: only float32 rounding separates the engine from float64.
  void f32MatchesFloat64() {
    const auto model = make_random_model(odd_config(), TensorType::F32, 1);
    const double error = worst_error(*model, -1, 2);
    qInfo("f32 worst relative error %.3g", error);
    QVERIFY2(error < 1e-5, qPrintable(QString::number(error)));
  }

  // The draft of self-speculation: the first layer, then the final norm and output.
  void firstLayersOnlyMatchFloat64() {
    const auto model = make_random_model(odd_config(), TensorType::F32, 2);
    const double error = worst_error(*model, 1, 1);
    QVERIFY2(error < 1e-5, qPrintable(QString::number(error)));
  }

  // f16 and bf16 weights decode exactly to float; the engine multiplies those exact values
  // in float32, so the f32 bound holds against float64 on the decoded weights.
  void halfPrecisionWeightsMatchFloat64() {
    for (TensorType type : {TensorType::F16, TensorType::BF16}) {
      const auto model = make_random_model(odd_config(), type, 3);
      const double error = worst_error(*model, -1, 2);
      qInfo("%s worst relative error %.3g", type_traits(type).name.data(), error);
      QVERIFY2(error < 1e-5, qPrintable(QString::number(error)));
    }
  }

  // Q8_0 / Q4_0 weights meet activations rounded to 8 bits per 32-value block: up to
  // amax / 254 per value, random in sign, about 0.5% relative error per matrix product
  // for Gaussian-like activations. 3 layers chain about 20 products, so errors of order
  // sqrt(20) * 0.5% = 2.5% are expected (and measured). The bound, 5%, still catches
  // any layout or scale mistake, which gives errors of order 100% (test_cpu_kernels
  // checks the products themselves to 1e-5).
  void quantizedWeightsMatchFloat64() {
    for (TensorType type : {TensorType::Q8_0, TensorType::Q4_0}) {
      const auto model = make_random_model(random_model_config("tiny"), type, 4);
      const double error = worst_error(*model, -1, 2);
      qInfo("%s worst relative error %.3g", type_traits(type).name.data(), error);
      QVERIFY2(error < 5e-2, qPrintable(QString::number(error)));
    }
  }

  // qwen2 (biases), qwen3 (q/k norms, 32-wide heads: q is twice dim), both rotating
  // halves; the engine's stages against the reference's.
  void qwenMatchFloat64() {
    for (const char* shape : {"tiny-qwen2", "tiny-qwen3"}) {
      for (TensorType type : {TensorType::F32, TensorType::BF16}) {
        const auto model = make_random_model(random_model_config(shape), type, 6);
        QCOMPARE(model->config.rope_style, RopeStyle::Halves);
        const double error = worst_error(*model, -1, 2);
        qInfo("%s %s worst relative error %.3g", shape, type_traits(type).name.data(), error);
        QVERIFY2(error < 1e-5, qPrintable(QString::number(error)));
      }
    }
    QCOMPARE(random_model_config("tiny-qwen3").q_dim(), 128);
  }

  // Quantized qwen weights: the bound and its reasoning of quantizedWeightsMatchFloat64.
  void quantizedQwenMatchFloat64() {
    for (const char* shape : {"tiny-qwen2", "tiny-qwen3"}) {
      const auto model = make_random_model(random_model_config(shape), TensorType::Q8_0, 7);
      const double error = worst_error(*model, -1, 2);
      qInfo("%s q8_0 worst relative error %.3g", shape, error);
      QVERIFY2(error < 5e-2, qPrintable(QString::number(error)));
    }
  }

  // Linear scaling (positions / 4) and llama3 scaling, whose factors the engine computes
  // with llama3_rope_factors and the reference from the definition. Theta 10000 over
  // 16-wide heads gives wavelengths 6.3 ... 4.7e3, so an original context of 64 with
  // factors 1 and 4 puts pairs on both sides of the blend and in it.
  void scaledRopeMatchesFloat64() {
    ModelConfig c = odd_config();
    c.dim = 64;
    c.n_heads = 4;
    c.n_kv_heads = 2;
    c.rope_theta = 10000.0f;
    c.rope_linear_factor = 4.0f;
    const auto linear = make_random_model(c, TensorType::F32, 8);
    const double linear_error = worst_error(*linear, -1, 2);
    QVERIFY2(linear_error < 1e-5, qPrintable(QString::number(linear_error)));

    c.rope_linear_factor = 1.0f;
    c.rope_freq_factors = llama3_rope_factors(c.rope_theta, c.head_dim(), 8.0, 1.0, 4.0, 64.0);
    QCOMPARE(c.rope_freq_factors.front(), 1.0f);
    QCOMPARE(c.rope_freq_factors.back(), 8.0f);
    QVERIFY(std::any_of(c.rope_freq_factors.begin(), c.rope_freq_factors.end(),
                        [](float f) { return f > 1.0f && f < 8.0f; }));
    const auto llama3 = make_random_model(c, TensorType::F32, 8);
    const double llama3_error = worst_error(*llama3, -1, 2, {8.0, 1.0, 4.0, 64.0});
    qInfo("linear %.3g, llama3 %.3g worst relative error", linear_error, llama3_error);
    QVERIFY2(llama3_error < 1e-5, qPrintable(QString::number(llama3_error)));
    // the same weights without the scaling are measurably another model
    const double unscaled_error = worst_error(*llama3, -1, 2, {});
    QVERIFY2(unscaled_error > 1e-3, qPrintable(QString::number(unscaled_error)));
  }

  // Q4_K / Q6_K weights meet activations rounded to 8 bits per 256 values: a coarser step
  // than Q8_0's, so the same reasoning allows 10% (a layout or scale mistake gives ~100%).
  void kQuantWeightsMatchFloat64() {
    ModelConfig config = odd_config();
    config.dim = 256;
    config.hidden_dim = 512;
    config.n_heads = 4;
    for (TensorType type : {TensorType::Q4_K, TensorType::Q6_K}) {
      const auto model = make_random_model(config, type, 6);
      const double error = worst_error(*model, -1, 2);
      qInfo("%s worst relative error %.3g", type_traits(type).name.data(), error);
      QVERIFY2(error < 1e-1, qPrintable(QString::number(error)));
    }
  }

  // The real SmolLM2-135M-Instruct Q4_1 file (30 layers, 9 heads on 3 KV heads, a tied Q8_0
  // embedding; its matrices go through the Q4_1 kernel): a code prompt, then 16 greedy
  // tokens, the engine against the float64 reference on the file's own decoded weights. The
  // engine rounds activations to 8 bits before each product, so over 30 layers its logits
  // move by a few percent of their range; a layout or scale mistake moves them by about all
  // of it. Each greedy token must be the reference's argmax, or within 2% of the reference
  // row's range of it (a near tie the rounding may flip), and most must be the argmax.
  // The real SmolLM2 Q4_1 file's perplexity on a Python text against numpy's float64
  // forward on the weights as llama.cpp's gguf package dequantizes them, with the text
  // tokenized by Hugging Face tokenizers (tools/oracles/perplexity_oracle.py, its output in
  // tests/data): the same ids, counts and windows, and the figure within 1 % (the engine's
  // quantized activations move it by about 0.2 %).
  void realSmolLM2PerplexityMatchesNumpy() {
    SPECULA_REAL_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    QFile file(specula::test::testDataDir() + "/perplexity_oracle.json");
    QVERIFY(file.open(QIODevice::ReadOnly));
    const QJsonObject oracle = QJsonDocument::fromJson(file.readAll()).object();
    std::vector<int> ids;
    for (const QJsonValue& v : oracle["ids"].toArray()) ids.push_back(v.toInt());
    const auto model = load_model(path);
    QCOMPARE(model->tokenizer->encode(oracle["text"].toString().toStdString(), false), ids);
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    PerplexityOptions options;
    options.context = oracle["context"].toInt();
    const PerplexityResult got = perplexity(*backend, *model, ids, options);
    QCOMPARE(got.scored, long(oracle["scored"].toInt()));
    QCOMPARE(got.windows, oracle["windows"].toInt());
    const double want = oracle["perplexity"].toDouble();
    qInfo("SmolLM2 Q4_1: perplexity %.5f, numpy float64 %.5f (%+.3f %%)", got.perplexity(), want,
          100 * (got.perplexity() / want - 1));
    QVERIFY2(std::abs(got.perplexity() / want - 1) < 0.01, qPrintable(QString::number(got.perplexity())));
  }

  void realSmolLM2Q4_1MatchesFloat64() {
    SPECULA_REAL_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const auto model = load_model(path);
    QVERIFY(model->weights.layers.at(0).wq.type == TensorType::Q4_1);
    QVERIFY(model->weights.token_embedding.type == TensorType::Q8_0);
    const std::vector<int> ids = model->tokenizer->encode("def fibonacci(n):\n    ", false);
    const std::vector<int32_t> prompt(ids.begin(), ids.end());
    QVERIFY(prompt.size() >= 5);
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    std::unique_ptr<KvCache> cache = backend->create_cache(*model, 64, -1, 16);
    ReferenceModel reference(*model, model->config.n_layers);
    const int seq = cache->create();
    std::vector<double> ref;
    for (int32_t t : prompt) ref = reference.step(t);
    RaggedBatch batch;
    batch.add(seq, prompt, false);
    std::vector<float> logits;
    backend->forward(*model, *cache, batch, logits);
    const int vocab = model->config.vocab_size;
    QCOMPARE(logits.size(), size_t(vocab));
    double worst = 0.0;
    int argmax_matches = 0;
    constexpr int kSteps = 16;
    std::vector<int> generated;
    for (int step = 0; step < kSteps; ++step) {
      worst = std::max(worst, relative_error(logits.data(), ref));
      const int mine = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      const int best = static_cast<int>(std::max_element(ref.begin(), ref.end()) - ref.begin());
      const auto [lo, hi] = std::minmax_element(ref.begin(), ref.end());
      QVERIFY2(mine == best || ref[best] - ref[mine] <= 0.02 * (*hi - *lo),
               qPrintable(QString("step %1: engine %2 (reference logit %3), reference %4 (%5)")
                              .arg(step).arg(mine).arg(ref[mine]).arg(best).arg(ref[best])));
      argmax_matches += mine == best;
      generated.push_back(mine);
      ref = reference.step(mine);
      RaggedBatch next;
      const int32_t token = mine;
      next.add(seq, std::span(&token, 1), true);
      backend->forward(*model, *cache, next, logits);
    }
    qInfo("SmolLM2 Q4_1: worst relative logit error %.3g, %d of %d greedy tokens the float64 argmax: %s", worst,
          argmax_matches, kSteps, model->tokenizer->decode(generated).c_str());
    QVERIFY2(worst < 0.1, qPrintable(QString::number(worst)));
    QVERIFY(argmax_matches >= kSteps - 2);
  }

  // The same file against llama.cpp and transformers (tools/oracles/llamacpp_reference.py,
  // tests/data/smollm2_llamacpp_reference.json). Greedy: five code prompts, no BOS (the file
  // adds none), the engine's argmax token by token against llama.cpp's; at least 8 tokens
  // alike on at least 4 of the 5. Where they part, the reference's gap between its best and
  // second-best logit there says whether it was a near tie (Q4_1 with 8-bit activations, in
  // both engines, moves logits by about 0.1 of the ~30-wide range).
  void realSmolLM2GreedyMatchesLlamaCpp() {
    SPECULA_REAL_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const QJsonObject oracle = llamacpp_reference();
    const auto model = load_model(path);
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    const QJsonArray cases = oracle["greedy"].toArray();
    QCOMPARE(cases.size(), 5);
    int alike_for_8 = 0;
    for (const QJsonValue& c : cases) {
      const std::vector<int> prompt = ints(c["prompt_ids"].toArray());
      QCOMPARE(model->tokenizer->encode(c["prompt"].toString().toStdString(), false), prompt);
      const std::vector<int> want = ints(c["llama_cpp_ids"].toArray());
      const std::vector<int> got = greedy(*backend, *model, prompt, static_cast<int>(want.size()));
      const std::vector<int> hf = ints(c["transformers_ids"].toArray());
      const size_t same = common_prefix(got, want);
      if (same >= 8) ++alike_for_8;
      if (same < want.size()) {
        const QJsonArray gaps = c["llama_cpp_top_gaps"].toArray();
        qInfo("%s: parts from llama.cpp at token %zu (engine %d, llama.cpp %d, its top-2 logit gap %.3f; "
              "transformers float32 gives %d, %zu tokens alike with llama.cpp, %zu with the engine)",
              qPrintable(c["prompt"].toString().split('\n').first()), same, got[same], want[same],
              gaps.at(static_cast<qsizetype>(same)).toDouble(), hf.at(same), common_prefix(hf, want),
              common_prefix(hf, got));
      } else {
        qInfo("%s: all %zu tokens as llama.cpp's (%s)", qPrintable(c["prompt"].toString().split('\n').first()),
              same, model->tokenizer->decode(got).c_str());
      }
    }
    QVERIFY2(alike_for_8 >= 4, qPrintable(QString("%1 of 5 prompts alike for 8 tokens").arg(alike_for_8)));
  }

  // Perplexity at a context of 128 on the Python text, against transformers (the GGUF
  // dequantized to float32) with specula's windows, and against llama-perplexity with its own:
  // whole chunks of 128, each scoring positions 65..127 only. The engine computes the latter
  // as a chunk's 128-token window minus its first 65 (causal attention: the first 64 rows
  // are the same in both), so the same tokens are scored from the same context. Within 1 %.
  void realSmolLM2PerplexityMatchesLlamaCppAndTransformers() {
    SPECULA_REAL_MODEL(path, "SmolLM2-135M-Instruct.Q4_1.gguf");
    const QJsonObject ppl = llamacpp_reference()["perplexity"].toObject();
    const std::vector<int> ids = ints(ppl["ids"].toArray());
    QFile text_file(specula::test::testDataDir() + "/perplexity_oracle.json");
    QVERIFY(text_file.open(QIODevice::ReadOnly));
    const std::string text = QJsonDocument::fromJson(text_file.readAll())["text"].toString().toStdString();
    const auto model = load_model(path);
    QCOMPARE(model->tokenizer->encode(text, false), ids);  // llama.cpp's tokenization of the text
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    const int context = ppl["context"].toInt();
    PerplexityOptions options;
    options.context = context;
    const PerplexityResult ours = perplexity(*backend, *model, ids, options);
    const QJsonObject hf_ours = ppl["transformers_specula_windows"].toObject();
    QCOMPARE(ours.scored, long(hf_ours["scored"].toInt()));

    const int first = context / 2;
    double nll = 0.0;
    long scored = 0;
    for (size_t start = 0; start + static_cast<size_t>(context) <= ids.size(); start += static_cast<size_t>(context)) {
      const std::span<const int> chunk(ids.data() + start, static_cast<size_t>(context));
      const PerplexityResult whole = perplexity(*backend, *model, chunk, options);
      const PerplexityResult head = perplexity(*backend, *model, chunk.first(static_cast<size_t>(first) + 1), options);
      nll += whole.nll_sum - head.nll_sum;
      scored += whole.scored - head.scored;
    }
    const double llama_windows = std::exp(nll / static_cast<double>(scored));
    const QJsonObject llama = ppl["llama_perplexity"].toObject();
    const QJsonObject hf_llama = ppl["transformers_llama_windows"].toObject();
    QCOMPARE(scored, long(llama["scored"].toInt()));
    QCOMPARE(scored, long(hf_llama["scored"].toInt()));
    const double want_hf = hf_ours["perplexity"].toDouble();
    const double want_llama = llama["perplexity"].toDouble();
    const double want_hf_llama = hf_llama["perplexity"].toDouble();
    qInfo("specula windows (%ld scored): engine %.4f, transformers %.4f (%+.3f %%)", ours.scored, ours.perplexity(),
          want_hf, 100 * (ours.perplexity() / want_hf - 1));
    qInfo("llama-perplexity windows (%ld scored): engine %.4f, llama-perplexity %.4f (%+.3f %%), transformers %.4f "
          "(%+.3f %%)", scored, llama_windows, want_llama, 100 * (llama_windows / want_llama - 1), want_hf_llama,
          100 * (llama_windows / want_hf_llama - 1));
    QVERIFY2(std::abs(ours.perplexity() / want_hf - 1) < 0.01, qPrintable(QString::number(ours.perplexity())));
    QVERIFY2(std::abs(llama_windows / want_llama - 1) < 0.01, qPrintable(QString::number(llama_windows)));
    QVERIFY2(std::abs(llama_windows / want_hf_llama - 1) < 0.01, qPrintable(QString::number(llama_windows)));
  }

  // specula-cli perplexity's arithmetic against the float64 reference: a random model
  // without BOS (windows of 8, the first of each unscored; forwards of 3 positions, so
  // chunks cross nothing but windows end mid-chunk) and stories260K, whose vocabulary
  // adds BOS (windows of BOS + 15 tokens, every text token scored once).
  void perplexityMatchesFloat64Reference() {
    const auto random = make_random_model(odd_config(), TensorType::F32, 11);
    std::vector<int> text;
    for (int i = 0; i < 30; ++i) text.push_back((i * 37 + 11) % random->config.vocab_size);
    std::unique_ptr<Backend> backend = create_cpu_backend(2);
    PerplexityOptions options;
    options.context = 8;
    options.chunk = 3;
    PerplexityResult got = perplexity(*backend, *random, text, options);
    long scored = 0;
    double want = reference_perplexity(*random, text, 8, -1, &scored);
    QCOMPARE(got.tokens, 30L);
    QCOMPARE(got.windows, 4);       // 8 + 8 + 8 + 6 tokens
    QCOMPARE(got.scored, 26L);      // each window's first is not scored
    QCOMPARE(got.scored, scored);
    qInfo("random model: perplexity %.6f, reference %.6f", got.perplexity(), want);
    QVERIFY2(std::abs(got.perplexity() / want - 1) < 1e-4, qPrintable(QString::number(got.perplexity() / want - 1)));

    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    LoadOptions load;
    load.tokenizer_path = tok;
    const auto stories = load_model(bin, load);
    text = stories->tokenizer->encode("Once upon a time, there was a little girl named Lily. She loved to play outside.", false);
    options.context = 16;
    options.chunk = 5;
    got = perplexity(*backend, *stories, text, options);
    want = reference_perplexity(*stories, text, 16, stories->tokenizer->bos(), &scored);
    QCOMPARE(got.scored, got.tokens);  // BOS predicts each window's first text token
    QCOMPARE(got.scored, scored);
    QCOMPARE(got.windows, int((text.size() + 14) / 15));
    qInfo("stories260K: %ld tokens, perplexity %.6f, reference %.6f", got.tokens, got.perplexity(), want);
    QVERIFY2(std::abs(got.perplexity() / want - 1) < 1e-4, qPrintable(QString::number(got.perplexity() / want - 1)));
  }

  void rejectsBadInput() {
    const auto model = make_random_model(odd_config(), TensorType::F32, 5);
    std::unique_ptr<Backend> backend = create_cpu_backend(1);
    std::unique_ptr<KvCache> cache = backend->create_cache(*model, 8, -1, 4);
    const int seq = cache->create();
    std::vector<float> logits;
    RaggedBatch bad_token;
    bad_token.add(seq, std::vector<int32_t>{1, 101}, true);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             backend->forward(*model, *cache, bad_token, logits));
    QCOMPARE(cache->length(seq), 0);
    RaggedBatch too_long;
    too_long.add(seq, std::vector<int32_t>(9, 1), false);
    QVERIFY_THROWS_EXCEPTION(std::exception, backend->forward(*model, *cache, too_long, logits));
    QCOMPARE(cache->length(seq), 0);
    std::unique_ptr<KvCache> shallow = backend->create_cache(*model, 8, 1, 4);
    RaggedBatch ok;
    ok.add(shallow->create(), std::vector<int32_t>{1}, true);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             backend->forward(*model, *shallow, ok, logits, 2));
    KvCache foreign(4, 2);
    RaggedBatch other;
    other.add(foreign.create(), std::vector<int32_t>{1}, true);
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument,
                             backend->forward(*model, foreign, other, logits));
  }

  void backendChoice() {
    std::string note;
    std::unique_ptr<Backend> cpu = create_backend(DeviceChoice::Cpu, &note);
    QVERIFY(cpu->name().starts_with("cpu ("));
    QVERIFY(note.find(cpu->name()) != std::string::npos);
    std::string why;
    if (create_cuda_backend(&why) == nullptr) {
      QVERIFY(!why.empty());
      qInfo("no CUDA backend: %s", why.c_str());
      // a machine without a driver is told so, not that its driver is too old
      if (!QFileInfo::exists("/proc/driver/nvidia/version")) {
        QVERIFY2(why.find("insufficient") == std::string::npos, why.c_str());
      }
      QVERIFY_THROWS_EXCEPTION(std::runtime_error, create_backend(DeviceChoice::Cuda));
    }
  }
};

QTEST_GUILESS_MAIN(TestForwardReference)
#include "test_forward_reference.moc"
