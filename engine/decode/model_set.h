// Loading what a generation needs, the one way the app, the commands and `serve` do it: the
// target, its draft model if any, each made ready on the backend (weights repacked or
// uploaded), a layers:K draft's narrowed copy of the target, and the measured cost of their
// forwards that the goodput policy weighs drafts by, with one progress bar over all of it.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "compute/backend.h"
#include "model/model.h"

namespace specula {

struct ModelSetOptions {
  std::string target;            // GGUF, llama2.c checkpoint or Hugging Face directory
  std::string tokenizer;         // for a target or draft file without a vocabulary; may be empty
  std::string draft_model;       // the "model" drafter's draft; empty: none
  std::string drafter = "none";  // "layers:K": its narrowed copy of the target is made now
  bool measure_cost = false;     // measure (or read from the cost cache) what forwards cost now,
                                 // rather than inside the first generation that drafts by it
};

// `stage` names what is being done ("reading model.gguf", "measuring the forward of ..."),
// `stage_fraction` how far it has come, `overall` how far the whole load has; returning
// false cancels the load (ModelError).
using ModelSetProgress = std::function<bool(const std::string& stage, double stage_fraction, double overall)>;

struct ModelSet {
  std::unique_ptr<Backend> backend;
  std::shared_ptr<const Model> target;
  std::shared_ptr<const Model> draft;  // null without a draft model
};

// Loads onto `backend` (which the caller chose: a device, a thread count, a SIMD level).
// Throws ModelError with a readable message: a file that is not a model (a file named .gguf
// without GGUF's magic gets GGUF's own message), a target without a vocabulary, a cancel.
ModelSet load_model_set(std::unique_ptr<Backend> backend, const ModelSetOptions& options,
                        const ModelSetProgress& progress = {});

}  // namespace specula
