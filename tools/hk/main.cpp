// hk — the hopperkit command line: info, list, bench.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <iostream>

#include "bench/bench.hpp"
#include "hk/hk.hpp"

namespace {

int need_gpu(const char* cmd) {
  std::string why = hk::no_gpu_reason();
  if (why.empty()) return 0;
  fmt::print(stderr, "hk {}: needs a CUDA GPU and found none ({})\n", cmd, why);
  return 2;
}

int cmd_info(bool remeasure) {
  if (int rc = need_gpu("info")) return rc;
  const hk::DeviceInfo& d = hk::device_info();
  fmt::print("device {}: {} (sm_{}, {})\n", d.index, d.name, d.sm(), d.uuid);
  fmt::print("  SMs                     {}\n", d.sm_count);
  fmt::print("  global memory           {:.1f} GiB\n", d.global_mem_bytes / double(1 << 30));
  fmt::print("  L2                      {:.1f} MiB\n", d.l2_bytes / double(1 << 20));
  fmt::print("  smem per block (opt-in) {} KiB; per SM {} KiB\n", d.smem_per_block_optin / 1024, d.smem_per_sm / 1024);
  fmt::print("  registers per SM        {}\n", d.regs_per_sm);
  fmt::print("  max clocks              SM {} MHz, memory {} MHz, bus {} bits\n", d.max_sm_clock_mhz,
             d.max_mem_clock_mhz, d.mem_bus_bits);
  if (auto c = hk::current_clocks()) fmt::print("  clocks now              SM {} MHz, memory {} MHz\n", c->sm_mhz, c->mem_mhz);
  fmt::print("  driver / runtime        {} / {}\n", d.driver_version, d.runtime_version);
  fmt::print("  datasheet bandwidth     {:.2f} TB/s (from memory clock and bus width)\n", d.datasheet_bandwidth() / 1e12);
  hk::Ceilings c = hk::measured_ceilings(remeasure);
  fmt::print("measured ceilings ({}{}):\n", c.measured_at, c.from_cache ? ", cached" : ", just measured");
  fmt::print("  copy bandwidth          {:.2f} TB/s (2 GiB device-to-device, read + write)\n", c.copy_bytes_per_s / 1e12);
  fmt::print("  bf16 tensor throughput  {:.0f} TFLOP/s (cuBLAS 8192^3, random data)\n", c.bf16_flops_per_s / 1e12);
  return 0;
}

int cmd_list(const std::string& family) {
  auto& reg = hk::Registry::get();
  int shown = 0;
  for (const hk::Family* f : reg.families()) {
    if (!family.empty() && f->name() != family) continue;
    fmt::print("{} — {}\n", f->name(), f->summary());
    for (const hk::Variant* v : reg.variants(f->name())) {
      std::string flags;
      if (v->is(hk::kFlagDefault)) flags += " default";
      if (v->is(hk::kFlagBaseline)) flags += " baseline";
      if (v->is(hk::kFlagReference)) flags += " reference";
      fmt::print("  {:<28} sm_{:<3} {:<28} {}\n", v->name(), v->min_sm(), flags.empty() ? "" : "[" + flags.substr(1) + "]",
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

int cmd_bench(hk::bench::BenchRequest req, const std::string& json_path) {
  if (int rc = need_gpu("bench")) return rc;
  for (auto& f : req.families)
    if (!hk::Registry::get().family(f)) {
      fmt::print(stderr, "hk bench: no family named '{}' (see hk list)\n", f);
      return 1;
    }
  hk::Ceilings ceil = hk::measured_ceilings();
  auto rows = hk::bench::run(req);
  const hk::DeviceInfo& d = hk::device_info();
  fmt::print("hk bench on {} ({} SMs), L2 {}; copy ceiling {:.2f} TB/s, bf16 ceiling {:.0f} TFLOP/s (measured {})\n\n",
             d.name, d.sm_count, req.time.warm ? "warm" : "cold (flushed before every sample)",
             ceil.copy_bytes_per_s / 1e12, ceil.bf16_flops_per_s / 1e12, ceil.measured_at);
  fmt::print("{}", hk::bench::markdown(rows, ceil.copy_bytes_per_s, ceil.bf16_flops_per_s));
  if (!json_path.empty()) {
    std::ofstream out(json_path);
    out << hk::bench::to_json(rows, req).dump(2) << "\n";
    if (!out) {
      fmt::print(stderr, "hk bench: cannot write {}\n", json_path);
      return 1;
    }
  }
  int failed = 0;
  for (auto& r : rows) failed += r.status.rfind("FAIL", 0) == 0;
  if (failed) fmt::print(stderr, "hk bench: {} row(s) FAILED verification\n", failed);
  return failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hopperkit: Hopper deep-learning kernels, each a ladder from naive to optimized"};
  app.require_subcommand(1);

  bool remeasure = false;
  auto* info = app.add_subcommand("info", "device facts and measured ceilings (copy bandwidth, bf16 cuBLAS peak)");
  info->add_flag("--remeasure", remeasure, "measure the ceilings again instead of reading the cache");

  std::string list_family;
  auto* list = app.add_subcommand("list", "families and their variants");
  list->add_option("family", list_family, "only this family");

  hk::bench::BenchRequest req;
  std::string family, json_path, dtype_list;
  std::vector<std::string> shapes;
  auto* bench = app.add_subcommand("bench", "verify then time variants; no family = quick suite of every family");
  bench->add_option("family", family, "family to benchmark (all variants); omit for the quick suite");
  bench->add_option("--variant", req.variant_glob, "only variants matching this glob (e.g. 'v0[23]*')");
  bench->add_option("--shape", shapes, "problem shape(s), e.g. 16384x8192 (repeatable)");
  bench->add_option("--dtype", dtype_list, "dtype(s), comma-separated: f32,f16,bf16");
  bench->add_option("--json", json_path, "write the rows and the environment as JSON here");
  bench->add_flag("--warm", req.time.warm, "keep L2 warm between samples (default: flushed)");
  bench->add_flag("--quick", req.select.quick, "a few shapes per family, default variant + baseline");
  bench->add_option("--budget-ms", req.time.budget_ms, "time budget per row after warm-up");

  CLI11_PARSE(app, argc, argv);
  try {
    if (*info) return cmd_info(remeasure);
    if (*list) return cmd_list(list_family);
    if (*bench) {
      if (family.empty()) req.select.quick = true;
      else req.families = {family};
      req.select.shapes = shapes;
      size_t pos = 0;
      while (!dtype_list.empty() && pos <= dtype_list.size()) {
        size_t end = dtype_list.find(',', pos);
        if (end == std::string::npos) end = dtype_list.size();
        req.select.dtypes.push_back(hk::parse_dtype(dtype_list.substr(pos, end - pos)));
        pos = end + 1;
      }
      return cmd_bench(req, json_path);
    }
  } catch (const hk::Error& e) {
    fmt::print(stderr, "hk: {} error: {}\n", hk::to_string(e.kind()), e.what());
    return 1;
  }
  return 0;
}
