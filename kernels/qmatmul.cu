// Products with quantized weights that stay quantized on the device (Q8_0, Q4_0, Q4_1, Q5_1,
// Q4_K, Q5_K, Q2_K, Q6_K and IQ4_XS in the tiles of quant_tiles.h), for the decode and
// verification regime and, in the batch-invariant mode, for everything.
//
// Design (the one llama.cpp's mmq kernels and Marlin arrive at for small batches): the
// product is bound by reading the weights, so each weight is read from memory once per
// launch and turned into tensor-core operands in registers, never staged as fp16 anywhere.
//   - A block is 4 warps; warp w owns tile row blockIdx.y * 4 + w (16 weight rows) and walks
//     the 256-column tiles of its k range. Its lane loads its tile's codes as 16-byte words
//     (coalesced: the 32 lanes read 512 consecutive bytes per word) plus 16 bytes of scales
//     for each of its two rows.
//   - The activations of the tile's 256 columns, for the block's 8 * NT rows, are copied
//     into shared memory once per block (all 4 warps use them), rows padded to 544 bytes so
//     the fragment reads do not conflict.
//   - Codes become fp16 with one OR into 0x6400 (1024.0) and one subtraction per pair,
//     exactly (|code - offset| <= 128); mma.m16n8k16 multiplies them with the activations
//     in fp32, and each scale group's partial sums are scaled in fp32 afterwards, so no
//     weight is ever rounded to fp16 (more precise than expanding the matrix to fp16).
//     The minimums (Q4_1, Q5_1 and the K-quants but Q6_K) take one more mma per step
//     against a register of ones: the sums of the activations.
//   - Matrices too short to fill the device are also split along k over gridDim.z blocks,
//     whose partial sums a second kernel adds in split order.
// Batch invariance: an output's value is a fixed sequence of mma and fma steps over its
// k range, split by the matrix shape and the device's SM count alone; the number of rows in
// the launch (m, NT, gridDim.x) changes which outputs are computed, never how. The
// activation rows past m are zeros, and zero columns of the mma do not touch the others.
#include <cuda_fp16.h>

#include <algorithm>
#include <stdexcept>
#include <type_traits>

#include "common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "the quantized products need mma.m16n8k16 (sm_80 or newer)"
#endif

namespace specula::cuda {

namespace {

constexpr int kWarps = 4;  // tile rows per block
constexpr int kThreads = kWarps * 32;
constexpr int kXStride = tiles::kCols + 16;  // halves per activation row in shared memory

__device__ __forceinline__ void mma_f16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// A code pair (16-bit halves) minus the format's zero code, as two exact fp16 values.
template <tiles::Format F>
__device__ __forceinline__ uint32_t codes_to_half2(uint32_t pair) {
  constexpr unsigned short bias = 0x6400 + tiles::code_offset(F);  // 1024 + offset, exact in fp16
  const uint32_t biased = pair | 0x64006400u;
  const __half2 v = __hsub2(*reinterpret_cast<const __half2*>(&biased), __half2half2(__ushort_as_half(bias)));
  return *reinterpret_cast<const uint32_t*>(&v);
}

__device__ __forceinline__ uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}
__device__ __forceinline__ uint8_t byte_of(const uint4& v, int i) { return (word_of(v, i / 4) >> (8 * (i % 4))) & 0xff; }
__device__ __forceinline__ float half_of(uint32_t word, int i) {
  return __half2float(__ushort_as_half(static_cast<unsigned short>(word >> (16 * i))));
}

// The scale of group g for one row: the factor of the group's mma sum.
template <tiles::Format F>
__device__ __forceinline__ float group_scale(const uint4& scales, const uint4& super, int g) {
  using tiles::Format;
  if constexpr (F == Format::Q8_0 || F == Format::Q4_0 || F == Format::Q4_1 || F == Format::Q5_1) {
    return half_of(word_of(scales, g / 2), g % 2);
  } else if constexpr (F == Format::Q4_K || F == Format::Q5_K) {
    return half_of(super.x, 0) * static_cast<float>(byte_of(scales, g));
  } else if constexpr (F == Format::Q2_K) {
    return half_of(super.x, 0) * static_cast<float>(byte_of(scales, g) & 0xF);
  } else {  // Q6_K, IQ4_XS
    return half_of(super.x, 0) * static_cast<float>(static_cast<int8_t>(byte_of(scales, g)));
  }
}
// The factor of the group's sum of activations, subtracted: the K-quants' scaled minimum,
// or minus Q4_1's and Q5_1's minimum (added).
template <tiles::Format F>
__device__ __forceinline__ float group_minimum(const uint4& scales, const uint4& super, int g) {
  using tiles::Format;
  if constexpr (F == Format::Q4_1 || F == Format::Q5_1) {
    return -half_of(word_of(super, g / 2), g % 2);
  } else if constexpr (F == Format::Q2_K) {
    return half_of(super.x, 1) * static_cast<float>(byte_of(scales, g) >> 4);
  } else {  // Q4_K, Q5_K
    return half_of(super.x, 1) * static_cast<float>(byte_of(scales, 8 + g));
  }
}

struct QuantArgs {
  const uint8_t* w;
  int rows, cols;
  int64_t panel_bytes;
  int ktiles;
  int split_ktiles;     // k tiles per blockIdx.z
  const __half* x;      // (m, cols)
  int m;
  float* y;             // y[i * ldy + j], plus blockIdx.z * split_stride
  int ldy;
  int64_t split_stride;
};

template <tiles::Format F, int NT>
__global__ void __launch_bounds__(kThreads) quant_gemm_kernel(QuantArgs a) {
  __shared__ __align__(16) __half xs[8 * NT][kXStride];
  constexpr int QW = tiles::quant_words(F);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int batch0 = blockIdx.x * 8 * NT;
  const int row_tile = blockIdx.y * kWarps + warp;
  const bool active = row_tile * tiles::kRows < a.rows;  // inactive warps still share the barriers
  const uint8_t* panel = a.w + row_tile * a.panel_bytes;
  const int kt_begin = blockIdx.z * a.split_ktiles, kt_end = min(a.ktiles, kt_begin + a.split_ktiles);
  float acc[NT][4] = {};

  for (int kt = kt_begin; kt < kt_end; ++kt) {
    // the warp's codes and scales first, so they are in flight while the activations load
    uint32_t q[4 * QW];
    uint4 scales[2] = {};
    uint4 supers[2] = {};
    if (active) {
#pragma unroll
      for (int v = 0; v < QW; ++v) {
        const uint4 u = __ldg(reinterpret_cast<const uint4*>(panel + tiles::quant_offset(F, kt, v, lane)));
        q[4 * v] = u.x, q[4 * v + 1] = u.y, q[4 * v + 2] = u.z, q[4 * v + 3] = u.w;
      }
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        scales[h] = __ldg(reinterpret_cast<const uint4*>(panel + tiles::scale_offset(F, a.ktiles, kt, g + 8 * h)));
        const uint8_t* super = panel + tiles::super_offset(F, a.ktiles, kt, g + 8 * h);
        if constexpr (tiles::super_bytes(F) == 16) {
          supers[h] = __ldg(reinterpret_cast<const uint4*>(super));
        } else if constexpr (tiles::super_bytes(F) == 4) {
          supers[h].x = __ldg(reinterpret_cast<const uint32_t*>(super));
        }
      }
    }
    __syncthreads();  // the previous tile's activations are read
    for (int i = threadIdx.x; i < 8 * NT * 32; i += kThreads) {
      const int r = i / 32, col = kt * tiles::kCols + (i % 32) * 8;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (batch0 + r < a.m && col < a.cols) {
        v = __ldg(reinterpret_cast<const uint4*>(a.x + static_cast<int64_t>(batch0 + r) * a.cols + col));
      }
      *reinterpret_cast<uint4*>(&xs[r][(i % 32) * 8]) = v;
    }
    __syncthreads();
    if (!active) continue;

#pragma unroll
    for (int c = 0; c < tiles::kChunks; ++c) {
      float part[NT][4] = {}, sums[NT][4] = {};
#pragma unroll
      for (int s = 0; s < tiles::kSteps; ++s) {
        uint32_t frag[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) frag[r] = codes_to_half2<F>(tiles::fragment_codes(F, q, c, s, r));
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
          const uint2 b = *reinterpret_cast<const uint2*>(&xs[8 * nt + g][64 * c + 16 * s + 4 * t]);
          mma_f16(part[nt], frag, b.x, b.y);
          if constexpr (tiles::has_minimum(F)) {
            constexpr uint32_t kOnes = 0x3c003c00u;  // 1.0 in both halves
            const uint32_t ones[4] = {kOnes, kOnes, kOnes, kOnes};
            mma_f16(sums[nt], ones, b.x, b.y);
          }
        }
        // a group ends every step (16 values) or every other step (32 values)
        if (tiles::group_size(F) == 16 || s % 2 == 1) {
          const int grp = tiles::group_of(F, c, s);
          const float scale[2] = {group_scale<F>(scales[0], supers[0], grp), group_scale<F>(scales[1], supers[1], grp)};
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
              acc[nt][i] = fmaf(scale[i / 2], part[nt][i], acc[nt][i]);
              part[nt][i] = 0.0f;
            }
          }
          if constexpr (tiles::has_minimum(F)) {
            const float minimum[2] = {group_minimum<F>(scales[0], supers[0], grp),
                                      group_minimum<F>(scales[1], supers[1], grp)};
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                acc[nt][i] = fmaf(-minimum[i / 2], sums[nt][i], acc[nt][i]);
                sums[nt][i] = 0.0f;
              }
            }
          }
        }
      }
    }
  }
  if (!active) return;
  float* y = a.y + blockIdx.z * a.split_stride;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = row_tile * tiles::kRows + g + 8 * (i / 2);
      const int b = batch0 + 8 * nt + 2 * t + i % 2;
      if (row < a.rows && b < a.m) y[static_cast<int64_t>(b) * a.ldy + row] = acc[nt][i];
    }
  }
}

// y[i * ldy + j] = the splits' partial sums added in split order.
__global__ void add_splits_kernel(const float* partials, int splits, int m, int rows, float* y, int ldy) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(m) * rows) return;
  const int64_t b = i / rows, j = i % rows;
  float sum = partials[i];
  for (int s = 1; s < splits; ++s) sum += partials[s * static_cast<int64_t>(m) * rows + i];
  y[b * ldy + j] = sum;
}

// Every value of a tile row range, rounded once to fp16, row-major: one warp per tile,
// each lane decoding its fragment values as the product kernel does.
template <tiles::Format F>
__global__ void dequantize_kernel(const uint8_t* w, tiles::Shape shape, int first_tile_row, int64_t end_row,
                                  __half* out) {
  const int lane = threadIdx.x;
  const int row_tile = first_tile_row + blockIdx.x, kt = blockIdx.y;
  const uint8_t* panel = w + row_tile * shape.panel_bytes();
  uint32_t q[4 * tiles::quant_words(F)];
#pragma unroll
  for (int v = 0; v < tiles::quant_words(F); ++v) {
    const uint4 u = __ldg(reinterpret_cast<const uint4*>(panel + tiles::quant_offset(F, kt, v, lane)));
    q[4 * v] = u.x, q[4 * v + 1] = u.y, q[4 * v + 2] = u.z, q[4 * v + 3] = u.w;
  }
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int tile_row = tiles::lane_row(lane, half);
    const int64_t row = static_cast<int64_t>(row_tile) * tiles::kRows + tile_row;
    if (row >= end_row) continue;
    const uint8_t* scales = panel + tiles::scale_offset(F, shape.ktiles(), kt, tile_row);
    const uint8_t* super = tiles::has_supers(F) ? panel + tiles::super_offset(F, shape.ktiles(), kt, tile_row) : nullptr;
#pragma unroll
    for (int c = 0; c < tiles::kChunks; ++c) {
#pragma unroll
      for (int s = 0; s < tiles::kSteps; ++s) {
        const int64_t col = static_cast<int64_t>(kt) * tiles::kCols + tiles::lane_col(lane, c, s, 0);
        if (col >= shape.cols) continue;
        __half v[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const uint32_t pair = tiles::fragment_codes(F, q, c, s, tiles::reg_of(half, j));
          const int code = static_cast<int>((pair >> (16 * tiles::elem_of(j))) & 0xffff);
          v[j] = __float2half_rn(tiles::tile_value(F, code, scales, super, tiles::group_of(F, c, s)));
        }
        *reinterpret_cast<uint2*>(out + (row - static_cast<int64_t>(first_tile_row) * tiles::kRows) * shape.cols + col) =
            *reinterpret_cast<const uint2*>(v);
      }
    }
  }
}

template <typename F>
void dispatch_format(tiles::Format format, F&& f) {
  using tiles::Format;
  switch (format) {
    case Format::Q8_0: f(std::integral_constant<Format, Format::Q8_0>{}); return;
    case Format::Q4_0: f(std::integral_constant<Format, Format::Q4_0>{}); return;
    case Format::Q4_1: f(std::integral_constant<Format, Format::Q4_1>{}); return;
    case Format::Q5_1: f(std::integral_constant<Format, Format::Q5_1>{}); return;
    case Format::Q4_K: f(std::integral_constant<Format, Format::Q4_K>{}); return;
    case Format::Q5_K: f(std::integral_constant<Format, Format::Q5_K>{}); return;
    case Format::Q2_K: f(std::integral_constant<Format, Format::Q2_K>{}); return;
    case Format::Q6_K: f(std::integral_constant<Format, Format::Q6_K>{}); return;
    case Format::IQ4_XS: f(std::integral_constant<Format, Format::IQ4_XS>{}); return;
  }
}

int multiprocessors() {
  static const int count = [] {
    int device = 0, n = 0;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "multiprocessor count");
    return std::max(1, n);
  }();
  return count;
}

// k tiles per split: enough blocks to fill the device twice over, from the shape alone.
int split_ktiles(const QuantMatrix& w) {
  const tiles::Shape shape{w.format, w.rows, w.cols};
  const int row_blocks = static_cast<int>((shape.row_tiles() + kWarps - 1) / kWarps);
  const int ktiles = static_cast<int>(shape.ktiles());
  const int splits = std::clamp((2 * multiprocessors() + row_blocks - 1) / row_blocks, 1, ktiles);
  return (ktiles + splits - 1) / splits;
}

int split_count(const QuantMatrix& w) {
  const int ktiles = static_cast<int>(tiles::Shape{w.format, w.rows, w.cols}.ktiles());
  const int per = split_ktiles(w);
  return (ktiles + per - 1) / per;
}

}  // namespace

size_t quant_gemm_scratch(const QuantMatrix& w, int m) {
  const int splits = split_count(w);
  return splits > 1 ? static_cast<size_t>(splits) * m * w.rows : 0;
}

void quant_gemm(const QuantMatrix& w, const void* x, int m, float* y, int ldy, float* scratch, cudaStream_t stream) {
  if (m == 0 || w.rows == 0) return;
  const tiles::Shape shape{w.format, w.rows, w.cols};
  const int splits = split_count(w);
  QuantArgs a;
  a.w = static_cast<const uint8_t*>(w.data);
  a.rows = w.rows;
  a.cols = w.cols;
  a.panel_bytes = shape.panel_bytes();
  a.ktiles = static_cast<int>(shape.ktiles());
  a.split_ktiles = split_ktiles(w);
  a.x = static_cast<const __half*>(x);
  a.m = m;
  a.y = splits > 1 ? scratch : y;
  a.ldy = splits > 1 ? w.rows : ldy;
  a.split_stride = splits > 1 ? static_cast<int64_t>(m) * w.rows : 0;
  const unsigned row_blocks = static_cast<unsigned>((shape.row_tiles() + kWarps - 1) / kWarps);
  const auto launch = [&](auto nt) {
    constexpr int NT = decltype(nt)::value;
    const dim3 grid(blocks_for(m, 8 * NT), row_blocks, static_cast<unsigned>(splits));
    dispatch_format(w.format, [&](auto format) {
      quant_gemm_kernel<decltype(format)::value, NT><<<grid, kThreads, 0, stream>>>(a);
    });
  };
  if (m <= 8) {
    launch(std::integral_constant<int, 1>{});
  } else if (m <= 16) {
    launch(std::integral_constant<int, 2>{});
  } else if (m <= 32) {
    launch(std::integral_constant<int, 4>{});
  } else {
    launch(std::integral_constant<int, 8>{});
  }
  check(cudaGetLastError(), "quant_gemm");
  if (splits > 1) {
    const int64_t n = static_cast<int64_t>(m) * w.rows;
    add_splits_kernel<<<blocks_for(n, 256), 256, 0, stream>>>(scratch, splits, m, w.rows, y, ldy);
    check(cudaGetLastError(), "quant_gemm splits");
  }
}

void dequantize_rows(const QuantMatrix& w, int first_row, int n_rows, void* out, cudaStream_t stream) {
  if (n_rows == 0) return;
  if (first_row % tiles::kRows != 0 || first_row + n_rows > w.rows) throw std::invalid_argument("dequantize_rows: rows must start at a tile and lie in the matrix");
  const tiles::Shape shape{w.format, w.rows, w.cols};
  const dim3 grid(blocks_for(n_rows, tiles::kRows), static_cast<unsigned>(shape.ktiles()));
  dispatch_format(w.format, [&](auto format) {
    dequantize_kernel<decltype(format)::value><<<grid, 32, 0, stream>>>(static_cast<const uint8_t*>(w.data), shape,
                                                                        first_row / tiles::kRows, first_row + n_rows,
                                                                        static_cast<__half*>(out));
  });
  check(cudaGetLastError(), "dequantize_rows");
}

}  // namespace specula::cuda
