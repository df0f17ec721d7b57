// Ragged paged attention: one launch for every sequence of a step, whatever its number of
// new tokens (1 when decoding, 1 + draft length when verifying, the prompt when
// prefilling) and its cache length, with no padding.
//
// The host splits each sequence's new tokens into work items of at most
// attention_query_tile() queries; the grid is (work item, KV head). A block loads the
// queries of its item for every query head of its KV group (grouped-query attention reads
// each key once for the whole group), then streams the sequence's keys and values through
// shared memory in chunks of kKeys positions, found through the block table, with an
// online softmax (running max and sum per query) so the scores never leave the chip. The
// causal mask is per query: a query at position p sees keys 0..p, which covers both the
// cached context and the new tokens before it (their keys are written first).
#include <algorithm>
#include <cmath>

#include "common.cuh"

namespace specula::cuda {

namespace {

constexpr int kKeys = 32;      // key positions per chunk
constexpr int kThreads = 128;
constexpr int kQueryVectors = 16;  // queries x heads per block the tile aims at

size_t shared_bytes(int query_vectors, int head_dim) {
  const size_t floats = 2 * static_cast<size_t>(query_vectors) * head_dim  // q, acc
                        + static_cast<size_t>(kKeys) * (head_dim + 1)      // keys, padded
                        + static_cast<size_t>(kKeys) * head_dim            // values
                        + static_cast<size_t>(query_vectors) * kKeys       // scores
                        + 3 * static_cast<size_t>(query_vectors);          // max, sum, rescale
  return floats * sizeof(float);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) paged_attention_kernel(AttentionArgs a) {
  extern __shared__ float smem[];
  const int seq = a.work[3 * blockIdx.x], first = a.work[3 * blockIdx.x + 1];
  const int n_queries = a.work[3 * blockIdx.x + 2];
  const int kv_head = blockIdx.y;
  const int group = a.n_heads / a.n_kv_heads, hd = a.head_dim, kv_dim = a.n_kv_heads * hd;
  const int qv = n_queries * group;  // query vector r: token first + r / group, head kv_head * group + r % group

  float* q = smem;
  float* acc = q + qv * hd;
  float* keys = acc + qv * hd;
  float* values = keys + kKeys * (hd + 1);
  float* scores = values + kKeys * hd;
  float* row_max = scores + qv * kKeys;
  float* row_sum = row_max + qv;
  float* rescale = row_sum + qv;

  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  for (int i = threadIdx.x; i < qv * hd; i += blockDim.x) {
    const int r = i / hd, d = i % hd;
    const int64_t token = first + r / group;
    const int head = kv_head * group + r % group;
    q[i] = a.qkv[token * a.row_stride + head * hd + d] * scale;
    acc[i] = 0.0f;
  }
  for (int r = threadIdx.x; r < qv; r += blockDim.x) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
  }
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  const int32_t* table = a.block_tables + a.table_offsets[seq];
  const int n_keys = a.positions[first + n_queries - 1] + 1;  // the last query sees the most
  __syncthreads();

  for (int start = 0; start < n_keys; start += kKeys) {
    const int chunk = min(kKeys, n_keys - start);
    for (int i = threadIdx.x; i < chunk * hd; i += blockDim.x) {
      const int c = i / hd, d = i % hd, j = start + c;
      const int64_t slot = static_cast<int64_t>(table[j / a.block_size]) * a.block_size + j % a.block_size;
      const int64_t at = slot * kv_dim + kv_head * hd + d;
      keys[c * (hd + 1) + d] = to_float(k_cache[at]);
      values[c * hd + d] = to_float(v_cache[at]);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < qv * kKeys; i += blockDim.x) {
      const int r = i / kKeys, c = i % kKeys;
      float s = -INFINITY;
      if (c < chunk && start + c <= a.positions[first + r / group]) {
        s = 0.0f;
        for (int d = 0; d < hd; ++d) s += q[r * hd + d] * keys[c * (hd + 1) + d];
      }
      scores[i] = s;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < qv; r += blockDim.x) {
      float m = row_max[r];
      for (int c = 0; c < chunk; ++c) m = fmaxf(m, scores[r * kKeys + c]);
      if (m == -INFINITY) {  // every key of this chunk is in this query's future
        rescale[r] = 1.0f;
        for (int c = 0; c < kKeys; ++c) scores[r * kKeys + c] = 0.0f;
        continue;
      }
      float sum = 0.0f;
      for (int c = 0; c < kKeys; ++c) {
        const float e = c < chunk ? expf(scores[r * kKeys + c] - m) : 0.0f;
        scores[r * kKeys + c] = e;
        sum += e;
      }
      rescale[r] = expf(row_max[r] - m);
      row_sum[r] = row_sum[r] * rescale[r] + sum;
      row_max[r] = m;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < qv * hd; i += blockDim.x) {
      const int r = i / hd, d = i % hd;
      float v = acc[i] * rescale[r];
      for (int c = 0; c < chunk; ++c) v += scores[r * kKeys + c] * values[c * hd + d];
      acc[i] = v;
    }
    __syncthreads();
  }

  T* out = static_cast<T*>(a.out);
  for (int i = threadIdx.x; i < qv * hd; i += blockDim.x) {
    const int r = i / hd, d = i % hd;
    const int64_t token = first + r / group;
    const int head = kv_head * group + r % group;
    out[token * a.n_heads * hd + head * hd + d] = from_float<T>(acc[i] / row_sum[r]);
  }
}

}  // namespace

int attention_query_tile(int n_heads, int n_kv_heads) {
  return std::max(1, kQueryVectors / (n_heads / n_kv_heads));
}

void paged_attention(const AttentionArgs& args, cudaStream_t stream) {
  if (args.n_work == 0) return;
  const int group = args.n_heads / args.n_kv_heads;
  const size_t bytes = shared_bytes(attention_query_tile(args.n_heads, args.n_kv_heads) * group, args.head_dim);
  dispatch(args.cache_type, [&](auto zero) {
    using T = decltype(zero);
    check(cudaFuncSetAttribute(paged_attention_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(bytes)),
          "paged_attention shared memory");
    const dim3 grid(static_cast<unsigned>(args.n_work), static_cast<unsigned>(args.n_kv_heads));
    paged_attention_kernel<T><<<grid, kThreads, bytes, stream>>>(args);
  });
  check(cudaGetLastError(), "paged_attention");
}

}  // namespace specula::cuda
