#include "core/scratch.hpp"

#include <map>
#include <mutex>
#include <string>
#include <tuple>

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
};
// Never destroyed (see core/cublas.cpp): emptied by release_cached_resources().
Scratch& scratch() {
  static auto* s = [] {
    auto* r = new Scratch;
    on_release([r] {
      std::lock_guard<std::mutex> lock(r->mu);
      for (auto& [key, b] : r->buffers) cudaFree(b.p);
      r->buffers.clear();
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
    if (b.p) {
      // A larger request: the old buffer may still be in use by work queued on the stream.
      HK_CHECK_CUDA(cudaStreamSynchronize(stream));
      HK_CHECK_CUDA(cudaFree(b.p));
      b = {};
    }
    HK_CHECK_CUDA(cudaMalloc(&b.p, bytes));
    HK_CHECK_CUDA(cudaMemset(b.p, 0, bytes));
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
