// microbench/tensor_cores.cu — Experiment 8: tensor cores, and launch overhead.
//
// Tensor-core throughput with no memory traffic: operands sit in registers (mma.sync) or in a
// few KiB of shared memory read over and over (wgmma), accumulators stay in registers.
//   mma.sync   m16n8k16 bf16 / f16, m16n8k32 e4m3; 8 independent accumulators per warp
//   wgmma      m64n256k16 bf16 / f16 and m64n256k32 e4m3, A and B from shared memory (SS) or A
//              from registers (RS); 8 wgmmas per commit group, one group kept in flight
// The datasheet's dense peak (H100/H200 SXM: 989.4 TFLOP/s bf16, 1978.9 fp8) is 132 SMs at a
// 1830 MHz boost clock: 4096 bf16 (8192 fp8) FLOP per SM per cycle. The per-cycle figure counts
// cycles with clock64 in the kernel, per SM over the same interval as the work (per_clock), so a
// lower clock under load is not mistaken for a slower pipe, and a clock read at another moment
// cannot push it above what the pipe does per cycle. Expect wgmma near the per-cycle peak and mma.sync well below it (Hopper's legacy
// path). wgmma needs sm_90a; its SASS should show HGMMA (QGMMA for fp8).
// Launch overhead: 2000 empty kernels launched on a stream vs replayed from a CUDA graph.
// Run: hk microbench tensor_cores
#include <chrono>

#include "hk/device.hpp"
#include "microbench/conclusions.hpp"
#include "microbench/ptx_local.cuh"

namespace hk::mb {
namespace {

enum Kind { kBf16, kF16, kE4m3 };
constexpr double kDatasheetBf16 = 989.4e12;  // dense, H100/H200 SXM
constexpr double kDatasheetMhz = 1830;       // the boost clock the datasheet peak assumes
constexpr int kDatasheetSms = 132;

// Operand bits near 1.0 with varied low mantissa bits: real data, finite sums.
__device__ __forceinline__ uint32_t operand_bits(int kind, uint32_t h) {
  h = h * 2654435761u ^ (h >> 13);
  if (kind == kBf16) return (0x3F80u | (h & 0x7F)) | ((0x3F80u | ((h >> 8) & 0x7F)) << 16);
  if (kind == kF16) return (0x3C00u | (h & 0x3FF)) | ((0x3C00u | ((h >> 10) & 0x3FF)) << 16);
  return 0x38383838u | (h & 0x07070707u);  // four e4m3 values in [1, 2)
}

// ---- mma.sync ------------------------------------------------------------------------------
template <int kKind>
__device__ __forceinline__ void mma_sync(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (kKind == kBf16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else if constexpr (kKind == kF16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

constexpr int kMmaAcc = 8;  // independent accumulators per warp: covers the MMA pipe latency

// `flip` is 0 at run time but unknown to the compiler: A changes every iteration as far as ptxas
// can tell. NOTE: sm_90 has no native fp8 mma.sync; ptxas lowers m16n8k32 e4m3 to F2FP unpacks and
// two f16 HMMA.16816 into zero plus FADDs into the accumulator, so it hoisted loop-invariant
// products out of the loop and shared equal products between accumulators. Every A register
// changes each iteration and each accumulator has its own B.
template <int kKind>
__global__ void mb_tc_mma_sync_kernel(int iters, uint32_t flip, float* sink, BlockSpan* spans) {
  uint32_t a[4], b[kMmaAcc][2];  // a B fragment per accumulator: no two MMAs share a product
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = operand_bits(kKind, threadIdx.x * 32 + i);
#pragma unroll
  for (int k = 0; k < kMmaAcc; ++k)
    b[k][0] = operand_bits(kKind, threadIdx.x * 32 + 4 + 2 * k), b[k][1] = operand_bits(kKind, threadIdx.x * 32 + 5 + 2 * k);
  float d[kMmaAcc][4] = {};
  __syncthreads();  // the block's span covers all its warps' work
  Stamp s0 = stamp();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < 4; ++i) a[i] ^= flip;
#pragma unroll
    for (int k = 0; k < kMmaAcc; ++k) mma_sync<kKind>(d[k], a, b[k]);
  }
  float s = 0;
#pragma unroll
  for (int k = 0; k < kMmaAcc; ++k) s += d[k][0] + d[k][1] + d[k][2] + d[k][3];
  if (s == -1.0f) *sink = s;
  __syncthreads();
  Stamp s1 = stamp();
  if (threadIdx.x == 0) store_block_span(&spans[blockIdx.x], s0, s1);
}

// ---- wgmma ---------------------------------------------------------------------------------
// Shared-memory matrix descriptor, no swizzle: 8-row x 16-byte core matrices of 128 contiguous
// bytes; LBO = 128 (next core matrix along K), SBO = 256 (next 8 rows).
__device__ __forceinline__ uint64_t smem_desc(const void* p) {
  return uint64_t((smem_addr(p) & 0x3FFFF) >> 4) | (uint64_t(128 >> 4) << 16) | (uint64_t(256 >> 4) << 32);
}

// "{%0, ..., %127}": the 128 accumulator operands of an m64n256 f32 wgmma.
#define MB_WGMMA_D128 \
  "{" "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127" "}"

#define MB_D8(i) "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), \
                 "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7])
#define MB_D32(i) MB_D8(i), MB_D8((i) + 8), MB_D8((i) + 16), MB_D8((i) + 24)
#define MB_D128_OPS MB_D32(0), MB_D32(32), MB_D32(64), MB_D32(96)

#define MB_WGMMA_SS(shape_types, tail)                                                               \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                       \
               "wgmma.mma_async.sync.aligned." shape_types " " MB_WGMMA_D128 ", %128, %129, p, 1, 1" tail \
               ";\n}\n"                                                                              \
               : MB_D128_OPS                                                                         \
               : "l"(da), "l"(db), "r"(1))
#define MB_WGMMA_RS(shape_types, tail)                                                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"                                      \
               "wgmma.mma_async.sync.aligned." shape_types " " MB_WGMMA_D128                         \
               ", {%128, %129, %130, %131}, %132, p, 1, 1" tail ";\n}\n"                             \
               : MB_D128_OPS                                                                        \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1))

// One m64n256 wgmma accumulating into d (128 f32 per thread of the warpgroup).
template <int kKind, bool kRegA>
__device__ __forceinline__ void wgmma(float (&d)[128], uint64_t da, const uint32_t (&a)[4], uint64_t db) {
  if constexpr (kKind == kBf16 && !kRegA) MB_WGMMA_SS("m64n256k16.f32.bf16.bf16", ", 0, 0");
  else if constexpr (kKind == kBf16) MB_WGMMA_RS("m64n256k16.f32.bf16.bf16", ", 0");
  else if constexpr (kKind == kF16 && !kRegA) MB_WGMMA_SS("m64n256k16.f32.f16.f16", ", 0, 0");
  else if constexpr (kKind == kF16) MB_WGMMA_RS("m64n256k16.f32.f16.f16", ", 0");
  else if constexpr (!kRegA) MB_WGMMA_SS("m64n256k32.f32.e4m3.e4m3", "");
  else MB_WGMMA_RS("m64n256k32.f32.e4m3.e4m3", "");
}

constexpr int kWgmmaPerGroup = 8;

// One warpgroup per block. A: (64 rows, 32 bytes of K) = 2 KiB; B: (256 rows, 32 bytes) = 8 KiB.
template <int kKind, bool kRegA>
__global__ void __launch_bounds__(128, 1) mb_tc_wgmma_kernel(int iters, float* sink, BlockSpan* spans) {
  __shared__ __align__(128) uint32_t a_s[512], b_s[2048];
  for (int i = threadIdx.x; i < 2048; i += blockDim.x) {
    b_s[i] = operand_bits(kKind, i + 7);
    if (i < 512) a_s[i] = operand_bits(kKind, i);
  }
  // NOTE: generic-proxy stores read next by the tensor cores (async proxy) need this fence.
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  uint32_t a[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = operand_bits(kKind, threadIdx.x * 4 + i);
  const uint64_t da = smem_desc(a_s), db = smem_desc(b_s);
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0;
  __syncthreads();  // the block's span covers all its warps' work
  Stamp s0 = stamp();
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");  // accumulators and A registers are ready
#pragma unroll
    for (int k = 0; k < kWgmmaPerGroup; ++k) wgmma<kKind, kRegA>(d, da, a, db);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");  // keep one group in flight
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  float s = 0;
#pragma unroll
  for (int i = 0; i < 128; ++i) s += d[i];
  if (s == -1.0f) *sink = s;
  __syncthreads();
  Stamp s1 = stamp();
  if (threadIdx.x == 0) store_block_span(&spans[blockIdx.x], s0, s1);
}

__global__ void mb_tc_empty_kernel() {}

struct TcRow {
  const char* instr;
  const char* dtype;
  const char* a_from;
  int grid;
  double flop_per_block;
  std::function<void(cudaStream_t, BlockSpan*)> launch;
};

template <int kKind>
TcRow mma_row(const char* dtype, int grid, float* sink) {
  const int iters = 4096, threads = 128;
  const double flop_per_mma = kKind == kE4m3 ? 2.0 * 16 * 8 * 32 : 2.0 * 16 * 8 * 16;
  return {kKind == kE4m3 ? "mma.sync m16n8k32" : "mma.sync m16n8k16", dtype, "registers",
          grid, double(threads) / 32 * iters * kMmaAcc * flop_per_mma, [=](cudaStream_t s, BlockSpan* spans) {
            mb_tc_mma_sync_kernel<kKind><<<grid, threads, 0, s>>>(iters, 0u, sink, spans);
            HK_CHECK_LAUNCH("mb_tc_mma_sync_kernel");
          }};
}

template <int kKind, bool kRegA>
TcRow wgmma_row(const char* dtype, int grid, float* sink) {
  const int iters = 512;
  const double flop_per_wgmma = 2.0 * 64 * 256 * (kKind == kE4m3 ? 32 : 16);
  return {kKind == kE4m3 ? "wgmma m64n256k32" : "wgmma m64n256k16", dtype, kRegA ? "registers" : "shared memory",
          grid, double(iters) * kWgmmaPerGroup * flop_per_wgmma, [=](cudaStream_t s, BlockSpan* spans) {
            mb_tc_wgmma_kernel<kKind, kRegA><<<grid, 128, 0, s>>>(iters, sink, spans);
            HK_CHECK_LAUNCH("mb_tc_wgmma_kernel");
          }};
}

Result run_tensor_cores(const Options& o) {
  const hk::DeviceInfo& d = hk::device_info();
  DeviceArray<float> sink(1);
  const double bf16_per_sm_clk = kDatasheetBf16 / (kDatasheetSms * kDatasheetMhz * 1e6);  // 4096
  const int mma_grid = d.sm_count * 4, wg_grid = d.sm_count * 2;
  std::vector<TcRow> rows{
      mma_row<kBf16>("bf16", mma_grid, sink.get()),
      mma_row<kF16>("f16", mma_grid, sink.get()),
      mma_row<kE4m3>("e4m3", mma_grid, sink.get()),
      wgmma_row<kBf16, false>("bf16", wg_grid, sink.get()),
      wgmma_row<kBf16, true>("bf16", wg_grid, sink.get()),
      wgmma_row<kF16, false>("f16", wg_grid, sink.get()),
      wgmma_row<kE4m3, false>("e4m3", wg_grid, sink.get()),
      wgmma_row<kE4m3, true>("e4m3", wg_grid, sink.get()),
  };
  Result r;
  Table& t = r.tables.emplace_back(
      "tensor-core throughput, no memory traffic (datasheet: " + num(bf16_per_sm_clk) + " bf16 / " +
          num(2 * bf16_per_sm_clk) + " fp8 dense FLOP per SM per cycle)",
      std::vector<std::string>{"instruction", "dtype", "A from", "median us", "spread %", "TFLOP/s", "SM MHz",
                               "FLOP/SM/clk", "% of datasheet per clk"});
  double mma_best = 0, wg_best = 0;
  for (auto& row : rows) {
    SpanRing ring(row.grid, o.max_samples);
    auto tm = time_launch([&](cudaStream_t s) { row.launch(s, ring.next()); }, o, true);
    const PerClock pc = per_clock(ring.last(tm.samples), row.grid, row.flop_per_block);
    const double mhz = pc.mhz, per_clk = pc.per_sm_clk;
    const double flops = row.grid * row.flop_per_block / (tm.median_us * 1e-6);
    const double sheet = std::string(row.dtype) == "e4m3" ? 2 * bf16_per_sm_clk : bf16_per_sm_clk;
    t.add({row.instr, row.dtype, row.a_from, tm.median_us, tm.spread_pct(), flops / 1e12, mhz, per_clk, 100 * per_clk / sheet});
    if (std::string(row.dtype) == "bf16") {
      double& best = std::string(row.instr).rfind("wgmma", 0) == 0 ? wg_best : mma_best;
      best = std::max(best, per_clk);
    }
  }
  t.conclusion = tensor_conclusion(mma_best, wg_best, bf16_per_sm_clk);

  Table& l = r.tables.emplace_back("launch overhead: 2000 empty kernels",
                                   std::vector<std::string>{"method", "us per kernel (GPU)", "us per call (host)"});
  constexpr int kLaunches = 2000;
  cudaStream_t s;
  HK_CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaGraph_t graph;
  HK_CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < kLaunches; ++i) mb_tc_empty_kernel<<<1, 32, 0, s>>>();
  HK_CHECK_CUDA(cudaStreamEndCapture(s, &graph));
  cudaGraphExec_t exec;
  HK_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  HK_CHECK_CUDA(cudaEventCreate(&e0));
  HK_CHECK_CUDA(cudaEventCreate(&e1));
  std::vector<double> gpu[2], host[2];
  for (int rep = 0; rep < 8; ++rep)
    for (int m = 0; m < 2; ++m) {
      HK_CHECK_CUDA(cudaEventRecord(e0, s));
      auto h0 = std::chrono::steady_clock::now();
      if (m == 0)
        for (int i = 0; i < kLaunches; ++i) mb_tc_empty_kernel<<<1, 32, 0, s>>>();
      else
        HK_CHECK_CUDA(cudaGraphLaunch(exec, s));
      auto h1 = std::chrono::steady_clock::now();
      HK_CHECK_CUDA(cudaEventRecord(e1, s));
      HK_CHECK_CUDA(cudaEventSynchronize(e1));
      HK_CHECK_LAUNCH("mb_tc_empty_kernel");
      float ms = 0;
      HK_CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      if (rep == 0) continue;  // warm-up
      gpu[m].push_back(1e3 * ms / kLaunches);
      host[m].push_back(std::chrono::duration<double, std::micro>(h1 - h0).count() / (m == 0 ? kLaunches : 1));
    }
  HK_CHECK_CUDA(cudaEventDestroy(e0));
  HK_CHECK_CUDA(cudaEventDestroy(e1));
  HK_CHECK_CUDA(cudaGraphExecDestroy(exec));
  HK_CHECK_CUDA(cudaGraphDestroy(graph));
  HK_CHECK_CUDA(cudaStreamDestroy(s));
  l.add({"stream launch (<<<>>>)", median(gpu[0]), median(host[0])});
  l.add({"CUDA graph replay (one cudaGraphLaunch of 2000 nodes)", median(gpu[1]), median(host[1])});
  l.conclusion = launch_conclusion(median(gpu[0]), median(gpu[1]));
  return r;
}

}  // namespace

std::string tensor_conclusion(double mma_sync_flop_per_sm_clk, double wgmma_flop_per_sm_clk, double datasheet_flop_per_sm_clk) {
  return "bf16 wgmma reaches " + num(wgmma_flop_per_sm_clk) + " FLOP/SM/cycle (" +
         num(100 * wgmma_flop_per_sm_clk / datasheet_flop_per_sm_clk) + "% of the datasheet's " +
         num(datasheet_flop_per_sm_clk) + "), mma.sync " + num(mma_sync_flop_per_sm_clk) + " (" +
         num(100 * mma_sync_flop_per_sm_clk / datasheet_flop_per_sm_clk) + "%): only wgmma reaches Hopper's tensor-core peak";
}

std::string launch_conclusion(double stream_us, double graph_us) {
  return "an empty kernel costs " + num(stream_us) + " us per stream launch and " + num(graph_us) +
         " us per graph node (" + num(stream_us / graph_us) + "x less): graphs pay off for microsecond kernels";
}

HK_REGISTER_MICROBENCH(8, "tensor_cores", "mma.sync vs wgmma (bf16, f16, e4m3; A from smem or registers) vs the "
                                         "datasheet peak per SM per cycle; stream launch vs CUDA graph replay",
                       run_tensor_cores);

}  // namespace hk::mb
