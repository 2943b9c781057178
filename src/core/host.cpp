#include "core/host.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include <sched.h>

namespace hk::host {

double Rng::normal() {
  // Box-Muller gives two independent normals per (log, sqrt, sincos): the second is kept for
  // the next call (bench inputs are 2^27-2^28 values; this halves their generation time).
  if (has_spare) {
    has_spare = false;
    return spare;
  }
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  const double r = std::sqrt(-2.0 * std::log(u1)), a = 6.283185307179586 * u2;
  spare = r * std::sin(a);
  has_spare = true;
  return r * std::cos(a);
}

int thread_count() {
  static const int count = [] {
    if (const char* env = std::getenv("HK_THREADS"); env && std::atoi(env) > 0) return std::atoi(env);
    int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) n = std::min(n, std::max(1, CPU_COUNT(&set)));
    // A container's CPU quota (cgroup v2 "cpu.max": "<quota> <period>" or "max <period>"): more
    // threads than the quota only queue behind each other's throttled time slices.
    std::ifstream f("/sys/fs/cgroup/cpu.max");
    std::string quota;
    double period = 0;
    if (f >> quota >> period && quota != "max" && period > 0) {
      const double q = std::atof(quota.c_str());
      if (q > 0) n = std::min(n, std::max(1, static_cast<int>(std::ceil(q / period))));
    }
    return n;
  }();
  return count;
}

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  int64_t threads = thread_count();
  if (n < 16 * grain || threads == 1) {
    fn(0, n);
    return;
  }
  threads = std::min<int64_t>(threads, n / grain + 1);
  std::vector<std::thread> pool;
  int64_t chunk = (n + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t) {
    int64_t b = t * chunk, e = std::min(n, b + chunk);
    if (b < e) pool.emplace_back(fn, b, e);
  }
  for (auto& th : pool) th.join();
}

int64_t storage_elems(const TensorSpec& spec) {
  int64_t span = 1;
  std::vector<int64_t> strides = spec.strides.empty() ? contiguous_strides(spec.shape) : spec.strides;
  for (size_t i = 0; i < spec.shape.size(); ++i) {
    if (spec.shape[i] == 0) return 0;
    span += (spec.shape[i] - 1) * strides[i];
  }
  return span;
}

int64_t storage_bytes(const TensorSpec& spec) {
  return (storage_elems(spec) * dtype_bits(spec.dtype) + 7) / 8;
}

static int64_t numel(const TensorSpec& spec) {
  int64_t n = 1;
  for (int64_t d : spec.shape) n *= d;
  return n;
}

std::vector<int64_t> storage_offsets(const TensorSpec& spec) {
  int64_t n = numel(spec);
  std::vector<int64_t> offs(n);
  if (n == 0) return offs;
  if (spec.strides.empty() || spec.strides == contiguous_strides(spec.shape)) {
    for (int64_t i = 0; i < n; ++i) offs[i] = i;
    return offs;
  }
  int rank = static_cast<int>(spec.shape.size());
  parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      int64_t rem = i, off = 0;
      for (int d = rank - 1; d >= 0; --d) {
        off += (rem % spec.shape[d]) * spec.strides[d];
        rem /= spec.shape[d];
      }
      offs[i] = off;
    }
  });
  return offs;
}

namespace {

uint8_t encode_e4m3(double v) { return __nv_fp8_e4m3(static_cast<float>(v)).__x; }
uint8_t encode_e5m2(double v) { return __nv_fp8_e5m2(static_cast<float>(v)).__x; }
double decode_e4m3(uint8_t b) {
  __nv_fp8_e4m3 f;
  f.__x = b;
  return static_cast<float>(f);
}
double decode_e5m2(uint8_t b) {
  __nv_fp8_e5m2 f;
  f.__x = b;
  return static_cast<float>(f);
}

void put(DType dtype, uint8_t* base, int64_t idx, double v) {
  switch (dtype) {
    case DType::kF32: reinterpret_cast<float*>(base)[idx] = static_cast<float>(v); break;
    case DType::kF16: reinterpret_cast<__half*>(base)[idx] = __double2half(v); break;
    case DType::kBF16: reinterpret_cast<__nv_bfloat16*>(base)[idx] = __double2bfloat16(v); break;
    case DType::kF8E4M3: base[idx] = encode_e4m3(v); break;
    case DType::kF8E5M2: base[idx] = encode_e5m2(v); break;
    case DType::kI32: reinterpret_cast<int32_t*>(base)[idx] = static_cast<int32_t>(v); break;
    case DType::kU8: base[idx] = static_cast<uint8_t>(v); break;
    case DType::kI4: {
      uint8_t nib = static_cast<uint8_t>(static_cast<int>(v) & 0xF);
      uint8_t& byte = base[idx / 2];
      byte = (idx % 2 == 0) ? static_cast<uint8_t>((byte & 0xF0) | nib)
                            : static_cast<uint8_t>((byte & 0x0F) | (nib << 4));
      break;
    }
  }
}

double get(DType dtype, const uint8_t* base, int64_t idx) {
  switch (dtype) {
    case DType::kF32: return reinterpret_cast<const float*>(base)[idx];
    case DType::kF16: return __half2float(reinterpret_cast<const __half*>(base)[idx]);
    case DType::kBF16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(base)[idx]);
    case DType::kF8E4M3: return decode_e4m3(base[idx]);
    case DType::kF8E5M2: return decode_e5m2(base[idx]);
    case DType::kI32: return reinterpret_cast<const int32_t*>(base)[idx];
    case DType::kU8: return base[idx];
    case DType::kI4: {
      int nib = (idx % 2 == 0) ? (base[idx / 2] & 0xF) : (base[idx / 2] >> 4);
      return nib >= 8 ? nib - 16 : nib;
    }
  }
  return 0;
}

}  // namespace

double round_to(DType dtype, double v) {
  uint8_t buf[8] = {};
  put(dtype, buf, 0, v);
  return get(dtype, buf, 0);
}

static bool contiguous(const TensorSpec& spec) {
  return spec.strides.empty() || spec.strides == contiguous_strides(spec.shape);
}

void encode(const TensorSpec& spec, const std::vector<double>& values, std::vector<uint8_t>& storage) {
  storage.assign(storage_bytes(spec), kPoisonByte);
  uint8_t* base = storage.data();
  if (contiguous(spec) && spec.dtype != DType::kI4) {  // no offset table: bench tensors are 2^28 elements
    parallel_for(static_cast<int64_t>(values.size()), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) put(spec.dtype, base, i, values[i]);
    });
    return;
  }
  std::vector<int64_t> offs = storage_offsets(spec);
  if (spec.dtype == DType::kI4) {  // nibbles share bytes: no parallel writes
    for (size_t i = 0; i < offs.size(); ++i) put(spec.dtype, base, offs[i], values[i]);
    return;
  }
  parallel_for(static_cast<int64_t>(offs.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) put(spec.dtype, base, offs[i], values[i]);
  });
}

void decode(const TensorSpec& spec, const std::vector<uint8_t>& storage, std::vector<double>& values) {
  const uint8_t* base = storage.data();
  if (contiguous(spec)) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    values.resize(n);
    double* out = values.data();
    // The dtype switch outside the loop: the float types decode at memory speed (bench outputs
    // are 2^27-2^28 elements, decoded once per variant).
    auto run = [&](auto conv) {
      parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) out[i] = conv(i);
      });
    };
    switch (spec.dtype) {
      case DType::kF32: {
        const float* p = reinterpret_cast<const float*>(base);
        run([p](int64_t i) { return double(p[i]); });
        break;
      }
      case DType::kBF16: {  // bf16 is the top half of an f32
        const uint16_t* p = reinterpret_cast<const uint16_t*>(base);
        run([p](int64_t i) {
          uint32_t bits = uint32_t(p[i]) << 16;
          float f;
          std::memcpy(&f, &bits, 4);
          return double(f);
        });
        break;
      }
      default: run([&](int64_t i) { return get(spec.dtype, base, i); });
    }
    return;
  }
  std::vector<int64_t> offs = storage_offsets(spec);
  values.resize(offs.size());
  parallel_for(static_cast<int64_t>(offs.size()), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) values[i] = get(spec.dtype, base, offs[i]);
  });
}

HostTensor random_tensor(const TensorSpec& spec, uint64_t seed) {
  HostTensor t{spec, {}};
  int64_t n = numel(spec);
  t.values.resize(n);
  constexpr int64_t kChunk = 1 << 16;  // each chunk its own stream: same values at any thread count
  int64_t chunks = (n + kChunk - 1) / kChunk;
  // NOTE: grain 1: a chunk is 2^16 values. With the element grain, the 2048 chunks of a 2^27
  // input ran on one thread (measured on the GPU box: 6.6 s per bench input of 2^27 bf16).
  parallel_for(chunks, [&](int64_t cb, int64_t ce) {
    for (int64_t c = cb; c < ce; ++c) {
      Rng rng(seed * 0x100000001B3ull + static_cast<uint64_t>(c));
      int64_t end = std::min(n, (c + 1) * kChunk);
      for (int64_t i = c * kChunk; i < end; ++i) {
        double v = 0;
        switch (spec.dist) {
          case Dist::kNormal: v = spec.scale * rng.normal(); break;
          case Dist::kUniform: v = spec.scale * (2.0 * rng.uniform() - 1.0); break;
          case Dist::kSmallInt: {
            auto r = static_cast<int64_t>(spec.scale);
            v = static_cast<double>(static_cast<int64_t>(rng.next() % (2 * r + 1)) - r);
            break;
          }
          case Dist::kPositive: v = spec.scale * (0.125 + 0.875 * rng.uniform()); break;
        }
        t.values[i] = round_to(spec.dtype, v);
      }
    }
  }, 1);
  for (auto [idx, v] : spec.specials)
    if (idx >= 0 && idx < n) t.values[idx] = round_to(spec.dtype, v);
  return t;
}

}  // namespace hk::host
