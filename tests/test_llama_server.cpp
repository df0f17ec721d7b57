// The remote generator and `generate --remote` against a real llama.cpp `llama-server` on
// loopback, serving stories260K written as GGUF: it refuses n > 1, so the candidates come
// from concurrent requests; greedy candidates equal a local session's text, with the
// log-probabilities llama.cpp sends (its chat-style array) equal to ours within float
// rounding; every candidate streams into its own callbacks; a seed gives the same sampled
// text twice; the CLI prints what a local run prints; and with --api-key, a wrong key is a
// clear message and the right one generates. Skipped unless the build names
// llama-server (-DSPECULA_LLAMA_SERVER=.../llama-server).
#include <QProcess>
#include <QTemporaryDir>
#include <QtTest>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <map>
#include <mutex>

#include "cli_run.h"
#include "decode/generator.h"
#include "model/model_export.h"
#include "serve/remote_generator.h"
#include "serve_process.h"
#include "shared_data.h"
#include "story_request.h"

using namespace specula;
using namespace specula::test;

namespace {

// A port no one listens on now (the kernel's choice for a socket bound to port 0).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof address;
  const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
                     ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0;
  ::close(fd);
  return bound ? ntohs(address.sin_port) : -1;
}

// llama-server on a free loopback port, serving `gguf` with four slots of 512 positions (the
// model's context), one thread, and an f32 KV cache as ours (llama.cpp's default f16 moves
// log-probabilities by about 1e-3); its log goes to `log`.
class LlamaServer {
 public:
  LlamaServer(const QString& program, const QString& gguf, const QString& log, const QStringList& extra = {})
      : log_(log) {
    const int port = free_port();
    process_.setStandardOutputFile(QProcess::nullDevice());
    process_.setStandardErrorFile(log);
    process_.start(program, QStringList{"-m", gguf, "--host", "127.0.0.1", "--port", QString::number(port), "-np", "4",
                                        "-c", "2048", "-t", "1", "-ctk", "f32", "-ctv", "f32"} + extra);
    url_ = QString("http://127.0.0.1:%1").arg(port);
    // /health answers 503 while the model loads, 200 once it serves
    for (int i = 0; i < 600 && port > 0 && process_.state() != QProcess::NotRunning; ++i) {
      const auto res = http_client(port).Get("/health");
      if (res && res->status == 200) {
        serving_ = true;
        return;
      }
      QTest::qWait(100);
    }
  }
  ~LlamaServer() {
    if (process_.state() == QProcess::NotRunning) return;
    process_.terminate();
    if (!process_.waitForFinished(20000)) process_.kill();
    process_.waitForFinished(5000);
  }
  bool serving() const { return serving_; }
  QString url() const { return url_; }
  QByteArray log_end() const {
    QFile log(log_);
    return log.open(QIODevice::ReadOnly) ? log.readAll().right(2000) : QByteArray("(no log)");
  }

 private:
  QProcess process_;
  QString log_;
  QString url_;
  bool serving_ = false;
};

}  // namespace

class TestLlamaServer : public QObject {
  Q_OBJECT

  QTemporaryDir dir;
  QString program;  // llama-server
  QString gguf;     // stories260K written as GGUF
  std::unique_ptr<LlamaServer> llama;
  QStringList local_model;  // specula-cli's options for the same model, loaded here
  std::unique_ptr<LocalGenerator> local;

 private slots:
  void initTestCase() {
    program = QStringLiteral(SPECULA_LLAMA_SERVER);
    if (program.isEmpty()) QSKIP("llama-server not configured (-DSPECULA_LLAMA_SERVER=PATH)");
    QVERIFY2(QFileInfo(program).isExecutable(), qPrintable(program + " is not an executable"));
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    LoadOptions options;
    options.tokenizer_path = tok;
    auto model = load_model(bin, options);
    gguf = dir.filePath("stories260K.gguf");
    write_gguf_model(*model, gguf.toStdString(), TensorType::F32);
    local = std::make_unique<LocalGenerator>(create_cpu_backend(), std::move(model));
    local_model = {"-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--device", "cpu"};

    llama = std::make_unique<LlamaServer>(program, gguf, dir.filePath("llama-server.log"));
    QVERIFY2(llama->serving(), llama->log_end().constData());
  }

  void greedyCandidatesEqualLocal() {
    serve::RemoteGenerator remote(serve::RemoteOptions{llama->url().toStdString()});
    QVERIFY(!remote.probe().model.empty());
    std::mutex mutex;
    std::map<int, std::string> streamed;  // each candidate's deltas, joined
    SessionCallbacks cb;
    cb.on_delta = [&](const CandidateDelta& d) {
      std::lock_guard lock(mutex);
      streamed[d.index] += d.text;
    };
    const GenerationRequest r = story_request(3, 0.0f, 0);
    const SessionResult got = remote.generate(r, cb);
    const SessionResult expected = local->generate(r);
    QCOMPARE(got.candidates.size(), size_t(3));
    for (size_t i = 0; i < 3; ++i) {
      const Candidate& g = got.candidates[i];
      const Candidate& e = expected.candidates[i];
      QCOMPARE(g.text, e.text);
      QCOMPARE(streamed[int(i)], e.text);
      QCOMPARE(finish_reason_name(g.finish), finish_reason_name(e.finish));
      QCOMPARE(g.logprobs.size(), e.logprobs.size());
      for (size_t t = 0; t < e.logprobs.size(); ++t) {
        QVERIFY2(std::fabs(g.logprobs[t] - e.logprobs[t]) < 1e-3f,
                 qPrintable(QString("token %1: %2 vs %3").arg(t).arg(g.logprobs[t]).arg(e.logprobs[t])));
      }
    }
  }

  void aSeedGivesTheSameSampledText() {
    serve::RemoteGenerator remote(serve::RemoteOptions{llama->url().toStdString()});
    const GenerationRequest r = story_request(2, 0.8f, 17);
    const SessionResult first = remote.generate(r);
    const SessionResult second = remote.generate(r);
    for (size_t i = 0; i < 2; ++i) {
      QVERIFY(!first.candidates[i].text.empty());
      QCOMPARE(second.candidates[i].text, first.candidates[i].text);
    }
  }

  void cliPrintsWhatALocalRunPrints() {
    const QStringList args{"-p", "Lily went", "--max-tokens", "40", "--temp", "0", "-n", "2"};
    const CliRun local_run = run_cli(QStringList{"generate"} + local_model + args);
    const CliRun remote_run = run_cli(QStringList{"generate", "--remote", llama->url()} + args);
    QVERIFY2(local_run.code == 0, local_run.err.constData());
    QVERIFY2(remote_run.code == 0, remote_run.err.constData());
    QCOMPARE(remote_run.out, local_run.out);
  }

  void keysAreLlamaServersToCheck() {
    LlamaServer keyed(program, gguf, dir.filePath("keyed.log"), {"--api-key", "s3cret"});
    QVERIFY2(keyed.serving(), keyed.log_end().constData());
    try {
      serve::RemoteGenerator(serve::RemoteOptions{keyed.url().toStdString(), "guess"}).generate(story_request(1, 0.0f, 0));
      QFAIL("a wrong key was accepted");
    } catch (const serve::RemoteError& e) {
      QVERIFY2(QString(e.what()).contains("refused the API key"), e.what());
    }
    const SessionResult r =
        serve::RemoteGenerator(serve::RemoteOptions{keyed.url().toStdString(), "s3cret"}).generate(story_request(1, 0.0f, 0));
    QCOMPARE(r.candidates[0].text, local->generate(story_request(1, 0.0f, 0)).candidates[0].text);
  }
};

QTEST_GUILESS_MAIN(TestLlamaServer)
#include "test_llama_server.moc"
