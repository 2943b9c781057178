// attention/v03_fa2_mma_sync.cu
//
// Rung 3: the FlashAttention-2 forward on tensor cores. A block of 4 warps owns 64 query rows of
// one (batch, head), 16 rows per warp. Q is copied to shared memory once; 64-key tiles of K and V
// stream through a two-slot cp.async ring (tile n + 1 lands while tile n is multiplied). Per
// tile each warp computes its 16 x 64 block of S = Q K^T with mma.sync.m16n8k16 (operands by
// ldmatrix from padded shared memory; Q's fragments stay in registers), applies
// scale (folded with log2 e, so the softmax is exp2), softcap and the mask in registers, and
// updates the online softmax: a running max and sum per row, the O accumulator rescaled when
// the max grows. P is rounded to the 16-bit dtype in registers and used directly as the A
// operand of O += P V: the m16n8 accumulator fragments of two adjacent key blocks are exactly
// an m16k16 A fragment, so P never touches shared memory. V's B fragments come by ldmatrix.trans
// (V is stored key-major, D contiguous). Key tiles no row of the block attends are skipped.
// Adds over v02: tensor cores (one HMMA does 4096 multiply-adds against v02's one FMA), f32
// accumulators in registers instead of shared memory, asynchronous copies overlapping the math.
// Variable length (thd, D <= 96; an instantiation of its own): a CTA reads its sequence's row
// offset and lengths from cu_seqlens and returns at once when its 64-row tile starts past the
// sequence's end; cp.async zero-fills rows past the end, so neighbouring sequences are never
// read. At D = 128 the per-sequence lengths in registers push the kernel (254 registers) into
// spills: thd D = 128 runs on v05, else v02.
// Needs: sm_80; D in {32, 64, 96, 128} (D = 256's 128 O accumulators per thread spill at 4 warps
// x 16 rows: it runs on v02); every operand 16-byte aligned with (b, s, h) strides
// multiples of 8 elements (16-byte rows for cp.async); B and Hq at most 65535; forward only.
// Run:   hk bench attention --variant v03_fa2_mma_sync --shape 2048x128x1
#include <cuda_runtime.h>

#include <cmath>

#include "attention/attn_common.cuh"
#include "common/ptx/cp_async.cuh"
#include "common/ptx/mma.cuh"

namespace hk::attention_v03_fa2_mma_sync {
namespace {

constexpr int kBlockM = 64, kBlockN = 64, kWarps = 4, kThreads = 32 * kWarps;
constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

template <int kD>
struct Smem {
  static constexpr int kPitch = ptx::padded_pitch(kD);
  static constexpr int kQ = kBlockM * kPitch, kKV = kBlockN * kPitch;
  static constexpr size_t kBytes = size_t(kQ + 4 * kKV) * 2;  // Q, 2 slots of K, 2 of V
};

__device__ __forceinline__ uint32_t pack2(float lo, float hi, __nv_bfloat16) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
__device__ __forceinline__ uint32_t pack2(float lo, float hi, __half) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

template <class T, int kD, bool kVarlen>
__global__ void __launch_bounds__(kThreads, 1) attn_v03_kernel(const AttentionArgs a) {
  using S = Smem<kD>;
  constexpr int kP = S::kPitch, kNT = kBlockN / 8, kDT = kD / 8, kKS = kD / 16;
  constexpr bool kQRegs = kD <= 128;
  extern __shared__ __align__(16) unsigned char smem[];
  T* qs = reinterpret_cast<T*>(smem);
  T* ks = qs + S::kQ;       // 2 slots
  T* vs = ks + 2 * S::kKV;  // 2 slots
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t4 = lane % 4;
  const int64_t b = blockIdx.z, h = blockIdx.y, G = a.heads_q / a.heads_kv, hk = h / G;
  // The last query tiles first: under a causal mask they see the most keys, and starting them
  // first keeps them out of the grid's tail.
  // thd: the sequence's own lengths and first packed rows (the grid covers the longest one). A
  // template switch: the fixed-length kernel (254 registers at D = 128) keeps its lengths in the
  // constant bank, where they cost no register.
  AttnSeq seq{0, 0, a.seqlen_q, a.seqlen_k};
  if constexpr (kVarlen) seq = attn_seq(a, b);
  const int64_t Sq = seq.sq, Sk = seq.sk, m0 = int64_t(gridDim.x - 1 - blockIdx.x) * kBlockM;
  if constexpr (kVarlen)
    if (m0 >= Sq) return;  // past this sequence's end
  const T* Q = static_cast<const T*>(a.q) + b * a.sq.b + seq.q0 * a.sq.s + h * a.sq.h;
  const T* K = static_cast<const T*>(a.k) + b * a.sk.b + seq.k0 * a.sk.s + hk * a.sk.h;
  const T* V = static_cast<const T*>(a.v) + b * a.sv.b + seq.k0 * a.sv.s + hk * a.sv.h;

  // Keys the block's rows attend: ranges grow with the row, so the first row's lo and the last
  // row's hi bound them (rows with no key are skipped by their own masks).
  const int64_t last_row = (m0 + kBlockM < Sq ? m0 + kBlockM : Sq) - 1;
  const KeyRange first = attn_key_range(m0, Sq, Sk, a.window_left, a.window_right);
  const KeyRange last = attn_key_range(last_row, Sq, Sk, a.window_left, a.window_right);
  const int64_t n_lo = first.lo / kBlockN, n_hi = last.hi < 0 ? -1 : last.hi / kBlockN;

  // This thread's rows (g and g + 8 of the warp's 16) and their key ranges.
  const int64_t r0 = m0 + warp * 16 + g, r1 = r0 + 8;
  const KeyRange kr0 = attn_key_range(r0, Sq, Sk, a.window_left, a.window_right);
  const KeyRange kr1 = attn_key_range(r1, Sq, Sk, a.window_left, a.window_right);

  ptx::cp_async_tile<kBlockM, kD, kP, kThreads>(qs, Q, a.sq.s, m0, 0, Sq, kD, tid);
  auto load_kv = [&](int64_t n, int slot) {
    ptx::cp_async_tile<kBlockN, kD, kP, kThreads>(ks + slot * S::kKV, K, a.sk.s, n * kBlockN, 0, Sk, kD, tid);
    ptx::cp_async_tile<kBlockN, kD, kP, kThreads>(vs + slot * S::kKV, V, a.sv.s, n * kBlockN, 0, Sk, kD, tid);
  };
  if (n_lo <= n_hi) load_kv(n_lo, 0);
  ptx::cp_async_commit();

  const ptx::RowCol arow = ptx::ldmatrix_a_row(lane, true), brow = ptx::ldmatrix_b_row(lane, true),
                    vrow = ptx::ldmatrix_b_row(lane, false);
  uint32_t qf[kQRegs ? kKS : 1][4];
  float o[kDT][4] = {};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  const float sl2 = a.scale * kLog2e;
  const bool capped = a.softcap > 0.f;
  const float cap_in = capped ? a.scale / a.softcap : 0.f, cap_out = capped ? a.softcap * kLog2e : 0.f;

  for (int64_t n = n_lo; n <= n_hi; ++n) {
    const int slot = static_cast<int>((n - n_lo) & 1);
    if (n + 1 <= n_hi) load_kv(n + 1, slot ^ 1);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();
    __syncthreads();
    if constexpr (kQRegs) {
      if (n == n_lo) {
#pragma unroll
        for (int ks_ = 0; ks_ < kKS; ++ks_)
          ptx::ldmatrix_x4<false>(qf[ks_], qs + (warp * 16 + arow.row) * kP + ks_ * 16 + arow.col);
      }
    }
    const T* kt = ks + slot * S::kKV;
    const T* vt = vs + slot * S::kKV;
    // S = Q K^T for the warp's 16 rows x 64 keys.
    float s[kNT][4] = {};
#pragma unroll
    for (int ks_ = 0; ks_ < kKS; ++ks_) {
      uint32_t af[4];
      if constexpr (kQRegs) {
#pragma unroll
        for (int e = 0; e < 4; ++e) af[e] = qf[ks_][e];
      } else {
        ptx::ldmatrix_x4<false>(af, qs + (warp * 16 + arow.row) * kP + ks_ * 16 + arow.col);
      }
#pragma unroll
      for (int nj = 0; nj < kNT; nj += 2) {
        uint32_t r[4];
        ptx::ldmatrix_x4<false>(r, kt + (nj * 8 + brow.row) * kP + ks_ * 16 + brow.col);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        ptx::mma_m16n8k16<T>(s[nj], af, b0);
        ptx::mma_m16n8k16<T>(s[nj + 1], af, b1);
      }
    }
    // Scale (log2 domain), softcap, mask; the tile's row maxima.
    const int64_t j0 = n * kBlockN;
    const bool edge = j0 < kr0.lo || j0 < kr1.lo || j0 + kBlockN - 1 > kr0.hi || j0 + kBlockN - 1 > kr1.hi;
    float mx[2] = {m[0], m[1]};
#pragma unroll
    for (int nj = 0; nj < kNT; ++nj)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[nj][e];
        x = capped ? cap_out * tanhf(x * cap_in) : x * sl2;
        if (edge) {
          const int64_t j = j0 + nj * 8 + 2 * t4 + (e & 1);
          const KeyRange& kr = e < 2 ? kr0 : kr1;
          if (j < kr.lo || j > kr.hi) x = -INFINITY;
        }
        s[nj][e] = x;
        mx[e / 2] = fmaxf(mx[e / 2], x);
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
    }
    // Rescale by exp2(m_old - m_new); a row with nothing attended yet keeps m = -inf and uses 0
    // as its reference so that exp2 never sees -inf - -inf.
    float use[2], corr[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      use[r] = mx[r] == -INFINITY ? 0.f : mx[r];
      corr[r] = attn::fast_exp2(m[r] - use[r]);
      m[r] = mx[r];
      l[r] *= corr[r];
    }
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[dt][e] *= corr[e / 2];
    // P = exp2(s - m), its row sums, and P as A fragments (two key blocks of 8 per k16 step).
    uint32_t pf[kBlockN / 16][4];
#pragma unroll
    for (int nj = 0; nj < kNT; ++nj) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[e] = attn::fast_exp2(s[nj][e] - use[e / 2]);
        l[e / 2] += p[e];
      }
      pf[nj / 2][(nj % 2) * 2 + 0] = pack2(p[0], p[1], T{});
      pf[nj / 2][(nj % 2) * 2 + 1] = pack2(p[2], p[3], T{});
    }
    // O += P V: k = the tile's keys, n = D.
#pragma unroll
    for (int kk = 0; kk < kBlockN / 16; ++kk) {
#pragma unroll
      for (int dt = 0; dt < kDT; dt += 2) {
        uint32_t r[4];
        ptx::ldmatrix_x4<true>(r, vt + (kk * 16 + vrow.row) * kP + dt * 8 + vrow.col);
        const uint32_t b0[2] = {r[0], r[1]}, b1[2] = {r[2], r[3]};
        ptx::mma_m16n8k16<T>(o[dt], pf[kk], b0);
        ptx::mma_m16n8k16<T>(o[dt + 1], pf[kk], b1);
      }
    }
    __syncthreads();  // the slot is refilled by the next iteration's load
  }
  ptx::cp_async_wait<0>();

  // Row sums across the 4 lanes of a row, then O / l and lse = (m + log2 l) ln 2.
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  // thd: the sequence re-read rather than kept live through the loop.
  AttnSeq out_seq = seq;
  if constexpr (kVarlen) out_seq = attn_seq(a, b);
  T* O = static_cast<T*>(a.out) + b * a.so.b + out_seq.q0 * a.so.s + h * a.so.h;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t row = r ? r1 : r0;
    if (row >= out_seq.sq) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;
    T* orow = O + row * a.so.s + 2 * t4;
#pragma unroll
    for (int dt = 0; dt < kDT; ++dt)
      *reinterpret_cast<uint32_t*>(orow + dt * 8) = pack2(o[dt][2 * r] * inv, o[dt][2 * r + 1] * inv, T{});
    if (t4 == 0)
      a.lse_out[a.lse_index(b, h, out_seq.q0 + row)] = l[r] > 0.f ? (m[r] + log2f(l[r])) * kLn2 : -INFINITY;
  }
}

template <class T, int kD>
void launch_typed(const AttentionArgs& a, cudaStream_t stream) {
  auto kernel = attn_v03_kernel<T, kD, false>;
  if constexpr (kD <= 96) {
    if (a.cu_q) kernel = attn_v03_kernel<T, kD, true>;
  } else {
    if (a.cu_q) HK_THROW(kNotSupported, "attention/v03_fa2_mma_sync: thd with D = ", kD);
  }
  constexpr size_t smem = Smem<kD>::kBytes;
  allow_dynamic_smem(kernel, smem);
  dim3 grid(static_cast<unsigned>(ceil_div(a.seqlen_q, kBlockM)), static_cast<unsigned>(a.heads_q),
            static_cast<unsigned>(a.batch));
  kernel<<<grid, kThreads, smem, stream>>>(a);
  HK_CHECK_LAUNCH("attn_v03_kernel");
}

void attention_v03_launch(const AttentionArgs& a, cudaStream_t stream) {
  attn::dispatch_16bit(a.dtype, "attention/v03_fa2_mma_sync", [&](auto t) {
    using T = decltype(t);
    switch (a.head_dim) {
      case 32: launch_typed<T, 32>(a, stream); return;
      case 64: launch_typed<T, 64>(a, stream); return;
      case 96: launch_typed<T, 96>(a, stream); return;
      case 128: launch_typed<T, 128>(a, stream); return;
      default: HK_THROW(kNotSupported, "attention/v03_fa2_mma_sync: D = ", a.head_dim);
    }
  });
}

std::string attention_v03_supports(const AttentionProblem& p) {
  if (p.dtype == DType::kF8E4M3) return "16-bit inputs (e4m3: v10_fp8_forward)";
  if (p.backward) return "forward only (the backward is v04_fa2_backward)";
  const int64_t d = p.head_dim;
  if (d != 32 && d != 64 && d != 96 && d != 128)
    return "head dim " + std::to_string(d) + " is not one of 32, 64, 96, 128 (instantiated tile shapes)";
  if (std::string why = p.rows_16b(); !why.empty()) return why;
  if (p.batch > 65535 || p.heads_q > 65535) return "B and Hq must be at most 65535 (grid z and y)";
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0) return "empty problem (an empty grid): the general rung";
  if (p.seqlen_q > (int64_t(1) << 31) - kBlockM) return "Sq too large for the grid";
  if (p.is_varlen() && d > 96)
    return "variable length (thd) is instantiated for D <= 96 only: at D = 128 the per-sequence lengths spill "
           "registers, so the build leaves that kernel out (v05 serves it, else v02)";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v03_fa2_mma_sync",
                    "FlashAttention-2 forward: 64-row Q tiles, mma.sync m16n8k16 + ldmatrix, cp.async K/V ring, "
                    "online softmax in registers (exp2), P reused as the A operand",
                    80, kFlagProduction, attention_v03_supports, attention_v03_launch);

}  // namespace hk::attention_v03_fa2_mma_sync
