// core/cublas.hpp — the process's cuBLAS handles, and the list of caches that
// hk::release_cached_resources() frees (handles, workspaces, cuBLASLt plans).
#pragma once

#include <cublas_v2.h>

#include <functional>

namespace hk::detail {

// A handle for the calling thread on the current device, created on first use (a cuBLAS handle
// must not be used by two threads at once); the caller sets its stream before each call.
cublasHandle_t cublas_handle();

// Adds `release` to what hk::release_cached_resources() runs. `release` must leave its cache
// empty and valid: the next op that needs it builds it again.
void on_release(std::function<void()> release);

}  // namespace hk::detail
