#include "engine_worker.h"

#include <QElapsedTimer>
#include <QRegularExpression>
#include <QThreadPool>
#include <algorithm>
#include <exception>
#include <future>
#include <mutex>
#include <optional>
#include <utility>

namespace specula::ui {

namespace {

constexpr double kTestTimeoutSeconds = 10.0;  // per candidate, inside the sandbox
constexpr int kTestThreads = 2;               // candidates tested while others still decode
constexpr qint64 kStatsIntervalMs = 100;      // live statistics, about ten a second
constexpr double kPromptCheckSeconds = 5.0;   // the prompt alone, parsed in the sandbox

// What the window says of a prompt that does not parse on its own.
QString prompt_message(const std::string& reason) {
  const std::string prefix = "does not parse: ";
  const std::string what = reason.rfind(prefix, 0) == 0 ? reason.substr(prefix.size()) : reason;
  return QStringLiteral("The prompt does not parse, so no candidate could: %1 (lines count from the prompt's first). "
                        "Write a Python function: its signature, then its docstring indented under it.")
      .arg(QString::fromStdString(what));
}

CandidateState state_after_generation(FinishReason reason) {
  switch (reason) {
    case FinishReason::Budget: return CandidateState::Budget;
    case FinishReason::Cancelled: return CandidateState::Stopped;
    default: return CandidateState::Done;
  }
}

// A crash or the memory limit is the candidate's failure; Error is the harness's own.
CandidateState state_of(Verdict verdict) {
  switch (verdict) {
    case Verdict::Passed: return CandidateState::Passed;
    case Verdict::Failed:
    case Verdict::Crashed:
    case Verdict::Memory: return CandidateState::Failed;
    case Verdict::Timeout: return CandidateState::Timeout;
    case Verdict::Error: return CandidateState::Error;
    case Verdict::Untested: return CandidateState::Checked;
    case Verdict::NotTested: return CandidateState::Done;  // the budget's end, not the candidate
  }
  return CandidateState::Error;
}

// A first line that sums the result up (the pane shows it), then what happened.
QString detail_of(const TestResult& result) {
  if (result.verdict == Verdict::NotTested) return QString::fromStdString(result.detail);
  QStringList summary;
  if (result.asserts_total > 0) summary << QStringLiteral("%1/%2 asserts").arg(result.asserts_passed).arg(result.asserts_total);
  if (result.examples_total > 0)
    summary << QStringLiteral("%1/%2 from the docstring").arg(result.examples_passed).arg(result.examples_total);
  const bool check_failed = !result.checks.passed() && result.checks.failure != CheckFailure::NotRun;
  if (check_failed) summary << QString::fromStdString(result.checks.reason);
  if (result.verdict == Verdict::Untested) summary << QStringLiteral("no tests; the checks passed");
  // The first failed comparison's values, where the harness could say them ("expected 5, got 6").
  const std::string marker = "AssertionError: expected ";
  if (const size_t at = result.detail.find(marker); at != std::string::npos) {
    const size_t from = at + marker.size() - std::string("expected ").size();
    QString values = QString::fromStdString(result.detail.substr(from, result.detail.find('\n', from) - from));
    // the failed assert's line: the traceback's last "line N" before it (pane_lines names it)
    const size_t line = result.detail.rfind("line ", at);
    if (line != std::string::npos) {
      const size_t digits = result.detail.find_first_not_of("0123456789", line + 5);
      if (digits > line + 5) values = QString::fromStdString(result.detail.substr(line, digits - line)) + ": " + values;
    }
    summary << values;
  }
  QString detail = QString::fromLatin1(verdict_name(result.verdict));
  if (!summary.isEmpty()) detail += QStringLiteral(": ") + summary.join(QStringLiteral(", "));
  const bool said = result.detail == result.checks.reason || result.verdict == Verdict::Untested;
  if (!result.detail.empty() && !said) detail += QStringLiteral("\n") + QString::fromStdString(result.detail);
  return detail;
}

int lines_in(const std::string& text) { return int(std::count(text.begin(), text.end(), '\n')); }

// Python numbers a result's lines as program.py's: the prompt, the candidate, the code after
// the hole, the tests. The pane numbers the candidate's own lines from 1, so each "line N"
// is said as the pane numbers it, or as a line of the prompt, the code after the hole or the
// tests.
QString pane_lines(const QString& text, const Problem& problem, const std::string& completion) {
  const int before = lines_in(problem.code_prefix);  // the candidate begins on line before + 1
  const int candidate_end = lines_in(problem.code_prefix + completion) + 1;  // its last line
  const std::string suffix = problem.suffix.value_or("");
  const int suffix_end = lines_in(problem.code_prefix + completion + suffix) + 1;
  static const QRegularExpression line(QStringLiteral("\\bline (\\d+)"));
  QString out;
  qsizetype from = 0;
  for (auto it = line.globalMatch(text); it.hasNext();) {
    const QRegularExpressionMatch m = it.next();
    const int n = m.captured(1).toInt();
    QString said;
    if (n <= before) said = QStringLiteral("line %1 of the prompt").arg(n);
    else if (n <= candidate_end) said = QStringLiteral("line %1").arg(n - before);
    else if (!suffix.empty() && n <= suffix_end) said = QStringLiteral("line %1 after the hole").arg(n - candidate_end);
    else said = QStringLiteral("line %1 of the tests").arg(n - (suffix.empty() ? candidate_end : suffix_end));
    out += text.mid(from, m.capturedStart() - from) + said;
    from = m.capturedEnd();
  }
  return out + text.mid(from);
}

// The groups as the grid shows them: each named by its best-ranked member.
RunGroups run_groups(const CandidateGroups& groups, const QVector<int>& ranking, const std::vector<TestResult>& results) {
  const int n = int(results.size());
  std::vector<int> position(size_t(n), n);
  for (int p = 0; p < ranking.size(); ++p) position[size_t(ranking[p])] = p;
  auto best_of = [&](const std::vector<int>& key) {
    QVector<int> best(n);
    for (int i = 0; i < n; ++i) {
      best[i] = i;
      for (int j = 0; j < n; ++j)
        if (key[size_t(j)] == key[size_t(i)] && position[size_t(j)] < position[size_t(best[i])]) best[i] = j;
    }
    return best;
  };
  RunGroups out;
  out.sameText = best_of(groups.same_text);
  out.group = best_of(groups.group);  // the engine's groups: never across test verdicts
  for (const TestResult& r : results) {  // every candidate was probed on the same inputs
    QStringList shown;
    for (const ProbeCall& call : r.behaviour) shown << QString::fromStdString(call.shown.empty() ? call.outcome : call.shown);
    out.outputs.push_back(shown);
    if (out.inputs.isEmpty())
      for (const ProbeCall& call : r.behaviour) out.inputs << QString::fromStdString(call.input);
  }
  return out;
}

// Running totals across candidates, fed by the session's callbacks.
struct LiveTotals {
  std::vector<int> tokens, accepted, proposed;  // (n) per candidate

  RunStats stats(double elapsed, double budget) const {
    RunStats s;
    s.elapsedSeconds = elapsed;
    s.budgetSeconds = budget;
    for (int t : tokens) s.tokens += t;
    int acc = 0, prop = 0;
    for (int a : accepted) acc += a;
    for (int p : proposed) prop += p;
    s.acceptance = prop > 0 ? double(acc) / prop : 0.0;
    s.tokensPerSecond = elapsed > 0 ? s.tokens / elapsed : 0.0;
    const double per_sequence = double(s.tokens) / double(std::max<size_t>(1, tokens.size()));
    s.msPerTokenPerSequence = per_sequence > 0 ? elapsed * 1000.0 / per_sequence : 0.0;
    return s;
  }
};

GenerationRequest generation_request(const RunRequest& request) {
  GenerationRequest generation;
  generation.prompt = request.prompt.toStdString();
  if (request.suffix) generation.suffix = request.suffix->toStdString();
  generation.n_candidates = request.candidates;
  generation.sampling.temperature = float(request.temperature);
  generation.sampling.top_p = float(request.topP);
  generation.sampling.seed = request.seed;
  generation.max_new_tokens = request.maxNewTokens;
  generation.budget_seconds = request.budgetSeconds;
  generation.code_stops = true;
  generation.token_healing = true;  // as eval does: the first token may extend the prompt's last
  generation.draft.kind = request.drafter.toStdString();
  generation.draft.policy = request.policy.toStdString();
  return generation;
}

serve::RemoteOptions remote_options(const QString& url, const QString& api_key, const QString& model, bool insecure) {
  serve::RemoteOptions options;
  options.url = url.trimmed().toStdString();
  options.api_key = api_key.toStdString();
  options.model = model.trimmed().toStdString();
  options.insecure = insecure;
  return options;
}

}  // namespace

EngineWorker::EngineWorker(std::unique_ptr<EnginePort> engine, QObject* parent)
    : QObject(parent), engine_(std::move(engine)) {}

EngineWorker::~EngineWorker() = default;

int EngineWorker::issueTicket() { return ++issued_; }

void EngineWorker::stop() {
  cancelled_upto_.store(issued_.load());  // first, so that begin() cannot miss it
  stop_.store(true);
}

void EngineWorker::shutdown() {
  shut_down_.store(true);
  stop();
}

bool EngineWorker::begin(int ticket) {
  stop_.store(false);
  if (ticket <= cancelled_upto_.load()) stop_.store(true);  // cancelled while it waited
  return !shut_down_.load();
}

void EngineWorker::loadModels(const QString& target, const QString& tokenizer, const QString& draft,
                              int device, int ticket) {
  if (!begin(ticket)) return;
  // loaded_ stays as it is until the load succeeds: a failed one leaves the engine's model in use
  ModelPaths paths{target.toStdString(), tokenizer.toStdString(), draft.toStdString(),
                   static_cast<DeviceChoice>(std::clamp(device, 0, 2))};
  try {
    const LoadedModels loaded = engine_->load(paths, [this](double fraction) {
      Q_EMIT loadProgress(fraction);
      return !stop_.load();
    });
    loaded_ = true;
    Q_EMIT loadProgress(1.0);
    Q_EMIT modelsLoaded(QString::fromStdString(loaded.summary), QString::fromStdString(loaded.backend),
                      QString::fromStdString(loaded.isolation), loaded.fill_in_middle);
  } catch (const std::exception& e) {
    Q_EMIT error(QStringLiteral("Could not load the model: %1").arg(QString::fromStdString(e.what())));
  }
}

void EngineWorker::connectServer(const QString& url, const QString& apiKey, const QString& model, bool insecure,
                                 int ticket) {
  if (!begin(ticket)) return;
  try {  // as for a load, a failed connection leaves the model in use
    const LoadedModels loaded = engine_->connect(remote_options(url, apiKey, model, insecure));
    loaded_ = true;
    Q_EMIT modelsLoaded(QString::fromStdString(loaded.summary), QString::fromStdString(loaded.backend),
                        QString::fromStdString(loaded.isolation), loaded.fill_in_middle);
  } catch (const std::exception& e) {
    Q_EMIT error(QStringLiteral("Could not use the server: %1").arg(QString::fromStdString(e.what())));
  }
}

void EngineWorker::testServer(const QString& url, const QString& apiKey, const QString& model, bool insecure) {
  try {
    Q_EMIT serverTested(true, QString::fromStdString(engine_->probe(remote_options(url, apiKey, model, insecure))));
  } catch (const std::exception& e) {
    Q_EMIT serverTested(false, QString::fromStdString(e.what()));
  }
}

void EngineWorker::start(const RunRequest& request, int ticket) {
  if (!begin(ticket)) return;
  const int n = request.candidates;
  const RunStats empty{.budgetSeconds = request.budgetSeconds};
  if (!loaded_) {
    Q_EMIT error(QStringLiteral("No model is loaded: choose a model file first."));
    Q_EMIT runFinished({}, empty);
    return;
  }

  const GenerationRequest generation = generation_request(request);

  Q_EMIT runStarted(n, request.budgetSeconds);
  for (int i = 0; i < n; ++i) Q_EMIT candidateState(i, int(CandidateState::Generating), {});

  QElapsedTimer clock;
  clock.start();
  // Tests end by the budget's end, as evaluation's do: one that has not run by then is "not
  // tested" (run_until), so a run with a budget ends within it.
  const std::optional<TestClock::time_point> deadline =
      request.budgetSeconds > 0 ? std::optional(TestClock::now() + std::chrono::duration_cast<TestClock::duration>(
                                                                       std::chrono::duration<double>(request.budgetSeconds)))
                                : std::nullopt;
  qint64 last_stats_ms = 0;
  LiveTotals totals{std::vector<int>(size_t(n)), std::vector<int>(size_t(n)), std::vector<int>(size_t(n))};
  const std::string tests = request.tests.trimmed().toStdString();
  // What each candidate is tested as: made in the test pool, where a prompt the tests cannot
  // use (check() without a function) becomes that candidate's error rather than the run's.
  auto problem_of = [&generation, &tests] {
    Problem problem = make_problem(generation.prompt, tests);
    problem.suffix = generation.suffix;
    return problem;
  };
  std::vector<RankEntry> entries(static_cast<size_t>(n));  // verdicts, filled by the test pool
  std::vector<std::string> texts(static_cast<size_t>(n));
  std::vector<bool> reported(size_t(n), false);
  QThreadPool test_pool;
  test_pool.setMaxThreadCount(kTestThreads);

  // The prompt is parsed on its own (a stub for its body) while the candidates decode: a
  // prompt that does not parse would fail every candidate for the prompt's own reason, so
  // the run stops and says so once. Candidates wait for the answer before their tests.
  std::promise<std::string> prompt_checked;  // why the prompt does not parse; empty: it does
  const std::shared_future<std::string> prompt_broken = prompt_checked.get_future().share();
  if (generation.suffix) {
    prompt_checked.set_value({});  // a hole's prefix need not parse alone
  } else {
    test_pool.start([this, &generation, &prompt_checked] {
      std::string why;
      try {
        const TestResult r = engine_->test(make_problem(generation.prompt, ""), body_stub(generation.prompt),
                                           kPromptCheckSeconds);
        if (r.checks.failure == CheckFailure::Syntax) why = r.checks.reason.empty() ? "a syntax error" : r.checks.reason;
      } catch (const std::exception&) {
        // no sandbox, or the harness could not start: the candidates' own tests will say
      }
      if (!why.empty()) stop_.store(true);
      prompt_checked.set_value(why);
    });
  }

  auto finish = [&](const Candidate& candidate) {
    const auto i = size_t(candidate.index);
    if (i >= reported.size() || reported[i]) return;
    reported[i] = true;
    texts[i] = candidate.text;
    totals.tokens[i] = int(candidate.tokens.size());
    entries[i].mean_logprob = candidate.mean_logprob();
    entries[i].finished_seconds = candidate.seconds;
    const CandidateState state = state_after_generation(candidate.finish);
    // Stopped and budget-cut candidates are unfinished code: shown as such, never tested.
    // Without tests, a run still makes the checks, the docstring's examples and the probe.
    const bool testable = state == CandidateState::Done;
    Q_EMIT candidateState(candidate.index, int(testable ? CandidateState::Testing : state), {});
    if (!testable) return;
    const std::string completion = candidate.text;
    test_pool.start([this, i, completion, &tests, &problem_of, &entries, &deadline, prompt_broken] {
      if (!prompt_broken.get().empty()) {
        Q_EMIT candidateState(int(i), int(CandidateState::Done), QStringLiteral("not tested: the prompt does not parse"));
        return;
      }
      if (stop_.load()) {  // stopped while queued for testing: keep the text, skip the test
        Q_EMIT candidateState(int(i), int(CandidateState::Done), QStringLiteral("not tested"));
        return;
      }
      TestResult result;
      try {
        const auto test = [&](double wall) { return engine_->test(problem_of(), completion, wall); };
        result = deadline ? run_until(*deadline, kTestTimeoutSeconds, test) : test(kTestTimeoutSeconds);
      } catch (const std::exception& e) {
        result.verdict = Verdict::Error;
        result.detail = e.what();
        if (tests.empty()) {  // nothing the user asked for went wrong: the text stands unchecked
          Q_EMIT candidateState(int(i), int(CandidateState::Done), QStringLiteral("not checked: %1").arg(e.what()));
          return;
        }
      }
      entries[i].result = result;
      Q_EMIT candidateState(int(i), int(state_of(result.verdict)), pane_lines(detail_of(result), problem_of(), completion));
    });
  };

  SessionCallbacks callbacks;
  callbacks.on_delta = [&](const CandidateDelta& delta) {
    const auto i = size_t(delta.index);
    if (i >= totals.tokens.size()) return;
    totals.tokens[i] = delta.tokens;
    totals.accepted[i] = delta.accepted;
    totals.proposed[i] = delta.proposed;
    Q_EMIT candidateDelta(delta.index, QString::fromStdString(delta.text), delta.tokens, delta.accepted,
                        delta.proposed);
    if (clock.elapsed() - last_stats_ms >= kStatsIntervalMs) {
      last_stats_ms = clock.elapsed();
      Q_EMIT stats(totals.stats(clock.elapsed() / 1000.0, request.budgetSeconds));
    }
  };
  callbacks.on_finished = finish;

  SessionResult result;
  try {
    result = engine_->generate(generation, callbacks, &stop_);
  } catch (const std::exception& e) {
    const QString message = QString::fromStdString(e.what());
    Q_EMIT error(QStringLiteral("Generation failed: %1").arg(message));
    for (int i = 0; i < n; ++i)
      if (!reported[size_t(i)]) Q_EMIT candidateState(i, int(CandidateState::Error), message);
  }
  for (const Candidate& candidate : result.candidates) finish(candidate);
  test_pool.waitForDone();
  if (!prompt_broken.get().empty()) Q_EMIT error(prompt_message(prompt_broken.get()));

  // Candidates never tested (stopped, cut by the budget) hold the default result, whose
  // checks did not run: they rank after every checked one.
  QVector<int> ranking;
  if (!result.candidates.empty()) {
    std::vector<TestResult> results;
    for (const RankEntry& entry : entries) results.push_back(entry.result);
    const CandidateGroups groups = group_candidates(texts, results);
    for (size_t i = 0; i < entries.size(); ++i) entries[i].agreement = groups.agreement[i];
    for (int i : rank_candidates(entries)) ranking.push_back(i);
    Q_EMIT groupsFound(run_groups(groups, ranking, results));
  }
  Q_EMIT runFinished(ranking, totals.stats(clock.elapsed() / 1000.0, request.budgetSeconds));
}

void EngineWorker::evaluateProblems(const std::vector<Problem>& problems, const RunRequest& request, int ticket) {
  if (!begin(ticket)) return;
  if (!loaded_) {
    Q_EMIT error(QStringLiteral("No model is loaded: choose a model file first."));
    Q_EMIT evaluationFinished();
    return;
  }
  GenerationRequest generation = generation_request(request);
  for (const Problem& problem : problems) {
    if (stop_.load()) break;
    generation.prompt = problem.prompt;
    generation.suffix = problem.suffix;
    try {
      const ProblemEvaluation evaluation = engine_->evaluate(problem, generation, &stop_);
      if (!stop_.load()) Q_EMIT problemEvaluated(evaluation);  // a stopped task's numbers mean nothing
    } catch (const std::exception& e) {
      Q_EMIT error(QStringLiteral("%1: %2").arg(QString::fromStdString(problem.task_id), QString::fromStdString(e.what())));
    }
  }
  Q_EMIT evaluationFinished();
}

}  // namespace specula::ui
