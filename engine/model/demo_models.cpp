#include "model/demo_models.h"

#include <filesystem>
#include <system_error>

namespace specula {

std::optional<DemoModels> find_demo_models(const std::string& executable_dir) {
  namespace fs = std::filesystem;
  const fs::path exe(executable_dir);
  for (const fs::path& dir : {exe / ".." / "share" / "specula" / "models", exe / "models",
                              fs::path(SPECULA_RESOURCE_DIR) / "models"}) {
    std::error_code ec;
    const fs::path target = dir / "specula-demo-target.gguf";
    if (!fs::is_regular_file(target, ec)) continue;
    const fs::path draft = dir / "specula-demo-draft.gguf";
    return DemoModels{fs::weakly_canonical(target, ec).string(),
                      fs::is_regular_file(draft, ec) ? fs::weakly_canonical(draft, ec).string() : std::string()};
  }
  return std::nullopt;
}

}  // namespace specula
