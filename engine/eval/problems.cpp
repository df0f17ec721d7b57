// Problem sets and samples: JSON lines, optionally gzip-compressed.
#include "eval/problems.h"

#include <zlib.h>

#include <nlohmann/json.hpp>
#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <sstream>
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

namespace {

bool reads_as_code(const std::string& text) {
  if (text.find_first_of("()[]{}=") != std::string::npos) return true;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;
    const size_t last = line.find_last_not_of(" \t\r");
    if (line[last] == ':' || std::string("@#\"'").find(line[first]) != std::string::npos) return true;
    for (const char* keyword : {"def ", "class ", "import ", "from ", "async ", "return ", "if ", "for ", "while "})
      if (line.compare(first, std::strlen(keyword), keyword) == 0) return true;
  }
  return false;
}

std::vector<std::string> lower_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  for (char c : text + " ") {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      word += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!word.empty()) {
      words.push_back(word);
      word.clear();
    }
  }
  return words;
}

// The verb of "reverses", "fixes", "counts" as a function name begins: "reverse", "fix", "count".
std::string base_form(std::string verb) {
  for (const char* ending : {"sses", "zzes", "xes", "ches", "shes"})
    if (verb.size() > 4 && verb.ends_with(ending)) return verb.substr(0, verb.size() - 2);
  if (verb.size() > 3 && verb.back() == 's' && !verb.ends_with("ss")) verb.pop_back();
  return verb;
}

// The parameters a request's words suggest: "two numbers" (strings, lists) are a and b of
// that kind; otherwise its last noun of a known kind, with that kind.
std::string parameter_for(const std::vector<std::string>& words) {
  static const std::map<std::string, std::string> pairs = {
      {"numbers", "int"}, {"integers", "int"}, {"floats", "float"}, {"strings", "str"}, {"words", "str"},
      {"lists", "list"}, {"arrays", "list"}, {"dictionaries", "dict"}};
  for (size_t i = 0; i + 1 < words.size(); ++i)
    if (const auto kind = pairs.find(words[i + 1]); words[i] == "two" && kind != pairs.end())
      return "a: " + kind->second + ", b: " + kind->second;
  static const std::map<std::string, std::string> kinds = {
      {"sentence", "str"}, {"string", "str"}, {"text", "str"}, {"word", "str"}, {"line", "str"},
      {"name", "str"}, {"phrase", "str"}, {"password", "str"}, {"email", "str"}, {"url", "str"},
      {"number", "int"}, {"integer", "int"}, {"year", "int"}, {"n", "int"}, {"age", "int"},
      {"numbers", "list"}, {"list", "list"}, {"array", "list"}, {"values", "list"}, {"items", "list"},
      {"integers", "list"}, {"scores", "list"}, {"strings", "list"}, {"words", "list"},
      {"dictionary", "dict"}, {"dict", "dict"}, {"mapping", "dict"}};
  for (auto it = words.rbegin(); it != words.rend(); ++it)
    if (const auto kind = kinds.find(*it); kind != kinds.end())
      return (*it == "list" || *it == "array" ? "items" : *it == "dictionary" || *it == "dict" ? "mapping" : *it) +
             ": " + kind->second;
  return "x";
}

}  // namespace

std::optional<std::string> function_for_request(const std::string& text) {
  const std::vector<std::string> words = lower_words(text);
  if (words.size() < 3 || reads_as_code(text)) return std::nullopt;
  // "write a python function that ..." says nothing of what the function does
  static const std::set<std::string> asking = {
      "write", "create", "make", "implement", "define", "code", "give", "generate", "me", "please", "a", "an",
      "the", "python", "function", "method", "program", "routine", "script", "that", "which", "to", "can",
      "could", "would", "you", "i", "need", "want", "helper", "simple", "small", "new"};
  static const std::set<std::string> filler = {"a", "an", "the", "in", "of", "to", "for", "and", "or", "with",
                                               "from", "into", "on", "by", "each", "every", "all", "given", "its",
                                               "it", "is", "are", "be", "as", "at", "if", "whether", "that"};
  size_t start = 0;
  while (start < words.size() && asking.contains(words[start])) ++start;
  std::string name;
  for (size_t i = start, taken = 0; i < words.size() && taken < 3; ++i) {
    if (filler.contains(words[i])) continue;
    name += (name.empty() ? base_form(words[i]) : "_" + words[i]);
    ++taken;
  }
  if (name.empty()) name = "solve";
  static const std::set<std::string> keywords = {"and", "as", "assert", "async", "await", "break", "class", "continue",
                                                 "def", "del", "elif", "else", "except", "finally", "for", "from",
                                                 "global", "if", "import", "in", "is", "lambda", "nonlocal", "not",
                                                 "or", "pass", "raise", "return", "try", "while", "with", "yield"};
  if (keywords.contains(name)) name += "_";
  std::string request = text.substr(text.find_first_not_of(" \t\r\n"));
  request = request.substr(0, request.find_last_not_of(" \t\r\n") + 1);
  std::replace(request.begin(), request.end(), '\n', ' ');
  std::replace(request.begin(), request.end(), '"', '\'');  // the docstring's own quotes stay its ends
  for (size_t at = request.find('\\'); at != std::string::npos; at = request.find('\\', at + 2))
    request.insert(at, 1, '\\');
  request[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(request[0])));
  if (std::string(".!?").find(request.back()) == std::string::npos) request += '.';
  return "def " + name + "(" + parameter_for(std::vector(words.begin() + long(start), words.end())) + "):\n    \"\"\"" +
         request + "\"\"\"\n";
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
