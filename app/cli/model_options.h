// Options that name the models, drafter and device, shared by the commands that generate.
#pragma once

#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "compute/backend.h"
#include "model/model.h"
#include "decode/session.h"

namespace specula::cli {

struct ModelOptions {
  std::string model_path;        // empty: the demo model pair
  std::string tokenizer_path;
  std::string draft_model_path;
  std::string draft;             // empty: none, or model with a draft model
  std::string draft_policy = "goodput";
  std::string device = "auto";
  int threads = 0;               // CPU threads with --device cpu; 0: one per core
};

void add_model_options(CLI::App* command, ModelOptions& options);

// "cpu", "cuda" or "auto" (anything else) as a DeviceChoice.
DeviceChoice device_choice(const std::string& name);

struct LoadedModels {
  std::shared_ptr<const Model> target;
  DraftOptions draft;             // kind, policy and draft model, ready for a request
  std::unique_ptr<Backend> backend;
  std::string backend_note;       // which backend was taken, and why
};

// Loads the target (the demo pair when no model is named), the draft model if any, and the
// backend. Throws CommandFailed (exit 2) for inconsistent options.
LoadedModels load_models(const ModelOptions& options);

}  // namespace specula::cli
