// microbench/memory_paths.cu — Experiment 6: Hopper memory paths.
//
//   HBM            read / write / copy of 1 GiB, 4-, 8-, 16-byte accesses (cold L2); compare
//                  with the datasheet (memory clock x bus width) and cudaMemcpy
//   L2             bandwidth: 16 MiB read 32 times per launch (warm, ld.global.cg skips L1);
//                  latency: one thread chasing random 128-byte lines in 16 KiB (L1), 4 MiB (L2),
//                  256 MiB (HBM: L2 flushed, every line new; TLB misses included), cycles per
//                  dependent load
//   shared memory  16-byte reads, one 1024-thread block per SM: expect 128 B/clk/SM
//                  (x 132 SMs x ~1.98 GHz = ~33 TB/s)
//   feeding smem   1 GiB from HBM and 16 MiB from L2 into a 128 KiB shared-memory ring per SM,
//                  three ways, each with 128 KiB in flight per SM: TMA 1-D bulk copies issued by
//                  one thread and completing on mbarriers; cp.async 16 B by 256 threads;
//                  plain 16-byte loads + shared stores by 1024 threads (8 loads in flight each)
// Run: hk microbench memory_paths
#include "common/launch.cuh"
#include "microbench/conclusions.hpp"
#include "microbench/ptx_local.cuh"

namespace hk::mb {
namespace {

constexpr int64_t kHbmBytes = int64_t(1) << 30;
constexpr int64_t kL2Bytes = int64_t(16) << 20;
constexpr int kChunk = 16384;  // bytes per ring stage
constexpr int kStages = 8;     // 128 KiB ring per SM

template <class T>
__device__ __forceinline__ float fold(const T& v) {
  const float* f = reinterpret_cast<const float*>(&v);
  float s = 0;
#pragma unroll
  for (int i = 0; i < int(sizeof(T) / 4); ++i) s += f[i];
  return s;
}

// Grid-stride read, 4 loads in flight per thread, `passes` sweeps (L2: the buffer stays resident).
template <class T>
__global__ void mb_paths_read_kernel(const T* __restrict__ in, int64_t n, int passes, float* sink) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  float acc = 0;
  for (int p = 0; p < passes; ++p)
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += 4 * step) {
      T v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) v[u] = i + u * step < n ? __ldcg(in + i + u * step) : T{};
#pragma unroll
      for (int u = 0; u < 4; ++u) acc += fold(v[u]);
    }
  if (acc == 1234.5f) *sink = acc;
}

template <class T>
__global__ void mb_paths_write_kernel(T* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    T v;
    float* f = reinterpret_cast<float*>(&v);
#pragma unroll
    for (int k = 0; k < int(sizeof(T) / 4); ++k) f[k] = float(i + k);
    out[i] = v;
  }
}

template <class T>
__global__ void mb_paths_copy_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t n) {
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += 4 * step) {
    T v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * step < n) v[u] = in[i + u * step];
#pragma unroll
    for (int u = 0; u < 4; ++u)
      if (i + u * step < n) out[i + u * step] = v[u];
  }
}

// One thread follows buf[j] (an element index of the next 128-byte line) from *pos: warm steps
// first, then `steps` timed dependent loads; *pos keeps where it stopped, so the next launch walks
// on into lines this one never touched. The final store needs j, so the closing stamp waits for it.
__global__ void mb_paths_chase_kernel(const uint32_t* buf, int warm, int steps, uint32_t* pos, ClockSpan* span) {
  uint32_t j = *pos;
  for (int s = 0; s < warm; ++s) j = buf[j];
  Stamp a = stamp();
  for (int s = 0; s < steps; ++s) j = buf[j];
  *pos = j;
  Stamp b = stamp();
  store_span(span, a, b);
}

__global__ void mb_paths_expand_links_kernel(const uint32_t* next, uint32_t lines, uint32_t* buf) {
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < lines; i += gridDim.x * blockDim.x) buf[i * 32] = next[i] * 32;
}

// 1024 threads each read 8 x 16 bytes per pass from a 32 KiB tile, conflict-free: each
// quarter-warp reads one aligned 128-byte row. Pass p reads the pattern p * shift float4s further
// on (mod the tile); `shift` is a kernel argument, so no compiler can prove that two passes read
// the same addresses and merge their loads. (The first GPU run's kernel read the same addresses
// every pass with an empty asm memory clobber between passes: NVVM still kept only 4 of every 64
// loads in the loop, and its 480 B/clk/SM was the rate of the FADDs.)
__global__ void mb_paths_smem_kernel(int passes, int shift, float* sink, ClockSpan* spans) {
  __shared__ float4 tile[2048];
  for (int i = threadIdx.x; i < 2048; i += blockDim.x) tile[i] = make_float4(i, i + 1, i + 2, i + 3);
  __syncthreads();
  float4 acc[4] = {};
  Stamp a = stamp();
  for (int p = 0; p < passes; ++p) {
    const int row = int(threadIdx.x) + p * shift;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float4 v = tile[(row + k * 256) & 2047];
      acc[k % 4].x += v.x, acc[k % 4].y += v.y, acc[k % 4].z += v.z, acc[k % 4].w += v.w;
    }
  }
  __syncthreads();
  Stamp b = stamp();
  if (threadIdx.x == 0) store_span(&spans[blockIdx.x], a, b);
  if (fold(acc[0]) + fold(acc[1]) + fold(acc[2]) + fold(acc[3]) == -1.0f) *sink = 0;
}

// Chunk i of this block; `src_chunks` < total re-reads a small (L2-resident) source.
__device__ __forceinline__ int64_t chunk_of(int64_t i, int64_t src_chunks) {
  return (blockIdx.x + i * gridDim.x) % src_chunks;
}
__device__ __forceinline__ int64_t my_chunks(int64_t chunks) {
  return (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x;
}

__global__ void mb_paths_tma_kernel(const uint8_t* src, int64_t chunks, int64_t src_chunks) {
  extern __shared__ __align__(128) uint8_t ring[];  // (kStages, kChunk) bytes
  __shared__ uint64_t full[kStages];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kStages; ++s) mbarrier_init(&full[s], 1);
  fence_mbarrier_init();
  const int64_t n = my_chunks(chunks);
  auto issue = [&](int64_t i) {
    const int s = int(i % kStages);
    mbarrier_arrive_expect_tx(&full[s], kChunk);
    bulk_copy_g2s(ring + s * kChunk, src + chunk_of(i, src_chunks) * kChunk, kChunk, &full[s]);
  };
  for (int64_t i = 0; i < n && i < kStages; ++i) issue(i);
  for (int64_t i = 0; i < n; ++i) {
    mbarrier_wait(&full[i % kStages], uint32_t(i / kStages) & 1);  // chunk i has landed
    if (i + kStages < n) issue(i + kStages);
  }
}

__global__ void mb_paths_cp_async_kernel(const uint8_t* src, int64_t chunks, int64_t src_chunks) {
  extern __shared__ __align__(128) uint8_t ring[];
  const int64_t n = my_chunks(chunks);
  auto issue = [&](int64_t i) {
    if (i < n)
      for (int k = threadIdx.x; k < kChunk / 16; k += blockDim.x)
        cp_async_16(ring + (i % kStages) * kChunk + k * 16, src + chunk_of(i, src_chunks) * kChunk + k * 16);
    cp_async_commit();  // empty groups keep the count aligned with chunk numbers
  };
  for (int64_t i = 0; i < kStages - 1; ++i) issue(i);
  for (int64_t i = 0; i < n; ++i) {
    issue(i + kStages - 1);
    cp_async_wait<kStages - 1>();  // this thread's part of chunk i has landed
    __syncthreads();               // everyone's has
  }
  cp_async_wait<0>();
}

// blockDim.x == kChunk / 16: one 16-byte piece of each of kStages chunks per thread.
__global__ void mb_paths_plain_kernel(const uint4* src, int64_t chunks, int64_t src_chunks) {
  extern __shared__ __align__(128) uint4 ring4[];
  const int64_t n = my_chunks(chunks);
  for (int64_t i0 = 0; i0 < n; i0 += kStages) {
    uint4 v[kStages];
#pragma unroll
    for (int u = 0; u < kStages; ++u)
      if (i0 + u < n) v[u] = __ldcg(src + chunk_of(i0 + u, src_chunks) * (kChunk / 16) + threadIdx.x);
#pragma unroll
    for (int u = 0; u < kStages; ++u)
      if (i0 + u < n) ring4[u * (kChunk / 16) + threadIdx.x] = v[u];
    __syncthreads();
  }
}

double gbps(double bytes, const hk::bench::Timing& t) { return bytes / (t.median_us * 1e-6) / 1e9; }

template <class T>
void hbm_rows(Table& t, const char* width, uint8_t* a, uint8_t* b, float* sink, const Options& o, double& best_copy) {
  const int64_t n = kHbmBytes / sizeof(T);
  const int gr = hk::resident_grid(mb_paths_read_kernel<T>, 256), gw = hk::resident_grid(mb_paths_write_kernel<T>, 256),
            gc = hk::resident_grid(mb_paths_copy_kernel<T>, 256);
  auto rd = time_launch([&](cudaStream_t s) {
    mb_paths_read_kernel<T><<<gr, 256, 0, s>>>(reinterpret_cast<const T*>(a), n, 1, sink);
    HK_CHECK_LAUNCH("mb_paths_read_kernel");
  }, o, false);
  auto wr = time_launch([&](cudaStream_t s) {
    mb_paths_write_kernel<T><<<gw, 256, 0, s>>>(reinterpret_cast<T*>(b), n);
    HK_CHECK_LAUNCH("mb_paths_write_kernel");
  }, o, false);
  auto cp = time_launch([&](cudaStream_t s) {
    mb_paths_copy_kernel<T><<<gc, 256, 0, s>>>(reinterpret_cast<const T*>(a), reinterpret_cast<T*>(b), n);
    HK_CHECK_LAUNCH("mb_paths_copy_kernel");
  }, o, false);
  const double ds = hk::device_info().datasheet_bandwidth() / 1e9;
  t.add({"read", width, rd.median_us, rd.spread_pct(), gbps(kHbmBytes, rd), 100 * gbps(kHbmBytes, rd) / ds});
  t.add({"write", width, wr.median_us, wr.spread_pct(), gbps(kHbmBytes, wr), 100 * gbps(kHbmBytes, wr) / ds});
  t.add({"copy (read + write)", width, cp.median_us, cp.spread_pct(), gbps(2.0 * kHbmBytes, cp), 100 * gbps(2.0 * kHbmBytes, cp) / ds});
  best_copy = std::max(best_copy, gbps(2.0 * kHbmBytes, cp) * 1e9);
}

Result run_memory_paths(const Options& o) {
  const hk::DeviceInfo& d = hk::device_info();
  DeviceArray<uint8_t> a(kHbmBytes), b(kHbmBytes);
  DeviceArray<float> sink(1);
  HK_CHECK_CUDA(cudaMemset(a.get(), 0x3C, kHbmBytes));
  Result r;

  Table& hbm = r.tables.emplace_back("HBM: 1 GiB, cold L2 (datasheet " + num(d.datasheet_bandwidth() / 1e12) + " TB/s)",
                                     std::vector<std::string>{"kernel", "access", "median us", "spread %", "GB/s", "% of datasheet"});
  double best_copy = 0;
  hbm_rows<float>(hbm, "4 B", a.get(), b.get(), sink.get(), o, best_copy);
  hbm_rows<float2>(hbm, "8 B", a.get(), b.get(), sink.get(), o, best_copy);
  hbm_rows<float4>(hbm, "16 B", a.get(), b.get(), sink.get(), o, best_copy);
  hbm.conclusion = hbm_conclusion(best_copy, d.datasheet_bandwidth());

  Table& l2 = r.tables.emplace_back("L2 bandwidth and load latency", std::vector<std::string>{"measurement", "value", "unit", "ns"});
  {
    const int g = hk::resident_grid(mb_paths_read_kernel<float4>, 256);
    auto t = time_launch([&](cudaStream_t s) {
      mb_paths_read_kernel<float4><<<g, 256, 0, s>>>(reinterpret_cast<const float4*>(a.get()), kL2Bytes / 16, 32, sink.get());
      HK_CHECK_LAUNCH("mb_paths_read_kernel");
    }, o, true);
    l2.add({"L2 read bandwidth (16 MiB x 32, warm, .cg)", gbps(32.0 * kL2Bytes, t), "GB/s", "-"});
  }
  DeviceArray<uint32_t> pos(1), links(uint32_t(256) << 20 >> 7);
  DeviceArray<ClockSpan> span(1);
  double lat[3] = {};
  const char* names[3] = {"latency, 16 KiB (L1 hit)", "latency, 4 MiB (L2 hit)",
                          "latency, 256 MiB (HBM: L2 flushed, lines not visited before)"};
  const uint32_t lines[3] = {128, 32768, uint32_t(256) << 20 >> 7};
  constexpr int kChaseSteps = 2048;
  for (int k = 0; k < 3; ++k) {
    links.from_host(random_cycle(lines[k], 17 + k));
    mb_paths_expand_links_kernel<<<256, 256>>>(links.get(), lines[k], reinterpret_cast<uint32_t*>(b.get()));
    HK_CHECK_LAUNCH("mb_paths_expand_links_kernel");
    pos.zero();
    const bool hbm = k == 2;
    std::vector<double> cyc, ns;
    for (int rep = 0; rep < 5; ++rep) {
      // L1 / L2: a warm walk of the whole cycle first, so the timed steps hit that level. HBM: no
      // warm walk, the L2 flushed (the expand kernel's last writes stay in L2), and each launch
      // walks on from where the previous one stopped: 5 x 2048 of the 2M lines, none seen before.
      // (The first GPU run restarted every launch at line 0 without a flush: launches 2 and 3
      // found the first one's 2048 lines in L2, and the median was the L2 hit latency.)
      if (hbm) hk::bench::flush_l2(nullptr);
      mb_paths_chase_kernel<<<1, 1>>>(reinterpret_cast<const uint32_t*>(b.get()), hbm ? 0 : int(lines[k]), kChaseSteps,
                                      pos.get(), span.get());
      HK_CHECK_LAUNCH("mb_paths_chase_kernel");
      ClockSpan s = span.to_host()[0];
      cyc.push_back(double(s.cycles) / kChaseSteps), ns.push_back(double(s.ns) / kChaseSteps);
    }
    lat[k] = median(cyc);
    l2.add({names[k], lat[k], "cycles", median(ns)});
  }
  l2.conclusion = latency_conclusion(lat[0], lat[1], lat[2]);

  Table& sm = r.tables.emplace_back("shared memory: 16-byte reads, one 1024-thread block per SM",
                                    std::vector<std::string>{"bytes/clk/SM", "expected", "SM MHz", "aggregate TB/s"});
  {
    DeviceArray<ClockSpan> spans(d.sm_count);
    const int passes = 512, shift = 8;  // shift: one 128-byte row per pass
    // Unused dynamic shared memory keeps a second block off each SM: the span is one SM's.
    const int pad = int(d.smem_per_sm / 2 + 1024);
    HK_CHECK_CUDA(cudaFuncSetAttribute(mb_paths_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, pad));
    for (int rep = 0; rep < 2; ++rep) mb_paths_smem_kernel<<<d.sm_count, 1024, pad>>>(passes, shift, sink.get(), spans.get());
    HK_CHECK_LAUNCH("mb_paths_smem_kernel");
    std::vector<double> bpc, mhz;
    for (auto& s : spans.to_host()) bpc.push_back(1024.0 * passes * 8 * 16 / double(s.cycles)), mhz.push_back(s.mhz());
    const double agg = median(bpc) * d.sm_count * median(mhz) * 1e6 / 1e12;
    sm.add({median(bpc), 128, median(mhz), agg});
    sm.conclusion = "shared memory delivers " + num(median(bpc)) + " of 128 bytes/clk/SM: " + num(agg) +
                    " TB/s over the chip at the measured clock (published: ~33 TB/s)";
  }

  Table& feed = r.tables.emplace_back("feeding shared memory, 128 KiB in flight per SM, one block per SM",
                                      std::vector<std::string>{"source", "method", "threads/SM", "median us", "spread %", "GB/s"});
  HK_CHECK_CUDA(cudaFuncSetAttribute(mb_paths_tma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kStages * kChunk));
  HK_CHECK_CUDA(cudaFuncSetAttribute(mb_paths_cp_async_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kStages * kChunk));
  HK_CHECK_CUDA(cudaFuncSetAttribute(mb_paths_plain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kStages * kChunk));
  const int64_t chunks = kHbmBytes / kChunk;
  double tma_hbm = 0, plain_hbm = 0;
  for (int64_t src_chunks : {chunks, kL2Bytes / kChunk}) {
    const bool from_l2 = src_chunks != chunks;
    const char* src = from_l2 ? "L2 (16 MiB re-read)" : "HBM (1 GiB)";
    auto t_tma = time_launch([&](cudaStream_t s) {
      mb_paths_tma_kernel<<<d.sm_count, 32, kStages * kChunk, s>>>(a.get(), chunks, src_chunks);
      HK_CHECK_LAUNCH("mb_paths_tma_kernel");
    }, o, from_l2);
    auto t_cpa = time_launch([&](cudaStream_t s) {
      mb_paths_cp_async_kernel<<<d.sm_count, 256, kStages * kChunk, s>>>(a.get(), chunks, src_chunks);
      HK_CHECK_LAUNCH("mb_paths_cp_async_kernel");
    }, o, from_l2);
    auto t_pl = time_launch([&](cudaStream_t s) {
      mb_paths_plain_kernel<<<d.sm_count, kChunk / 16, kStages * kChunk, s>>>(reinterpret_cast<const uint4*>(a.get()), chunks, src_chunks);
      HK_CHECK_LAUNCH("mb_paths_plain_kernel");
    }, o, from_l2);
    feed.add({src, "TMA bulk copy + mbarrier", 1, t_tma.median_us, t_tma.spread_pct(), gbps(kHbmBytes, t_tma)});
    feed.add({src, "cp.async 16 B", 256, t_cpa.median_us, t_cpa.spread_pct(), gbps(kHbmBytes, t_cpa)});
    feed.add({src, "ld.global 16 B + st.shared", kChunk / 16, t_pl.median_us, t_pl.spread_pct(), gbps(kHbmBytes, t_pl)});
    if (!from_l2) tma_hbm = gbps(kHbmBytes, t_tma), plain_hbm = gbps(kHbmBytes, t_pl);
  }
  feed.conclusion = "from HBM, one TMA thread per SM moves " + num(tma_hbm) + " GB/s, " + num(100 * tma_hbm / plain_hbm) +
                    "% of what 1024 threads of plain 16-byte loads move, leaving the other threads free";
  return r;
}

}  // namespace

std::string hbm_conclusion(double best_copy_bytes_per_s, double datasheet_bytes_per_s) {
  return "the best copy moves " + num(best_copy_bytes_per_s / 1e12) + " TB/s, " +
         num(100 * best_copy_bytes_per_s / datasheet_bytes_per_s) + "% of the " + num(datasheet_bytes_per_s / 1e12) +
         " TB/s datasheet figure";
}

std::string latency_conclusion(double l1_cycles, double l2_cycles, double hbm_cycles) {
  return "a dependent load costs " + num(l1_cycles) + " cycles from L1, " + num(l2_cycles) + " from L2 (" +
         num(l2_cycles / l1_cycles) + "x) and " + num(hbm_cycles) + " from HBM (" + num(hbm_cycles / l2_cycles) +
         "x L2): hiding HBM latency takes many loads in flight";
}

HK_REGISTER_MICROBENCH(6, "memory_paths", "HBM read/write/copy by access width, L2 bandwidth and latency, shared "
                                         "memory bandwidth, TMA vs cp.async vs plain loads feeding shared memory",
                       run_memory_paths);

}  // namespace hk::mb
