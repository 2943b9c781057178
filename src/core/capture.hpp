// core/capture.hpp — stream-capture helpers shared by the library's caches (scratch buffers,
// library handles) that may be first used while a graph is being captured.
#pragma once

#include <cuda_runtime_api.h>

#include "hk/error.hpp"

namespace hk::detail {

// Sets the calling thread's capture mode to relaxed for its lifetime: cudaMalloc is refused
// while any stream is being captured in global mode (torch.cuda.graph's default), although an
// allocation that no graph node records is safe.
class RelaxedCapture {
 public:
  RelaxedCapture() { HK_CHECK_CUDA(cudaThreadExchangeStreamCaptureMode(&mode_)); }
  ~RelaxedCapture() { (void)cudaThreadExchangeStreamCaptureMode(&mode_); }
  RelaxedCapture(const RelaxedCapture&) = delete;
  RelaxedCapture& operator=(const RelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace hk::detail
