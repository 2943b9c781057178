// row_sum/baseline_cub_segmented.cu
//
// Baseline: cub::DeviceSegmentedReduce::Reduce with + (Sum), the CUDA library path for "reduce
// each of these segments" (what a CUDA programmer reaches for before writing a kernel). Segment r is
// [r * ldx, r * ldx + T) of x (strided offsets from a counting iterator); a transform iterator
// widens each element to f32 so CUB accumulates in f32 (summing bf16 in bf16 would lose the
// sum past 256 terms), and a transform output iterator rounds the f32 result to the dtype.
// CUB assigns one block per segment: few long rows starve the GPU, as v01 does.
// Needs: at most 2^31-1 rows (CUB's segment count is an int).
// Run:   hk bench row_sum --variant baseline_cub_segmented --shape 4x67108864
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>
#include <thrust/iterator/transform_output_iterator.h>

#include <cub/device/device_segmented_reduce.cuh>

#include "common/launch.cuh"
#include "common/vec.cuh"
#include "row_sum/row_sum_op.hpp"
#include "core/scratch.hpp"

namespace hk::row_sum_baseline_cub_segmented {
namespace {

template <class T>
struct WidenToF32 {
  __device__ float operator()(T v) const { return to_f32(v); }
};

template <class T>
struct NarrowFromF32 {
  __device__ T operator()(float v) const { return from_f32<T>(v); }
};

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};

struct RowOffset {
  int64_t ld, shift;
  __host__ __device__ int64_t operator()(int64_t r) const { return r * ld + shift; }
};

template <class T>
void launch_typed(const RowSumArgs& a, cudaStream_t stream) {
  auto in = thrust::make_transform_iterator(static_cast<const T*>(a.x), WidenToF32<T>{});
  thrust::counting_iterator<int64_t> row(0);
  auto begins = thrust::make_transform_iterator(row, RowOffset{a.ldx, 0});
  auto ends = thrust::make_transform_iterator(row, RowOffset{a.ldx, a.cols});
  // The output iterator rounds CUB's f32 result to T on store; the f32 initial value and
  // operator make CUB's accumulator f32.
  auto y = thrust::make_transform_output_iterator(static_cast<T*>(a.y), NarrowFromF32<T>{});
  const int segments = static_cast<int>(a.rows);
  size_t temp_bytes = 0;
  HK_CHECK_CUDA(cub::DeviceSegmentedReduce::Reduce(nullptr, temp_bytes, in, y, segments, begins, ends, Add{}, 0.f, stream));
  detail::StreamWorkspace ws(stream, "row_sum_cub_temp", temp_bytes);
  void* temp = ws.get();
  HK_CHECK_CUDA(cub::DeviceSegmentedReduce::Reduce(temp, temp_bytes, in, y, segments, begins, ends, Add{}, 0.f, stream));
  HK_CHECK_LAUNCH("cub::DeviceSegmentedReduce::Reduce");
}

void row_sum_cub_launch(const RowSumArgs& a, cudaStream_t stream) {
  dispatch_float(a.dtype, "row_sum/baseline_cub_segmented", [&](auto t) { launch_typed<decltype(t)>(a, stream); });
}

std::string row_sum_cub_supports(const RowSumProblem& p) {
  if (p.rows > 0x7FFFFFFF) return "CUB's segment count is an int, got " + std::to_string(p.rows) + " rows";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(RowSumProblem, RowSumArgs, "row_sum", "baseline_cub_segmented",
                    "cub::DeviceSegmentedReduce with +, strided row offsets, f32 accumulation", 70,
                    kFlagBaseline | kFlagProduction, row_sum_cub_supports, row_sum_cub_launch);

}  // namespace hk::row_sum_baseline_cub_segmented
