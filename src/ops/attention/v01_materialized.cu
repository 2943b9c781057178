// attention/v01_materialized.cu
//
// Rung 1 on the GPU: attention as eager PyTorch computes it. Forward is three kernels over an f32
// scratch of B x Hq x Sq x Sk scores: S = scale Q K^T (softcap, mask: -inf), a row softmax that
// turns S into P in place and writes lse, and O = P V. Backward materialises P and dS the same
// way (P from lse, dP = dO V^T and Delta = rowsum(dO o O) per element, dS = P (dP - Delta)),
// then dQ = scale dS K, and dK = scale dS^T Q, dV = P^T dO summed over the query heads of each
// kv head's group. One thread per output element, plain loops: the simplest correct kernels,
// the baseline every later rung is measured against (the family's kFlagBaseline: eager attention
// is what a framework without a fused kernel runs). Memory: 4 B Hq Sq Sk bytes (forward) and
// twice that (backward) of scratch — 8.6 GB for B = 2, Hq = 16 at S = 8192.
// Needs: nothing beyond the contract (ladder-only: the public op never runs it).
// Run:   hk bench attention --variant v01_materialized --shape 2048x128x1
#include <cuda_runtime.h>

#include <cmath>

#include "attention/attn_common.cuh"
#include "common/stream_scratch.hpp"

namespace hk::attention_v01_materialized {
namespace {

constexpr int kThreads = 256;
constexpr float kNegInf = -INFINITY;

// Grid-stride loop over n items.
#define HK_ATTN_FOR(idx, n) \
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < (n); idx += int64_t(gridDim.x) * blockDim.x)

template <class T>
__device__ float dot_rows(const T* x, const T* y, int64_t n) {
  float s = 0.f;
  for (int64_t d = 0; d < n; ++d) s += to_f32(x[d]) * to_f32(y[d]);
  return s;
}

// Decodes a flat (b, h, i, j) index of the [B, Hq, Sq, Sk] scratch.
struct Bhij {
  int64_t b, h, i, j;
};
__device__ __forceinline__ Bhij bhij(int64_t e, const AttentionArgs& a) {
  Bhij r;
  r.j = e % a.seqlen_k;
  e /= a.seqlen_k;
  r.i = e % a.seqlen_q;
  e /= a.seqlen_q;
  r.h = e % a.heads_q;
  r.b = e / a.heads_q;
  return r;
}

template <class T>
__global__ void attn_v01_scores(const AttentionArgs a, float* s) {
  const int64_t n = a.batch * a.heads_q * a.seqlen_q * a.seqlen_k, G = a.heads_q / a.heads_kv;
  HK_ATTN_FOR(e, n) {
    const Bhij x = bhij(e, a);
    const KeyRange kr = attn_key_range(x.i, a.seqlen_q, a.seqlen_k, a.window_left, a.window_right);
    float v = kNegInf;
    if (x.j >= kr.lo && x.j <= kr.hi) {
      const T* q = attn::row_ptr(static_cast<const T*>(a.q), a.sq, x.b, x.i, x.h);
      const T* k = attn::row_ptr(static_cast<const T*>(a.k), a.sk, x.b, x.j, x.h / G);
      v = attn::score(dot_rows(q, k, a.head_dim), a.scale, a.softcap);
    }
    s[e] = v;
  }
}

// One warp per row of S: P = exp(S - max) / sum in place, lse = max + log(sum); a row of -inf
// (every key masked) becomes zeros and lse = -inf.
__global__ void attn_v01_softmax(const AttentionArgs a, float* s) {
  const int64_t rows = a.batch * a.heads_q * a.seqlen_q, Sk = a.seqlen_k;
  const int lane = threadIdx.x % 32;
  for (int64_t r = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32; r < rows;
       r += int64_t(gridDim.x) * blockDim.x / 32) {
    float* row = s + r * Sk;
    float m = kNegInf;
    for (int64_t j = lane; j < Sk; j += 32) m = fmaxf(m, row[j]);
    m = attn::warp_max(m);
    float sum = 0.f;
    if (m != kNegInf)
      for (int64_t j = lane; j < Sk; j += 32) sum += expf(row[j] - m);
    sum = attn::warp_sum(sum);
    const float inv = sum > 0.f ? 1.f / sum : 0.f;
    for (int64_t j = lane; j < Sk; j += 32) row[j] = sum > 0.f ? expf(row[j] - m) * inv : 0.f;
    if (lane == 0) a.lse_out[r] = sum > 0.f ? m + logf(sum) : kNegInf;
  }
}

template <class T>
__global__ void attn_v01_pv(const AttentionArgs a, const float* p) {
  const int64_t D = a.head_dim, n = a.batch * a.heads_q * a.seqlen_q * D, G = a.heads_q / a.heads_kv;
  HK_ATTN_FOR(e, n) {
    const int64_t d = e % D, r = e / D, i = r % a.seqlen_q, h = (r / a.seqlen_q) % a.heads_q,
                  b = r / (a.seqlen_q * a.heads_q);
    const float* prow = p + r * a.seqlen_k;
    float acc = 0.f;
    for (int64_t j = 0; j < a.seqlen_k; ++j)
      acc += prow[j] * to_f32(attn::row_ptr(static_cast<const T*>(a.v), a.sv, b, j, h / G)[d]);
    attn::row_ptr(static_cast<T*>(a.out), a.so, b, i, h)[d] = from_f32<T>(acc);
  }
}

// ---- backward --------------------------------------------------------------------------------

template <class T>
__global__ void attn_v01_delta(const AttentionArgs a, float* delta) {
  const int64_t n = a.batch * a.heads_q * a.seqlen_q;
  HK_ATTN_FOR(r, n) {
    const int64_t i = r % a.seqlen_q, h = (r / a.seqlen_q) % a.heads_q, b = r / (a.seqlen_q * a.heads_q);
    delta[r] = dot_rows(attn::row_ptr(static_cast<const T*>(a.dout), a.sdo, b, i, h),
                        attn::row_ptr(static_cast<const T*>(a.o), a.so, b, i, h), a.head_dim);
  }
}

template <class T>
__global__ void attn_v01_p_ds(const AttentionArgs a, const float* delta, float* p, float* ds) {
  const int64_t n = a.batch * a.heads_q * a.seqlen_q * a.seqlen_k, G = a.heads_q / a.heads_kv;
  HK_ATTN_FOR(e, n) {
    const Bhij x = bhij(e, a);
    const KeyRange kr = attn_key_range(x.i, a.seqlen_q, a.seqlen_k, a.window_left, a.window_right);
    float pv = 0.f, dsv = 0.f;
    if (x.j >= kr.lo && x.j <= kr.hi) {
      const T* q = attn::row_ptr(static_cast<const T*>(a.q), a.sq, x.b, x.i, x.h);
      const T* k = attn::row_ptr(static_cast<const T*>(a.k), a.sk, x.b, x.j, x.h / G);
      const T* v = attn::row_ptr(static_cast<const T*>(a.v), a.sv, x.b, x.j, x.h / G);
      const T* dout = attn::row_ptr(static_cast<const T*>(a.dout), a.sdo, x.b, x.i, x.h);
      float t = 0.f;
      const float s = attn::score(dot_rows(q, k, a.head_dim), a.scale, a.softcap, &t);
      const int64_t r = e / a.seqlen_k;
      pv = expf(s - a.lse_in[r]);
      dsv = pv * (dot_rows(dout, v, a.head_dim) - delta[r]);
      if (a.softcap > 0.f) dsv *= 1.f - t * t;
    }
    p[e] = pv;
    ds[e] = dsv;
  }
}

template <class T>
__global__ void attn_v01_dq(const AttentionArgs a, const float* ds) {
  const int64_t D = a.head_dim, n = a.batch * a.heads_q * a.seqlen_q * D, G = a.heads_q / a.heads_kv;
  HK_ATTN_FOR(e, n) {
    const int64_t d = e % D, r = e / D, i = r % a.seqlen_q, h = (r / a.seqlen_q) % a.heads_q,
                  b = r / (a.seqlen_q * a.heads_q);
    const float* row = ds + r * a.seqlen_k;
    float acc = 0.f;
    for (int64_t j = 0; j < a.seqlen_k; ++j)
      acc += row[j] * to_f32(attn::row_ptr(static_cast<const T*>(a.k), a.sk, b, j, h / G)[d]);
    attn::row_ptr(static_cast<T*>(a.out), a.sdq, b, i, h)[d] = from_f32<T>(a.scale * acc);
  }
}

template <class T>
__global__ void attn_v01_dkv(const AttentionArgs a, const float* p, const float* ds) {
  const int64_t D = a.head_dim, n = a.batch * a.heads_kv * a.seqlen_k * D, G = a.heads_q / a.heads_kv;
  HK_ATTN_FOR(e, n) {
    const int64_t d = e % D, c = e / D, j = c % a.seqlen_k, hk = (c / a.seqlen_k) % a.heads_kv,
                  b = c / (a.seqlen_k * a.heads_kv);
    float dk = 0.f, dv = 0.f;
    for (int64_t h = hk * G; h < (hk + 1) * G; ++h)
      for (int64_t i = 0; i < a.seqlen_q; ++i) {
        const int64_t at = ((b * a.heads_q + h) * a.seqlen_q + i) * a.seqlen_k + j;
        dk += ds[at] * to_f32(attn::row_ptr(static_cast<const T*>(a.q), a.sq, b, i, h)[d]);
        dv += p[at] * to_f32(attn::row_ptr(static_cast<const T*>(a.dout), a.sdo, b, i, h)[d]);
      }
    attn::row_ptr(static_cast<T*>(a.dk), a.sdk, b, j, hk)[d] = from_f32<T>(a.scale * dk);
    attn::row_ptr(static_cast<T*>(a.dv), a.sdv, b, j, hk)[d] = from_f32<T>(dv);
  }
}

template <class Kernel, class... Args>
void launch(Kernel k, int64_t items, int threads, cudaStream_t stream, const char* name, Args... args) {
  if (items <= 0) return;
  k<<<grid_for(ceil_div(items, threads)), threads, 0, stream>>>(args...);
  HK_CHECK_LAUNCH(name);
}

void attention_v01_launch(const AttentionArgs& a, cudaStream_t stream) {
  attn::dispatch_16bit(a.dtype, "attention/v01_materialized", [&](auto t) {
    using T = decltype(t);
    const int64_t rows = a.batch * a.heads_q * a.seqlen_q, scores = rows * a.seqlen_k;
    if (!a.backward) {
      StreamScratch s(scores * int64_t(sizeof(float)), stream);
      launch(attn_v01_scores<T>, scores, kThreads, stream, "attn_v01_scores", a, s.as<float>());
      launch(attn_v01_softmax, rows * 32, kThreads, stream, "attn_v01_softmax", a, s.as<float>());
      launch(attn_v01_pv<T>, rows * a.head_dim, kThreads, stream, "attn_v01_pv", a,
             static_cast<const float*>(s.as<float>()));
      return;
    }
    StreamScratch delta(rows * int64_t(sizeof(float)), stream), p(scores * int64_t(sizeof(float)), stream),
        ds(scores * int64_t(sizeof(float)), stream);
    launch(attn_v01_delta<T>, rows, kThreads, stream, "attn_v01_delta", a, delta.as<float>());
    launch(attn_v01_p_ds<T>, scores, kThreads, stream, "attn_v01_p_ds", a, static_cast<const float*>(delta.as<float>()),
           p.as<float>(), ds.as<float>());
    launch(attn_v01_dq<T>, rows * a.head_dim, kThreads, stream, "attn_v01_dq", a,
           static_cast<const float*>(ds.as<float>()));
    launch(attn_v01_dkv<T>, a.batch * a.heads_kv * a.seqlen_k * a.head_dim, kThreads, stream, "attn_v01_dkv", a,
           static_cast<const float*>(p.as<float>()), static_cast<const float*>(ds.as<float>()));
  });
}

std::string attention_v01_supports(const AttentionProblem& p) {
  if (p.dtype == DType::kF8E4M3) return "16-bit inputs (e4m3: v10_fp8_forward)";
  if (p.is_varlen()) return "fixed-length layouts only (bshd, bhsd): the packed thd layout runs on v02 and up";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(AttentionProblem, AttentionArgs, "attention", "v01_materialized",
                    "eager attention: S = QK^T, softmax, PV as separate kernels over an f32 B*Hq*Sq*Sk scratch",
                    80, kFlagReference | kFlagBaseline, attention_v01_supports, attention_v01_launch);

}  // namespace hk::attention_v01_materialized
