// microbench/bank_conflicts.cu — Experiment 3: shared-memory bank conflicts.
//
// Shared memory has 32 banks of 4 bytes; word w lives in bank w % 32. A warp's 32 reads take as
// many passes as the most-requested bank has distinct words: lane t reading word t * s + k hits
// gcd(s, 32) lanes per bank. Reading a column of a row-major 32x32 f32 tile is s = 32: a 32-way
// conflict. The two fixes: pad each row to 33 words (s = 33, odd: conflict-free) or store
// (row, col) at row * 32 + (col ^ row) (XOR swizzle: the column's 32 words land in 32 banks).
// Each SM runs one 1024-thread block; every warp reads 32 words per pass, 64 passes; clock64
// over the loop gives cycles per warp-wide 4-byte access per SM (expect ~1 per way: 128 B/clk).
// Run: hk microbench bank_conflicts
#include <algorithm>
#include <numeric>

#include "hk/device.hpp"
#include "microbench/conclusions.hpp"
#include "microbench/ptx_local.cuh"

namespace hk::mb {
namespace {

constexpr int kThreads = 1024;
constexpr int kPasses = 64;
constexpr int kShift = 32;            // words the pattern moves per pass: one bank row, same banks
// The padded tile (stride 32 needs 31*32+31 words, stride 33 31*33+31) plus one row per pass.
constexpr int kTileWords = 33 * 32 + kPasses * kShift;

// kSwizzle = false: lane t reads word t * stride + k; true: lane t reads row t, column k of an
// XOR-swizzled 32x32 tile (word t * 32 + (k ^ t)). Pass p reads the pattern p * shift words
// further on: a multiple of 32 keeps every word in its bank, and `shift` is a kernel argument, so
// no compiler can prove two passes read the same words and merge their loads (an empty asm
// memory clobber between passes did not stop NVVM from merging them in the other experiments).
// 1024 threads: __launch_bounds__ caps ptxas at 64 registers, or the launch fails for lack of
// registers (cudaErrorLaunchOutOfResources, the first GPU run).
template <bool kSwizzle>
__global__ void __launch_bounds__(kThreads) mb_bank_read_kernel(int stride, int shift, float* sink, ClockSpan* spans) {
  __shared__ float tile[kTileWords];
  for (int i = threadIdx.x; i < kTileWords; i += blockDim.x) tile[i] = float(i);
  __syncthreads();
  const int lane = threadIdx.x & 31;
  const int base = kSwizzle ? lane * 32 : lane * stride;
  float acc[4] = {0, 0, 0, 0};
  Stamp a = stamp();
  for (int p = 0; p < kPasses; ++p) {
    const int row = base + p * shift;
#pragma unroll
    for (int k = 0; k < 32; ++k) acc[k % 4] += tile[row + (kSwizzle ? k ^ lane : k)];
  }
  __syncthreads();
  Stamp b = stamp();
  if (threadIdx.x == 0) store_span(&spans[blockIdx.x], a, b);
  if (acc[0] + acc[1] + acc[2] + acc[3] == -1.0f) *sink = acc[0];
}

struct Pattern {
  std::string name;
  bool swizzle;
  int stride;
  int ways;
};

Result run_bank_conflicts(const Options&) {
  const int sms = hk::device_info().sm_count;
  DeviceArray<float> sink(1);
  DeviceArray<ClockSpan> spans(sms);
  const std::vector<Pattern> patterns{
      {"row: lane t reads word t + k (stride 1)", false, 1, 1},
      {"stride 2 words", false, 2, 2},
      {"stride 4 words", false, 4, 4},
      {"stride 8 words", false, 8, 8},
      {"stride 16 words", false, 16, 16},
      {"column of a 32x32 tile (stride 32)", false, 32, 32},
      {"column, rows padded to 33 words", false, 33, 1},
      {"column, XOR swizzle (col ^ row)", true, 32, 1},
  };
  Table t("shared-memory reads: one 1024-thread block per SM, 64 passes of 32 reads per warp",
          {"pattern", "ways (bank model)", "cycles per warp access", "spread %", "vs conflict-free", "SM MHz"});
  std::vector<BankPoint> pts;
  // Unused dynamic shared memory keeps a second block off each SM: each span is one SM's.
  const int pad = int(hk::device_info().smem_per_sm / 2 + 1024);
  HK_CHECK_CUDA(cudaFuncSetAttribute(mb_bank_read_kernel<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, pad));
  HK_CHECK_CUDA(cudaFuncSetAttribute(mb_bank_read_kernel<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, pad));
  for (auto& p : patterns) {
    std::vector<double> cycles, mhz;
    for (int rep = 0; rep < 6; ++rep) {  // the first launch warms up and is dropped
      if (p.swizzle) mb_bank_read_kernel<true><<<sms, kThreads, pad>>>(p.stride, kShift, sink.get(), spans.get());
      else mb_bank_read_kernel<false><<<sms, kThreads, pad>>>(p.stride, kShift, sink.get(), spans.get());
      HK_CHECK_LAUNCH("mb_bank_read_kernel");
      if (rep == 0) continue;
      for (auto& s : spans.to_host()) {
        cycles.push_back(double(s.cycles) / (kPasses * 32.0 * (kThreads / 32)));
        mhz.push_back(s.mhz());
      }
    }
    std::sort(cycles.begin(), cycles.end());
    double med = median(cycles);
    double spread = 100 * (cycles[cycles.size() * 3 / 4] - cycles[cycles.size() / 4]) / med;
    pts.push_back({p.name, p.ways, med});
    t.add({p.name, p.ways, med, spread, med / pts.front().cycles_per_access, median(mhz)});
  }
  t.conclusion = bank_conflict_conclusion(pts);
  Result r;
  r.tables.push_back(std::move(t));
  return r;
}

}  // namespace

std::string bank_conflict_conclusion(const std::vector<BankPoint>& points) {
  if (points.empty() || points.front().cycles_per_access <= 0) return "nothing measured";
  const double base = points.front().cycles_per_access;
  auto worst = std::find_if(points.begin(), points.end(), [](const BankPoint& p) { return p.ways == 32; });
  if (worst == points.end()) return "no 32-way pattern measured";
  std::string s = worst->pattern + " costs " + num(worst->cycles_per_access) + " cycles per access, " +
                  num(worst->cycles_per_access / base) + "x the conflict-free read (bank model: 32x); cycles per way:";
  // Appends, not "; " + string: GCC 12's -Wrestrict misfires on operator+(const char*, string&&).
  for (auto& p : points)
    if (p.ways > 1) s.append(" ").append(num(p.cycles_per_access / base / p.ways));
  for (auto it = worst + 1; it != points.end(); ++it)
    s.append("; ").append(it->pattern).append(": ").append(num(it->cycles_per_access / base)).append("x");
  return s;
}

HK_REGISTER_MICROBENCH(3, "bank_conflicts", "shared-memory reads with 1..32-way conflicts, then padding and "
                                           "XOR swizzle: cycles per warp access",
                       run_bank_conflicts);

}  // namespace hk::mb
