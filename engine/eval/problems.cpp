// Problem sets and samples: JSON lines, optionally gzip-compressed.
#include "eval/problems.h"

#include <zlib.h>

#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace specula {

namespace {

using json = nlohmann::json;

// A string field, or "" when absent; numbers (MBPP's integer task ids) become text.
std::string text_field(const json& record, const char* key) {
  const auto it = record.find(key);
  if (it == record.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<long long>());
  throw std::invalid_argument(std::string("field '") + key + "' is not a string");
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\n") == std::string::npos; }

// Parses one non-empty line into a JSON object, or explains why not.
json parse_object(const std::string& line) {
  json record = json::parse(line);  // throws json::parse_error
  if (!record.is_object()) throw std::invalid_argument("not a JSON object");
  return record;
}

std::string parse_message(const json::parse_error& e) {
  const std::string what = e.what();
  const auto colon = what.find(": ");  // drop nlohmann's "[json.exception.parse_error.101] "
  return "malformed JSON (" + (colon == std::string::npos ? what : what.substr(colon + 2)) + ")";
}

Problem problem_from(const json& record) {
  Problem p;
  p.task_id = text_field(record, "task_id");
  if (p.task_id.empty()) throw std::invalid_argument("no task_id");
  if (record.contains("test_list")) {  // MBPP: a description, and asserts that name the function
    const json& tests = record["test_list"];
    if (!tests.is_array()) throw std::invalid_argument("test_list is not a list");
    p.prompt = text_field(record, "prompt");
    if (p.prompt.empty()) p.prompt = text_field(record, "text");
    const std::string setup = text_field(record, "test_setup_code");
    p.test = blank(setup) ? "" : setup + "\n";
    for (const json& t : tests) {
      if (!t.is_string()) throw std::invalid_argument("test_list holds a non-string");
      p.test += t.get<std::string>() + "\n";
    }
    p.canonical_solution = text_field(record, "code");
  } else {  // HumanEval: the completion continues the prompt; check(entry_point) runs the tests
    p.prompt = text_field(record, "prompt");
    p.code_prefix = p.prompt;
    p.test = text_field(record, "test");
    p.entry_point = text_field(record, "entry_point");
    p.canonical_solution = text_field(record, "canonical_solution");
    if (record.contains("suffix") && !record["suffix"].is_null()) p.suffix = text_field(record, "suffix");
    if (p.prompt.empty()) throw std::invalid_argument("task '" + p.task_id + "' has no prompt");
  }
  if (blank(p.test)) throw std::invalid_argument("task '" + p.task_id + "' has no tests");
  if (p.entry_point.empty() && p.test.find("def check(") != std::string::npos)
    throw std::invalid_argument("task '" + p.task_id + "' defines check() but has no entry_point");
  return p;
}

}  // namespace

std::vector<std::string> read_text_lines(const std::string& path) {
  gzFile file = gzopen(path.c_str(), "rb");  // reads plain files unchanged
  if (!file) throw std::runtime_error("cannot open '" + path + "'");
  std::string text;
  char buffer[1 << 16];
  int n = 0;
  while ((n = gzread(file, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<std::size_t>(n));
  int error = Z_OK;
  const char* message = gzerror(file, &error);
  const std::string why = n < 0 ? message : "";
  gzclose(file);
  if (n < 0) throw std::runtime_error("cannot read '" + path + "': " + why);
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

namespace {

// Calls use(record, line) for the JSON object on each non-blank line of a JSONL file; a
// line that does not parse, or that `use` throws on, becomes an issue and is skipped.
template <typename Use>
void for_each_record(const std::string& path, std::vector<LoadIssue>& issues, const Use& use) {
  const std::vector<std::string> lines = read_text_lines(path);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const int line = static_cast<int>(i) + 1;
    if (blank(lines[i])) continue;
    try {
      use(parse_object(lines[i]), line);
    } catch (const json::parse_error& e) {
      issues.push_back({line, parse_message(e)});
    } catch (const std::exception& e) {
      issues.push_back({line, e.what()});
    }
  }
}

}  // namespace

ProblemSet load_problems(const std::string& path) {
  ProblemSet set;
  std::set<std::string> seen;
  for_each_record(path, set.issues, [&](const json& record, int) {
    Problem p = problem_from(record);
    if (!seen.insert(p.task_id).second) throw std::invalid_argument("duplicate task_id '" + p.task_id + "'");
    set.problems.push_back(std::move(p));
  });
  return set;
}

std::string body_stub(const std::string& prompt) {
  const size_t end = prompt.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "pass\n";
  const size_t newline = prompt.rfind('\n', end);
  const size_t start = newline == std::string::npos ? 0 : newline + 1;
  std::string indent = prompt.substr(start, prompt.find_first_not_of(" \t", start) - start);
  if (prompt[end] == ':') indent += "    ";
  return (prompt.ends_with('\n') ? "" : "\n") + indent + "pass\n";
}

Problem make_problem(const std::string& prompt, const std::string& tests, const std::string& task_id) {
  Problem p;
  p.task_id = task_id;
  p.prompt = prompt;
  p.code_prefix = prompt;
  p.test = blank(tests) ? "" : tests;
  // check(candidate) needs the function under test: the last one the prompt defines.
  std::size_t start = 0;
  while (start < prompt.size()) {
    std::size_t end = prompt.find('\n', start);
    if (end == std::string::npos) end = prompt.size();
    const std::string line = prompt.substr(start, end - start);
    if (line.rfind("def ", 0) == 0) {
      const std::size_t paren = line.find('(');
      if (paren != std::string::npos) p.entry_point = line.substr(4, paren - 4);
    }
    start = end + 1;
  }
  if (p.entry_point.empty() && tests.find("def check(") != std::string::npos)
    throw std::invalid_argument("the tests define check(candidate) but the prompt defines no function");
  return p;
}

SampleSet load_samples(const std::string& path) {
  SampleSet set;
  for_each_record(path, set.issues, [&](const json& record, int line) {
    Sample s;
    s.task_id = text_field(record, "task_id");
    if (s.task_id.empty()) throw std::invalid_argument("no task_id");
    if (!record.contains("completion")) throw std::invalid_argument("no completion");
    s.completion = text_field(record, "completion");
    s.line = line;
    set.samples.push_back(std::move(s));
  });
  return set;
}

}  // namespace specula
