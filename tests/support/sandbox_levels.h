// The isolation levels the sandbox suites run at: "full"; "reduced"; "reduced, system
// python", with /usr/bin/python3, which an unprivileged uid can reach (as root, its runs get
// a uid of their own; the default interpreter may live where that uid cannot go).
#pragma once

#include <QFileInfo>
#include <QString>
#include <memory>

#include "eval/sandbox.h"

namespace specula::test {

inline constexpr const char* kSandboxLevels[] = {"full", "reduced", "reduced, system python"};

struct SandboxLevels {
  std::unique_ptr<Sandbox> full;            // the default level (full where the machine offers it)
  std::unique_ptr<Sandbox> reduced;         // namespaces turned off
  std::unique_ptr<Sandbox> reduced_system;  // reduced with /usr/bin/python3; null without one

  // Opens every level; throws SandboxError.
  void open() {
    full = std::make_unique<Sandbox>();
    SandboxOptions options;
    options.use_namespaces = false;
    reduced = std::make_unique<Sandbox>(options);
    if (QFileInfo::exists("/usr/bin/python3")) {
      options.python = "/usr/bin/python3";
      reduced_system = std::make_unique<Sandbox>(options);
    }
  }

  // The sandbox of a level named as in kSandboxLevels; null where there is none.
  const Sandbox* operator[](const QString& level) const {
    return level == "full" ? full.get() : level == "reduced" ? reduced.get() : reduced_system.get();
  }
};

}  // namespace specula::test
