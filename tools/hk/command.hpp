// tools/hk/command.hpp — each `hk` subcommand lives in its own cmd_<name>.cpp and adds itself
// to the app through add_<name>_command(); its callback stores the exit code in hk_exit_code().
#pragma once

#include <CLI/CLI.hpp>

namespace hk::cli {

int& exit_code();
// 0 when a GPU is present; otherwise prints why `cmd` needs one and returns 2.
int need_gpu(const char* cmd);

void add_info_command(CLI::App& app);
void add_list_command(CLI::App& app);
void add_explain_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_profile_command(CLI::App& app);
void add_microbench_command(CLI::App& app);

}  // namespace hk::cli
