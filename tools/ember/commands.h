// Each subcommand lives in its own file and registers itself here.
#pragma once

#include <CLI/CLI.hpp>

namespace ember::tools {

void RegisterCommands(CLI::App& app);
// The exit status the selected subcommand asked for (0 if it succeeded).
int ExitCode();
void SetExitCode(int code);

}  // namespace ember::tools
