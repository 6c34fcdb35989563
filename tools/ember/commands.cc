#include "tools/ember/commands.h"

namespace ember::tools {

namespace {
int g_exit_code = 0;
}  // namespace

int ExitCode() { return g_exit_code; }
void SetExitCode(int code) { g_exit_code = code; }

void RegisterCommands(CLI::App& app) {
  (void)app;
}

}  // namespace ember::tools
