// The kernel algorithms, written once over a thin vector layer V and compiled by each SIMD
// level's translation unit with its own V (cpu_vec_portable.h, cpu_vec_avx2.h,
// cpu_vec_avx512.h) under its own target options. Everything here is in an unnamed
// namespace: each translation unit gets its own copy, so code compiled for AVX-512 can
// never be merged with, or called in place of, its baseline twin.
//
// V provides kLanes (8 or 16 lanes of 32 bits), kRegisters (16 or 32 vector registers),
// kVnni (whether dpbusd is the fast product), float vectors F, integer vectors I and
// primitives named after the instruction each maps to. Rows of a repacked panel sit in
// the lanes; every per-lane operation is independent of the lane count, so the 16-lane
// algorithms can run (and be tested) on pairs of AVX2 registers.
//
// Batch invariance: an output element is one accumulator, updated by the same sequence of
// operations in every tile shape (rows × tokens) and every split; integer sums inside a
// block are exact, so the order in which the products of a block are added is free.
#pragma once


#include "compute/cpu_kernel_table.h"
#include "compute/cpu_kernel_tiles.h"
#include "compute/cpu_kernels_float.h"
#include "compute/cpu_kernels_quantized.h"
#include "compute/cpu_kernels_5bit.h"
#include "compute/cpu_kernels_q3k.h"
#include "compute/cpu_kernels_iq4.h"
#include "compute/cpu_kernels_quantize.h"
#include "compute/cpu_kernels_exp.h"
#include "compute/cpu_kernels_attention.h"
#include "compute/cpu_kernels_peak.h"

namespace specula::kernels {
namespace {

// ---- the level's table ------------------------------------------------------------------

// VQ4K: the vector type of the Q4_K kernel (its lanes are the rows of a Q4_K panel).
template <class V, class VQ4K = V>
KernelTable make_kernel_table() {
  KernelTable table{};
  table.lanes = V::kLanes;
  table.q4_k_rows = VQ4K::kLanes;
  table.float_rows = kFloatPanelRows<V>;
  table.vnni = V::kVnni;
  table.f32 = float_rows<V, F32Load>;
  table.f16 = float_rows<V, F16Load>;
  table.bf16 = float_rows<V, BF16Load>;
  table.q8_0 = panel_rows<V, Q8_0Panel<V>>;
  table.q4_0 = panel_rows<V, Q4_0Panel<V>>;
  table.q4_1 = panel_rows<V, AffinePanel<V>>;
  table.q5_0 = panel_rows<V, Q5Panel<V, false>>;
  table.q5_1 = panel_rows<V, Q5Panel<V, true>>;
  table.q5_k = panel_rows<V, Q5_KPanel<V>>;
  table.iq4_xs = panel_rows<V, LookupPanel<V, LookupType::IQ4_XS>>;
  table.iq4_nl = panel_rows<V, LookupPanel<V, LookupType::IQ4_NL>>;
  table.mxfp4 = panel_rows<V, LookupPanel<V, LookupType::MXFP4>>;
  table.q4_k = panel_rows<VQ4K, Q4_KPanel<VQ4K>>;
  table.q6_k = panel_rows<V, Q6_KPanel<V>>;
  table.q2_k = panel_rows<V, Q2_KPanel<V>>;
  table.q3_k = panel_rows<V, Q3_KPanel<V>>;
  table.quantize_q8 = quantize_q8<V>;
  table.quantize_q8k = quantize_q8k<V>;
  if constexpr (V::kLanes == 8) table.attend = attend<V>;
  table.peak = peak_loop<V>;
  table.log_sum_exp = log_sum_exp<V>;
  return table;
}

}  // namespace
}  // namespace specula::kernels
