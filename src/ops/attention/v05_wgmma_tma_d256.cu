// attention/v05_wgmma_tma_d256.cu — rung 5's kernels for the 256-column tile (D = 136 ... 256),
// bf16 and f16, fixed length and variable length: 64-key K/V tiles, S as m64n64k16, PV as two
// m64n128k16 per k16 step (hopper_attention.cuh). Registered with the rest of the rung in
// v05_wgmma_tma.cu.
// Build: own translation unit.
#include "attention/hopper_attention.cuh"

namespace hk::attn_hopper {
HK_ATTN_INSTANCES(, V05Policy, 256)
}  // namespace hk::attn_hopper
