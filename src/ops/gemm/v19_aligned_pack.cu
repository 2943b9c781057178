// gemm/v19_aligned_pack.cu
//
// Rung 19: every valid GEMM at the speed of the TMA kernels. TMA describes a matrix by a 16-byte
// aligned base and leading and batch strides that are multiples of 16 bytes, so v15-v18 decline
// a bf16 x W^T whose K is odd (K = 4095: a row of 8190 bytes), a view that starts one element
// into a buffer, a broadcast batch (stride 0), or an f16 C with an odd N. Before this rung such
// problems fell to the CUDA-core ladder: 4096x4096x4095 ran at 0.08x torch.matmul on the H200
// (2026-12-01), and cuBLAS itself drops to ~130 TFLOP/s there. Here each operand that breaks a
// rule is copied once into an aligned scratch with its leading dimension rounded up to 16 bytes
// (the padding zero-filled; TMA reads only the true extent), and the copies are handed to the
// family's dispatch again, which runs v18 (or v17 for decode shapes) on them. A C that TMA cannot
// store is computed into an aligned scratch and copied back row by row (only its N columns: the
// caller's padding is never written); where a C row is not whole 16-byte units (N = 203 at f32)
// N is rounded up, B gets zero columns and the bias zeros to match. C_in is read by the
// epilogue with scalar loads, so it is used in place whatever its alignment (also when it
// aliases C), and copied only when N is rounded up. K = 0 runs on one zero k-block of 8
// (A B = 0), so the epilogue alone writes act(beta C_in + bias).
// The copies stream A and B once each (read + write), a few percent of a GEMM's time where K,
// M and N are in the thousands: 2 x 32 MiB for 4096x4096x4095, ~30 us at copy bandwidth beside
// ~180 us of GEMM.
// Adds over v18: no operand layout or alignment outside the fast path.
// Needs: sm_90a (v18's); dimensions and leading dims below 2^31 (TMA's coordinates).
// Kernel: copy_lines_kernel below, then the dispatch's choice for the aligned problem.
// Run:   hk bench gemm --variant 'v19*' --shape 4096x4096x4095
#include <cstdint>

#include "common/launch.cuh"
#include "core/scratch.hpp"
#include "gemm/gemm_op.hpp"
#include "hk/error.hpp"

namespace hk::gemm_v19_aligned_pack {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kAlign = 16;  // bytes: TMA's rule for bases and strides

// Line l of batch b of src (src + b * src_bs + l * src_ld, `inner` elements) is copied to the
// same line of dst. kPad: dst is an aligned scratch of `dst_lines` (>= lines) lines of `width`
// (>= inner) elements, a multiple of 16 bytes; everything past `inner` and past `lines` is
// zero-filled and each thread stores 16 bytes at once. Otherwise dst is the caller's C: exactly
// `inner` elements of `lines` lines are written, scalar. Loads are scalar (src may sit at any
// element alignment) but coalesced: a warp reads 32 adjacent 16-byte windows of one line.
template <class T, bool kPad>
__global__ void __launch_bounds__(kThreads)
    copy_lines_kernel(const T* __restrict__ src, int64_t src_ld, int64_t src_bs, T* __restrict__ dst, int64_t dst_ld,
                      int64_t dst_bs, int64_t lines, int64_t dst_lines, int64_t inner, int64_t width, int64_t batch) {
  constexpr int kPer = 16 / sizeof(T);
  const int64_t c0 = (int64_t(blockIdx.x) * kThreads + threadIdx.x) * kPer;
  if (c0 >= width) return;
  for (int64_t b = blockIdx.z; b < batch; b += gridDim.z)
    for (int64_t l = blockIdx.y; l < dst_lines; l += gridDim.y) {
      const T* s = src + b * src_bs + l * src_ld + c0;
      T* d = dst + b * dst_bs + l * dst_ld + c0;
      union {
        uint4 v;
        T e[kPer];
      } u;
#pragma unroll
      for (int i = 0; i < kPer; ++i) u.e[i] = l < lines && c0 + i < inner ? s[i] : T(0);
      if constexpr (kPad) {
        *reinterpret_cast<uint4*>(d) = u.v;
      } else {
#pragma unroll
        for (int i = 0; i < kPer; ++i)
          if (c0 + i < inner) d[i] = u.e[i];
      }
    }
}

template <bool kPad>
void copy_lines(int esize, const void* src, int64_t src_ld, int64_t src_bs, void* dst, int64_t dst_ld, int64_t dst_bs,
                int64_t lines, int64_t dst_lines, int64_t inner, int64_t batch, cudaStream_t stream) {
  const int64_t width = kPad ? dst_ld : inner;
  const int per = 16 / esize;
  dim3 grid(static_cast<unsigned>(ceil_div(ceil_div(width, per), kThreads)),
            static_cast<unsigned>(std::min<int64_t>(dst_lines, 65535)), static_cast<unsigned>(std::min<int64_t>(batch, 65535)));
  if (esize == 4) {
    copy_lines_kernel<uint32_t, kPad><<<grid, kThreads, 0, stream>>>(
        static_cast<const uint32_t*>(src), src_ld, src_bs, static_cast<uint32_t*>(dst), dst_ld, dst_bs, lines, dst_lines,
        inner, width, batch);
  } else {
    copy_lines_kernel<uint16_t, kPad><<<grid, kThreads, 0, stream>>>(
        static_cast<const uint16_t*>(src), src_ld, src_bs, static_cast<uint16_t*>(dst), dst_ld, dst_bs, lines, dst_lines,
        inner, width, batch);
  }
  HK_CHECK_LAUNCH("copy_lines_kernel");
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % kAlign == 0; }
int64_t round_up(int64_t v, int64_t to) { return ceil_div(v, to) * to; }

// One matrix operand as lines of contiguous elements: `lines` lines of `inner` elements, `ld`
// apart, batches `bs` apart; its copy has `lines_p` >= lines lines of `inner_p` >= inner
// elements (zero-filled past the true extents), each line a multiple of 16 bytes.
struct Lines {
  const void* data;
  int64_t lines, inner, ld, bs;
  int esize;
  int64_t lines_p = 0, inner_p = 0;
  // TMA can read it as it is.
  bool tma_ok(int64_t batch) const {
    return aligned(data) && (ld * esize) % kAlign == 0 && (batch == 1 || (bs > 0 && (bs * esize) % kAlign == 0));
  }
  int64_t packed_ld() const { return round_up(std::max<int64_t>(inner_p, 1), kAlign / esize); }
  int64_t packed_bytes(int64_t batch) const { return round_up(packed_ld() * lines_p * batch * esize, 256); }
};

// The problem that `g` poses (what supports() reads), for the dispatch's second pass.
GemmProblem problem_of(const GemmArgs& g) {
  GemmProblem p(g.m, g.n, g.k, g.batch, g.in_dtype, g.out_dtype, g.a_col, g.b_col);
  p.lda = g.lda, p.ldb = g.ldb, p.ldc = g.ldc, p.ldc_in = g.ldc_in;
  p.batch_stride_a = g.batch_stride_a, p.batch_stride_b = g.batch_stride_b;
  p.batch_stride_c = g.batch_stride_c, p.batch_stride_c_in = g.batch_stride_c_in;
  p.act = g.act, p.has_bias = g.bias != nullptr, p.alpha = g.alpha, p.beta = g.beta;
  // C_in is read with scalar loads by every epilogue, so only A, B, C and bias set the rule.
  p.align_bytes = aligned(g.a) && aligned(g.b) && aligned(g.c) && (!g.bias || aligned(g.bias)) ? 256 : 2;
  return p;
}

void gemm_v19_launch(const GemmArgs& g, cudaStream_t stream) {
  const int ein = dtype_bits(g.in_dtype) / 8, eout = dtype_bits(g.out_dtype) / 8;
  GemmArgs q = g;
  // K = 0: one zero k-block of 8 (A B = 0), so the kernels' K >= 1 holds. A K that is not whole
  // 16-byte units is rounded up, both copies zero-filled past it (the product is unchanged): the
  // dispatch hands small plain products to cuBLAS, which keeps its slow path for an unaligned K
  // even on aligned copies (4096x4096x1001 bf16: 372 us with K = 1001 and padded rows, 73 us
  // when v18 ran those copies; H200, 2026-12-03).
  const bool k0 = g.k == 0;
  const bool pad_k = !k0 && (g.k * ein) % kAlign != 0;
  q.k = k0 ? 8 : pad_k ? round_up(g.k, kAlign / ein) : g.k;
  const int64_t k_src = k0 ? q.k : g.k;  // K = 0 copies nothing: its scratch is zeroed
  Lines c{g.c, g.m, g.n, g.ldc, g.batch_stride_c, eout};
  // TMA stores whole 16-byte units, so a C row must be whole units: N is rounded up and the
  // GEMM computes the extra columns (zero columns of B, zero bias) into the scratch C.
  const bool pack_c = !c.tma_ok(g.batch) || (g.n * eout) % kAlign != 0;
  q.n = pack_c ? round_up(g.n, kAlign / eout) : g.n;
  const bool wide = q.n != g.n;
  Lines a{g.a, g.a_col ? k_src : g.m, g.a_col ? g.m : k_src, g.lda, g.batch_stride_a, ein};
  Lines b{g.b, g.b_col ? g.n : k_src, g.b_col ? k_src : g.n, g.ldb, g.batch_stride_b, ein};
  a.lines_p = g.a_col ? q.k : g.m, a.inner_p = g.a_col ? g.m : q.k;
  b.lines_p = g.b_col ? q.n : q.k, b.inner_p = g.b_col ? q.k : q.n;
  c.lines_p = c.lines, c.inner_p = q.n;
  Lines c_in{g.c_in, g.m, g.n, g.ldc_in, g.batch_stride_c_in, eout, g.m, q.n};
  const bool pack_a = k0 || pad_k || !a.tma_ok(g.batch), pack_b = k0 || pad_k || wide || !b.tma_ok(g.batch);
  // C_in is read with scalar loads wherever it is, but not past its N columns.
  const bool pack_c_in = g.c_in && wide;
  const bool pack_bias = g.bias && (wide || !aligned(g.bias));
  const int64_t bytes_a = pack_a ? a.packed_bytes(g.batch) : 0, bytes_b = pack_b ? b.packed_bytes(g.batch) : 0;
  const int64_t bytes_c = pack_c ? c.packed_bytes(g.batch) : 0, bytes_c_in = pack_c_in ? c_in.packed_bytes(g.batch) : 0;
  const int64_t bytes_bias = pack_bias ? round_up(q.n * eout, 256) : 0;
  detail::StreamWorkspace ws(stream, "gemm_v19_operands",
                             std::max<int64_t>(bytes_a + bytes_b + bytes_c + bytes_c_in + bytes_bias, 256));
  char* next = static_cast<char*>(ws.get());
  auto pack = [&](const Lines& l, int64_t bytes, const void*& ptr, int64_t& ld, int64_t& bs) {
    void* dst = next;
    next += bytes;
    ld = l.packed_ld(), bs = ld * l.lines_p;
    if (k0) HK_CHECK_CUDA(cudaMemsetAsync(dst, 0, bytes, stream));
    else copy_lines<true>(l.esize, l.data, l.ld, l.bs, dst, ld, bs, l.lines, l.lines_p, l.inner, g.batch, stream);
    ptr = dst;
  };
  if (pack_a) pack(a, bytes_a, q.a, q.lda, q.batch_stride_a);
  if (pack_b) pack(b, bytes_b, q.b, q.ldb, q.batch_stride_b);
  if (pack_c_in) {
    void* dst = next;
    next += bytes_c_in;
    q.ldc_in = c_in.packed_ld(), q.batch_stride_c_in = q.ldc_in * g.m;
    copy_lines<true>(eout, g.c_in, g.ldc_in, g.batch_stride_c_in, dst, q.ldc_in, q.batch_stride_c_in, g.m, g.m, g.n,
                     g.batch, stream);
    q.c_in = dst;
  }
  if (pack_c) {
    q.c = next;
    next += bytes_c;
    q.ldc = c.packed_ld(), q.batch_stride_c = q.ldc * g.m;
  }
  if (pack_bias) {
    if (wide) HK_CHECK_CUDA(cudaMemsetAsync(next, 0, bytes_bias, stream));
    HK_CHECK_CUDA(cudaMemcpyAsync(next, g.bias, g.n * eout, cudaMemcpyDeviceToDevice, stream));
    q.bias = next;
  }
  const GemmProblem p = problem_of(q);
  const Choice choice = Registry::get().choose(p);
  if (choice.variant->name() == "v19_aligned_pack")
    HK_THROW(kInternal, "gemm/v19_aligned_pack: the aligned copy of ", p.key(), " is still not TMA-describable");
  Operands ops;
  ops.in = {TensorView(q.a, g.in_dtype, {}), TensorView(q.b, g.in_dtype, {})};
  if (q.c_in) ops.in.emplace_back(q.c_in, g.out_dtype, std::vector<int64_t>{});
  if (q.bias) ops.in.emplace_back(q.bias, g.out_dtype, std::vector<int64_t>{});
  ops.out = {TensorView(q.c, g.out_dtype, {})};
  choice.variant->run(p, ops, stream);
  if (pack_c)
    copy_lines<false>(eout, q.c, q.ldc, q.batch_stride_c, g.c, g.ldc, g.batch_stride_c, g.m, g.m, g.n, g.batch, stream);
}

std::string gemm_v19_supports(const GemmProblem& p) {
  for (int64_t v : {p.m, p.n, p.k, p.batch})
    if (v > INT32_MAX) return "gemm: TMA coordinates are 32-bit, got a dimension of 2^31 or more";
  return "";
}

}  // namespace

HK_REGISTER_VARIANT(GemmProblem, GemmArgs, "gemm", "v19_aligned_pack",
                    "any layout or alignment: operands TMA cannot describe are copied into aligned scratch "
                    "(one pass each), then the dispatch's TMA kernel runs on the copies",
                    90, kFlagProduction, gemm_v19_supports, gemm_v19_launch);

}  // namespace hk::gemm_v19_aligned_pack
