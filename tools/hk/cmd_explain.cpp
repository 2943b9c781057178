// hk explain — which kernel the public op runs for a problem, and why (the family's dispatch).
#include <fmt/format.h>

#include "command.hpp"
#include "hk/hk.hpp"

namespace hk::cli {
namespace {

int cmd_explain(const std::string& family, const std::vector<std::string>& shapes, const std::string& dtype_list) {
  const hk::Family* f = hk::Registry::get().family(family);
  if (!f) {
    fmt::print(stderr, "hk explain: no family named '{}' (see hk list)\n", family);
    return 1;
  }
  hk::BenchSelect sel;
  sel.shapes = shapes;
  size_t pos = 0;
  while (!dtype_list.empty() && pos <= dtype_list.size()) {
    size_t end = dtype_list.find(',', pos);
    if (end == std::string::npos) end = dtype_list.size();
    sel.dtypes.push_back(hk::parse_dtype(dtype_list.substr(pos, end - pos)));
    pos = end + 1;
  }
  for (const hk::ProblemPtr& p : f->bench_problems(sel)) fmt::print("{}", hk::Registry::get().explain(*p));
  return 0;
}

}  // namespace

void add_explain_command(CLI::App& app) {
  static std::string family, dtype_list;
  static std::vector<std::string> shapes;
  auto* cmd = app.add_subcommand("explain", "which kernel the public op runs for a problem, and why");
  cmd->add_option("family", family, "the family (see hk list)")->required();
  cmd->add_option("--shape", shapes, "problem shape(s) as hk bench takes them (repeatable); none = the bench shapes");
  cmd->add_option("--dtype", dtype_list, "dtype(s), comma-separated: f32,f16,bf16");
  cmd->callback([] { exit_code() = cmd_explain(family, shapes, dtype_list); });
}

}  // namespace hk::cli
