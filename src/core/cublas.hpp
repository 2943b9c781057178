// core/cublas.hpp — the process's cuBLAS handles, and the list of caches that
// hk::release_cached_resources() frees (handles, workspaces, cuBLASLt plans).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

#include <cstddef>
#include <functional>

namespace hk::detail {

// A handle for the calling thread on the current device, created on first use (a cuBLAS handle
// must not be used by two threads at once); the caller sets its stream before each call.
cublasHandle_t cublas_handle();

// The process's cuBLASLt handle, created on first use; the callers serialise their calls (their
// plan caches' locks). Each cublasLtMatmul gets kCublasLtWorkspaceBytes of the stream's workspace
// (detail::StreamWorkspace, key kCublasLtWorkspaceKey): matmuls queued on one stream run in order
// and share it, matmuls on two streams never do.
cublasLtHandle_t cublaslt_handle();
inline constexpr size_t kCublasLtWorkspaceBytes = size_t(32) << 20;  // what cuBLAS itself reserves on Hopper
inline constexpr const char* kCublasLtWorkspaceKey = "cublaslt";

// Adds `release` to what hk::release_cached_resources() runs. `release` must leave its cache
// empty and valid: the next op that needs it builds it again.
void on_release(std::function<void()> release);

}  // namespace hk::detail
