// hk info — device facts and the measured ceilings.
#include <fmt/format.h>

#include "command.hpp"
#include "hk/hk.hpp"

namespace hk::cli {
namespace {

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

}  // namespace

void add_info_command(CLI::App& app) {
  static bool remeasure = false;
  auto* cmd = app.add_subcommand("info", "device facts and measured ceilings (copy bandwidth, bf16 cuBLAS peak)");
  cmd->add_flag("--remeasure", remeasure, "measure the ceilings again instead of reading the cache");
  cmd->callback([] { exit_code() = cmd_info(remeasure); });
}

}  // namespace hk::cli
