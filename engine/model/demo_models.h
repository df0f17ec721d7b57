// The demo model pair shipped with Specula (resources/models): a small code model and its
// draft, used when the user names no model.
#pragma once

#include <optional>
#include <string>

namespace specula {

struct DemoModels {
  std::string target;  // specula-demo-target.gguf
  std::string draft;   // specula-demo-draft.gguf; empty when only the target is there
};

// Looks next to an installed executable (<dir>/../share/specula/models, <dir>/models),
// then in the source tree the program was built from. nullopt when no target is found.
std::optional<DemoModels> find_demo_models(const std::string& executable_dir);

}  // namespace specula
