// common/ptx/smem_desc.hpp — the host-checkable half of wgmma.cuh: the shared-memory matrix
// descriptor and the 128-byte swizzle, as plain constexpr functions (unit-tested on the CPU in
// tests/cpp/test_gemm.cpp; the layouts they encode are described in wgmma.cuh).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace hk::ptx {

// The 64-bit matrix descriptor. Bits 0-13: start address >> 4; 16-29: leading byte offset >> 4;
// 32-45: stride byte offset >> 4; 49-51: base offset (0: atoms are 1024-byte aligned);
// 62-63: swizzle mode (1 = 128-byte).
HK_HOST_DEVICE constexpr uint64_t make_smem_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}

// Byte offset of (row, byte column) inside a 128-byte-swizzled tile whose rows are 128 bytes
// (the layout TMA's SWIZZLE_128B writes and reads): for ordinary threads staging a tile.
HK_HOST_DEVICE constexpr uint32_t swizzle_128b_offset(uint32_t row, uint32_t byte_col) {
  return row * 128 + ((((byte_col >> 4) ^ (row & 7)) & 7) << 4) + (byte_col & 15);
}

}  // namespace hk::ptx
