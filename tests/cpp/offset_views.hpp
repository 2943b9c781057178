// GPU test helper for the peeled (any-alignment) paths of the memory-bound families: runs a
// public op on views placed at chosen element offsets inside larger device buffers (so each
// operand sits at its own 16-byte phase) with chosen row strides, and checks every output
// against the problem's fp64 reference. The harness (bench::Case) allocates every operand with
// cudaMalloc, so its bases are always 256-byte aligned; this is where misaligned bases are run.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "bench/case.hpp"
#include "core/host.hpp"
#include "hk/hk.hpp"

namespace hktest {

// Where one operand lives: `offset` elements past a 256-byte aligned allocation, and for an
// operand of rank >= 2 rows `ld` elements apart (0: the problem's own strides).
struct Place {
  int64_t offset = 0;
  int64_t ld = 0;
};

using ViewsFn = std::function<void(const std::vector<hk::TensorView>& in, const std::vector<hk::TensorView>& out)>;

// The reference depends only on the logical values (row-major in the shape), so a spec's strides
// may be changed freely: the same problem checks any layout of its operands.
inline hk::TensorSpec placed_spec(hk::TensorSpec spec, const Place& pl) {
  if (pl.ld > 0 && spec.shape.size() >= 2) {
    std::vector<int64_t> s(spec.shape.size(), 1);
    int64_t step = pl.ld;
    for (size_t d = spec.shape.size() - 1; d-- > 0;) {
      s[d] = step;
      step *= spec.shape[d];
    }
    spec.strides = s;
  }
  return spec;
}

// Runs `call` on the placed views (outputs poisoned first) and checks each output against the
// reference, and that no byte outside an output's elements was written (padding included).
// `what` names the case in failure messages. Returns false when a check failed.
inline bool check_offset_views(const hk::Problem& p, const std::vector<Place>& in_place,
                               const std::vector<Place>& out_place, const ViewsFn& call, uint64_t seed,
                               const std::string& what) {
  const std::vector<hk::TensorSpec> in_specs = p.inputs(), out_specs = p.outputs();
  std::vector<hk::HostTensor> in;
  std::vector<hk::bench::DeviceBuffer> bufs;
  std::vector<hk::TensorView> in_views, out_views;
  std::vector<hk::TensorSpec> out_placed;
  std::vector<int64_t> out_bytes_at;
  for (size_t i = 0; i < in_specs.size(); ++i) {
    const Place pl = i < in_place.size() ? in_place[i] : Place{};
    const hk::TensorSpec spec = placed_spec(in_specs[i], pl);
    in.push_back(hk::host::random_tensor(spec, seed * 131 + i));
    std::vector<uint8_t> bytes;
    hk::host::encode(spec, in.back().values, bytes);
    const int64_t at = pl.offset * hk::dtype_bits(spec.dtype) / 8;
    bufs.emplace_back(at + int64_t(bytes.size()) + 16);
    char* ptr = static_cast<char*>(bufs.back().get()) + at;
    if (!bytes.empty()) {
      EXPECT_EQ(cudaMemcpy(ptr, bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
    }
    in_views.emplace_back(ptr, spec.dtype, spec.shape, spec.strides);
  }
  for (size_t i = 0; i < out_specs.size(); ++i) {
    const Place pl = i < out_place.size() ? out_place[i] : Place{};
    const hk::TensorSpec spec = placed_spec(out_specs[i], pl);
    const int64_t at = pl.offset * hk::dtype_bits(spec.dtype) / 8;
    bufs.emplace_back(at + hk::host::storage_bytes(spec) + 16);
    EXPECT_EQ(cudaMemset(bufs.back().get(), hk::host::kPoisonByte, bufs.back().bytes()), cudaSuccess);
    out_views.emplace_back(static_cast<char*>(bufs.back().get()) + at, spec.dtype, spec.shape, spec.strides);
    out_placed.push_back(spec);
    out_bytes_at.push_back(at);
  }
  call(in_views, out_views);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess) << what;
  std::vector<hk::HostTensor> ref;
  for (auto& spec : out_specs) {
    int64_t n = 1;
    for (int64_t d : spec.shape) n *= d;
    ref.push_back({spec, std::vector<double>(n)});
  }
  p.reference(in, ref);
  bool ok = true;
  for (size_t i = 0; i < out_specs.size(); ++i) {
    const hk::bench::DeviceBuffer& buf = bufs[in_specs.size() + i];
    std::vector<uint8_t> all(buf.bytes());
    EXPECT_EQ(cudaMemcpy(all.data(), buf.get(), all.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    const int64_t at = out_bytes_at[i], len = hk::host::storage_bytes(out_placed[i]);
    std::vector<uint8_t> storage(all.begin() + at, all.begin() + at + len);
    // Bytes outside the view's storage and the padding inside it must still be poison.
    std::vector<bool> element(all.size(), false);
    const int64_t esize = hk::dtype_bits(out_placed[i].dtype) / 8;
    for (int64_t off : hk::host::storage_offsets(out_placed[i]))
      for (int64_t b = 0; b < esize; ++b) element[at + off * esize + b] = true;
    int64_t stray = 0;
    for (size_t b = 0; b < all.size(); ++b) stray += !element[b] && all[b] != hk::host::kPoisonByte;
    EXPECT_EQ(stray, 0) << what << ": " << out_placed[i].name << ": bytes outside the view written";
    std::vector<double> got;
    hk::host::decode(out_placed[i], storage, got);
    auto r = hk::bench::compare(out_placed[i], got, ref[i].values, p.tolerance(int(i)));
    EXPECT_TRUE(r.ok) << what << ": " << r.message;
    ok = ok && r.ok && stray == 0;
  }
  return ok;
}

}  // namespace hktest
