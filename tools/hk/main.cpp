// hk — the hopperkit command line. Each subcommand is one cmd_<name>.cpp.
#include <fmt/format.h>

#include "command.hpp"
#include "hk/hk.hpp"

namespace hk::cli {

int& exit_code() {
  static int code = 0;
  return code;
}

int need_gpu(const char* cmd) {
  std::string why = hk::no_gpu_reason();
  if (why.empty()) return 0;
  fmt::print(stderr, "hk {}: needs a CUDA GPU and found none ({})\n", cmd, why);
  return 2;
}

}  // namespace hk::cli

int main(int argc, char** argv) {
  CLI::App app{"hopperkit: Hopper deep-learning kernels, each a ladder from naive to optimized"};
  app.require_subcommand(1);
  hk::cli::add_info_command(app);
  hk::cli::add_list_command(app);
  hk::cli::add_explain_command(app);
  hk::cli::add_bench_command(app);
  hk::cli::add_profile_command(app);
  hk::cli::add_microbench_command(app);
  try {
    CLI11_PARSE(app, argc, argv);
  } catch (const hk::Error& e) {
    fmt::print(stderr, "hk: {} error: {}\n", hk::to_string(e.kind()), e.what());
    return 1;
  }
  return hk::cli::exit_code();
}
