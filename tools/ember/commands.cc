#include "tools/ember/commands.h"

namespace ember::tools {

namespace {
int g_exit_code = 0;
}  // namespace

int ExitCode() { return g_exit_code; }
void SetExitCode(int code) { g_exit_code = code; }

void RegisterGenerateCommand(CLI::App& app);
void RegisterInspectCommand(CLI::App& app);
void RegisterBenchCommand(CLI::App& app);
void RegisterPerplexityCommand(CLI::App& app);
void RegisterChatCommand(CLI::App& app);
void RegisterServeCommand(CLI::App& app);
void RegisterRecipeCommand(CLI::App& app);
void RegisterConvertCommand(CLI::App& app);
void RegisterPlacementCommand(CLI::App& app);
void RegisterRouterCommand(CLI::App& app);

void RegisterCommands(CLI::App& app) {
  RegisterGenerateCommand(app);
  RegisterInspectCommand(app);
  RegisterBenchCommand(app);
  RegisterPerplexityCommand(app);
  RegisterChatCommand(app);
  RegisterServeCommand(app);
  RegisterRecipeCommand(app);
  RegisterConvertCommand(app);
  RegisterPlacementCommand(app);
  RegisterRouterCommand(app);
}

}  // namespace ember::tools
