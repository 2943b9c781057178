// common/stream_scratch.hpp — a stream-ordered scratch buffer for one op's intermediates (the
// row families' partial sums, attention's row statistics and f32 accumulators).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "hk/error.hpp"

namespace hk {

// cudaMallocAsync / cudaFreeAsync on the op's stream: the buffer lives only for one op and the
// pool recycles it between calls.
class StreamScratch {
 public:
  StreamScratch(int64_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes > 0) HK_CHECK_CUDA(cudaMallocAsync(&ptr_, static_cast<size_t>(bytes), stream));
  }
  ~StreamScratch() {
    if (ptr_) (void)cudaFreeAsync(ptr_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  template <class U>
  U* as() const { return static_cast<U*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace hk
