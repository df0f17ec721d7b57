#include "serve/suggestions.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <regex>
#include <sstream>

#include "eval/evaluation.h"
#include "eval/problems.h"

namespace specula::serve {

namespace {

constexpr auto kAbandonPoll = std::chrono::milliseconds(20);

std::vector<std::string> lines_of(const std::string& code) {
  std::vector<std::string> lines;
  std::istringstream in(code);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

size_t indentation(const std::string& line) { return line.find_first_not_of(" \t"); }

bool starts_with(const std::string& text, const char* start) { return text.rfind(start, 0) == 0; }

// A line that only Python (among the languages an editor sends) starts so.
bool python_statement(const std::string& trimmed) {
  if (starts_with(trimmed, "def ") || starts_with(trimmed, "async def ") || starts_with(trimmed, "import ")) return true;
  if (starts_with(trimmed, "class ") && trimmed.back() == ':') return true;
  return starts_with(trimmed, "from ") && trimmed.find(" import ") != std::string::npos;
}

// Every candidate's verdict from one run per distinct text; nothing when a check was cut by
// the deadline or nobody waits any more (`abandoned`).
std::optional<std::vector<TestResult>> run_checks(const SuggestionInput& input, TestRunner& runner,
                                                  TestClock::time_point deadline, const std::function<bool()>& abandoned,
                                                  bool& was_abandoned) {
  Problem problem;
  problem.task_id = "suggestion";
  problem.code_prefix = input.prefix;
  problem.suffix = input.suffix;
  problem.entry_point = hole_function(input.prefix);
  std::map<std::string, size_t> run_of_text;  // text -> its run in `futures`
  std::vector<std::future<TestResult>> futures;
  std::vector<size_t> run_of(input.candidates.size());
  for (size_t i = 0; i < input.candidates.size(); ++i) {
    const std::string& text = input.candidates[i].text;
    auto [it, fresh] = run_of_text.emplace(text, futures.size());
    if (fresh) futures.push_back(runner.submit(ranking_program(problem, text, /*with_tests=*/false), 0.0, {}, deadline));
    run_of[i] = it->second;
  }
  std::vector<TestResult> runs;
  for (std::future<TestResult>& f : futures) {
    do {
      if (abandoned && abandoned()) {
        was_abandoned = true;
        return std::nullopt;  // the runs under way end by the deadline on their own
      }
    } while (f.wait_for(kAbandonPoll) != std::future_status::ready);
    runs.push_back(f.get());
    if (runs.back().verdict == Verdict::NotTested) return std::nullopt;
  }
  std::vector<TestResult> results;
  for (size_t i = 0; i < input.candidates.size(); ++i) results.push_back(runs[run_of[i]]);
  return results;
}

}  // namespace

bool looks_like_python(const std::string& code) {
  const std::vector<std::string> lines = lines_of(code);
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t indent = indentation(lines[i]);
    if (indent == std::string::npos) continue;
    std::string trimmed = lines[i].substr(indent);
    while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\r')) trimmed.pop_back();
    if (python_statement(trimmed)) return true;
  }
  return false;
}

std::string hole_function(const std::string& prefix) {
  static const std::regex def(R"(^(?:async\s+)?def\s+([A-Za-z_][A-Za-z0-9_]*)\s*\()");
  std::string name;
  for (const std::string& line : lines_of(prefix)) {
    std::smatch m;
    if (std::regex_search(line, m, def)) name = m[1];
  }
  return name;
}

RankedSuggestions rank_suggestions(const SuggestionInput& input, TestRunner* runner, TestClock::time_point deadline,
                                   const std::function<bool()>& abandoned) {
  const auto start = TestClock::now();
  const size_t n = input.candidates.size();
  RankedSuggestions out;
  out.verdicts.resize(n);
  std::vector<RankEntry> entries(n);
  std::vector<std::string> texts;
  for (size_t i = 0; i < n; ++i) {
    entries[i].mean_logprob = input.candidates[i].mean_logprob;
    entries[i].finished_seconds = static_cast<double>(i);  // full ties keep the decode's order
    texts.push_back(input.candidates[i].text);
  }
  std::optional<std::vector<TestResult>> results;
  bool was_abandoned = false;
  if (n < 2) {
    out.note = "one candidate: nothing to rank";
  } else if (!runner) {
    out.note = "no sandbox: ranked by likelihood";
  } else if (!looks_like_python(input.prefix + input.suffix)) {
    out.note = "the code does not read as Python: ranked by likelihood";
  } else {
    results = run_checks(input, *runner, deadline, abandoned, was_abandoned);
    if (!results) {
      out.note = was_abandoned ? "the client went away before the checks ended"
                               : "the checks did not finish within the time limit: ranked by likelihood";
    }
  }
  const CandidateGroups groups = group_candidates(texts, results ? *results : std::vector<TestResult>(n));
  std::vector<int> identical(n, 0);
  for (size_t i = 0; i < n; ++i) ++identical[static_cast<size_t>(groups.same_text[i])];
  for (size_t i = 0; i < n; ++i) {
    SuggestionVerdict& v = out.verdicts[i];
    v.agreement = identical[static_cast<size_t>(groups.same_text[i])];
    if (!results) continue;
    const TestResult& r = (*results)[i];
    v.checked = true;
    v.checks = r.checks;
    v.verdict = r.verdict;
    v.examples_passed = r.examples_passed;
    v.examples_total = r.examples_total;
    v.agreement = groups.agreement[i];
    entries[i].result = r;
    entries[i].agreement = groups.agreement[i];
  }
  out.ranked_by = results ? "checks" : "likelihood";
  out.order = rank_candidates(entries, results ? RankRule::Agreement : RankRule::Likelihood);
  out.check_seconds = std::chrono::duration<double>(TestClock::now() - start).count();
  return out;
}

double suggestion_step_seconds(const ForwardCost& target, const ForwardCost* draft, int n, int draft_tokens,
                               int context) {
  const int verified = n * (draft_tokens + 1);
  double seconds = target.seconds(verified, verified, static_cast<double>(verified) * context);
  if (draft) seconds += draft_tokens * draft->seconds(n, n, static_cast<double>(n) * context);
  return seconds;
}

int suggestions_for_cost(const ForwardCost& target, const ForwardCost* draft, int max_n, double max_ratio,
                         int draft_tokens, int context) {
  const double one = suggestion_step_seconds(target, draft, 1, draft_tokens, context);
  int best = 1;
  for (int n = 2; n <= max_n; ++n) {
    if (suggestion_step_seconds(target, draft, n, draft_tokens, context) <= max_ratio * one) best = n;
  }
  return best;
}

int decoded_candidates(int asked, int suggestions, bool stream, int max_n) {
  if (stream) return asked;
  return std::min(std::max(asked, suggestions), std::max(asked, max_n));
}

long long generation_limit_ms(long long t_max_predict_ms, bool ranked) {
  if (!ranked || t_max_predict_ms <= 0) return t_max_predict_ms;
  return std::max(1LL, t_max_predict_ms - std::min(t_max_predict_ms / 4, kCheckReserveMs));
}

TestClock::time_point check_deadline(TestClock::time_point started, double prefill_seconds, long long t_max_predict_ms,
                                     TestClock::time_point now) {
  using std::chrono::duration_cast;
  if (t_max_predict_ms <= 0) return now + duration_cast<TestClock::duration>(std::chrono::duration<double>(kUntimedCheckSeconds));
  return started + duration_cast<TestClock::duration>(std::chrono::duration<double>(prefill_seconds)) +
         std::chrono::milliseconds(t_max_predict_ms);
}

SuggestionInput suggestion_hole(const LlamaRequest& request) {
  SuggestionInput hole;
  if (request.endpoint == LlamaEndpoint::Infill) hole.prefix = request.input_prefix;
  for (const PromptPiece& piece : request.prompt) hole.prefix += piece.text;
  if (request.endpoint == LlamaEndpoint::Infill) hole.suffix = request.input_suffix;
  return hole;
}

nlohmann::json ranking_json(const RankedSuggestions& ranking, const SuggestionInput& input) {
  nlohmann::json candidates = nlohmann::json::array();
  for (const int i : ranking.order) {
    const SuggestionVerdict& v = ranking.verdicts[static_cast<size_t>(i)];
    const SuggestionCandidate& c = input.candidates[static_cast<size_t>(i)];
    candidates.push_back({{"index", i},
                          {"content", c.text},
                          {"mean_logprob", c.mean_logprob},
                          {"agreement", v.agreement},
                          {"checks",
                           {{"checked", v.checked},
                            {"result", check_name(v.checks.failure)},
                            {"reason", v.checks.reason},
                            {"verdict", v.checked ? verdict_name(v.verdict) : "not tested"},
                            {"examples_passed", v.examples_passed},
                            {"examples_total", v.examples_total}}}});
  }
  nlohmann::json out = {{"ranked_by", ranking.ranked_by},
                        {"ranking_ms", ranking.check_seconds * 1e3},
                        {"candidates", candidates}};
  if (!ranking.note.empty()) out["ranking_note"] = ranking.note;
  return out;
}

}  // namespace specula::serve
