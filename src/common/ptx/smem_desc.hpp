// common/ptx/smem_desc.hpp — the host-checkable half of wgmma.cuh: the shared-memory matrix
// descriptor and the 128-, 64- and 32-byte swizzles, as plain constexpr functions (unit-tested on the CPU in
// tests/cpp/test_gemm.cpp; the layouts they encode are described in wgmma.cuh).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"

namespace hk::ptx {

// The 64-bit matrix descriptor. Bits 0-13: start address >> 4; 16-29: leading byte offset >> 4;
// 32-45: stride byte offset >> 4; 49-51: base offset (0: atoms are 1024-byte aligned);
// 62-63: swizzle mode (1 = 128-byte; 2 = 64-byte, 3 = 32-byte: make_smem_desc_swizzled below).
HK_HOST_DEVICE constexpr uint64_t make_smem_desc_sw128(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32) | (uint64_t(1) << 62);
}

// The descriptor for the narrower swizzles (PTX ISA, "Matrix Descriptor Format" and "Shared Memory
// Matrix Layout" of wgmma; CuTe's GMMA::LayoutType B64 = 2, B32 = 3, make_gmma_desc). Fields as
// above; bits 62-63 = 2 for the 64-byte swizzle, 3 for the 32-byte one. The swizzle XORs byte
// address bits [4, 4 + b) with bits [7, 7 + b), b = 2 (64-byte) or 1 (32-byte): the pattern repeats
// every 8 rows x the swizzle width (512 or 256 bytes), and with base offset 0 the tile must start
// on that boundary (TMA's SWIZZLE_64B / SWIZZLE_32B write the same pattern from the same address
// bits). For 16-bit types, in CuTe's element notation (W = the swizzle width in elements: 32 for
// 64-byte rows, 16 for 32-byte rows):
//   K-major:  ((8, m), (W, k)) : ((W, SBO), (1, -))  one 8-row core group = 8 rows of W K values;
//             SBO = bytes between 8-row groups (8 x the row bytes when dense: 512 / 256); LBO is
//             not used for swizzled K-major layouts (CuTe sets 1). A k16 step is 32 bytes along the
//             row: + 32 bytes on the start address (64-byte rows: steps 0 and 1; 32-byte rows:
//             the whole row is one k16 step).
//   MN-major: ((W, m), (8, k)) : ((1, LBO), (W, SBO))  rows of W MN values, one row per K;
//             LBO = bytes between W-wide MN blocks (unused when N or M is W), SBO = bytes between
//             8-row K groups (8 x the row bytes when dense). A k16 step is 16 rows: 16 x the row
//             bytes on the start address. The instruction's transpose bit for that operand is set.
HK_HOST_DEVICE constexpr uint64_t make_smem_desc_swizzled(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                                          uint32_t swizzle_bytes) {
  const uint64_t mode = swizzle_bytes == 128 ? 1 : swizzle_bytes == 64 ? 2 : swizzle_bytes == 32 ? 3 : 0;
  return uint64_t((smem_addr & 0x3FFFF) >> 4) | (uint64_t((lbo_bytes >> 4) & 0x3FFF) << 16) |
         (uint64_t((sbo_bytes >> 4) & 0x3FFF) << 32) | (mode << 62);
}
HK_HOST_DEVICE constexpr uint64_t make_smem_desc_sw64(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return make_smem_desc_swizzled(smem_addr, lbo_bytes, sbo_bytes, 64);
}
HK_HOST_DEVICE constexpr uint64_t make_smem_desc_sw32(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return make_smem_desc_swizzled(smem_addr, lbo_bytes, sbo_bytes, 32);
}
static_assert(make_smem_desc_swizzled(0x400, 0x100, 0x400, 128) == make_smem_desc_sw128(0x400, 0x100, 0x400));
static_assert(make_smem_desc_sw64(0x200, 0, 512) == ((uint64_t(2) << 62) | (uint64_t(512 >> 4) << 32) | (0x200 >> 4)));
static_assert(make_smem_desc_sw32(0x100, 0, 256) == ((uint64_t(3) << 62) | (uint64_t(256 >> 4) << 32) | (0x100 >> 4)));

// Byte offset of (row, byte column) inside a 128-byte-swizzled tile whose rows are 128 bytes
// (the layout TMA's SWIZZLE_128B writes and reads): for ordinary threads staging a tile.
HK_HOST_DEVICE constexpr uint32_t swizzle_128b_offset(uint32_t row, uint32_t byte_col) {
  return row * 128 + ((((byte_col >> 4) ^ (row & 7)) & 7) << 4) + (byte_col & 15);
}

// The same for 64- and 32-byte rows (TMA's SWIZZLE_64B / SWIZZLE_32B in a tile whose rows are that
// wide and that starts on a 512- / 256-byte boundary): chunk c of row r at c ^ ((r / 2) % 4) for
// 64-byte rows, c ^ ((r / 4) % 2) for 32-byte rows (address bits [4, 4 + b) ^= bits [7, 7 + b)).
HK_HOST_DEVICE constexpr uint32_t swizzle_64b_offset(uint32_t row, uint32_t byte_col) {
  return row * 64 + ((((byte_col >> 4) ^ (row >> 1)) & 3) << 4) + (byte_col & 15);
}
HK_HOST_DEVICE constexpr uint32_t swizzle_32b_offset(uint32_t row, uint32_t byte_col) {
  return row * 32 + ((((byte_col >> 4) ^ (row >> 2)) & 1) << 4) + (byte_col & 15);
}

}  // namespace hk::ptx
