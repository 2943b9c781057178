// gemm_fp8/quantize.cu — hk::quantize_fp8: f32 / bf16 / f16 [rows, cols] into fp8 data and f32
// scales, per tensor, per row, or per 1 x 128 / 128 x 128 block (the layouts hk::gemm_fp8 takes).
//
// Three passes over groups of 128 consecutive elements of a row (a "segment", which never
// straddles two scaling groups): the segments' amax into the scales buffer (atomicMax on the
// f32 bit patterns, which order like the values for non-negative floats; per-tensor reduces a
// warp first), amax -> scale in place, then data = saturate(round(x / scale)). Division and
// conversion are IEEE round-to-nearest (__fdiv_rn, satfinite cvt), so the result is the host
// quantiser's (quantize_fp8_host) bit for bit.
#include <cuda_fp8.h>

#include "common/launch.cuh"
#include "common/vec.cuh"
#include "gemm_fp8/gemm_fp8_op.hpp"

namespace hk {
namespace {

constexpr int kSeg = 128;  // elements of a row one thread reduces / quantises

struct Groups {
  int64_t rows, cols, segs_per_row, scols;  // scols: groups per row of the scale grid
  int block_rows;
  Fp8Scaling scaling;
  __device__ __forceinline__ int64_t of(int64_t r, int64_t seg) const {
    if (scaling == Fp8Scaling::kTensor) return 0;
    if (scaling == Fp8Scaling::kRow) return r;
    return (r / block_rows) * scols + seg;  // a segment is one 128-wide block column
  }
};

template <class T>
__global__ void quantize_fp8_amax_kernel(const T* __restrict__ x, float* __restrict__ scales, Groups gr) {
  const int64_t items = gr.rows * gr.segs_per_row;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i - threadIdx.x % 32 < items;
       i += int64_t(gridDim.x) * blockDim.x) {
    float amax = 0.0f;
    int64_t g = 0;
    if (i < items) {
      const int64_t r = i / gr.segs_per_row, seg = i % gr.segs_per_row;
      const int64_t c0 = seg * kSeg, c1 = min(gr.cols, c0 + kSeg);
      const T* row = x + r * gr.cols;
      for (int64_t c = c0; c < c1; ++c) amax = fmaxf(amax, fabsf(to_f32(row[c])));
      g = gr.of(r, seg);
    }
    if (gr.scaling == Fp8Scaling::kTensor) {  // one group: a warp's max, one atomic
      for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
      if (threadIdx.x % 32 == 0) atomicMax(reinterpret_cast<unsigned*>(scales), __float_as_uint(amax));
    } else if (i < items) {
      atomicMax(reinterpret_cast<unsigned*>(scales + g), __float_as_uint(amax));
    }
  }
}

__global__ void quantize_fp8_scale_kernel(float* __restrict__ scales, int64_t groups, float fmax) {
  for (int64_t g = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; g < groups; g += int64_t(gridDim.x) * blockDim.x) {
    const float amax = scales[g];
    scales[g] = amax > 0.0f ? __fdiv_rn(amax, fmax) : 1.0f;
  }
}

template <class T, class Q>
__global__ void quantize_fp8_data_kernel(const T* __restrict__ x, const float* __restrict__ scales, Q* __restrict__ q,
                                         Groups gr) {
  const int64_t items = gr.rows * gr.segs_per_row;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < items; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / gr.segs_per_row, seg = i % gr.segs_per_row;
    const int64_t c0 = seg * kSeg, c1 = min(gr.cols, c0 + kSeg);
    const float s = scales[gr.of(r, seg)];
    for (int64_t c = c0; c < c1; ++c) q[r * gr.cols + c] = Q(__fdiv_rn(to_f32(x[r * gr.cols + c]), s));  // satfinite
  }
}

}  // namespace

void quantize_fp8(const TensorView& x, const TensorView& data, const TensorView& scales, Fp8Scaling scaling,
                  int block_rows, cudaStream_t stream) {
  if (x.dtype != DType::kF32 && x.dtype != DType::kBF16 && x.dtype != DType::kF16)
    HK_THROW(kType, "quantize_fp8: x is ", to_string(x.dtype), ", expected f32, bf16 or f16");
  if (data.dtype != DType::kF8E4M3 && data.dtype != DType::kF8E5M2)
    HK_THROW(kType, "quantize_fp8: data is ", to_string(data.dtype), ", expected e4m3 or e5m2");
  if (scales.dtype != DType::kF32) HK_THROW(kType, "quantize_fp8: scales is ", to_string(scales.dtype), ", expected f32");
  if (x.rank() != 2) HK_THROW(kValue, "quantize_fp8: x must be [rows, cols], got ", x.describe());
  if (data.shape != x.shape)
    HK_THROW(kValue, "quantize_fp8: data must be [", shape_to_string(x.shape), "], got [", shape_to_string(data.shape), "]");
  if (block_rows != 1 && block_rows != 128)
    HK_THROW(kValue, "quantize_fp8: block_rows must be 1 (1 x 128 tiles) or 128 (128 x 128 tiles), got ", block_rows);
  const int64_t rows = x.size(0), cols = x.size(1);
  const std::vector<int64_t> want = fp8_scale_shape(scaling, rows, cols, block_rows);
  const bool shape_ok = scaling == Fp8Scaling::kTensor ? scales.rank() <= 1 && scales.numel() == 1 : scales.shape == want;
  if (!shape_ok)
    HK_THROW(kValue, "quantize_fp8: ", to_string(scaling), "-wise scales must be [", shape_to_string(want), "], got [",
             shape_to_string(scales.shape), "]");
  for (auto [name, t] : {std::pair<const char*, const TensorView*>{"x", &x}, {"data", &data}, {"scales", &scales}}) {
    if (!t->is_contiguous()) HK_THROW(kNotSupported, "quantize_fp8: ", name, " must be contiguous, got ", t->describe());
    if (t->numel() > 0 && t->data == nullptr) HK_THROW(kValue, "quantize_fp8: ", name, " is a null pointer");
  }
  if (rows == 0 || cols == 0) return;  // nothing to quantise
  int64_t groups = 1;
  for (int64_t d : want) groups *= d;
  const Groups gr{rows, cols, ceil_div(cols, kSeg), want.size() == 2 ? want[1] : 1, block_rows, scaling};
  const int64_t items = rows * gr.segs_per_row;
  float* s = static_cast<float*>(scales.data);
  HK_CHECK_CUDA(cudaMemsetAsync(s, 0, groups * sizeof(float), stream));
  const float fmax = static_cast<float>(fp8_max_finite(data.dtype));
  dispatch_float(x.dtype, "quantize_fp8", [&](auto t) {
    using T = decltype(t);
    const T* xp = static_cast<const T*>(x.data);
    quantize_fp8_amax_kernel<T><<<grid_for(ceil_div(items, 256)), 256, 0, stream>>>(xp, s, gr);
    HK_CHECK_LAUNCH("quantize_fp8_amax_kernel");
    quantize_fp8_scale_kernel<<<grid_for(ceil_div(groups, 256)), 256, 0, stream>>>(s, groups, fmax);
    HK_CHECK_LAUNCH("quantize_fp8_scale_kernel");
    auto run = [&](auto q) {
      using Q = decltype(q);
      quantize_fp8_data_kernel<T, Q><<<grid_for(ceil_div(items, 256)), 256, 0, stream>>>(xp, s, static_cast<Q*>(data.data), gr);
      HK_CHECK_LAUNCH("quantize_fp8_data_kernel");
    };
    if (data.dtype == DType::kF8E5M2) run(__nv_fp8_e5m2{});
    else run(__nv_fp8_e4m3{});
  });
}

}  // namespace hk
