// conv2d/im2col_tma.hpp — the geometry of the implicit GEMM's im2col-mode TMA loads (v06): the
// tensor map's bounding box, and the coordinates and offsets of the load that fills one A tile.
// Host and device code; the CPU suite checks it against the im2col matrix with a model of TMA's
// traversal (tests/cpp/test_conv2d.cpp).
//
// The implicit GEMM: y [M, Cout] = P [M, K] . W^T with M = N OH OW output pixels in (n, oy, ox)
// order and K = kH kW C in (ky, kx, c) order, c fastest (the NHWC weight [Cout, kH, kW, C] as it
// lies in memory). P[m, k] = x[n, oy sh - pt + ky dh, ox sw - pl + kx dw, c], zero outside x.
// A k-block is 64 values of k: one tap (ky, kx) and channels c0 .. c0 + 63 (C a multiple of 64).
//
// TMA's im2col mode, for a rank-4 map over x (dims c, w, h, n): the bounding box along W runs
// from lower_w to W - 1 + upper_w in steps of stride_w (likewise along H); these are the input
// positions of the top-left tap, one per output column (row). A load names a start position
// (c, w, h, n) inside the box and the offsets (off_w, off_h); it reads `pixels` positions walking
// the box along W, wrapping to the next row at the box's end, and from the last row to the next
// image, and for each position p the channels c .. c + channels - 1 of x at p + (off_w, off_h),
// zeros where that lies outside x (the padding, and images past N).
#pragma once

#include <cstdint>

#include "common/host_device.hpp"
#include "hk/ops/conv2d.hpp"

namespace hk::conv2d_im2col {

struct Coords {
  int32_t c, w, h, n;      // start position
  uint16_t off_w, off_h;  // the tap's offsets
};

struct Geometry {
  int32_t pixels_per_image = 1;  // OH OW
  int32_t ow = 1;
  int32_t stride_h = 1, stride_w = 1;
  int32_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
  int32_t dilation_h = 1, dilation_w = 1;
  int32_t kh = 1, kw = 1;
  int32_t channel_blocks = 1;  // C / 64: k-blocks per tap

  static constexpr int kTapChannels = 64;

  // The bounding box's corners (TMA's pixelBoxLowerCorner / pixelBoxUpperCorner, W then H).
  HK_HOST_DEVICE int32_t lower_w() const { return -pad_left; }
  HK_HOST_DEVICE int32_t lower_h() const { return -pad_top; }
  HK_HOST_DEVICE int32_t upper_w() const { return pad_right - dilation_w * (kw - 1); }
  HK_HOST_DEVICE int32_t upper_h() const { return pad_bottom - dilation_h * (kh - 1); }

  // Where the walk of output pixels m0, m0 + 1, ... starts: the input position of pixel m0's
  // top-left tap (a point of the bounding box).
  HK_HOST_DEVICE_INLINE void start(int32_t m0, Coords& at) const {
    const int32_t img = m0 / pixels_per_image, rest = m0 - img * pixels_per_image;
    const int32_t oy = rest / ow, ox = rest - oy * ow;
    at.w = ox * stride_w - pad_left, at.h = oy * stride_h - pad_top, at.n = img;
  }
  // Which channels and tap offsets the k-block of columns k0 .. k0 + 63 reads.
  HK_HOST_DEVICE_INLINE void columns(int32_t k0, Coords& at) const {
    const int32_t kb = k0 / kTapChannels;
    const int32_t tap = kb / channel_blocks, ky = tap / kw, kx = tap - ky * kw;
    at.c = (kb - tap * channel_blocks) * kTapChannels;
    at.off_w = static_cast<uint16_t>(kx * dilation_w), at.off_h = static_cast<uint16_t>(ky * dilation_h);
  }
  // The load of k-block k0 / 64 for the tile whose first output pixel is m0.
  HK_HOST_DEVICE_INLINE Coords load(int32_t m0, int32_t k0) const {
    Coords at{};
    start(m0, at);
    columns(k0, at);
    return at;
  }
};

// The geometry of a forward convolution with parameters p, C input channels (a multiple of 64),
// a kh x kw kernel and an oh x ow output.
inline Geometry geometry(const Conv2dParams& p, int64_t c, int64_t kh, int64_t kw, int64_t oh, int64_t ow) {
  Geometry geo;
  geo.pixels_per_image = static_cast<int32_t>(oh * ow);
  geo.ow = static_cast<int32_t>(ow);
  geo.stride_h = static_cast<int32_t>(p.stride_h), geo.stride_w = static_cast<int32_t>(p.stride_w);
  geo.pad_top = static_cast<int32_t>(p.pad_top), geo.pad_bottom = static_cast<int32_t>(p.pad_bottom);
  geo.pad_left = static_cast<int32_t>(p.pad_left), geo.pad_right = static_cast<int32_t>(p.pad_right);
  geo.dilation_h = static_cast<int32_t>(p.dilation_h), geo.dilation_w = static_cast<int32_t>(p.dilation_w);
  geo.kh = static_cast<int32_t>(kh), geo.kw = static_cast<int32_t>(kw);
  geo.channel_blocks = static_cast<int32_t>(c / Geometry::kTapChannels);
  return geo;
}

// The data gradient of a stride-1 convolution as a forward one: dx = conv(dy, w') where w'
// [C, kH, kW, Cout] is the weight with C and Cout swapped and its taps reversed, w'[c, ky, kx, co]
// = w[co, kH - 1 - ky, kW - 1 - kx, c], and each side padded by the kernel's reach less its own
// padding: dx[iy] sums dy[oy] over oy = iy + pt - ky d = iy - (d (kH - 1) - pt) + (kH - 1 - ky) d.
// Needs every padding at most the reach (d (k - 1)), so the new padding is >= 0.
inline Conv2dParams dgrad_as_forward(const Conv2dParams& p, int64_t kh, int64_t kw) {
  Conv2dParams q = p;
  q.pad_top = p.dilation_h * (kh - 1) - p.pad_top, q.pad_bottom = p.dilation_h * (kh - 1) - p.pad_bottom;
  q.pad_left = p.dilation_w * (kw - 1) - p.pad_left, q.pad_right = p.dilation_w * (kw - 1) - p.pad_right;
  return q;
}

}  // namespace hk::conv2d_im2col
