// core/host.hpp — host-side tensor helpers shared by the references, tests and benchmarks:
// dtype encode/decode, random fills, strided layout, and a parallel loop for fp64 references.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "hk/registry.hpp"

namespace hk::host {

// Rounds `v` to the nearest value representable in `dtype` (round-to-nearest-even; saturating
// to ±max for e4m3, which has no infinity).
double round_to(DType dtype, double v);
// Writes `values` (logical row-major order) into `storage` laid out with `spec`'s strides.
// `storage` must hold storage_elems(spec) elements of spec.dtype.
void encode(const TensorSpec& spec, const std::vector<double>& values, std::vector<uint8_t>& storage);
void decode(const TensorSpec& spec, const std::vector<uint8_t>& storage, std::vector<double>& values);
// Elements spanned by the strided layout (1 + sum (extent-1)*stride), 0 for empty tensors.
int64_t storage_elems(const TensorSpec& spec);
int64_t storage_bytes(const TensorSpec& spec);
// Storage offset (elements) of each logical element, in logical order.
std::vector<int64_t> storage_offsets(const TensorSpec& spec);
// Fresh random logical values for `spec` (already rounded to its dtype), specials applied.
HostTensor random_tensor(const TensorSpec& spec, uint64_t seed);
// The byte pattern used to poison outputs and padding: all 0xFF (NaN in every float dtype).
constexpr uint8_t kPoisonByte = 0xFF;

// Threads for host loops: HK_THREADS when set, else the CPUs this process may run on (affinity
// mask, and a cgroup v2 CPU quota when there is one), at least 1.
int thread_count();
// Splits [0, n) into chunks over thread_count() threads; fn(begin, end). `grain` is the least
// work worth a thread, in items of n: element loops keep the default; a loop over chunks of
// elements passes 1 (each item is already a thread's worth).
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain = 4096);
// The grain for a loop whose items each do `work` element operations (a row of D: D).
inline int64_t grain_for(int64_t work) { return work >= 4096 ? 1 : 4096 / (work > 0 ? work : 1); }

// A fast deterministic generator (splitmix64) for reproducible fills.
struct Rng {
  uint64_t state;
  double spare = 0;        // normal(): the second value of the last Box-Muller pair
  bool has_spare = false;
  explicit Rng(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal();
};

}  // namespace hk::host
