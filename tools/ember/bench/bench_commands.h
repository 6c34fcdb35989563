// The subcommands of `ember bench` that live in this folder; bench_command.cc registers them
// under its `bench` command (beside `ember bench --model` and `ember bench decode`).
#pragma once

#include <CLI/CLI.hpp>

namespace ember::tools {

void RegisterBenchRooflineCommand(CLI::App* bench);
void RegisterBenchThroughputCommand(CLI::App* bench);
void RegisterBenchServeCommand(CLI::App* bench);
// ember bench quant (../bench_quant_command.cc): block-scaled kernel GB/s vs the STREAM triad.
void RegisterBenchQuantCommand(CLI::App* bench);

}  // namespace ember::tools
