// microbench/sfu.cu — Experiment 4: SFU (MUFU) vs FMA throughput, and what a GeLU costs.
//
// Each SM has 4 x 32 FP32 lanes (128 FMA per cycle) and 16 special-function lanes (MUFU: ex2,
// sin, rsqrt, rcp, tanh: 16 results per cycle). Each thread keeps 8 independent inputs, walks them
// through [-4, 4] and accumulates op(x), so the loop is bound by the op's pipe, not by latency;
// the FMA row is 8 independent fmaf chains. Results per SM per cycle = the results of the blocks on
// one SM / the clock64 cycles from their first start to their last end (per_clock: median over
// SMs and timed launches), so a clock that moves between launches cannot bias it.
//   FMA                    expect 128 / SM / cycle
//   __expf, ex2.approx,    expect 16 (one MUFU each; __expf adds an FMUL, exp2f's ftz form is one
//   __sinf, rsqrtf,        MUFU.EX2); tanhf is the IEEE-accurate libm path (several instructions)
//   tanh.approx, rcp.approx
//   GeLU per element       library form (ex2 + rcp: 2 MUFU -> 8), tanh.approx form (1 MUFU -> 16),
//                          tanhf form, erff form (polynomials on the FMA pipe)
// Run: hk microbench sfu
#include "common/activations.cuh"
#include "common/launch.cuh"
#include "microbench/conclusions.hpp"
#include "microbench/ptx_local.cuh"

namespace hk::mb {
namespace {

enum Op { kFma, kExpf, kEx2, kSinf, kRsqrt, kRcp, kTanhApprox, kTanhf, kGeluLib, kGeluTanhApprox, kGeluTanhf, kGeluErf };

__device__ __forceinline__ float tanh_approx(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

template <int kOp>
__device__ __forceinline__ float apply(float x) {
  using namespace hk::act;
  if constexpr (kOp == kExpf) return __expf(x);
  else if constexpr (kOp == kEx2) return ex2_approx(x);
  else if constexpr (kOp == kSinf) return __sinf(x);
  else if constexpr (kOp == kRsqrt) return rsqrtf(x);
  else if constexpr (kOp == kRcp) return rcp_approx(x);
  else if constexpr (kOp == kTanhApprox) return tanh_approx(x);
  else if constexpr (kOp == kTanhf) return tanhf(x);
  else if constexpr (kOp == kGeluLib) return gelu_tanh(x);
  else if constexpr (kOp == kGeluTanhApprox) return 0.5f * x * (1.0f + tanh_approx(kSqrt2OverPi * fmaf(kGeluCoef * x, x * x, x)));
  else if constexpr (kOp == kGeluTanhf) return 0.5f * x * (1.0f + tanhf(kSqrt2OverPi * fmaf(kGeluCoef * x, x * x, x)));
  else return gelu_erf(x);
}

template <int kOp>
__global__ void mb_sfu_kernel(int iters, float* sink, BlockSpan* spans) {
  float x[8], acc[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    x[j] = -4.0f + 8.0f * float((threadIdx.x * 8 + j) % 1024) / 1024.0f;
    acc[j] = 0;
  }
  __syncthreads();  // the block's span covers all its warps' work
  Stamp a = stamp();
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if constexpr (kOp == kFma) {
        x[j] = fmaf(x[j], 0.9999f, 1e-4f);
      } else {
        acc[j] += apply<kOp>(x[j]);
        x[j] += 1e-4f;
      }
    }
  }
  __syncthreads();
  Stamp b = stamp();
  if (threadIdx.x == 0) store_block_span(&spans[blockIdx.x], a, b);
  float s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += acc[j] + x[j];
  if (s == 1234.5f) *sink = s;
}

struct Row {
  const char* name;
  const char* sass;  // what the op should compile to
  double expected;   // results / SM / cycle by the unit counts; 0 = no simple expectation
  int iters;
  const void* fn;
  void (*launch)(int, int, int, float*, BlockSpan*, cudaStream_t);
};

template <int kOp>
Row row(const char* name, const char* sass, double expected, int iters) {
  return {name, sass, expected, iters, reinterpret_cast<const void*>(mb_sfu_kernel<kOp>),
          [](int grid, int threads, int it, float* sink, BlockSpan* spans, cudaStream_t s) {
            mb_sfu_kernel<kOp><<<grid, threads, 0, s>>>(it, sink, spans);
            HK_CHECK_LAUNCH("mb_sfu_kernel");
          }};
}

Result run_sfu(const Options& o) {
  const hk::DeviceInfo& d = hk::device_info();
  DeviceArray<float> sink(1);
  const std::vector<Row> rows{
      row<kFma>("fmaf", "FFMA", 128, 4096),
      row<kExpf>("__expf", "FMUL + MUFU.EX2", 16, 512),
      row<kEx2>("exp2 (ex2.approx.ftz)", "MUFU.EX2", 16, 512),
      row<kSinf>("__sinf", "FMUL + MUFU.SIN", 16, 512),
      row<kRsqrt>("rsqrtf", "MUFU.RSQ", 16, 512),
      row<kRcp>("rcp.approx.ftz", "MUFU.RCP", 16, 512),
      row<kTanhApprox>("tanh.approx.f32", "MUFU.TANH", 16, 512),
      row<kTanhf>("tanhf (IEEE libm)", "several FFMA + MUFU", 0, 512),
      row<kGeluLib>("GeLU: library (ex2 + rcp)", "2 MUFU + 4 FP32", 8, 512),
      row<kGeluTanhApprox>("GeLU: tanh.approx", "1 MUFU + 5 FP32", 16, 512),
      row<kGeluTanhf>("GeLU: tanhf", "libm tanhf + 5 FP32", 0, 512),
      row<kGeluErf>("GeLU: erff", "erff polynomial", 0, 512),
  };
  Table t("throughput per SM per cycle: 8 independent inputs per thread, full occupancy",
          {"op", "expected SASS", "median us", "spread %", "results/SM/cycle", "expected", "SM MHz"});
  double fma = 0, ex2 = 0, gelu = 0, mhz_seen = 0;
  for (auto& r : rows) {
    const int threads = 256;
    int per_sm = 0;
    HK_CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, r.fn, threads, 0));
    const int grid = d.sm_count * std::max(per_sm, 1);
    SpanRing ring(grid, o.max_samples);
    auto tm = time_launch([&](cudaStream_t s) { r.launch(grid, threads, r.iters, sink.get(), ring.next(), s); }, o, true);
    const PerClock pc = per_clock(ring.last(tm.samples), grid, double(threads) * r.iters * 8);
    const double mhz = pc.mhz, per_sm_clk = pc.per_sm_clk;
    t.add({r.name, r.sass, tm.median_us, tm.spread_pct(), per_sm_clk,
           r.expected > 0 ? Cell(r.expected) : Cell("-"), mhz});
    if (std::string(r.name) == "fmaf") fma = per_sm_clk;
    if (std::string(r.sass) == "MUFU.EX2") ex2 = per_sm_clk;
    if (std::string(r.name).find("library") != std::string::npos) gelu = per_sm_clk;
    mhz_seen = mhz;
  }
  // A bf16 GeLU reads 2 and writes 2 bytes per element: at the measured copy bandwidth it needs
  // copy / 4 elements per second from the whole chip.
  const double needed = hk::measured_ceilings().copy_bytes_per_s / 4 / (mhz_seen * 1e6) / d.sm_count;
  t.conclusion = sfu_conclusion(fma, ex2, gelu, needed);
  Result res;
  res.tables.push_back(std::move(t));
  return res;
}

}  // namespace

std::string sfu_conclusion(double fma_per_sm_cycle, double ex2_per_sm_cycle, double gelu_per_sm_cycle,
                           double hbm_needed_per_sm_cycle) {
  std::string s = "FMA gives " + num(fma_per_sm_cycle) + " results/SM/cycle and MUFU.EX2 " + num(ex2_per_sm_cycle) +
                  " (" + num(fma_per_sm_cycle / ex2_per_sm_cycle) + "x fewer; unit counts say 128 vs 16); the library GeLU runs " +
                  num(gelu_per_sm_cycle) + " elements/SM/cycle, ";
  const double margin = gelu_per_sm_cycle / hbm_needed_per_sm_cycle;
  s += num(margin) + "x the " + num(hbm_needed_per_sm_cycle) + " a bf16 GeLU needs to keep pace with HBM copy";
  s += margin >= 1 ? ", so it stays memory-bound" : ", so its math, not HBM, sets its speed";
  return s;
}

HK_REGISTER_MICROBENCH(4, "sfu", "__expf, ex2, __sinf, rsqrtf, tanh (approx and libm), rcp vs FMA per SM per cycle, "
                                "and GeLU per element in each form",
                       run_sfu);

}  // namespace hk::mb
