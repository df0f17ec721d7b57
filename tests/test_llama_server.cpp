// The remote generator and `generate --remote` against a real llama.cpp `llama-server` on
// loopback, serving stories260K written as GGUF: it refuses n > 1, so the candidates come
// from concurrent requests; greedy candidates equal a local session's text, with the
// log-probabilities llama.cpp sends (its chat-style array) equal to ours within float
// rounding; every candidate streams into its own callbacks; a seed gives the same sampled
// text twice; and the CLI prints what a local run prints. Skipped unless the build names
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

}  // namespace

class TestLlamaServer : public QObject {
  Q_OBJECT

  QTemporaryDir dir;
  QProcess llama;
  QString url;
  QStringList local_model;  // specula-cli's options for the same model, loaded here
  std::unique_ptr<LocalGenerator> local;

 private slots:
  void initTestCase() {
    const QString server = QStringLiteral(SPECULA_LLAMA_SERVER);
    if (server.isEmpty()) QSKIP("llama-server not configured (-DSPECULA_LLAMA_SERVER=PATH)");
    QVERIFY2(QFileInfo(server).isExecutable(), qPrintable(server + " is not an executable"));
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    LoadOptions options;
    options.tokenizer_path = tok;
    auto model = load_model(bin, options);
    const QString gguf = dir.filePath("stories260K.gguf");
    write_gguf_model(*model, gguf.toStdString(), TensorType::F32);
    local = std::make_unique<LocalGenerator>(create_cpu_backend(), std::move(model));
    local_model = {"-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--device", "cpu"};

    const int port = free_port();
    QVERIFY(port > 0);
    llama.setStandardOutputFile(QProcess::nullDevice());
    llama.setStandardErrorFile(dir.filePath("llama-server.log"));
    // four slots of 512 positions (the model's context), one thread; an f32 KV cache as ours
    // (llama.cpp's default f16 moves log-probabilities by about 1e-3)
    llama.start(server, {"-m", gguf, "--host", "127.0.0.1", "--port", QString::number(port), "-np", "4", "-c", "2048",
                         "-t", "1", "-ctk", "f32", "-ctv", "f32"});
    QVERIFY2(llama.waitForStarted(), qPrintable(llama.errorString()));
    url = QString("http://127.0.0.1:%1").arg(port);
    // /health answers 503 while the model loads, 200 once it serves
    const auto log_end = [this] {
      QFile log(dir.filePath("llama-server.log"));
      return log.open(QIODevice::ReadOnly) ? log.readAll().right(2000) : QByteArray("(no log)");
    };
    QTRY_VERIFY2_WITH_TIMEOUT(http_client(port).Get("/health") && http_client(port).Get("/health")->status == 200,
                              log_end().constData(), 60000);
  }

  void greedyCandidatesEqualLocal() {
    serve::RemoteGenerator remote(serve::RemoteOptions{url.toStdString()});
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
    serve::RemoteGenerator remote(serve::RemoteOptions{url.toStdString()});
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
    const CliRun remote_run = run_cli(QStringList{"generate", "--remote", url} + args);
    QVERIFY2(local_run.code == 0, local_run.err.constData());
    QVERIFY2(remote_run.code == 0, remote_run.err.constData());
    QCOMPARE(remote_run.out, local_run.out);
  }

  void cleanupTestCase() {
    if (llama.state() == QProcess::NotRunning) return;
    llama.terminate();
    if (!llama.waitForFinished(20000)) llama.kill();
    llama.waitForFinished(5000);
  }
};

QTEST_GUILESS_MAIN(TestLlamaServer)
#include "test_llama_server.moc"
