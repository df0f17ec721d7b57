#include "evaluation_common.h"

#include <cstdio>

#include "commands.h"

namespace specula::cli {

void report_load_issues(const std::string& file, const std::vector<LoadIssue>& issues) {
  for (const LoadIssue& issue : issues) std::fprintf(stderr, "%s:%d: %s\n", file.c_str(), issue.line, issue.message.c_str());
}

std::unique_ptr<Sandbox> open_sandbox(const std::string& python, bool use_namespaces) {
  try {
    SandboxOptions options;
    options.python = python;
    options.use_namespaces = use_namespaces;
    return std::make_unique<Sandbox>(options);
  } catch (const SandboxError& e) {
    throw CommandFailed(e.what(), kExitNoPython);
  }
}

nlohmann::json pass_at_k_json(const std::vector<std::pair<int, double>>& values) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [k, v] : values) out["pass@" + std::to_string(k)] = v;
  return out;
}

}  // namespace specula::cli
