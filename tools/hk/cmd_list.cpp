// hk list — families and their variants.
#include <fmt/format.h>

#include "command.hpp"
#include "hk/hk.hpp"

namespace hk::cli {
namespace {

int cmd_list(const std::string& family, bool names) {
  auto& reg = hk::Registry::get();
  if (names) {
    for (const hk::Family* f : reg.families()) fmt::print("{}\n", f->name());
    return 0;
  }
  int shown = 0;
  for (const hk::Family* f : reg.families()) {
    if (!family.empty() && f->name() != family) continue;
    fmt::print("{} — {}\n", f->name(), f->summary());
    // production: the family's dispatch may run it for a public call (hk explain says when);
    // ladder: a teaching rung, run by tests and hk bench only.
    for (const hk::Variant* v : reg.variants(f->name())) {
      std::string flags;
      flags += v->is(hk::kFlagProduction) ? " production" : " ladder";
      if (v->is(hk::kFlagBaseline)) flags += " baseline";
      if (v->is(hk::kFlagReference)) flags += " reference";
      fmt::print("  {:<28} sm_{:<3} {:<32} {}\n", v->name(), v->min_sm(), flags.empty() ? "" : "[" + flags.substr(1) + "]",
                 v->summary());
    }
    ++shown;
  }
  if (shown == 0) {
    fmt::print(stderr, "hk list: no family named '{}'\n", family);
    return 1;
  }
  return 0;
}

}  // namespace

void add_list_command(CLI::App& app) {
  static std::string family;
  static bool names = false;
  auto* cmd = app.add_subcommand("list", "families and their variants");
  cmd->add_option("family", family, "only this family");
  cmd->add_flag("--names", names, "print only the family names, one per line");
  cmd->callback([] { exit_code() = cmd_list(family, names); });
}

}  // namespace hk::cli
