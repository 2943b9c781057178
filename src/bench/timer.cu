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

// Holds the stream for `ns` nanoseconds of the global timer (one thread).
__global__ void bench_spin_kernel(int64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < static_cast<uint64_t>(ns));
}

void spin(cudaStream_t s, double us) {
  if (us <= 0) return;
  bench_spin_kernel<<<1, 1, 0, s>>>(static_cast<int64_t>(us * 1e3));
  HK_CHECK_LAUNCH("bench_spin_kernel");
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

std::vector<Timing> time_interleaved(const std::vector<std::function<void(cudaStream_t)>>& launches,
                                     const TimeOptions& opt) {
  cudaStream_t s = nullptr;
  const size_t nv = launches.size();
  // Warm-up, each launch on its own: module load, allocator pools, clocks up. At least 3 runs or
  // 20 ms. Its per-launch time sets the launch's sample count: as many as fit in budget_ms, at
  // least 3 (a naive GEMM at 16384^3 takes seconds), at most opt.max_samples.
  std::vector<int> want(nv);
  for (size_t v = 0; v < nv; ++v) {
    auto t0 = std::chrono::steady_clock::now();
    int warm = 0;
    for (; warm < 3 || std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(20); ++warm) {
      launches[v](s);
      HK_CHECK_CUDA(cudaStreamSynchronize(s));
      if (warm > 1000) break;
    }
    const double per_launch_ms =
        std::max(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / warm,
                 1e-3);
    const int fit = static_cast<int>(opt.budget_ms / per_launch_ms);
    want[v] = std::max(3, std::min(opt.max_samples, fit));
  }
  // Round r takes sample r of every launch that wants more than r, in order, each after its own
  // L2 flush. Interleaved, the launches share whatever the clocks and temperature do over the
  // run: a ratio between two of them is not biased by which one ran first.
  std::vector<std::vector<cudaEvent_t>> ev(nv);
  for (size_t v = 0; v < nv; ++v) {
    ev[v].resize(2 * want[v]);
    for (auto& e : ev[v]) HK_CHECK_CUDA(cudaEventCreate(&e));
  }
  const int rounds = nv ? *std::max_element(want.begin(), want.end()) : 0;
  for (int r = 0; r < rounds; ++r) {
    for (size_t v = 0; v < nv; ++v) {
      if (r >= want[v]) continue;
      if (!opt.warm) flusher().flush(s);
      spin(s, opt.spin_us);
      HK_CHECK_CUDA(cudaEventRecord(ev[v][2 * r], s));
      launches[v](s);
      HK_CHECK_CUDA(cudaEventRecord(ev[v][2 * r + 1], s));
    }
    if (r % 8 == 7) HK_CHECK_CUDA(cudaStreamSynchronize(s));  // bound the queue
  }
  HK_CHECK_CUDA(cudaStreamSynchronize(s));
  std::vector<Timing> out(nv);
  for (size_t v = 0; v < nv; ++v) {
    std::vector<float> ms(want[v]);
    for (int i = 0; i < want[v]; ++i) HK_CHECK_CUDA(cudaEventElapsedTime(&ms[i], ev[v][2 * i], ev[v][2 * i + 1]));
    for (auto& e : ev[v]) cudaEventDestroy(e);
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) { return 1e3 * ms[std::min<size_t>(ms.size() - 1, size_t(q * (ms.size() - 1) + 0.5))]; };
    Timing& t = out[v];
    t.samples = want[v];
    t.median_us = at(0.5);
    t.p25_us = at(0.25);
    t.p75_us = at(0.75);
    t.min_us = 1e3 * ms.front();
  }
  return out;
}

Timing time_launches(const std::function<void(cudaStream_t)>& launch, const TimeOptions& opt) {
  return time_interleaved({launch}, opt).front();
}


}  // namespace hk::bench
