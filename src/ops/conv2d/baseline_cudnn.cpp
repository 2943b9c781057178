// conv2d/baseline_cudnn.cpp
//
// Baseline: cuDNN's legacy convolution API — cudnnConvolutionForward / BackwardData /
// BackwardFilter with the algorithm cudnnGet*Algorithm_v7's heuristics rank first, as
// torch.nn.functional.conv2d runs it with torch.backends.cudnn.benchmark off. f32 runs FMA
// math only (no TF32: the family's f32 tolerance is f32's); f16 and bf16 run tensor-op math
// with f32 compute. Bias is one elementwise pass after the forward (as PyTorch adds it). The
// descriptors, the algorithm choice and the workspace size are built once per problem and device
// (a Plan). The workspace is the stream's cached scratch (core/scratch.hpp).
// Needs: a build with cuDNN; symmetric padding (cuDNN has one pad per dim); every tensor below
// 2^31 elements; a 16-bit filter gradient ungrouped; otherwise supports() says why. Also the dispatch's general route.
// Run:   hk bench conv2d --variant baseline_cudnn --shape 64x256x56x56_256x3x3
#include <algorithm>
#include <climits>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include <cuda_runtime_api.h>

#include "hk/device.hpp"
#include "hk/error.hpp"
#include "conv2d/conv2d_op.hpp"
#include "core/cublas.hpp"
#include "core/capture.hpp"  // RelaxedCapture
#include "core/scratch.hpp"

#ifdef HK_HAVE_CUDNN
#include <cudnn.h>
#endif

namespace hk {
namespace {

#ifdef HK_HAVE_CUDNN

void check(cudnnStatus_t s, const char* what) {
  if (s != CUDNN_STATUS_SUCCESS) HK_THROW(kCuda, "conv2d/baseline_cudnn: ", what, " failed: ", cudnnGetErrorString(s));
}

struct Handles {
  std::mutex mu;
  std::map<std::pair<std::thread::id, int>, cudnnHandle_t> by_thread_device;
  std::map<std::pair<std::string, int>, std::shared_ptr<const struct Plan>> plans;  // (key, device) -> plan
};
// Never destroyed (as the cuBLAS handles): hk::release_cached_resources() frees them.
Handles& handles() {
  static auto* h = [] {
    auto* s = new Handles;
    detail::on_release([s] {
      std::lock_guard<std::mutex> lock(s->mu);
      for (auto& [key, h] : s->by_thread_device) cudnnDestroy(h);
      s->by_thread_device.clear();
      s->plans.clear();
    });
    return s;
  }();
  return *h;
}

// A handle for the calling thread on the current device (a cuDNN handle is not thread-safe).
cudnnHandle_t handle(int dev) {
  Handles& s = handles();
  std::lock_guard<std::mutex> lock(s.mu);
  auto [it, fresh] = s.by_thread_device.try_emplace({std::this_thread::get_id(), dev}, nullptr);
  if (fresh) {
    detail::RelaxedCapture relaxed;  // the handle allocates; a first call may come under a graph capture
    cudnnStatus_t st = cudnnCreate(&it->second);
    if (st != CUDNN_STATUS_SUCCESS) {
      s.by_thread_device.erase(it);
      check(st, "cudnnCreate");
    }
  }
  return it->second;
}

cudnnDataType_t data_type(DType dt) {
  switch (dt) {
    case DType::kF32: return CUDNN_DATA_FLOAT;
    case DType::kF16: return CUDNN_DATA_HALF;
    default: return CUDNN_DATA_BFLOAT16;
  }
}

// The descriptors of one call, destroyed with it.
struct Descs {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  explicit Descs(const Conv2dArgs& a) {
    const cudnnTensorFormat_t fmt = a.prm.layout == ConvLayout::kNHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
    const cudnnDataType_t dt = data_type(a.dtype);
    check(cudnnCreateTensorDescriptor(&x), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&y), "cudnnCreateTensorDescriptor");
    check(cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check(cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    check(cudnnSetTensor4dDescriptor(x, fmt, dt, int(a.n), int(a.c), int(a.h), int(a.w_in)), "cudnnSetTensor4dDescriptor(x)");
    check(cudnnSetTensor4dDescriptor(y, fmt, dt, int(a.n), int(a.cout), int(a.oh), int(a.ow)), "cudnnSetTensor4dDescriptor(y)");
    check(cudnnSetFilter4dDescriptor(w, dt, fmt, int(a.cout), int(a.c / a.prm.groups), int(a.kh), int(a.kw)),
          "cudnnSetFilter4dDescriptor");
    check(cudnnSetConvolution2dDescriptor(conv, int(a.prm.pad_top), int(a.prm.pad_left), int(a.prm.stride_h),
                                          int(a.prm.stride_w), int(a.prm.dilation_h), int(a.prm.dilation_w),
                                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    check(cudnnSetConvolutionGroupCount(conv, int(a.prm.groups)), "cudnnSetConvolutionGroupCount");
  }
  ~Descs() {
    if (conv) cudnnDestroyConvolutionDescriptor(conv);
    if (w) cudnnDestroyFilterDescriptor(w);
    if (y) cudnnDestroyTensorDescriptor(y);
    if (x) cudnnDestroyTensorDescriptor(x);
  }
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
};

// What a call needs beyond its pointers, built once per problem and device: the descriptors
// (read-only once built, so calls on several threads share them), the heuristics' algorithm and
// math type, and the workspace size. Rebuilding these on every call cost hundreds of
// microseconds of host time per call, more than the small layers' kernels take.
struct Plan {
  explicit Plan(const Conv2dArgs& a) : d(a) {}
  Descs d;
  int algo = -1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  size_t ws_bytes = 0;
};

// The first algorithm of the heuristics' list that runs (f32: without tensor-op math, i.e.
// TF32) and is not in `avoid` (unless nothing else runs); algo -1 when there is none.
template <class Perf>
std::pair<int, cudnnMathType_t> pick(const Perf* perf, int count, DType dt, std::initializer_list<int> avoid = {}) {
  std::pair<int, cudnnMathType_t> fallback{-1, CUDNN_DEFAULT_MATH};
  for (int i = 0; i < count; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    if (dt == DType::kF32 && perf[i].mathType != CUDNN_DEFAULT_MATH && perf[i].mathType != CUDNN_FMA_MATH) continue;
    const std::pair<int, cudnnMathType_t> c{int(perf[i].algo), perf[i].mathType};
    if (std::find(avoid.begin(), avoid.end(), c.first) == avoid.end()) return c;
    if (fallback.first < 0) fallback = c;
  }
  return fallback;
}

// The plan for `a` on device `dev`, cached per problem and device.
std::shared_ptr<const Plan> plan_for(const Conv2dArgs& a, cudnnHandle_t h, int dev) {
  // The cache key: every field the descriptors carry.
  std::string key;
  for (int64_t v : {int64_t(a.dir), a.n, a.c, a.h, a.w_in, a.cout, a.kh, a.kw, a.prm.stride_h, a.prm.stride_w,
                    a.prm.pad_top, a.prm.pad_left, a.prm.dilation_h, a.prm.dilation_w, a.prm.groups,
                    int64_t(a.prm.layout), int64_t(a.dtype)})
    key += std::to_string(v) + "_";
  Handles& s = handles();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.plans.find({key, dev});
    if (it != s.plans.end()) return it->second;
  }
  auto plan = std::make_shared<Plan>(a);
  const Descs& d = plan->d;
  check(cudnnSetConvolutionMathType(d.conv, a.dtype == DType::kF32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH),
        "cudnnSetConvolutionMathType");
  int got = 0;
  std::pair<int, cudnnMathType_t> choice;
  if (a.dir == ConvDirection::kForward) {
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    check(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, perf),
          "cudnnGetConvolutionForwardAlgorithm_v7");
    choice = pick(perf, got, a.dtype);
  } else if (a.dir == ConvDirection::kBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    check(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                      &got, perf),
          "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    choice = pick(perf, got, a.dtype);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                        &got, perf),
          "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    // 16-bit: the two non-deterministic algorithms add partial sums into the 16-bit filter
    // gradient; on a grouped, dilated f16 problem (C8 33x65, groups 8) their result was 1%
    // off the fp64 one, 4x the f32-accumulation tolerance (H200, cuDNN 9, 2026-12-02).
    if (a.dtype == DType::kF32)
      choice = pick(perf, got, a.dtype);
    else
      choice = pick(perf, got, a.dtype, {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3});
  }
  plan->algo = choice.first;
  plan->math = choice.second;
  if (plan->algo >= 0) {
    check(cudnnSetConvolutionMathType(d.conv, plan->math), "cudnnSetConvolutionMathType");
    if (a.dir == ConvDirection::kForward)
      check(cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, cudnnConvolutionFwdAlgo_t(plan->algo),
                                                    &plan->ws_bytes),
            "cudnnGetConvolutionForwardWorkspaceSize");
    else if (a.dir == ConvDirection::kBackwardData)
      check(cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x,
                                                         cudnnConvolutionBwdDataAlgo_t(plan->algo), &plan->ws_bytes),
            "cudnnGetConvolutionBackwardDataWorkspaceSize");
    else
      check(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w,
                                                           cudnnConvolutionBwdFilterAlgo_t(plan->algo), &plan->ws_bytes),
            "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  }
  std::lock_guard<std::mutex> lock(s.mu);
  return s.plans.try_emplace({key, dev}, std::move(plan)).first->second;
}

void conv2d_baseline_cudnn_launch(const Conv2dArgs& a, cudaStream_t stream) {
  int dev = 0;
  HK_CHECK_CUDA(cudaGetDevice(&dev));
  cudnnHandle_t h = handle(dev);
  check(cudnnSetStream(h, stream), "cudnnSetStream");
  const std::shared_ptr<const Plan> plan = plan_for(a, h, dev);
  if (plan->algo < 0) HK_THROW(kNotSupported, "conv2d/baseline_cudnn: cuDNN's heuristics offer no algorithm");
  const Descs& d = plan->d;
  const size_t ws_bytes = plan->ws_bytes;
  const auto choice = std::make_pair(plan->algo, plan->math);
  // The stream's cached workspace, not an allocation per call (core/scratch.hpp). The host time
  // left per call (300-480 us on the H200, 2026-12-03, against ~40 us for F.conv2d) is cuDNN's
  // legacy API itself: PyTorch runs cached execution plans of the graph API.
  std::unique_ptr<detail::StreamWorkspace> workspace;
  if (ws_bytes) workspace = std::make_unique<detail::StreamWorkspace>(stream, "conv2d_cudnn_workspace", ws_bytes);
  void* ws = workspace ? workspace->get() : nullptr;

  const float one = 1.f, zero = 0.f;
  if (a.dir == ConvDirection::kForward) {
    check(cudnnConvolutionForward(h, &one, d.x, a.x, d.w, a.w, d.conv, cudnnConvolutionFwdAlgo_t(choice.first), ws,
                                  ws_bytes, &zero, d.y, a.out),
          "cudnnConvolutionForward");
    if (a.bias) conv2d_add_bias(a, stream);
  } else if (a.dir == ConvDirection::kBackwardData) {
    check(cudnnConvolutionBackwardData(h, &one, d.w, a.w, d.y, a.dy, d.conv, cudnnConvolutionBwdDataAlgo_t(choice.first),
                                       ws, ws_bytes, &zero, d.x, a.out),
          "cudnnConvolutionBackwardData");
  } else {
    check(cudnnConvolutionBackwardFilter(h, &one, d.x, a.x, d.y, a.dy, d.conv,
                                         cudnnConvolutionBwdFilterAlgo_t(choice.first), ws, ws_bytes, &zero, d.w, a.out),
          "cudnnConvolutionBackwardFilter");
  }
}

std::string conv2d_baseline_cudnn_supports(const Conv2dProblem& p) {
  if (p.prm.pad_top != p.prm.pad_bottom || p.prm.pad_left != p.prm.pad_right)
    return "cuDNN takes symmetric padding only, got top/bottom " + std::to_string(p.prm.pad_top) + "/" +
           std::to_string(p.prm.pad_bottom) + ", left/right " + std::to_string(p.prm.pad_left) + "/" +
           std::to_string(p.prm.pad_right);
  for (int64_t v : {p.n * p.c * p.h * p.w, p.n * p.cout * p.oh() * p.ow(), p.cout * p.cin_per_group() * p.kh * p.kw})
    if (v > INT_MAX) return "cuDNN's 4-d descriptors take tensors below 2^31 elements, got " + std::to_string(v);
  // A grouped 16-bit filter gradient came back 0.7% off the fp64 one (f16, C8 33x65, groups 8,
  // dilation 2: 23 of 72 values past the f32-accumulation tolerance), the same with the two
  // atomic algorithms excluded (H200, cuDNN 9, 2026-12-02): partial sums kept in the 16-bit type.
  if (p.dir == ConvDirection::kBackwardWeight && p.dtype != DType::kF32 && p.prm.groups > 1)
    return "cuDNN's grouped 16-bit filter gradient loses f32 accuracy (partial sums in the 16-bit type)";
  if (!no_gpu_reason().empty()) return "";  // nothing to ask cuDNN without a device; launch would say
  // Whether cuDNN's heuristics offer an algorithm for this problem on the current device.
  Conv2dArgs a;
  a.n = p.n, a.c = p.c, a.h = p.h, a.w_in = p.w, a.cout = p.cout, a.kh = p.kh, a.kw = p.kw;
  a.oh = p.oh(), a.ow = p.ow();
  a.prm = p.prm;
  a.dtype = p.dtype;
  a.dir = p.dir;
  try {
    int dev = 0;
    HK_CHECK_CUDA(cudaGetDevice(&dev));
    if (plan_for(a, handle(dev), dev)->algo < 0) return "cuDNN's heuristics offer no algorithm for this problem";
  } catch (const Error& e) {
    return std::string("cuDNN refused the problem: ") + e.what();
  }
  return "";
}

#else  // no cuDNN in this build

void conv2d_baseline_cudnn_launch(const Conv2dArgs&, cudaStream_t) {
  HK_THROW(kNotSupported, "conv2d/baseline_cudnn: hopperkit was built without cuDNN");
}

std::string conv2d_baseline_cudnn_supports(const Conv2dProblem&) { return "hopperkit was built without cuDNN"; }

#endif

}  // namespace

HK_REGISTER_VARIANT(Conv2dProblem, Conv2dArgs, "conv2d", "baseline_cudnn",
                    "cuDNN legacy API, the heuristics' first algorithm (as F.conv2d without cudnn.benchmark)", 70,
                    kFlagBaseline | kFlagProduction, conv2d_baseline_cudnn_supports, conv2d_baseline_cudnn_launch);

}  // namespace hk
