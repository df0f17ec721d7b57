// Token tiles and weight prefetch: the loop shapes every matrix kernel shares.
// Part of the kernel algorithms written once over a vector layer V (cpu_kernel_templates.h
// says how they are compiled per SIMD level); in an unnamed namespace like all of them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "compute/cpu_kernel_table.h"

namespace specula::kernels {
namespace {

// Calls tile.template operator()<T>(t) for tiles of `Max`, then one smaller tile, covering
// tokens 0..n-1.
template <int T, class Tile>
inline void run_token_tile(int count, int t, Tile& tile) {
  if constexpr (T > 1) {
    if (count < T) return run_token_tile<T - 1>(count, t, tile);
  }
  tile.template operator()<T>(t);
}
template <int Max, class Tile>
inline void each_token_tile(int n, Tile&& tile) {
  for (int t = 0; t < n;) {
    const int count = std::min(n - t, Max);
    run_token_tile<Max>(count, t, tile);
    t += count;
  }
}

// Software prefetch of the weight stream, kAhead bytes ahead of the block a tile is reading
// (panels lie one after another, so that runs on into the next panel): the hardware
// prefetchers alone keep too few lines in flight for the cores to read at the memory's rate,
// in one-token decoding and, more still, in tiles of a few tokens, whose arithmetic spaces
// the loads out. The distances come from alternated runs of the 1.1B files at 4 and 8 KiB:
// 4 KiB for the 32-value blocks and the float panels, 8 KiB for the K-quants' 256-value ones
// and for Q8_0's tiles of several tokens
// (docs/cpu_backend.md). The lines go to the L2 cache (prefetcht2), not the L1: a prefetch
// into the L1 holds one of the core's few L1 miss buffers until its line arrives, which
// capped a Zen 4 core's tiles of 4 and 8 tokens near 12 GB/s; into the L2, 4 to 8 tokens ran
// 1.15x to 1.6x as fast on every type (F16 4 tokens 40 -> 67 tok/s, Q4_K_M 8 tokens 126 ->
// 204), one token as before. A tile of one token prefetches only where that is faster
// (PackedMatrix::one_token_prefetch: on AMD's cores the hardware prefetchers alone stream the
// 32-value blocks and float chunks faster, cpu_kernels.cpp). Prefetches never fault, past the
// matrix's end included.
template <size_t kAhead>
inline void prefetch_ahead(const uint8_t* block, size_t bytes) {
  for (size_t line = 0; line < bytes; line += 64) __builtin_prefetch(block + kAhead + line, 0, 1);
}

}  // namespace
}  // namespace specula::kernels
