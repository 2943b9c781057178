// core/scratch.hpp — small device buffers that kernels keep at zero between launches.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

namespace hk::detail {

// A device buffer of at least `bytes`, all zero when first handed out, cached per (device,
// stream, key) for the life of the process (freed by hk::release_cached_resources()). The
// contract: every kernel that uses it leaves it all zero again when it exits (self-resetting
// counters and flags), so no memset precedes a launch and a captured graph replays correctly.
// Launches on one stream run in order and share it; launches on different streams get
// different buffers. `key` is a string literal naming the user (one buffer per key).
void* zeroed_stream_scratch(cudaStream_t stream, const char* key, size_t bytes);

}  // namespace hk::detail
