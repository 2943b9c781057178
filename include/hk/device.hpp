// hk/device.hpp — facts about the current CUDA device, and the measured ceilings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hk {

struct DeviceInfo {
  int index = 0;
  std::string name;
  std::string uuid;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t global_mem_bytes = 0;
  int64_t l2_bytes = 0;
  int64_t smem_per_block_optin = 0;
  int64_t smem_per_sm = 0;
  int regs_per_sm = 0;
  int max_threads_per_sm = 0;
  int max_sm_clock_mhz = 0;   // cudaDevAttrClockRate
  int max_mem_clock_mhz = 0;  // cudaDevAttrMemoryClockRate
  int mem_bus_bits = 0;
  int driver_version = 0;   // e.g. 13000
  int runtime_version = 0;  // e.g. 13000
  int sm() const { return cc_major * 10 + cc_minor; }
  double datasheet_bandwidth() const;  // bytes/s from the memory clock and bus width
};

// Number of usable CUDA devices (0 when there is no driver or no GPU; never throws).
int device_count();
// Why there is no GPU ("no CUDA device: cudaGetDeviceCount says ..."), or "" if there is one.
std::string no_gpu_reason();
// Facts about the current device (cached per device). Throws kCuda without a GPU.
const DeviceInfo& device_info();

// Current clocks through NVML (loaded at run time); nullopt where NVML is absent.
struct Clocks {
  int sm_mhz = 0;
  int mem_mhz = 0;
};
std::optional<Clocks> current_clocks();

// Ceilings measured on this device, cached in $HK_CACHE_DIR or ~/.cache/hopperkit per GPU UUID.
struct Ceilings {
  double copy_bytes_per_s = 0;     // device-to-device copy, bytes read + written over time
  double bf16_flops_per_s = 0;     // cuBLAS bf16 GEMM 8192^3 on random data
  std::string measured_at;         // ISO date
  bool from_cache = false;
};
// Measures when no cached value exists or `remeasure` is set. Needs a GPU.
Ceilings measured_ceilings(bool remeasure = false);

// Frees what ops cache for the life of the process (cuBLAS handles, the cuBLASLt workspace and
// plans). Optional: for a leak-free `compute-sanitizer --leak-check full` run, or before the
// CUDA context is torn down by the application. Not concurrent with running ops; later ops
// rebuild what they need.
void release_cached_resources();

}  // namespace hk
