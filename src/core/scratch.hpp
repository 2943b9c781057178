// core/scratch.hpp — small device buffers that kernels keep at zero between launches.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "hk/error.hpp"

namespace hk::detail {

// A device buffer of at least `bytes`, all zero when first handed out, cached per (device,
// stream, key) for the life of the process (freed by hk::release_cached_resources()). The
// contract: every kernel that uses it leaves it all zero again when it exits (self-resetting
// counters and flags), so no memset precedes a launch and a captured graph replays correctly.
// Launches on one stream run in order and share it; launches on different streams get
// different buffers. `key` is a string literal naming the user (one buffer per key). It may be
// called while `stream` is being captured: the buffer is allocated and zeroed outside the graph,
// and one that a larger request replaces is kept until release_cached_resources(), since a
// graph captured earlier may still name it. A graph shares the buffer with every launch on the
// stream it was captured on: replay it on that stream or while that stream is idle.
void* zeroed_stream_scratch(cudaStream_t stream, const char* key, size_t bytes);

// A device buffer of at least `bytes` for work queued on `stream`, contents undefined (operand
// copies). Outside stream capture it is cached per (device, stream, key) and grown when too
// small (the old one freed once the stream drains), so steady-state calls allocate nothing.
// While `stream` is being captured into a graph it is a stream-ordered allocation owned by the
// graph (cudaMallocAsync, freed stream-ordered by the destructor), so replays never see a buffer
// that a later call freed. Destroy it after queueing its last use.
class StreamWorkspace {
 public:
  StreamWorkspace(cudaStream_t stream, const char* key, size_t bytes);
  ~StreamWorkspace();
  StreamWorkspace(const StreamWorkspace&) = delete;
  StreamWorkspace& operator=(const StreamWorkspace&) = delete;
  void* get() const { return p_; }

 private:
  cudaStream_t stream_;
  void* p_ = nullptr;
  bool graph_owned_ = false;
};

}  // namespace hk::detail
