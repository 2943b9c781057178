#include "core/scratch.hpp"

#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/capture.hpp"  // RelaxedCapture
#include "core/cublas.hpp"  // on_release
#include "hk/error.hpp"

namespace hk::detail {
namespace {

struct Buffer {
  void* p = nullptr;
  size_t bytes = 0;
};
struct Scratch {
  std::mutex mu;
  std::map<std::tuple<int, cudaStream_t, std::string>, Buffer> buffers;
  // Zeroed buffers that a larger request replaced. A graph captured earlier may still name one,
  // so they are freed only by release_cached_resources(), never while the process may replay it.
  std::vector<void*> retired;
  // Per device, a private non-blocking stream that zeroes new buffers: a memset on the legacy
  // stream would join a stream that is being captured.
  std::map<int, cudaStream_t> zeroing;
};
// Never destroyed (see core/cublas.cpp): emptied by release_cached_resources().
Scratch& scratch() {
  static auto* s = [] {
    auto* r = new Scratch;
    on_release([r] {
      std::lock_guard<std::mutex> lock(r->mu);
      for (auto& [key, b] : r->buffers) cudaFree(b.p);
      for (void* p : r->retired) cudaFree(p);
      r->buffers.clear();
      r->retired.clear();
    });
    return r;
  }();
  return *s;
}

}  // namespace

void* zeroed_stream_scratch(cudaStream_t stream, const char* key, size_t bytes) {
  int dev = 0;
  HK_CHECK_CUDA(cudaGetDevice(&dev));
  Scratch& s = scratch();
  std::lock_guard<std::mutex> lock(s.mu);
  Buffer& b = s.buffers[{dev, stream, key}];
  if (b.bytes < bytes) {
    // Allocated and zeroed outside any graph, also while `stream` is being captured: the buffer
    // is the process's, a replay finds it zero because every kernel leaves it so.
    RelaxedCapture relaxed;
    if (b.p) s.retired.push_back(b.p);
    b = {};
    cudaStream_t& z = s.zeroing[dev];
    if (!z) HK_CHECK_CUDA(cudaStreamCreateWithFlags(&z, cudaStreamNonBlocking));
    HK_CHECK_CUDA(cudaMalloc(&b.p, bytes));
    HK_CHECK_CUDA(cudaMemsetAsync(b.p, 0, bytes, z));
    HK_CHECK_CUDA(cudaStreamSynchronize(z));
    b.bytes = bytes;
  }
  return b.p;
}

StreamWorkspace::StreamWorkspace(cudaStream_t stream, const char* key, size_t bytes) : stream_(stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  HK_CHECK_CUDA(cudaStreamIsCapturing(stream, &capture));
  if (capture != cudaStreamCaptureStatusNone) {
    HK_CHECK_CUDA(cudaMallocAsync(&p_, bytes, stream));
    graph_owned_ = true;
    return;
  }
  int dev = 0;
  HK_CHECK_CUDA(cudaGetDevice(&dev));
  Scratch& s = scratch();
  std::lock_guard<std::mutex> lock(s.mu);
  Buffer& b = s.buffers[{dev, stream, std::string("workspace:") + key}];
  if (b.bytes < bytes) {
    RelaxedCapture relaxed;  // another thread's stream may be under capture
    if (b.p) {
      HK_CHECK_CUDA(cudaStreamSynchronize(stream));  // work queued earlier may still read it
      HK_CHECK_CUDA(cudaFree(b.p));
      b = {};
    }
    HK_CHECK_CUDA(cudaMalloc(&b.p, bytes));
    b.bytes = bytes;
  }
  p_ = b.p;
}

StreamWorkspace::~StreamWorkspace() {
  if (graph_owned_) cudaFreeAsync(p_, stream_);  // a destructor cannot throw; capture reports it
}

}  // namespace hk::detail
