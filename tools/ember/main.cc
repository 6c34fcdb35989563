// ember: the single command-line entry point (ember generate | inspect | bench | ...).
#include <CLI/CLI.hpp>

#include "tools/ember/commands.h"
#include "tools/ember/parallel_ranks.h"

int main(int argc, char** argv) {
  ember::tools::SetCommandLine(argc, argv);
  CLI::App app{"ember — inference and serving engine for sparse mixture-of-experts models"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ember 0.1.0");
  ember::tools::RegisterCommands(app);
  CLI11_PARSE(app, argc, argv);
  return ember::tools::ExitCode();
}
