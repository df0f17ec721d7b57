// What the commands that test completions (check, eval) share: exit codes, load issues on
// stderr, the sandbox, and pass@k as JSON.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "eval/problems.h"
#include "eval/sandbox.h"

namespace specula::cli {

constexpr int kExitUnreadable = 3;  // a file cannot be read, or holds nothing usable
constexpr int kExitNoPython = 5;    // the Python interpreter is missing or does not run

// Each issue as FILE:LINE: MESSAGE on stderr.
void report_load_issues(const std::string& file, const std::vector<LoadIssue>& issues);

// The sandbox running `python` ("" = python3 on PATH), with namespaces where they work unless
// `use_namespaces` is false (the reduced level). Throws CommandFailed (kExitNoPython) when
// the interpreter is missing or does not run.
std::unique_ptr<Sandbox> open_sandbox(const std::string& python, bool use_namespaces = true);

// {"pass@1": ..., "pass@5": ...}
nlohmann::json pass_at_k_json(const std::vector<std::pair<int, double>>& values);

}  // namespace specula::cli
