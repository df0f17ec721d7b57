// Best of N for the editor (`serve --suggestions N`, docs/editor.md): the N candidates of one
// /infill or /completion request, decoded together, ranked by what needs no tests, within
// the request's own time limit:
//
//   1. for Python, prefix + candidate + suffix parses and compiles, and runs as a module, in
//      the sandbox (TestRunner: the warm sandbox unless told otherwise), with the hole's
//      function called on inputs derived from its signature (the behaviour probe) and the
//      docstring's examples run;
//   2. candidates that behave alike agree: the larger group first (identical texts always agree);
//   3. likelihood: the higher mean log-probability of its tokens first.
//
// This is eval's ranking (evaluation.h: ranking_program, group_candidates, rank_candidates)
// with the editor's file as the problem and no tests. When the checks cannot all finish by the
// deadline, or the code is not Python, or there is no sandbox, the order is likelihood's alone
// and `note` says why.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compute/cost_model.h"
#include "eval/test_runner.h"
#include "serve/llama_api.h"

namespace specula::serve {

// One candidate to rank, as generation handed it over.
struct SuggestionCandidate {
  std::string text;
  double mean_logprob = 0.0;
};

// What a ranking is asked: the code around the hole and the candidates for it.
struct SuggestionInput {
  std::string prefix;  // the code before the hole (/completion: the prompt's text)
  std::string suffix;  // the code after it (/completion: none)
  std::vector<SuggestionCandidate> candidates;
};

// What the ranking found about one candidate.
struct SuggestionVerdict {
  bool checked = false;  // its checks ran to the end
  CandidateChecks checks;  // checks.failure None: the filled code parses, compiles and runs as a module
  Verdict verdict = Verdict::NotTested;  // the ranking run's verdict (examples, probe): untested, failed, ...
  int examples_passed = 0;
  int examples_total = 0;
  int agreement = 0;  // candidates that behave as this one does, itself included; identical texts
                      // when its behaviour could not be compared
};

struct RankedSuggestions {
  std::vector<int> order;                  // indices of the candidates, best first
  std::vector<SuggestionVerdict> verdicts; // per candidate, in input order
  std::string ranked_by;                   // "checks" (every step above) or "likelihood"
  std::string note;                        // why the checks did not decide; empty when they did
  double check_seconds = 0.0;              // from the ranking's start to its answer
};

// Whether `code` reads as Python: a line that starts a def, class, import or from-import,
// or a block opened by a line ending in ':' and indented below it. Code that does not is
// never sent to the sandbox (its checks would fail for every candidate alike).
bool looks_like_python(const std::string& code);

// The last top-level function `prefix` defines ("" when none): the function the hole is in
// (or the one before it), which the behaviour probe calls.
std::string hole_function(const std::string& prefix);

// Ranks `input`'s candidates. `runner` null: no sandbox, the likelihood order. The checks
// run on the runner's workers, the identical texts once; a check not finished by `deadline`
// (run_until's rule) makes the order likelihood's. `abandoned` (polled every 20 ms while the
// checks run) returns true when nobody waits for the answer any more: the ranking returns at
// once with likelihood's order (the checks under way end within their own limits).
RankedSuggestions rank_suggestions(const SuggestionInput& input, TestRunner* runner, TestClock::time_point deadline,
                                   const std::function<bool()>& abandoned = {});

// The default of `serve --suggestions` on a CPU: the largest N (at most `max_n`) whose
// predicted decoding step, N sequences each verifying `draft_tokens` drafted tokens plus one
// after `context` cached positions (and the drafter's forwards, when `draft` is given), costs
// at most `max_ratio` times the step of one sequence. At least 1.
inline constexpr double kSuggestionCostRatio = 1.3;
inline constexpr int kSuggestionDraftTokens = 4;
inline constexpr int kSuggestionContext = 512;
int suggestions_for_cost(const ForwardCost& target, const ForwardCost* draft, int max_n = 8,
                         double max_ratio = kSuggestionCostRatio, int draft_tokens = kSuggestionDraftTokens,
                         int context = kSuggestionContext);
// Predicted seconds of that step for `n` sequences.
double suggestion_step_seconds(const ForwardCost& target, const ForwardCost* draft, int n, int draft_tokens,
                               int context);
inline constexpr int kGpuSuggestions = 4;  // the default on a GPU, where a batch of 4 costs about one

// Candidates a request decodes: the `asked` ones (n_cmpl, n), at least `suggestions` when its
// answer comes whole (a stream shows text before every candidate has ended, so it is not
// ranked), at most `max_n`.
int decoded_candidates(int asked, int suggestions, bool stream, int max_n);

// The generation's share of t_max_predict_ms (0: none) when the candidates are ranked after
// it: the checks keep a quarter of it, at most kCheckReserveMs.
inline constexpr long long kCheckReserveMs = 300;
long long generation_limit_ms(long long t_max_predict_ms, bool ranked);

// When the checks must have ended: t_max_predict_ms after the first token (the generation's
// start plus its prompt's time), as the request's whole answer; without a limit,
// kUntimedCheckSeconds after `now`.
inline constexpr double kUntimedCheckSeconds = 2.0;
TestClock::time_point check_deadline(TestClock::time_point started, double prefill_seconds, long long t_max_predict_ms,
                                     TestClock::time_point now);

// The code around an /infill request's hole (input_prefix + prompt, input_suffix), or a
// /completion request's prompt text (token ids left out) with nothing after it.
SuggestionInput suggestion_hole(const LlamaRequest& request);

// The extension fields of a ranked answer: "ranked_by", "ranking_note" (only when the checks
// did not decide), "ranking_ms", and "candidates": every candidate, best first, with its
// "index" in the decode, "content", "mean_logprob", "agreement" and "checks" ({"checked",
// "result": check_name, "reason", "verdict", "examples_passed", "examples_total"}).
nlohmann::json ranking_json(const RankedSuggestions& ranking, const SuggestionInput& input);

}  // namespace specula::serve
