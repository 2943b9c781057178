// Measured ceilings (host code here avoids fmt: nvcc's front end rejects its C++20 checks): what `hk info` prints and what the benchmark's roofline columns divide by.
//   copy:  cudaMemcpyAsync device-to-device of 2 GiB, bytes read + written over the median time
//   bf16:  cublasGemmEx 8192^3, bf16 inputs (random, never zeros), f32 accumulate, median time
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "hk/device.hpp"
#include "hk/error.hpp"

namespace hk {
namespace {

__global__ void ceilings_fill_bf16_kernel(__nv_bfloat16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16((static_cast<float>(h & 0xFFFF) / 65535.0f) - 0.5f);
  }
}

template <class F>
double median_ms(F&& work, int reps) {
  cudaEvent_t a, b;
  HK_CHECK_CUDA(cudaEventCreate(&a));
  HK_CHECK_CUDA(cudaEventCreate(&b));
  std::vector<float> times;
  for (int i = 0; i < reps + 2; ++i) {
    HK_CHECK_CUDA(cudaEventRecord(a));
    work();
    HK_CHECK_CUDA(cudaEventRecord(b));
    HK_CHECK_CUDA(cudaEventSynchronize(b));
    float ms = 0;
    HK_CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    if (i >= 2) times.push_back(ms);  // two warm-ups
  }
  HK_CHECK_CUDA(cudaEventDestroy(a));
  HK_CHECK_CUDA(cudaEventDestroy(b));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double measure_copy() {
  const size_t bytes = size_t(2) << 30;
  void *src = nullptr, *dst = nullptr;
  HK_CHECK_CUDA(cudaMalloc(&src, bytes));
  HK_CHECK_CUDA(cudaMalloc(&dst, bytes));
  HK_CHECK_CUDA(cudaMemset(src, 0x3C, bytes));
  double ms = median_ms([&] { HK_CHECK_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice)); }, 20);
  HK_CHECK_CUDA(cudaFree(src));
  HK_CHECK_CUDA(cudaFree(dst));
  return 2.0 * bytes / (ms * 1e-3);
}

double measure_bf16_gemm() {
  const int n = 8192;
  const int64_t elems = int64_t(n) * n;
  __nv_bfloat16 *a = nullptr, *b = nullptr, *c = nullptr;
  HK_CHECK_CUDA(cudaMalloc(&a, elems * 2));
  HK_CHECK_CUDA(cudaMalloc(&b, elems * 2));
  HK_CHECK_CUDA(cudaMalloc(&c, elems * 2));
  ceilings_fill_bf16_kernel<<<1024, 256>>>(a, elems, 1);
  HK_CHECK_LAUNCH("ceilings_fill_bf16_kernel");
  ceilings_fill_bf16_kernel<<<1024, 256>>>(b, elems, 2);
  HK_CHECK_LAUNCH("ceilings_fill_bf16_kernel");
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) HK_THROW(kCuda, "hk info: cublasCreate failed");
  float alpha = 1.f, beta = 0.f;
  cublasStatus_t st = CUBLAS_STATUS_SUCCESS;
  double ms = median_ms([&] {
    st = cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a, CUDA_R_16BF, n, b,
                      CUDA_R_16BF, n, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT);
  }, 10);
  cublasDestroy(handle);
  HK_CHECK_CUDA(cudaFree(a));
  HK_CHECK_CUDA(cudaFree(b));
  HK_CHECK_CUDA(cudaFree(c));
  if (st != CUBLAS_STATUS_SUCCESS) HK_THROW(kCuda, "hk info: cublasGemmEx failed with status ", int(st));
  return 2.0 * n * double(n) * n / (ms * 1e-3);
}

std::filesystem::path cache_file(const DeviceInfo& d) {
  std::filesystem::path dir;
  if (const char* env = std::getenv("HK_CACHE_DIR")) dir = env;
  else if (const char* home = std::getenv("HOME")) dir = std::filesystem::path(home) / ".cache" / "hopperkit";
  else dir = std::filesystem::temp_directory_path() / "hopperkit";
  return dir / ("ceilings-" + d.uuid + ".json");
}

}  // namespace

Ceilings measured_ceilings(bool remeasure) {
  const DeviceInfo& d = device_info();
  auto path = cache_file(d);
  if (!remeasure && std::filesystem::exists(path)) {
    try {
      std::ifstream in(path);
      auto j = nlohmann::json::parse(in);
      Ceilings c{j.at("copy_bytes_per_s"), j.at("bf16_flops_per_s"), j.at("measured_at"), true};
      if (c.copy_bytes_per_s > 0 && c.bf16_flops_per_s > 0) return c;
    } catch (const std::exception&) {
      // unreadable cache: measure again below
    }
  }
  Ceilings c;
  c.copy_bytes_per_s = measure_copy();
  c.bf16_flops_per_s = measure_bf16_gemm();
  std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  c.measured_at = buf;
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream out(path);
  if (out) {
    out << nlohmann::json{{"gpu", d.name}, {"uuid", d.uuid}, {"copy_bytes_per_s", c.copy_bytes_per_s},
                          {"bf16_flops_per_s", c.bf16_flops_per_s}, {"measured_at", c.measured_at}}
               .dump(2);
  }
  return c;
}

}  // namespace hk
