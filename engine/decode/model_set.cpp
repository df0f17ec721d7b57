#include "decode/model_set.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>

#include "decode/drafter.h"
#include "model/gguf.h"
#include "model/tokenizer.h"

namespace specula {

namespace {

// Shares of the whole bar: reading and preparing the weights, then measuring the forwards
// (seconds for a large model the first time; nothing once the cost cache holds it).
constexpr double kWeightsShare = 0.9;
constexpr double kTargetShare = 0.8;  // of each part, when there is a draft: the small one

std::string file_name(const std::string& path) { return std::filesystem::path(path).filename().string(); }

// A file named *.gguf that does not start with GGUF's magic (a text file, a download that
// was an error page) gets GGUF's own message, as `specula-cli models` gives it, rather than
// the message of the format the loader tries for anything else (llama2.c's).
void check_gguf_name(const std::string& path) {
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (!lower.ends_with(".gguf")) return;
  char magic[4] = {};
  std::ifstream(path, std::ios::binary).read(magic, sizeof magic);
  if (std::string_view(magic, sizeof magic) != "GGUF") GgufFile::read_header(path);  // throws its message
}

// One stage's progress as the caller hears it: its own fraction, and the whole bar's from
// `from` over `share`.
std::function<bool(double)> stage(const ModelSetProgress& progress, const std::string& what, double from,
                                  double share) {
  return [&progress, what, from, share](double f) { return !progress || progress(what, f, from + share * f); };
}

}  // namespace

ModelSet load_model_set(std::unique_ptr<Backend> backend, const ModelSetOptions& options,
                        const ModelSetProgress& progress) {
  ModelSet set{.backend = std::move(backend)};
  Backend& b = *set.backend;
  const double target_share = options.draft_model.empty() ? 1.0 : kTargetShare;
  const double read_share = b.uploads_weights() ? 0.5 : 1.0;  // a device spends the rest uploading
  const auto load = [&](const std::string& path, double from, double share) {
    check_gguf_name(path);
    LoadOptions load;
    load.tokenizer_path = options.tokenizer;
    load.progress = stage(progress, "reading " + file_name(path), kWeightsShare * from,
                          kWeightsShare * share * read_share);
    std::shared_ptr<const Model> model = load_model(path, load);
    b.prepare(*model, stage(progress, "preparing " + file_name(path), kWeightsShare * (from + share * read_share),
                            kWeightsShare * share * (1.0 - read_share)));
    return model;
  };
  set.target = load(options.target, 0.0, target_share);
  if (!set.target->tokenizer) throw ModelError(options.target + " has no vocabulary: name its tokenizer file too");
  if (!options.draft_model.empty()) set.draft = load(options.draft_model, target_share, 1.0 - target_share);

  // a layers:K draft's narrowed copy of the target's first layers, made and repacked now
  const Model* self_draft = nullptr;
  if (options.drafter.starts_with("layers:")) {
    self_draft = self_draft_weights(b, *set.target, options.drafter);
    if (self_draft) b.prepare(*self_draft, stage(progress, "preparing the draft's layers", kWeightsShare, 0.0));
  }
  if (!options.measure_cost) return set;
  const auto measure = [&](const Model& model, const std::string& what, double from, double share) {
    const auto report = stage(progress, "measuring the forward of " + what, kWeightsShare + (1.0 - kWeightsShare) * from,
                              (1.0 - kWeightsShare) * share);
    b.forward_cost(model, [&report](double f) { report(f); });
  };
  measure(*set.target, file_name(options.target), 0.0, target_share);
  if (set.draft) measure(*set.draft, file_name(options.draft_model), target_share, 1.0 - target_share);
  if (self_draft) measure(*self_draft, "the draft's layers", 1.0, 0.0);
  return set;
}

}  // namespace specula
