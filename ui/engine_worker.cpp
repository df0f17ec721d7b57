#include "engine_worker.h"

#include <QElapsedTimer>
#include <QRegularExpression>
#include <algorithm>
#include <exception>
#include <future>
#include <utility>

#include "prompt_choice.h"

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

// The evaluation's ranking and groups by candidate index, as the window shows them; a
// candidate the evaluation never saw (generation failed before it ended) ranks last, alone.
std::pair<QVector<int>, RunGroups> window_order(const ProblemEvaluation& evaluation, int n) {
  CandidateGroups groups;  // by candidate index, each naming candidates by index
  for (int i = 0; i < n; ++i) {
    groups.same_text.push_back(i);
    groups.group.push_back(i);
  }
  std::vector<TestResult> results(static_cast<size_t>(n));
  const auto index_at = [&evaluation](int position) { return evaluation.candidates[size_t(position)].index; };
  for (const EvaluatedCandidate& c : evaluation.candidates) {
    if (c.index < 0 || c.index >= n) continue;
    groups.same_text[size_t(c.index)] = index_at(c.same_text);
    groups.group[size_t(c.index)] = index_at(c.group);
    results[size_t(c.index)] = c.result;
  }
  QVector<int> ranking;
  for (int position : evaluation.ranking) ranking.push_back(index_at(position));
  for (int i = 0; i < n; ++i)
    if (!ranking.contains(i)) ranking.push_back(i);
  return {ranking, run_groups(groups, ranking, results)};
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
    chat_template_ = loaded.chat_template;
    server_ = false;
    Q_EMIT loadProgress(1.0);
    Q_EMIT modelsLoaded(QString::fromStdString(loaded.summary), QString::fromStdString(loaded.backend),
                      QString::fromStdString(loaded.isolation), loaded.fill_in_middle,
                        loaded.chat_template.has_value());
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
    chat_template_.reset();
    server_ = true;
    Q_EMIT modelsLoaded(QString::fromStdString(loaded.summary), QString::fromStdString(loaded.backend),
                        QString::fromStdString(loaded.isolation), loaded.fill_in_middle,
                        loaded.chat_template.has_value());
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
  GenerationRequest generation = generation_request(request);
  try {
    applyPromptStyle(generation, request.promptStyle, true);
  } catch (const std::invalid_argument& e) {  // one message, not n candidates that fail alike
    Q_EMIT error(QString::fromStdString(e.what()));
    Q_EMIT runFinished({}, empty);
    return;
  }
  Problem problem;
  try {
    problem = make_problem(generation.prompt, request.tests.trimmed().toStdString());
    problem.suffix = generation.suffix;
  } catch (const std::invalid_argument& e) {  // check(candidate) tests, a prompt without a function
    Q_EMIT error(QStringLiteral("The tests cannot run: %1.").arg(QString::fromStdString(e.what())));
    Q_EMIT runFinished({}, empty);
    return;
  }

  Q_EMIT runStarted(n, request.budgetSeconds);
  for (int i = 0; i < n; ++i) Q_EMIT candidateState(i, int(CandidateState::Generating), {});
  QElapsedTimer clock;
  clock.start();
  LiveTotals totals{std::vector<int>(size_t(n)), std::vector<int>(size_t(n)), std::vector<int>(size_t(n))};

  // The prompt is parsed on its own (a stub for its body) while the candidates decode: a
  // prompt that does not parse would fail every candidate for the prompt's own reason, so
  // the run stops and says so once. Candidates wait for the answer before their tests.
  const std::shared_future<std::string> prompt_broken =
      std::async(std::launch::async, [this, &generation] { return checkPrompt(generation); }).share();

  // Generation, as evaluate_problem drives it: every candidate is handed over (one the budget
  // or Stop cut as incomplete, never tested), the panes updated as it streams and ends.
  const CandidateGenerator generate = [&](const Problem&, double, const CandidateSink& emit, const std::atomic<bool>&) {
    qint64 last_stats_ms = 0;
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
    callbacks.on_finished = [&](const Candidate& c) {
      if (size_t(c.index) < totals.tokens.size()) totals.tokens[size_t(c.index)] = int(c.tokens.size());
      const CandidateState state = state_after_generation(c.finish);
      // Stopped and budget-cut candidates are unfinished code: shown as such, never tested.
      Q_EMIT candidateState(c.index, int(state == CandidateState::Done ? CandidateState::Testing : state), {});
      emit({.index = c.index, .completion = c.text, .mean_logprob = c.mean_logprob(),
            .complete = state == CandidateState::Done});
    };
    engine_->generate(generation, callbacks, &stop_);  // the session keeps the budget itself
  };

  // The tests: the window's runs check the docstring's examples and the probe with them.
  const CandidateTesting testing{
      .test = [this, &prompt_broken](const CandidateTest& candidate, double wall) {
        TestResult result;
        if (!prompt_broken.get().empty()) {
          result.verdict = Verdict::NotTested;
          result.detail = "not tested: the prompt does not parse";
        } else if (stop_.load()) {  // stopped while queued for testing: keep the text, skip the test
          result.verdict = Verdict::NotTested;
          result.detail = "not tested";
        } else {
          result = engine_->test(candidate, wall);
        }
        return result;
      },
      .jobs = kTestThreads,
      .limit_seconds = kTestTimeoutSeconds};
  const auto on_tested = [&](const EvaluatedCandidate& e) {
    Q_EMIT candidateState(e.index, int(state_of(e.result.verdict)),
                          pane_lines(detail_of(e.result), problem, e.completion));
  };

  ProblemEvaluation evaluation;
  try {
    evaluation = evaluate_problem(problem, generate, testing, request.budgetSeconds, on_tested,
                                  {.checks_with_tests = true});
  } catch (const std::exception& e) {
    const QString message = QString::fromStdString(e.what());
    Q_EMIT error(QStringLiteral("Generation failed: %1").arg(message));
    for (int i = 0; i < n; ++i) Q_EMIT candidateState(i, int(CandidateState::Error), message);
    Q_EMIT runFinished({}, totals.stats(clock.elapsed() / 1000.0, request.budgetSeconds));
    return;
  }
  if (!prompt_broken.get().empty()) Q_EMIT error(prompt_message(prompt_broken.get()));
  const auto [ranking, groups] = window_order(evaluation, n);
  if (!evaluation.candidates.empty()) Q_EMIT groupsFound(groups);
  Q_EMIT runFinished(ranking, totals.stats(clock.elapsed() / 1000.0, request.budgetSeconds));
}

void EngineWorker::applyPromptStyle(GenerationRequest& generation, const QString& choice, bool announce) {
  const PromptContext context{.chat_template = chat_template_.has_value(),
                              .server = server_,
                              .fill_in_middle = generation.suffix.has_value()};
  const PromptStyle used = runPromptStyle(choice, context);
  if (used == PromptStyle::Chat) {
    try {
      use_chat_prompt(generation, *chat_template_);
    } catch (const ChatTemplateError& e) {
      throw std::invalid_argument("The model's chat template failed (" + e.kind() + ": " + e.what() +
                                  "). Choose Prompt style Raw.");
    }
  }
  if (announce)
    Q_EMIT promptStyleUsed(promptStyleSummary(used), promptStyleReason(choice, used, context),
                           QString::fromStdString(generation.chat_prefix.value_or("")));
}

std::string EngineWorker::checkPrompt(const GenerationRequest& generation) {
  if (generation.suffix) return {};  // a hole's prefix need not parse alone
  try {
    const Problem alone = make_problem(generation.prompt, "");
    const std::string stub = body_stub(generation.prompt);
    const TestResult r = engine_->test({.problem = alone, .completion = stub, .program = ranking_program(alone, stub, false)},
                                       kPromptCheckSeconds);
    if (r.checks.failure != CheckFailure::Syntax) return {};
    stop_.store(true);
    return r.checks.reason.empty() ? "a syntax error" : r.checks.reason;
  } catch (const std::exception&) {
    return {};  // no sandbox, or the harness could not start: the candidates' own tests will say
  }
}

void EngineWorker::evaluateProblems(const std::vector<Problem>& problems, const RunRequest& request, int ticket) {
  if (!begin(ticket)) return;
  if (!loaded_) {
    Q_EMIT error(QStringLiteral("No model is loaded: choose a model file first."));
    Q_EMIT evaluationFinished();
    return;
  }
  const GenerationRequest base = generation_request(request);
  for (const Problem& problem : problems) {
    if (stop_.load()) break;
    GenerationRequest generation = base;  // each problem's own chat prefix and stops
    generation.prompt = problem.prompt;
    generation.suffix = problem.suffix;
    try {
      applyPromptStyle(generation, request.promptStyle, false);  // a problem with a suffix refuses Chat alone
      const ProblemEvaluation evaluation = engine_->evaluate(problem, generation, &stop_);
      if (!stop_.load()) Q_EMIT problemEvaluated(evaluation);  // a stopped task's numbers mean nothing
    } catch (const std::exception& e) {
      Q_EMIT error(QStringLiteral("%1: %2").arg(QString::fromStdString(problem.task_id), QString::fromStdString(e.what())));
    }
  }
  Q_EMIT evaluationFinished();
}

}  // namespace specula::ui
