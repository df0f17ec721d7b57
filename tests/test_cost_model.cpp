// The cost model of forwards (compute/cost_model.h): its arithmetic on a hand-made curve,
// the shape of a measurement on the controlled fake backend (which probes run, how many,
// how the budget bounds them), the identity of a measurement, and the cache file: a valid
// file is used, a stale or corrupt one is measured again and replaced, an unwritable
// directory costs nothing but the file. No assertion depends on how fast anything runs; one
// rests on sleeps, in the direction a sleep cannot miss (it never ends early).
#include <QtTest>

#include <QDateTime>
#include <QFile>
#include <QTemporaryDir>
#include <cmath>
#include <fstream>
#include <functional>
#include <unistd.h>

#include "compute/backend.h"
#include "compute/cost_model.h"
#include "compute/expert_union.h"
#include "model/random_model.h"
#include "fake_backend.h"

using namespace specula;
using namespace specula::test;

namespace {

ForwardCost hand_made() {
  ForwardCost c;
  c.key = "a key";
  c.n_layers = 10;
  c.tokens = {1, 2, 4};
  c.layer_seconds = {1.0, 1.0, 2.0};
  c.head_seconds = {0.5, 0.5, 1.5};
  c.position_seconds = 0.01;
  c.sample_row_seconds = 4e-05;
  return c;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A fake model whose weights "come from" a file of our own, so that it has a key.
std::shared_ptr<Model> model_with_file(const QTemporaryDir& dir) {
  auto m = make_fake_model("target");
  m->path = dir.filePath("model.gguf").toStdString();
  write_text(m->path, "weights");
  return m;
}

// The fake backend, with every whole-model forward of one token first sleeping as long as
// `sleep_ms(n)` says for the n-th of them (from 1).
struct SleepingWholeForwards : FakeBackend {
  std::function<int(int)> sleep_ms;
  int whole_one_token_forwards = 0;
  explicit SleepingWholeForwards(std::function<int(int)> ms) : sleep_ms(std::move(ms)) {}
  void forward(const Model& model, KvCache& cache, const RaggedBatch& batch, std::vector<float>& logits,
               int n_layers) override {
    if (n_layers == model.config.n_layers && batch.n_tokens() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms(++whole_one_token_forwards)));
    }
    FakeBackend::forward(model, cache, batch, logits, n_layers);
  }
};

// The price of a forward as it was before mixtures of experts were priced apart: written out
// again here, so that a dense model's figures can be compared bit for bit.
double interpolate_as_before(const std::vector<int>& xs, const std::vector<double>& ys, double x) {
  if (x <= xs.front()) return ys.front();
  const size_t n = xs.size();
  if (n == 1) return ys.front() * x / xs.front();
  size_t hi = 1;
  while (hi + 1 < n && xs[hi] < x) ++hi;
  const double slope = std::max(0.0, (ys[hi] - ys[hi - 1]) / (xs[hi] - xs[hi - 1]));
  if (x > xs.back()) return ys.back() + std::max(slope, ys.back() / xs.back()) * (x - xs.back());
  return ys[hi - 1] + slope * (x - xs[hi - 1]);
}
double seconds_as_before(const ForwardCost& c, int n, int rows, double positions, int layers = -1) {
  if (n <= 0) return 0.0;
  const int depth = layers < 0 ? c.n_layers : layers;
  return depth * (interpolate_as_before(c.tokens, c.layer_seconds, n) + positions * c.position_seconds) +
         interpolate_as_before(c.tokens, c.head_seconds, rows);
}

// hand_made() as a mixture of 128 experts, 8 per token, its layer_seconds the dense part.
ForwardCost hand_made_mixture() {
  ForwardCost c = hand_made();
  c.n_experts = 128;
  c.n_experts_used = 8;
  c.expert_bytes = 3e6;
  c.expert_seconds = 0.05;
  return c;
}

}  // namespace

class TestCostModel : public QObject {
  Q_OBJECT

 private slots:
  void seconds() {
    const ForwardCost c = hand_made();
    QCOMPARE(c.seconds(1, 1, 0), 10 * 1.0 + 0.5);
    QCOMPARE(c.seconds(3, 1, 0), 10 * 1.5 + 0.5);          // halfway between 2 and 4 tokens
    QCOMPARE(c.seconds(8, 4, 0), 10 * 4.0 + 1.5);          // beyond 4: the last segment's slope
    QCOMPARE(c.seconds(8, 8, 0), 10 * 4.0 + 3.5);
    QCOMPARE(c.seconds(2, 2, 100), 10 * (1.0 + 1.0) + 0.5);  // 100 attended positions
    QCOMPARE(c.seconds(2, 2, 0, 3), 3 * 1.0 + 0.5);        // the first 3 layers (a layers:3 draft)
    QCOMPARE(c.seconds(0, 0, 0), 0.0);
    // beyond the last point at least in proportion to the batch, even after a flat segment
    ForwardCost flat = c;
    flat.layer_seconds = {1.0, 2.0, 2.0};
    QCOMPARE(flat.seconds(8, 1, 0), 10 * (2.0 + 4 * (2.0 / 4)) + 0.5);
    // one sequence of 2 tokens after 10 cached: rows attend to 11 and 12 positions
    QCOMPARE(c.verify_seconds(2, 10), 10 * (1.0 + 23 * 0.01) + 0.5);
  }

  // A dense model's prices are those of the formula before experts, to the bit.
  void denseUnchanged() {
    const ForwardCost c = hand_made();
    for (int n = 0; n <= 40; ++n) {
      for (const double positions : {0.0, 7.0, 1234.5}) {
        QCOMPARE(c.seconds(n, n, positions), seconds_as_before(c, n, n, positions));
        QCOMPARE(c.seconds(n, 1, positions, 3), seconds_as_before(c, n, 1, positions, 3));
      }
      QCOMPARE(c.experts_touched(n), 0.0);
    }
  }

  // A mixture's layer is its dense part plus one expert's seconds per expected distinct
  // expert: the expert part grows with the union, which flattens toward E.
  void expertsPricedByUnion() {
    const ForwardCost m = hand_made_mixture();
    const ForwardCost d = hand_made();
    double last_experts = 0;
    for (int n = 1; n <= 64; ++n) {
      const double u = m.experts_touched(n);
      QVERIFY(std::abs(u - expected_union_uniform(128, 8, n)) < 1e-12);
      const double experts = m.seconds(n, n, 0) - d.seconds(n, n, 0);
      QVERIFY(std::abs(experts - m.n_layers * m.expert_seconds * u) < 1e-9 * experts);
      QVERIFY(experts > last_experts);  // more tokens, more experts read
      if (n > 1) QVERIFY(experts < last_experts + m.n_layers * m.expert_seconds * m.n_experts_used);  // never 8 new ones
      last_experts = experts;
    }
    QVERIFY(m.experts_touched(1) == 8.0 || std::abs(m.experts_touched(1) - 8.0) < 1e-12);
    QVERIFY(m.experts_touched(64) < 128.0);
    // an expert-heavy 32-token verification costs far less than 32 one-token forwards' experts
    QVERIFY(m.seconds(32, 32, 0) - d.seconds(32, 32, 0) < 0.5 * 32 * (m.seconds(1, 1, 0) - d.seconds(1, 1, 0)));
  }

  // Routing seen that keeps to a few experts makes a wide verification cheaper; one token
  // still reads k experts.
  void routingSeenPricesTheUnion() {
    ForwardCost m = hand_made_mixture();
    const double uniform32 = m.seconds(32, 32, 0);
    auto routing = std::make_shared<RoutingCounts>(m.n_layers, 128, 8);
    std::vector<int32_t> picks;
    for (int t = 0; t < 1000; ++t) {
      for (int r = 0; r < 8; ++r) picks.push_back((t + r) % 16);  // every token within experts 0-15
    }
    for (int l = 0; l < m.n_layers; ++l) routing->add(l, picks, 1000);
    m.routing = routing;
    QVERIFY(std::abs(m.experts_touched(1) - 8.0) < 1e-9);
    QVERIFY(m.experts_touched(32) < 32);  // 16 experts, and some 13 of the prior's share of the others
    QVERIFY(m.seconds(32, 32, 0) < uniform32 - m.n_layers * m.expert_seconds * 50);
    QVERIFY(format_forward_cost(m).find("routing seen") != std::string::npos);
  }

  // A measured random qwen3moe model: its experts are priced apart, one expert's bytes are
  // those of its three matrices, and the terms are positive with a nondecreasing dense part.
  // (No figure is compared with a clock.)
  void measuredMixtureSplitsExperts() {
    const ModelConfig config = random_model_config("tiny-qwen3moe");
    const auto model = make_random_model(config, TensorType::Q8_0, 5);
    std::unique_ptr<Backend> backend = create_cpu_backend(1);
    const ForwardCost c = measure_forward_cost(*backend, *model, 0.0);
    QCOMPARE(c.n_experts, config.n_experts);
    QCOMPARE(c.n_experts_used, config.n_experts_used);
    const LayerWeights& l = model->weights.layers.front();
    QCOMPARE(c.expert_bytes, static_cast<double>(l.expert_gate[0].bytes() + l.expert_up[0].bytes() + l.expert_down[0].bytes()));
    QVERIFY(c.expert_seconds > 0);
    for (size_t p = 0; p < c.tokens.size(); ++p) {
      QVERIFY(c.layer_seconds[p] > 0);
      if (p > 0) QVERIFY(c.layer_seconds[p] >= c.layer_seconds[p - 1]);
    }
    const std::string table = format_forward_cost(c);
    QVERIFY(table.find("mixture of experts: 8 experts, 2 per token") != std::string::npos);
    QVERIFY(table.find("uniform routing") != std::string::npos);
    // stored and read back with its expert terms
    QTemporaryDir dir;
    ForwardCost keyed = c;
    keyed.key = "moe";
    QVERIFY(write_cost_cache(dir.path().toStdString(), keyed));
    const auto back = read_cost_cache(dir.path().toStdString(), "moe");
    QVERIFY(back.has_value());
    QCOMPARE(back->n_experts, c.n_experts);
    QCOMPARE(back->n_experts_used, c.n_experts_used);
    QCOMPARE(back->expert_bytes, c.expert_bytes);
    QCOMPARE(back->expert_seconds, c.expert_seconds);
    QCOMPARE(back->verify_seconds(16), c.verify_seconds(16));
  }

  // With no budget, the fewest probes: 1 to 16 tokens, three runs of each; with a large
  // one, every batch size up to 64 and five runs. Each size is timed as a whole forward and
  // as one layer (logits for the last token and for all); a whole forward warms up. This
  // model fits in the last-level cache, so each whole forward, the attention probe's too,
  // follows an untimed one of its size, as a decoding step follows another.
  void measurementIsBoundedByItsBudget() {
    FakeBackend backend;
    const auto model = make_fake_model("target", 24, 6);
    const ForwardCost small = measure_forward_cost(backend, *model, 0.0);
    QCOMPARE(small.tokens, (std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16}));
    QCOMPARE(backend.calls, 2 + 3 * (4 * 8 + 2));  // warm-up (a whole forward: 2), then per round: 8 sizes x (whole forward x 2, 1 layer x 2), context x 2
    QCOMPARE(backend.max_layers, 6);
    QCOMPARE(small.n_layers, 6);
    QVERIFY(!small.streams_weights);  // a few kilobytes: in the cache

    backend.calls = 0;
    const ForwardCost full = measure_forward_cost(backend, *model, 1e6);
    QCOMPARE(full.tokens, (std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}));
    QCOMPARE(backend.calls, 2 + 5 * (4 * 12 + 2));
    for (const ForwardCost* c : {&small, &full}) {
      QCOMPARE(c->layer_seconds.size(), c->tokens.size());
      QCOMPARE(c->head_seconds.size(), c->tokens.size());
      for (size_t p = 0; p < c->tokens.size(); ++p) {
        QVERIFY(c->layer_seconds[p] > 0 && std::isfinite(c->layer_seconds[p]));
        QVERIFY(c->head_seconds[p] >= 0);
        if (p > 0) QVERIFY(c->layer_seconds[p] >= c->layer_seconds[p - 1] && c->head_seconds[p] >= c->head_seconds[p - 1]);
      }
      QVERIFY(c->position_seconds >= 0);
      QVERIFY(c->sample_row_seconds > 0 && std::isfinite(c->sample_row_seconds));  // the sampler, timed on a real row
    }
  }

  // A model's context bounds the batch sizes probed.
  void shortContextsAreRespected() {
    FakeBackend backend;
    const auto model = make_fake_model("target", 24, 3, 20);
    const ForwardCost c = measure_forward_cost(backend, *model, 1e6);
    QCOMPARE(c.tokens, (std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16}));
  }

  // The typical run of a probe decides, not the luckiest: a one-token whole forward that is
  // fast once and slow twice is costed as slow (the fastest run would say it costs nothing).
  void aTypicalRunDecidesNotALuckyOne() {
    // each timed whole forward of this small model follows an untimed one: the warm-up's
    // two, then the first round's, whose timed run is the lucky one
    SleepingWholeForwards backend([](int n) { return n == 4 ? 0 : 30; });
    const auto model = make_fake_model("target", 24, 6);
    const ForwardCost c = measure_forward_cost(backend, *model, 0.0);
    QCOMPARE(backend.whole_one_token_forwards, 2 + 3 * 2);
    QVERIFY2(c.seconds(1, 1, 0) >= 0.030, qPrintable(QString::number(c.seconds(1, 1, 0))));
  }

  // A model larger than the last-level cache streams its weights at one token: the head's
  // share of a one-token forward is its share of the bytes, however fast a lone layer's probe
  // happened to run (here at once, where whole forwards take 20 ms or more).
  void aModelBeyondTheCacheSplitsByBytes() {
    SleepingWholeForwards backend([](int) { return 20; });
    auto model = make_fake_model("target", 24, 4);
    // shapes without data: 4 layers of half the cache each, and a head of twice the cache,
    // so that the head is half of what a one-token forward reads
    const long cache = static_cast<long>(last_level_cache_bytes());
    model->weights.layers.resize(4);
    for (LayerWeights& layer : model->weights.layers) layer.w_gate = TensorView{TensorType::F32, 1024, cache / 2 / 4096, nullptr};
    model->weights.output = TensorView{TensorType::F32, 1024, 2 * cache / 4096, nullptr};
    QVERIFY(model->weight_bytes() > static_cast<size_t>(cache));
    const ForwardCost c = measure_forward_cost(backend, *model, 0.0);
    const double one = c.seconds(1, 1, 0);
    QVERIFY2(c.head_seconds[0] >= 0.010, qPrintable(QString::number(c.head_seconds[0])));
    QVERIFY(std::abs(c.head_seconds[0] - one / 2) < 1e-9 * one);  // one-token seconds are the whole forward
    QVERIFY(c.streams_weights);
  }

  // The last-level cache as sysfs states it: the highest level among the index directories,
  // sizes with their units.
  void lastLevelCacheFromSysfs() {
    QCOMPARE(parse_cache_size("32768K\n"), size_t{32} << 20);
    QCOMPARE(parse_cache_size("2M"), size_t{2} << 20);
    QCOMPARE(parse_cache_size("512"), size_t{512});
    QCOMPARE(parse_cache_size("big"), size_t{0});
    QCOMPARE(parse_cache_size("12X"), size_t{0});
    QTemporaryDir dir;
    const auto cache = [&](const char* index, const char* level, const char* size) {
      QVERIFY(QDir(dir.path()).mkpath(index));
      write_text((dir.path() + "/" + index + "/level").toStdString(), level);
      write_text((dir.path() + "/" + index + "/size").toStdString(), size);
    };
    QCOMPARE(last_level_cache_bytes_in(dir.path().toStdString()), size_t{0});  // no caches listed
    cache("index0", "1\n", "48K\n");
    cache("index1", "1\n", "32K\n");
    cache("index2", "2\n", "2048K\n");
    QCOMPARE(last_level_cache_bytes_in(dir.path().toStdString()), size_t{2} << 20);
    cache("index3", "3\n", "32768K\n");
    QCOMPARE(last_level_cache_bytes_in(dir.path().toStdString()), size_t{32} << 20);
    QCOMPARE(last_level_cache_bytes_in((dir.path() + "/missing").toStdString()), size_t{0});
    QVERIFY(last_level_cache_bytes() >= size_t{1} << 20);
  }

  // A measurement reports how far it has come: after every probe of the rounds it always
  // runs, rising, ending at 1; a known cost reports nothing.
  void measurementReportsProgress() {
    FakeBackend backend;
    const auto model = make_fake_model("target", 24, 6);
    for (const double budget : {0.0, 1e6}) {
      std::vector<double> seen;
      const ForwardCost c = measure_forward_cost(backend, *model, budget, [&](double f) { seen.push_back(f); });
      QCOMPARE(seen.size(), 3 * c.tokens.size() + 1);  // 3 rounds of every size (later rounds only repeat), then done
      QVERIFY(seen.front() > 0.0);
      QVERIFY(std::is_sorted(seen.begin(), seen.end()));
      QVERIFY(seen[seen.size() - 2] < 1.0);
      QCOMPARE(seen.back(), 1.0);
    }
    QTemporaryDir dir;
    const auto with_file = model_with_file(dir);
    const std::string d = dir.filePath("cache").toStdString();
    const double busy = 1e9;  // a load beside which any stored measurement still holds
    int reports = 0;
    load_or_measure_forward_cost(backend, *with_file, d, busy, [&](double) { ++reports; });
    QVERIFY(reports > 0);
    reports = 0;
    QVERIFY(load_or_measure_forward_cost(backend, *with_file, d, busy, [&](double) { ++reports; }).from_file);
    QCOMPARE(reports, 0);
  }

  void keyNamesModelFileBackendAndMachine() {
    QTemporaryDir dir;
    FakeBackend backend;
    QVERIFY(cost_model_key(backend, *make_fake_model("in memory")).empty());  // nothing to cache it by
    const auto model = model_with_file(dir);
    const std::string key = cost_model_key(backend, *model);
    QVERIFY(key.find(model->path) != std::string::npos);
    QVERIFY(key.find("backend fake") != std::string::npos);
    QVERIFY(key.find("logical cores") != std::string::npos);
    // the running program, by its file: a rebuilt program measures its own kernels
    const std::string program = QCoreApplication::applicationFilePath().toStdString();
    QVERIFY2(key.find("program " + program + ", ") != std::string::npos, key.c_str());
    write_text(model->path, "other weights");  // the file changed: another measurement
    const std::string rewritten = cost_model_key(backend, *model);
    QVERIFY(rewritten != key);
    // the same size, written later: still another measurement
    write_text(model->path, "OTHER WEIGHTS");
    QFile file(QString::fromStdString(model->path));
    QVERIFY(file.open(QIODevice::ReadWrite));
    QVERIFY(file.setFileTime(QDateTime::currentDateTime().addSecs(3600), QFileDevice::FileModificationTime));
    file.close();
    QVERIFY(cost_model_key(backend, *model) != rewritten);
  }

  void cacheFileRoundTrip() {
    QTemporaryDir dir;
    const std::string d = dir.path().toStdString() + "/nested/cache";  // created on demand
    ForwardCost c = hand_made();
    c.measure_seconds = 0.25;
    c.streams_weights = !c.streams_weights;  // not the default, so that reading must restore it
    QVERIFY(write_cost_cache(d, c));
    const auto back = read_cost_cache(d, c.key);
    QVERIFY(back.has_value());
    QCOMPARE(back->tokens, c.tokens);
    QCOMPARE(back->layer_seconds, c.layer_seconds);
    QCOMPARE(back->head_seconds, c.head_seconds);
    QCOMPARE(back->position_seconds, c.position_seconds);
    QCOMPARE(back->sample_row_seconds, c.sample_row_seconds);
    QCOMPARE(back->n_layers, c.n_layers);
    QCOMPARE(back->streams_weights, c.streams_weights);
    QVERIFY(back->from_file);
    QCOMPARE(back->file, cost_cache_path(d, c.key));
    QVERIFY(!read_cost_cache(d, "another key"));
    QVERIFY(!read_cost_cache(dir.path().toStdString() + "/missing", c.key));
  }

  // Whatever is wrong with a file, it is not used.
  void corruptFilesAreNotTrusted_data() {
    QTest::addColumn<QString>("text");
    const ForwardCost c = hand_made();
    QTemporaryDir dir;
    write_cost_cache(dir.path().toStdString(), c);
    const QString good = QString::fromStdString(read_text(cost_cache_path(dir.path().toStdString(), c.key)));
    QVERIFY(good.contains("layer_seconds"));
    QTest::newRow("empty") << QString();
    QTest::newRow("not json") << QStringLiteral("forward cost: fast");
    QTest::newRow("truncated") << good.left(good.size() / 2);
    QTest::newRow("another key") << QString(good).replace("a key", "a stale key");
    QTest::newRow("negative") << QString(good).replace("0.5", "-0.5");
    QTest::newRow("not a number") << QString(good).replace("0.01", "null");
    QTest::newRow("decreasing") << QString(good).replace("1.5", "0.1");
    QTest::newRow("missing field") << QString(good).replace("position_seconds", "position");
    QTest::newRow("wrong type") << QString(good).replace("\"n_layers\": 10", "\"n_layers\": \"ten\"");
    QTest::newRow("no load") << QString(good).replace("\"load\"", "\"lode\"");
    QTest::newRow("no sampling cost") << QString(good).replace("sample_row_seconds", "sample_seconds");
    QTest::newRow("no memory flag") << QString(good).replace("streams_weights", "streams");
    QTest::newRow("no experts") << QString(good).replace("\"n_experts\"", "\"experts\"");
    QTest::newRow("more used than experts") << QString(good).replace("\"n_experts_used\": 0", "\"n_experts_used\": 3");
  }
  void corruptFilesAreNotTrusted() {
    QFETCH(QString, text);
    QTemporaryDir dir;
    const std::string d = dir.path().toStdString();
    const ForwardCost c = hand_made();
    write_text(cost_cache_path(d, c.key), text.toStdString());
    QVERIFY(!read_cost_cache(d, c.key));
  }

  // load_or_measure_forward_cost: a fresh measurement is stored; the next load reads it
  // without a forward; a corrupt file or a changed model file is measured again.
  void staleOrCorruptFilesAreRemeasured() {
    QTemporaryDir dir;
    const std::string d = dir.path().toStdString();
    FakeBackend backend;
    const auto model = model_with_file(dir);

    const ForwardCost first = load_or_measure_forward_cost(backend, *model, d);
    QVERIFY(!first.from_file);
    QVERIFY(backend.calls > 0);
    QCOMPARE(first.file, cost_cache_path(d, first.key));

    backend.calls = 0;
    const ForwardCost again = load_or_measure_forward_cost(backend, *model, d);
    QVERIFY(again.from_file);
    QCOMPARE(backend.calls, 0);
    QCOMPARE(again.layer_seconds, first.layer_seconds);

    write_text(first.file, "{\"key\": ");  // corrupt
    const ForwardCost repaired = load_or_measure_forward_cost(backend, *model, d);
    QVERIFY(!repaired.from_file);
    QVERIFY(backend.calls > 0);
    QVERIFY(read_cost_cache(d, first.key).has_value());  // replaced by a good one

    write_text(model->path, "retrained weights");  // stale: the model changed
    backend.calls = 0;
    const ForwardCost fresh = load_or_measure_forward_cost(backend, *model, d);
    QVERIFY(!fresh.from_file);
    QVERIFY(backend.calls > 0);
    QVERIFY(fresh.key != first.key);
  }

  // Figures taken on a crowded machine hold while it stays crowded; a quieter one measures
  // again (and the new file replaces the old).
  void busyMeasurementsAreRetakenWhenQuiet() {
    QVERIFY(cost_still_representative(0.5, 0.0));
    QVERIFY(cost_still_representative(1.0, 0.1));
    QVERIFY(cost_still_representative(4.0, 3.5));
    QVERIFY(!cost_still_representative(4.0, 1.0));
    QTemporaryDir dir;
    const std::string d = dir.path().toStdString();
    FakeBackend backend;
    const auto model = model_with_file(dir);
    ForwardCost busy = measure_forward_cost(backend, *model, 0.0);
    busy.load = 6.0;
    QVERIFY(write_cost_cache(d, busy));
    QCOMPARE(read_cost_cache(d, busy.key)->load, 6.0);
    backend.calls = 0;
    QVERIFY(load_or_measure_forward_cost(backend, *model, d, 5.5).from_file);  // still as busy
    QCOMPARE(backend.calls, 0);
    QVERIFY(!load_or_measure_forward_cost(backend, *model, d, 0.5).from_file);  // quiet now
    QVERIFY(backend.calls > 0);
    QVERIFY(read_cost_cache(d, busy.key)->load != 6.0);  // replaced by the new figures
  }

  void unwritableDirectoryStillMeasures() {
    QTemporaryDir dir;
    const std::string blocker = dir.filePath("a file").toStdString();
    write_text(blocker, "x");
    FakeBackend backend;
    const auto model = model_with_file(dir);
    QVERIFY(!write_cost_cache(blocker + "/cache", hand_made()));
    const ForwardCost c = load_or_measure_forward_cost(backend, *model, blocker + "/cache");
    QVERIFY(!c.from_file);
    QVERIFY(c.file.empty());
    QVERIFY(!c.tokens.empty());
  }

  // A backend measures each model once and keeps the result.
  void backendKeepsWhatItMeasured() {
    QTemporaryDir dir;
    qputenv("XDG_CACHE_HOME", dir.path().toUtf8());
    FakeBackend backend;
    const auto a = make_fake_model("target"), b = make_fake_model("draft", 24, 2);
    const auto cost_a = backend.forward_cost(*a);
    const int calls = backend.calls;
    QVERIFY(calls > 0);
    QCOMPARE(backend.forward_cost(*a).get(), cost_a.get());
    QCOMPARE(backend.calls, calls);
    const auto cost_b = backend.forward_cost(*b);
    QVERIFY(cost_b.get() != cost_a.get());
    QCOMPARE(cost_b->n_layers, 2);
  }

  void defaultDirectoryFollowsXdg() {
    qputenv("XDG_CACHE_HOME", "/somewhere/cache");
    QCOMPARE(QString::fromStdString(default_cost_cache_dir()), QStringLiteral("/somewhere/cache/specula"));
    qunsetenv("XDG_CACHE_HOME");
    qputenv("HOME", "/home/someone");
    QCOMPARE(QString::fromStdString(default_cost_cache_dir()), QStringLiteral("/home/someone/.cache/specula"));
  }

  void formatNamesTheSource() {
    ForwardCost c = hand_made();
    c.measure_seconds = 0.123;
    QVERIFY(QString::fromStdString(format_forward_cost(c)).contains("measured in 123 ms"));
    c.from_file = true;
    c.file = "/x/forward-cost.json";
    const QString text = QString::fromStdString(format_forward_cost(c));
    QVERIFY(text.contains("read from /x/forward-cost.json"));
    QVERIFY(text.contains("10 layers"));
  }
};

QTEST_GUILESS_MAIN(TestCostModel)
#include "test_cost_model.moc"
