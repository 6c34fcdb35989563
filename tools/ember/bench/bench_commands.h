// The subcommands of `ember bench` that live in this folder; bench_command.cc registers them
// under its `bench` command (beside `ember bench --model` and `ember bench decode`).
#pragma once

#include <CLI/CLI.hpp>

namespace ember::tools {

void RegisterBenchRooflineCommand(CLI::App* bench);
void RegisterBenchThroughputCommand(CLI::App* bench);
void RegisterBenchServeCommand(CLI::App* bench);
void RegisterBenchQuantCommand(CLI::App* bench);

}  // namespace ember::tools
