// bench/timer.cu — event timing with a cold L2 between samples.
#include <algorithm>
#include <chrono>
#include <vector>

#include "bench/bench.hpp"
#include "hk/device.hpp"

namespace hk::bench {
namespace {

// Reads every 16 bytes of `buf` and writes nothing (the store is never taken): after it the L2
// holds only clean lines of `buf`, so the timed kernel starts cold and pays no write-backs.
__global__ void bench_l2_flush_kernel(const uint4* __restrict__ buf, int64_t n, uint4* sink) {
  uint32_t acc = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    uint4 v = __ldcg(buf + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u && sink) *sink = make_uint4(acc, 0, 0, 0);
}

struct Flusher {
  uint4* buf = nullptr;
  int64_t n = 0;
  Flusher() {
    int64_t bytes = std::max<int64_t>(3 * device_info().l2_bytes, 64 << 20);
    n = bytes / 16;
    HK_CHECK_CUDA(cudaMalloc(&buf, bytes));
    HK_CHECK_CUDA(cudaMemset(buf, 0x5A, bytes));
  }
  void flush(cudaStream_t s) {
    bench_l2_flush_kernel<<<device_info().sm_count * 4, 512, 0, s>>>(buf, n, nullptr);
    HK_CHECK_LAUNCH("bench_l2_flush_kernel");
  }
};

Flusher& flusher() {
  static Flusher f;
  return f;
}

}  // namespace

void flush_l2(cudaStream_t stream) { flusher().flush(stream); }

Timing time_launches(const std::function<void(cudaStream_t)>& launch, const TimeOptions& opt) {
  cudaStream_t s = nullptr;
  // Warm-up: module load, allocator pools, clocks up. At least 3 runs or 20 ms.
  auto t0 = std::chrono::steady_clock::now();
  int warm = 0;
  for (; warm < 3 || std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20); ++warm) {
    launch(s);
    HK_CHECK_CUDA(cudaStreamSynchronize(s));
    if (warm > 1000) break;
  }
  // A slow variant (a naive GEMM at 16384^3 takes seconds) gets fewer samples, never fewer than 3.
  double per_launch_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / warm;
  int min_samples = std::max(3, std::min(opt.min_samples, int(opt.budget_ms / std::max(per_launch_ms, 1e-3))));
  std::vector<cudaEvent_t> ev(2 * opt.max_samples);
  for (auto& e : ev) HK_CHECK_CUDA(cudaEventCreate(&e));
  std::vector<float> ms;
  auto start = std::chrono::steady_clock::now();
  int taken = 0;
  while (taken < opt.max_samples) {
    if (!opt.warm) flusher().flush(s);
    HK_CHECK_CUDA(cudaEventRecord(ev[2 * taken], s));
    launch(s);
    HK_CHECK_CUDA(cudaEventRecord(ev[2 * taken + 1], s));
    ++taken;
    if (taken % 8 == 0 || taken == opt.max_samples) {
      HK_CHECK_CUDA(cudaStreamSynchronize(s));
      double elapsed = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      if (taken >= min_samples && elapsed > opt.budget_ms) break;
    }
  }
  HK_CHECK_CUDA(cudaStreamSynchronize(s));
  for (int i = 0; i < taken; ++i) {
    float t = 0;
    HK_CHECK_CUDA(cudaEventElapsedTime(&t, ev[2 * i], ev[2 * i + 1]));
    ms.push_back(t);
  }
  for (auto& e : ev) cudaEventDestroy(e);
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return 1e3 * ms[std::min<size_t>(ms.size() - 1, size_t(q * (ms.size() - 1) + 0.5))]; };
  Timing t;
  t.samples = taken;
  t.median_us = at(0.5);
  t.p25_us = at(0.25);
  t.p75_us = at(0.75);
  t.min_us = 1e3 * ms.front();
  return t;
}

Timing time_variant(const Variant& v, const Problem& p, const Operands& ops, const TimeOptions& opt) {
  return time_launches([&](cudaStream_t s) { v.run(p, ops, s); }, opt);
}

}  // namespace hk::bench
