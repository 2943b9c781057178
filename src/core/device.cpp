#include "hk/device.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <fmt/format.h>

#include <map>
#include <mutex>

#include "hk/error.hpp"

namespace hk {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  return n;
}

std::string no_gpu_reason() {
  int n = 0;
  cudaError_t st = cudaGetDeviceCount(&n);
  if (st != cudaSuccess) {
    cudaGetLastError();
    return fmt::format("no CUDA device: cudaGetDeviceCount says {} ({})", cudaGetErrorString(st),
                       cudaGetErrorName(st));
  }
  if (n == 0) return "no CUDA device: cudaGetDeviceCount found 0 devices";
  return "";
}

double DeviceInfo::datasheet_bandwidth() const {
  // HBM is double data rate: 2 transfers per clock, bus width in bits.
  return 2.0 * max_mem_clock_mhz * 1e6 * mem_bus_bits / 8.0;
}

const DeviceInfo& device_info() {
  static std::mutex mu;
  static std::map<int, DeviceInfo> cache;
  std::string why = no_gpu_reason();
  if (!why.empty()) throw Error(ErrorKind::kCuda, why);
  int dev = 0;
  HK_CHECK_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(dev);
  if (it != cache.end()) return it->second;
  cudaDeviceProp prop{};
  HK_CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  DeviceInfo d;
  d.index = dev;
  d.name = prop.name;
  const auto* u = reinterpret_cast<const unsigned char*>(prop.uuid.bytes);
  d.uuid = fmt::format("GPU-{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
                       u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                       u[12], u[13], u[14], u[15]);
  d.cc_major = prop.major;
  d.cc_minor = prop.minor;
  d.sm_count = prop.multiProcessorCount;
  d.global_mem_bytes = static_cast<int64_t>(prop.totalGlobalMem);
  d.l2_bytes = prop.l2CacheSize;
  d.smem_per_block_optin = static_cast<int64_t>(prop.sharedMemPerBlockOptin);
  d.smem_per_sm = static_cast<int64_t>(prop.sharedMemPerMultiprocessor);
  d.regs_per_sm = prop.regsPerMultiprocessor;
  d.max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
  int khz = 0;
  HK_CHECK_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, dev));
  d.max_sm_clock_mhz = khz / 1000;
  HK_CHECK_CUDA(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev));
  d.max_mem_clock_mhz = khz / 1000;
  HK_CHECK_CUDA(cudaDeviceGetAttribute(&d.mem_bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
  HK_CHECK_CUDA(cudaDriverGetVersion(&d.driver_version));
  HK_CHECK_CUDA(cudaRuntimeGetVersion(&d.runtime_version));
  return cache.emplace(dev, d).first->second;
}

// NVML, loaded at run time so that hopperkit links and runs where the driver has none.
namespace {
using nvmlReturn = int;
struct Nvml {
  void* lib = nullptr;
  nvmlReturn (*init)() = nullptr;
  nvmlReturn (*by_uuid)(const char*, void**) = nullptr;
  nvmlReturn (*clock)(void*, int, unsigned*) = nullptr;
  bool ok = false;
  Nvml() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (!lib) return;
    init = reinterpret_cast<decltype(init)>(dlsym(lib, "nvmlInit_v2"));
    by_uuid = reinterpret_cast<decltype(by_uuid)>(dlsym(lib, "nvmlDeviceGetHandleByUUID"));
    clock = reinterpret_cast<decltype(clock)>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    ok = init && by_uuid && clock && init() == 0;
  }
};
}  // namespace

std::optional<Clocks> current_clocks() {
  static Nvml nvml;
  if (!nvml.ok || device_count() == 0) return std::nullopt;
  void* handle = nullptr;
  if (nvml.by_uuid(device_info().uuid.c_str(), &handle) != 0) return std::nullopt;
  unsigned sm = 0, mem = 0;
  // NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2
  if (nvml.clock(handle, 1, &sm) != 0 || nvml.clock(handle, 2, &mem) != 0) return std::nullopt;
  return Clocks{static_cast<int>(sm), static_cast<int>(mem)};
}

}  // namespace hk
