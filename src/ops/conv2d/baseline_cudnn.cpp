// conv2d/baseline_cudnn.cpp
//
// Baseline: cuDNN, as torch.nn.functional.conv2d runs it with torch.backends.cudnn.benchmark off.
// First route: the graph (backend) API — the convolution as a one-node operation graph, the first
// engine configuration (heuristics mode A, then B, then the fallback list) that finalizes and
// keeps the numerics below, its execution plan built once per problem and handle; a call is one
// variant pack and cudnnBackendExecute. Where the backend refuses a step, the legacy API:
// cudnnConvolutionForward / BackwardData / BackwardFilter with the algorithm
// cudnnGet*Algorithm_v7's heuristics rank first, descriptors and choice built once per problem and
// device (a Plan). Both: f32 runs FMA math only (no TF32: the family's f32 tolerance is f32's),
// no FFT or Winograd algorithm and no atomic (non-deterministic) filter gradient: the cuDNN
// route left 1.5e-3 absolute error in an f32 filter gradient summing 2178 products, past that
// tolerance (H200, cuDNN 9.19, 2026-12-05), where the graph API's first choice under the notes
// filtered before was a non-deterministic engine and the legacy API may pick a transform;
// f16 and bf16 run tensor-op math with f32 compute, and a 16-bit filter gradient no atomic
// (non-deterministic) algorithm. Bias is one elementwise pass after the forward (as PyTorch adds
// it). The workspace is the stream's cached scratch (core/scratch.hpp).
// Needs: a build with cuDNN; symmetric padding for the legacy API (one pad per dim), asymmetric
// where the graph API builds a plan (asked on a device); every tensor below 2^31 elements; a
// 16-bit filter gradient ungrouped; otherwise supports() says why. Also the dispatch's general
// route.
// Run:   hk bench conv2d --variant baseline_cudnn --shape 64x256x56x56_256x3x3
#include <algorithm>
#include <array>
#include <climits>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

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

struct GraphPlan;
struct Handles {
  std::mutex mu;
  std::map<std::pair<std::thread::id, int>, cudnnHandle_t> by_thread_device;
  std::map<std::pair<std::string, int>, std::shared_ptr<const struct Plan>> plans;  // (key, device) -> plan
  // (key, handle) -> the graph-API plan built with that handle; null: the backend refused it.
  std::map<std::pair<std::string, cudnnHandle_t>, std::shared_ptr<const GraphPlan>> graph_plans;
};
// Never destroyed (as the cuBLAS handles): hk::release_cached_resources() frees them, the plans
// before the handles they were built with.
Handles& handles() {
  static auto* h = [] {
    auto* s = new Handles;
    detail::on_release([s] {
      std::lock_guard<std::mutex> lock(s->mu);
      s->graph_plans.clear();
      s->plans.clear();
      for (auto& [key, h] : s->by_thread_device) cudnnDestroy(h);
      s->by_thread_device.clear();
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

// One padding per dim, as the legacy API's descriptors take it.
bool symmetric(const Conv2dParams& prm) { return prm.pad_top == prm.pad_bottom && prm.pad_left == prm.pad_right; }

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
    choice = a.dtype == DType::kF32 ? pick(perf, got, a.dtype,
                                           {CUDNN_CONVOLUTION_FWD_ALGO_FFT, CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING,
                                            CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD,
                                            CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED})
                                    : pick(perf, got, a.dtype);
  } else if (a.dir == ConvDirection::kBackwardData) {
    cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
    check(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                      &got, perf),
          "cudnnGetConvolutionBackwardDataAlgorithm_v7");
    choice = a.dtype == DType::kF32
                 ? pick(perf, got, a.dtype,
                        {CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING,
                         CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD, CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED})
                 : pick(perf, got, a.dtype);
  } else {
    cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
    check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT,
                                                        &got, perf),
          "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    // The two non-deterministic algorithms add partial sums into the filter gradient: at 16 bits
    // a grouped, dilated f16 problem (C8 33x65, groups 8) came out 1% off the fp64 result, 4x
    // the f32-accumulation tolerance (H200, cuDNN 9, 2026-12-02). f32 passes over them and over
    // the transforms (see the top of this file).
    if (a.dtype == DType::kF32)
      choice = pick(perf, got, a.dtype,
                    {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_3,
                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT_TILING,
                     CUDNN_CONVOLUTION_BWD_FILTER_ALGO_WINOGRAD_NONFUSED});
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

// ---- cuDNN's graph (backend) API ----------------------------------------------------------------
// The legacy calls above spend 210-280 us of host time per call (H200, cuDNN 9.19, measured from
// Python against F.conv2d's ~35 us): each rebuilds cuDNN's internal execution plan. PyTorch runs
// the graph API with its execution plans cached, and so does this: one operation graph (the
// single convolution node) per problem, the heuristics' first engine configuration that
// finalizes and keeps the numerics the legacy path keeps (f32 without TF32; no
// non-deterministic engine for a 16-bit filter gradient), cached per problem and handle. A call
// is one variant pack and cudnnBackendExecute. Any step the backend refuses leaves the problem on
// the legacy path.

// A backend descriptor, destroyed with its owner.
class BackendDesc {
 public:
  explicit BackendDesc(cudnnBackendDescriptorType_t type) {
    check(cudnnBackendCreateDescriptor(type, &d_), "cudnnBackendCreateDescriptor");
  }
  ~BackendDesc() {
    if (d_) cudnnBackendDestroyDescriptor(d_);
  }
  BackendDesc(const BackendDesc&) = delete;
  BackendDesc& operator=(const BackendDesc&) = delete;
  cudnnBackendDescriptor_t get() const { return d_; }
  cudnnBackendDescriptor_t* ptr() { return &d_; }
  template <class V>
  void set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count, const V* values) {
    check(cudnnBackendSetAttribute(d_, name, type, count, values), "cudnnBackendSetAttribute");
  }
  void set_desc(cudnnBackendAttributeName_t name, const BackendDesc& v) {
    cudnnBackendDescriptor_t d = v.get();
    set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
  }
  void finalize() { check(cudnnBackendFinalize(d_), "cudnnBackendFinalize"); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
};

// The unique ids of the three operands in the graph and the variant pack.
enum : int64_t { kUidX = 1, kUidW = 2, kUidY = 3 };

// A tensor in logical order (n, c, h, w) or (cout, cin, kh, kw), with its element strides.
std::unique_ptr<BackendDesc> graph_tensor(int64_t uid, cudnnDataType_t dt, std::array<int64_t, 4> dims,
                                          const std::array<int64_t, 4>& strides, int64_t align) {
  auto t = std::make_unique<BackendDesc>(CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  t->set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
  t->set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
  t->set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
  t->set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  t->set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
  t->finalize();
  return t;
}

// Everything a call needs, kept alive together: the descriptors the plan was built from, the
// plan, its workspace size.
struct GraphPlan {
  std::vector<std::unique_ptr<BackendDesc>> parts;
  std::unique_ptr<BackendDesc> plan;
  int64_t ws_bytes = 0;
};

// The global index and numerical notes of engine configuration `cfg`'s engine; false where cuDNN
// does not say.
bool engine_of(cudnnBackendDescriptor_t cfg, int64_t& index, std::vector<cudnnBackendNumericalNote_t>& notes) {
  BackendDesc engine(CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t n = 0;
  if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                               engine.ptr()) != CUDNN_STATUS_SUCCESS ||
      cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index) !=
          CUDNN_STATUS_SUCCESS)
    return false;
  notes.assign(CUDNN_NUMERICAL_NOTE_TYPE_COUNT, CUDNN_NUMERICAL_NOTE_TENSOR_CORE);
  n = 0;
  if (cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                               CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes.data()) != CUDNN_STATUS_SUCCESS)
    return false;
  notes.resize(static_cast<size_t>(n));
  return true;
}

// Whether engine configuration `cfg` keeps the numerics the legacy path keeps.
bool acceptable_engine(cudnnBackendDescriptor_t cfg, const Conv2dArgs& a) {
  int64_t index = -1;
  std::vector<cudnnBackendNumericalNote_t> notes;
  if (!engine_of(cfg, index, notes)) return false;
  for (const cudnnBackendNumericalNote_t note : notes) {
    // f32: an engine without numerical notes (no tensor cores, i.e. TF32 inputs; no FFT or
    // Winograd transform; no non-deterministic reduction), as the legacy path's choice.
    if (a.dtype == DType::kF32 && note != CUDNN_NUMERICAL_NOTE_STRICT_NAN_PROP) return false;
    // 16-bit: no reduction in reduced precision; a filter gradient without atomics (the legacy
    // path's algorithms 0 and 3, which add partial sums into the 16-bit output).
    if (a.dtype != DType::kF32 && note == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) return false;
    if (a.dtype != DType::kF32 && a.dir == ConvDirection::kBackwardWeight &&
        note == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)
      return false;
  }
  return true;
}

// The graph's one operation (the convolution of `a`'s direction over its three tensors), its
// descriptors appended to `parts` (the operation last). Needs no handle and no device: the CPU
// suite builds it for every test problem (conv2d_cudnn_graph_refusal).
void build_operation(const Conv2dArgs& a, std::vector<std::unique_ptr<BackendDesc>>& parts) {
  const cudnnDataType_t dt = data_type(a.dtype);
  const int64_t align = std::min<int64_t>(a.align_bytes, 16);
  // x / dx, w / dw, y / dy in logical order; ids x = 1, w = 2, y = 3 whatever the direction.
  // (Pointers to the descriptors, not references to parts' elements, which move as it grows.)
  BackendDesc* x = parts.emplace_back(graph_tensor(kUidX, dt, {a.n, a.c, a.h, a.w_in}, a.xs, align)).get();
  BackendDesc* w =
      parts.emplace_back(graph_tensor(kUidW, dt, {a.cout, a.c / a.prm.groups, a.kh, a.kw}, a.ws, align)).get();
  BackendDesc* y = parts.emplace_back(graph_tensor(kUidY, dt, {a.n, a.cout, a.oh, a.ow}, a.ys, align)).get();

  BackendDesc* conv = parts.emplace_back(std::make_unique<BackendDesc>(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR)).get();
  const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  const int64_t dims = 2;
  const int64_t dil[2] = {a.prm.dilation_h, a.prm.dilation_w}, str[2] = {a.prm.stride_h, a.prm.stride_w};
  const int64_t pre[2] = {a.prm.pad_top, a.prm.pad_left}, post[2] = {a.prm.pad_bottom, a.prm.pad_right};
  conv->set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
  conv->set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  conv->set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims);
  conv->set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dil);
  conv->set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, str);
  conv->set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre);
  conv->set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post);
  conv->finalize();

  // The direction's operation and the names of its attributes: x / dx, w / dw, y / dy.
  struct OpNames {
    cudnnBackendDescriptorType_t type;
    cudnnBackendAttributeName_t x, w, y, conv, alpha, beta;
  };
  const OpNames names =
      a.dir == ConvDirection::kForward
          ? OpNames{CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA}
      : a.dir == ConvDirection::kBackwardData
          ? OpNames{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA}
          : OpNames{CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
                    CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA};
  const float alpha = 1.0f, beta = 0.0f;
  auto op = std::make_unique<BackendDesc>(names.type);
  op->set_desc(names.x, *x);
  op->set_desc(names.w, *w);
  op->set_desc(names.y, *y);
  op->set_desc(names.conv, *conv);
  op->set(names.alpha, CUDNN_TYPE_FLOAT, 1, &alpha);
  op->set(names.beta, CUDNN_TYPE_FLOAT, 1, &beta);
  op->finalize();
  parts.push_back(std::move(op));
}

// The graph plan for `a` on handle h, or null where the backend refuses a step.
// The engine configurations cuDNN's heuristics in `mode` rank for `graph`, best first, their
// descriptors kept in `cfgs`; empty where the heuristics refuse. `devprop`: a described device
// to rank for instead of the graph's (the CPU suite's; nullptr on a device).
std::vector<cudnnBackendDescriptor_t> ranked_configs(const BackendDesc& graph, cudnnBackendHeurMode_t mode,
                                                     const BackendDesc* devprop,
                                                     std::vector<std::unique_ptr<BackendDesc>>& cfgs) {
  BackendDesc heur(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  heur.set_desc(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph);
  heur.set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  if (devprop) heur.set_desc(CUDNN_ATTR_ENGINEHEUR_DEVICEPROP, *devprop);
  if (cudnnBackendFinalize(heur.get()) != CUDNN_STATUS_SUCCESS) return {};
  int64_t count = 0;
  if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                               nullptr) != CUDNN_STATUS_SUCCESS)
    return {};
  cfgs.clear();
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < count; ++i) {
    cfgs.push_back(std::make_unique<BackendDesc>(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR));
    raw.push_back(cfgs.back()->get());
  }
  // The count asked for first can exceed what the fetch returns (configurations that then fail
  // to finalize): `got` is the list.
  int64_t got = 0;
  if (cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                               raw.data()) != CUDNN_STATUS_SUCCESS)
    return {};
  raw.resize(static_cast<size_t>(std::min(got, count)));
  return raw;
}

constexpr cudnnBackendHeurMode_t kHeurModes[3] = {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_B, CUDNN_HEUR_MODE_FALLBACK};

std::unique_ptr<GraphPlan> build_graph_plan(const Conv2dArgs& a, cudnnHandle_t h) try {
  auto gp = std::make_unique<GraphPlan>();
  build_operation(a, gp->parts);
  const BackendDesc* opd = gp->parts.back().get();

  BackendDesc* graph =
      gp->parts.emplace_back(std::make_unique<BackendDesc>(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)).get();
  const cudnnBackendDescriptor_t ops[1] = {opd->get()};
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, ops);
  graph->set(CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
  graph->finalize();

  // Heuristics mode A's list first, then mode B's, then the fallback list: mode A can offer only
  // tensor-core engines for an f32 problem (an f32 filter gradient of a 3x3 256-channel layer:
  // 14 of them), which the numerics filter refuses.
  for (const cudnnBackendHeurMode_t heur_mode : kHeurModes) {
    std::vector<std::unique_ptr<BackendDesc>> cfgs;
    const std::vector<cudnnBackendDescriptor_t> raw = ranked_configs(*graph, heur_mode, nullptr, cfgs);
    for (size_t i = 0; i < raw.size(); ++i) {
      if (!acceptable_engine(raw[i], a)) continue;
      auto plan = std::make_unique<BackendDesc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &h);
      plan->set(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i]);
      if (cudnnBackendFinalize(plan->get()) != CUDNN_STATUS_SUCCESS) continue;  // the next configuration
      int64_t n = 0;
      check(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                     &gp->ws_bytes),
            "cudnnBackendGetAttribute(EXECUTION_PLAN_WORKSPACE_SIZE)");
      gp->parts.push_back(std::move(cfgs[i]));
      gp->plan = std::move(plan);
      return gp;
    }
  }
  return nullptr;  // no configuration both acceptable and buildable
} catch (const Error&) {
  return nullptr;
}

std::shared_ptr<const GraphPlan> graph_plan_for(const Conv2dArgs& a, cudnnHandle_t h) {
  std::string key;
  for (int64_t v : {int64_t(a.dir), a.n, a.c, a.h, a.w_in, a.cout, a.kh, a.kw, a.prm.stride_h, a.prm.stride_w,
                    a.prm.pad_top, a.prm.pad_bottom, a.prm.pad_left, a.prm.pad_right, a.prm.dilation_h,
                    a.prm.dilation_w, a.prm.groups, int64_t(a.prm.layout), int64_t(a.dtype),
                    std::min<int64_t>(a.align_bytes, 16)})
    key += std::to_string(v) + "_";
  Handles& s = handles();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    auto it = s.graph_plans.find({key, h});
    if (it != s.graph_plans.end()) return it->second;
  }
  std::shared_ptr<const GraphPlan> gp;
  {
    detail::RelaxedCapture relaxed;  // building may allocate; a first call may come under a graph capture
    gp = build_graph_plan(a, h);
  }
  std::lock_guard<std::mutex> lock(s.mu);
  return s.graph_plans.try_emplace({key, h}, std::move(gp)).first->second;
}

// Forgets the graph plan of `a` on h: the legacy path serves the problem from now on.
void drop_graph_plan(cudnnHandle_t h, const std::shared_ptr<const GraphPlan>& gp) {
  Handles& s = handles();
  std::lock_guard<std::mutex> lock(s.mu);
  for (auto& [k, v] : s.graph_plans)
    if (k.second == h && v == gp) v = nullptr;
}

// Runs `a` through its graph plan; false (nothing launched) where there is none.
bool run_graph_plan(const Conv2dArgs& a, cudnnHandle_t h, cudaStream_t stream) {
  const std::shared_ptr<const GraphPlan> gp = graph_plan_for(a, h);
  if (!gp) return false;
  std::unique_ptr<detail::StreamWorkspace> workspace;
  if (gp->ws_bytes > 0)
    workspace = std::make_unique<detail::StreamWorkspace>(stream, "conv2d_cudnn_workspace", size_t(gp->ws_bytes));
  void* ws = workspace ? workspace->get() : nullptr;
  const bool fwd = a.dir == ConvDirection::kForward, dgrad = a.dir == ConvDirection::kBackwardData;
  void* ptrs[3] = {const_cast<void*>(fwd ? a.x : dgrad ? static_cast<const void*>(a.out) : a.x),
                   const_cast<void*>(a.dir == ConvDirection::kBackwardWeight ? static_cast<const void*>(a.out) : a.w),
                   const_cast<void*>(fwd ? static_cast<const void*>(a.out) : a.dy)};
  const int64_t uids[3] = {kUidX, kUidW, kUidY};
  try {
    BackendDesc pack(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
    pack.set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 3, uids);
    pack.set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 3, ptrs);
    pack.set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    pack.finalize();
    if (cudnnBackendExecute(h, gp->plan->get(), pack.get()) == CUDNN_STATUS_SUCCESS) return true;
  } catch (const Error&) {
  }
  drop_graph_plan(h, gp);  // refused at launch: nothing ran, the legacy path serves it
  return false;
}

void conv2d_baseline_cudnn_launch(const Conv2dArgs& a, cudaStream_t stream) {
  int dev = 0;
  HK_CHECK_CUDA(cudaGetDevice(&dev));
  cudnnHandle_t h = handle(dev);
  check(cudnnSetStream(h, stream), "cudnnSetStream");
  if (run_graph_plan(a, h, stream)) {
    if (a.dir == ConvDirection::kForward && a.bias) conv2d_add_bias(a, stream);
    return;
  }
  if (!symmetric(a.prm))
    HK_THROW(kNotSupported, "conv2d/baseline_cudnn: cuDNN's graph API refused a problem with asymmetric padding, "
                            "which its legacy API cannot take");
  const std::shared_ptr<const Plan> plan = plan_for(a, h, dev);
  if (plan->algo < 0) HK_THROW(kNotSupported, "conv2d/baseline_cudnn: cuDNN's heuristics offer no algorithm");
  const Descs& d = plan->d;
  const size_t ws_bytes = plan->ws_bytes;
  const auto choice = std::make_pair(plan->algo, plan->math);
  // The stream's cached workspace, not an allocation per call (core/scratch.hpp). The host time
  // left per call (300-480 us on the H200, 2026-12-03, against ~40 us for F.conv2d) is cuDNN's
  // legacy API itself, which is why the graph path above comes first.
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

std::string graph_refusal(const Conv2dArgs& a) {
  try {
    std::vector<std::unique_ptr<BackendDesc>> parts;
    build_operation(a, parts);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

std::vector<Conv2dCudnnOffer> cudnn_offers(const Conv2dArgs& a, const std::string& device_json) {
  std::vector<std::unique_ptr<BackendDesc>> parts;
  build_operation(a, parts);
  const cudnnBackendDescriptor_t ops[1] = {parts.back()->get()};
  BackendDesc graph(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  graph.set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, ops);
  graph.finalize();  // no handle: the device is the described one
  BackendDesc devprop(CUDNN_BACKEND_DEVICEPROP_DESCRIPTOR);
  devprop.set(CUDNN_ATTR_DEVICEPROP_JSON_REPRESENTATION, CUDNN_TYPE_CHAR, static_cast<int64_t>(device_json.size()),
              device_json.data());
  devprop.finalize();
  std::vector<Conv2dCudnnOffer> out;
  for (int m = 0; m < 3; ++m) {
    std::vector<std::unique_ptr<BackendDesc>> cfgs;
    for (const cudnnBackendDescriptor_t cfg : ranked_configs(graph, kHeurModes[m], &devprop, cfgs)) {
      Conv2dCudnnOffer o;
      o.mode = "ABF"[m];
      std::vector<cudnnBackendNumericalNote_t> notes;
      if (!engine_of(cfg, o.engine, notes)) continue;
      for (const cudnnBackendNumericalNote_t n : notes) o.notes.push_back(static_cast<int>(n));
      o.accepted = acceptable_engine(cfg, a);
      out.push_back(std::move(o));
    }
  }
  return out;
}

std::string conv2d_baseline_cudnn_supports(const Conv2dProblem& p) {
  const std::string asym = "top/bottom " + std::to_string(p.prm.pad_top) + "/" + std::to_string(p.prm.pad_bottom) +
                           ", left/right " + std::to_string(p.prm.pad_left) + "/" + std::to_string(p.prm.pad_right);
  // Asymmetric padding ('same' with an even kernel) only through the graph API (pre and post
  // paddings), asked on a device.
  if (!symmetric(p.prm) && !no_gpu_reason().empty())
    return "cuDNN's legacy API takes symmetric padding only, and its graph API is asked on a device; got " + asym;
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
    if (!symmetric(p.prm)) {
      // The graph plan needs the operands' strides and alignment: bind the problem's own.
      Operands ops;
      for (auto& t : p.inputs()) ops.in.emplace_back(nullptr, t.dtype, t.shape);
      for (auto& t : p.outputs()) ops.out.emplace_back(nullptr, t.dtype, t.shape);
      if (!graph_plan_for(Conv2dArgs::bind(p, ops), handle(dev)))
        return "cuDNN's graph API builds no plan for this problem, and its legacy API takes symmetric padding only; "
               "got " + asym;
      return "";
    }
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

std::string graph_refusal(const Conv2dArgs&) { return "hopperkit was built without cuDNN"; }

std::vector<Conv2dCudnnOffer> cudnn_offers(const Conv2dArgs&, const std::string&) {
  HK_THROW(kNotSupported, "conv2d/baseline_cudnn: hopperkit was built without cuDNN");
}

#endif

}  // namespace

std::string conv2d_cudnn_graph_refusal(const Conv2dArgs& a) { return graph_refusal(a); }

std::vector<Conv2dCudnnOffer> conv2d_cudnn_offers(const Conv2dArgs& a, const std::string& device_json) {
  return cudnn_offers(a, device_json);
}

HK_REGISTER_VARIANT(Conv2dProblem, Conv2dArgs, "conv2d", "baseline_cudnn",
                    "cuDNN: a cached graph-API execution plan of the heuristics' first engine (as F.conv2d without "
                    "cudnn.benchmark), the legacy API where the backend refuses",
                    70,
                    kFlagBaseline | kFlagProduction, conv2d_baseline_cudnn_supports, conv2d_baseline_cudnn_launch);

}  // namespace hk
