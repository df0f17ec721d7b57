// specula-cli models [--json] [--dir DIR]...: the models already on this computer (Ollama,
// LM Studio, llama.cpp, the Hugging Face hub, and the folders given), whether each loads,
// and the drafts suggested for it.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "commands.h"
#include "model/model_scan.h"

namespace specula::cli {

namespace {

nlohmann::json to_json(const std::vector<ScanRoot>& roots, const ScanResult& result) {
  nlohmann::json j;
  j["roots"] = nlohmann::json::array();
  for (const ScanRoot& r : roots) j["roots"].push_back({{"store", model_store_name(r.store)}, {"path", r.path}});
  j["models"] = nlohmann::json::array();
  for (const FoundModel& m : result.models) {
    j["models"].push_back({{"path", m.path},
                           {"name", m.name},
                           {"aliases", m.aliases},
                           {"store", model_store_name(m.store)},
                           {"format", m.format},
                           {"architecture", m.architecture},
                           {"parameters", m.parameters},
                           {"experts", m.experts},
                           {"experts_used", m.experts_used},
                           {"bytes", m.bytes},
                           {"weight_type", m.weight_type},
                           {"tokenizer", m.tokenizer},
                           {"vocabulary", m.vocabulary},
                           {"loadable", m.loadable},
                           {"problem", m.loadable ? nlohmann::json() : nlohmann::json(m.problem)},
                           {"drafts", m.drafts}});
  }
  j["skipped"] = nlohmann::json::array();
  for (const SkippedEntry& s : result.skipped) {
    j["skipped"].push_back({{"path", s.path}, {"name", s.name}, {"reason", s.reason}});
  }
  return j;
}

// One row per model, its path under it; the drafts by name.
void print_table(const std::vector<ScanRoot>& roots, const ScanResult& result) {
  if (result.models.empty()) {
    std::printf("No models found in:\n");
    for (const ScanRoot& r : roots) std::printf("  %s (%s)\n", r.path.c_str(), std::string(model_store_name(r.store)).c_str());
    if (roots.empty()) std::printf("  (none of the stores exists; add a folder with --dir)\n");
  } else {
    std::map<std::string, std::string> names;  // path -> name
    for (const FoundModel& m : result.models) names[m.path] = m.name;
    std::vector<std::vector<std::string>> rows = {{"NAME", "FAMILY", "PARAMS", "SIZE", "TYPE", "STORE", "LOADS"}};
    for (const FoundModel& m : result.models) {
      std::string loads = m.loadable ? "yes" : "no: " + m.problem;
      if (!m.drafts.empty()) {
        loads += "; drafts:";
        for (const std::string& d : m.drafts) loads += " " + names[d];
      }
      std::string family = m.architecture.empty() ? "?" : m.architecture;
      if (m.experts > 0) family += " (" + std::to_string(m.experts_used) + " of " + std::to_string(m.experts) + " experts)";
      rows.push_back({m.name, family, parameter_count_label(m.parameters),
                      byte_count_label(m.bytes), m.weight_type.empty() ? "?" : m.weight_type,
                      std::string(model_store_name(m.store)), loads});
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto& row : rows) {
      for (size_t c = 0; c + 1 < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    for (size_t r = 0; r < rows.size(); ++r) {
      for (size_t c = 0; c < rows[r].size(); ++c) {
        std::printf(c + 1 < rows[r].size() ? "%-*s  " : "%-*s\n", static_cast<int>(width[c]), rows[r][c].c_str());
      }
      if (r > 0) std::printf("    %s\n", result.models[r - 1].path.c_str());
    }
  }
  if (!result.skipped.empty()) {
    std::printf("\nSkipped %zu %s:\n", result.skipped.size(), result.skipped.size() == 1 ? "entry" : "entries");
    for (const SkippedEntry& s : result.skipped) {
      std::printf("  %s%s%s: %s\n", s.path.c_str(), s.name.empty() ? "" : " (", s.name.empty() ? "" : (s.name + ")").c_str(),
                  s.reason.c_str());
    }
  }
}

}  // namespace

void add_models_command(CLI::App& app) {
  struct Options {
    std::vector<std::string> dirs;
    bool json = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "models", "List the models on this computer (Ollama, LM Studio, llama.cpp, Hugging Face): loadable? drafts?");
  cmd->add_option("--dir", options->dirs, "Also scan this folder (repeatable)");
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->callback([options] {
    std::vector<ScanRoot> roots;
    for (const std::string& dir : options->dirs) {
      std::error_code ec;
      if (!std::filesystem::is_directory(dir, ec)) throw CommandFailed(dir + ": no such folder", 2);
      roots.push_back(scan_root_for(dir));
    }
    for (ScanRoot& root : default_scan_roots()) roots.push_back(std::move(root));
    const ScanResult result = scan_models(roots);
    if (options->json) {
      std::printf("%s\n", to_json(roots, result).dump(2).c_str());
    } else {
      print_table(roots, result);
    }
  });
}

}  // namespace specula::cli
