// common/host_device.hpp — functions compiled for both the host and the device: the scheduling
// rules, layout maps and mask rule that kernels apply and CPU tests check with the same code.
#pragma once

#if defined(__CUDACC__)
#define HK_HOST_DEVICE __host__ __device__
#define HK_HOST_DEVICE_INLINE __host__ __device__ __forceinline__  // e.g. a loop whose body is a kernel's
#else
#define HK_HOST_DEVICE
#define HK_HOST_DEVICE_INLINE inline
#endif
