// Ragged paged attention, split along the keys (flash-decoding): one launch for every
// sequence of a step whatever its number of new tokens (1 when decoding, 1 + draft length
// when verifying, the prompt when prefilling) and its cache length, with no padding.
//
// The host cuts each sequence's new tokens into work items of at most attention_query_tile()
// queries, and each item's context into pieces of kPieceKeys keys at fixed positions
// (device_plan.h). The grid is (task, KV head): a block loads its item's queries for every
// query head of its KV group (grouped-query attention reads each key once for the whole
// group) and, for each piece of its task:
//   - copies the piece's keys into shared memory with 16-byte loads through the block table,
//   - scores them, one thread per key (kPieceKeys threads), every query vector at once,
//   - takes each query vector's softmax over the piece in one warp (shuffle reductions),
//   - copies the values over the keys and accumulates p * v, one thread per output element,
//     summing the piece's keys in order,
// then folds the piece (its max, sum and weighted values) into a running state. A decode or
// verification item has one task per piece, so long contexts spread over many blocks; those
// write their pieces to a scratch buffer and combine_kernel folds them in piece order, with
// the very same fold. A query's result is thus its pieces folded in order, the pieces fixed
// by its position: the same bits in any batch, any item, any split of the sequence into calls
// (keys a query must not see are masked to exact zeros).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>

#include "common.cuh"

namespace specula::cuda {

namespace {

constexpr int kPieceKeys = 128;   // keys per piece: one per thread
constexpr int kThreads = kPieceKeys;
constexpr int kQueryVectors = 16; // query vectors (tokens x heads of a group) per block
constexpr int kMaxHeadDim = 256;
constexpr int kOutPerThread = kQueryVectors * kMaxHeadDim / kThreads;

struct Layout {  // shared memory of one block, in bytes
  size_t q, kv, scores, stats, total;
};
__host__ __device__ Layout layout_for(int head_dim, size_t element) {
  Layout l;
  l.q = static_cast<size_t>(kQueryVectors) * head_dim * sizeof(float);
  l.kv = static_cast<size_t>(kPieceKeys) * (head_dim * element + 16);  // rows padded by 16 bytes
  l.scores = static_cast<size_t>(kQueryVectors) * kPieceKeys * sizeof(float);
  l.stats = 2 * static_cast<size_t>(kQueryVectors) * sizeof(float);
  l.total = l.q + l.kv + l.scores + l.stats;
  return l;
}

// The fold of one piece (max m, sum l, weighted values o) into a running state (M, L, O),
// rounded step by step so the block and combine_kernel give the same bits.
__device__ __forceinline__ void fold_weights(float state_max, float piece_max, float& keep, float& take) {
  const float next = fmaxf(state_max, piece_max);
  keep = expf(state_max - next);  // 0 for the empty state (-inf)
  take = expf(piece_max - next);
}
__device__ __forceinline__ float fold(float state, float keep, float piece, float take) {
  return __fadd_rn(__fmul_rn(state, keep), __fmul_rn(piece, take));
}

// Copies the piece's key (or value) rows of this KV head into shared memory, zeros past `n`.
template <typename T>
__device__ void load_rows(const T* cache, const int32_t* table, int block_size, int kv_dim, int kv_head, int hd,
                          int first_key, int n, uint8_t* rows) {
  const int vectors = hd * static_cast<int>(sizeof(T)) / 16;  // 16-byte vectors per row
  const int row_bytes = hd * static_cast<int>(sizeof(T)) + 16;
  for (int i = threadIdx.x; i < kPieceKeys * vectors; i += blockDim.x) {
    const int key = i / vectors, v = i % vectors;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (key < n) {
      const int j = first_key + key;
      const int64_t slot = static_cast<int64_t>(table[j / block_size]) * block_size + j % block_size;
      value = __ldg(reinterpret_cast<const uint4*>(cache + slot * kv_dim + static_cast<int64_t>(kv_head) * hd) + v);
    }
    *reinterpret_cast<uint4*>(rows + key * row_bytes + v * 16) = value;
  }
}

template <typename T>
__device__ __forceinline__ float row_at(const uint8_t* rows, int row_bytes, int key, int d) {
  return to_float(reinterpret_cast<const T*>(rows + key * row_bytes)[d]);
}

template <typename T>
__global__ void __launch_bounds__(kThreads) attention_kernel(AttentionArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int* task = a.tasks + 4 * blockIdx.x;
  const int item = task[0], first_piece = task[1], n_pieces = task[2], partial_row = task[3];
  const int seq = a.work[5 * item], first = a.work[5 * item + 1], n_queries = a.work[5 * item + 2];
  if (n_queries == 0) return;  // the padding of a replayed graph
  const bool whole_item = a.work[5 * item + 4] == 1;  // this block folds every piece and writes the output
  const int kv_head = blockIdx.y;
  const int group = a.n_heads / a.n_kv_heads, hd = a.head_dim, kv_dim = a.n_kv_heads * hd;
  const int qv = n_queries * group;  // query vector r: token first + r / group, head kv_head * group + r % group
  const Layout l = layout_for(hd, sizeof(T));
  float* q = reinterpret_cast<float*>(smem);
  uint8_t* rows = smem + l.q;
  float* scores = reinterpret_cast<float*>(smem + l.q + l.kv);
  float* piece_max = reinterpret_cast<float*>(smem + l.q + l.kv + l.scores);
  float* piece_sum = piece_max + kQueryVectors;
  const int row_bytes = hd * static_cast<int>(sizeof(T)) + 16;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, n_warps = blockDim.x / 32;

  const float scale = 1.0f / sqrtf(static_cast<float>(hd));
  for (int i = threadIdx.x; i < qv * hd; i += blockDim.x) {
    const int r = i / hd, d = i % hd;
    const int64_t token = first + r / group;
    q[i] = a.qkv[token * a.row_stride + (kv_head * group + r % group) * hd + d] * scale;
  }
  const T* k_cache = static_cast<const T*>(a.k_cache);
  const T* v_cache = static_cast<const T*>(a.v_cache);
  const int32_t* table = a.block_tables + a.table_offsets[seq];
  const int n_keys = a.positions[first + n_queries - 1] + 1;  // the last query sees the most

  // the running state of this thread's output elements (i = threadIdx.x + k * kThreads)
  float state_max[kOutPerThread], state_sum[kOutPerThread], state[kOutPerThread];
#pragma unroll
  for (int k = 0; k < kOutPerThread; ++k) state_max[k] = -INFINITY, state_sum[k] = 0.0f, state[k] = 0.0f;

  for (int p = first_piece; p < first_piece + n_pieces; ++p) {
    const int begin = p * kPieceKeys, n = min(kPieceKeys, n_keys - begin);
    __syncthreads();  // q is written; the previous piece's rows and scores are read
    load_rows(k_cache, table, a.block_size, kv_dim, kv_head, hd, begin, n, rows);
    __syncthreads();
    {  // scores: thread = key, its row read 16 bytes at a time (rows padded: no bank conflicts)
      constexpr int V = 16 / sizeof(T);
      const int key = threadIdx.x, j = begin + key;
      float s[kQueryVectors];
#pragma unroll
      for (int r = 0; r < kQueryVectors; ++r) s[r] = 0.0f;
      for (int d0 = 0; d0 < hd; d0 += V) {
        const uint4 raw = *reinterpret_cast<const uint4*>(rows + key * row_bytes + d0 * static_cast<int>(sizeof(T)));
        T k[V];
        memcpy(k, &raw, sizeof(raw));
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const float kf = to_float(k[e]);
#pragma unroll
          for (int r = 0; r < kQueryVectors; ++r) {
            if (r < qv) s[r] = fmaf(q[r * hd + d0 + e], kf, s[r]);
          }
        }
      }
#pragma unroll
      for (int r = 0; r < kQueryVectors; ++r) {
        if (r < qv) scores[r * kPieceKeys + key] = key < n && j <= a.positions[first + r / group] ? s[r] : -INFINITY;
      }
    }
    __syncthreads();
    // softmax over the piece: a warp per query vector, keys lane, lane + 32, ...
    for (int r = warp; r < qv; r += n_warps) {
      float m = -INFINITY;
      for (int key = lane; key < kPieceKeys; key += 32) m = fmaxf(m, scores[r * kPieceKeys + key]);
      m = warp_max(m);
      float sum = 0.0f;
      for (int key = lane; key < kPieceKeys; key += 32) {
        const float e = m == -INFINITY ? 0.0f : expf(scores[r * kPieceKeys + key] - m);
        scores[r * kPieceKeys + key] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        piece_max[r] = m;
        piece_sum[r] = sum;
      }
    }
    __syncthreads();  // probabilities are written; the keys are read
    load_rows(v_cache, table, a.block_size, kv_dim, kv_head, hd, begin, n, rows);
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kOutPerThread; ++k) {
      const int i = threadIdx.x + k * kThreads;
      if (i >= qv * hd) break;
      const int r = i / hd, d = i % hd;
      float o = 0.0f;
      for (int key = 0; key < kPieceKeys; ++key) o = fmaf(scores[r * kPieceKeys + key], row_at<T>(rows, row_bytes, key, d), o);
      const float m = piece_max[r];
      if (!whole_item) {  // one of several parallel pieces: to the scratch rows, folded later
        const int64_t at = (static_cast<int64_t>(partial_row + r) * a.n_kv_heads + kv_head);
        a.partial_values[at * hd + d] = o;
        if (d == 0) {
          a.partial_stats[2 * at] = m;
          a.partial_stats[2 * at + 1] = piece_sum[r];
        }
        continue;
      }
      if (m == -INFINITY) continue;  // every key of the piece is in this query's future
      float keep, take;
      fold_weights(state_max[k], m, keep, take);
      state_sum[k] = fold(state_sum[k], keep, piece_sum[r], take);
      state[k] = fold(state[k], keep, o, take);
      state_max[k] = fmaxf(state_max[k], m);
    }
  }
  if (!whole_item) return;
  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int k = 0; k < kOutPerThread; ++k) {
    const int i = threadIdx.x + k * kThreads;
    if (i >= qv * hd) break;
    const int r = i / hd, d = i % hd;
    const int64_t token = first + r / group;
    out[token * a.n_heads * hd + (kv_head * group + r % group) * hd + d] = from_float<T>(__fdiv_rn(state[k], state_sum[k]));
  }
}

// The parallel pieces of decode and verification items, folded in piece order: one block
// per token, a thread per (head, element).
template <typename T>
__global__ void combine_kernel(AttentionArgs a) {
  const int t = blockIdx.x;
  const int item = a.token_work[t];
  const int first = a.work[5 * item + 1], first_task = a.work[5 * item + 3], n_tasks = a.work[5 * item + 4];
  if (n_tasks == 1) return;  // written by its one block
  const int group = a.n_heads / a.n_kv_heads, hd = a.head_dim;
  T* out = static_cast<T*>(a.out);
  for (int i = threadIdx.x; i < a.n_heads * hd; i += blockDim.x) {
    const int head = i / hd, d = i % hd, kv_head = head / group;
    const int r = (t - first) * group + head % group;
    float state_max = -INFINITY, state_sum = 0.0f, state = 0.0f;
    for (int k = first_task; k < first_task + n_tasks; ++k) {
      const int64_t at = static_cast<int64_t>(a.tasks[4 * k + 3] + r) * a.n_kv_heads + kv_head;
      const float m = a.partial_stats[2 * at];
      if (m == -INFINITY) continue;
      float keep, take;
      fold_weights(state_max, m, keep, take);
      state_sum = fold(state_sum, keep, a.partial_stats[2 * at + 1], take);
      state = fold(state, keep, a.partial_values[at * hd + d], take);
      state_max = fmaxf(state_max, m);
    }
    out[static_cast<int64_t>(t) * a.n_heads * hd + i] = from_float<T>(__fdiv_rn(state, state_sum));
  }
}

// The dynamic shared memory limit of every attention kernel, raised once to the most any
// head size up to kMaxHeadDim needs (an attribute, not a per-launch cost).
void allow_shared_memory() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
      dispatch(t, [&](auto zero) {
        using T = decltype(zero);
        check(cudaFuncSetAttribute(attention_kernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(layout_for(kMaxHeadDim, sizeof(T)).total)),
              "attention shared memory");
      });
    }
  });
}

}  // namespace

void prepare_kernels() { allow_shared_memory(); }

int attention_query_tile(int n_heads, int n_kv_heads) {
  return std::max(1, kQueryVectors / (n_heads / n_kv_heads));
}
int attention_piece_keys() { return kPieceKeys; }

void paged_attention(const AttentionArgs& args, cudaStream_t stream) {
  if (args.n_tasks == 0) return;
  const int group = args.n_heads / args.n_kv_heads;
  if (group > kQueryVectors || args.head_dim > kMaxHeadDim || args.head_dim * dtype_bytes(args.cache_type) % 16 != 0) {
    throw std::invalid_argument("paged_attention: head size " + std::to_string(args.head_dim) + " with " +
                                std::to_string(group) + " query heads per KV head is not supported");
  }
  allow_shared_memory();
  dispatch(args.cache_type, [&](auto zero) {
    using T = decltype(zero);
    const dim3 grid(static_cast<unsigned>(args.n_tasks), static_cast<unsigned>(args.n_kv_heads));
    attention_kernel<T><<<grid, kThreads, layout_for(args.head_dim, sizeof(T)).total, stream>>>(args);
    check(cudaGetLastError(), "paged_attention");
    if (args.partial_rows > 0) {
      combine_kernel<T><<<static_cast<unsigned>(args.n_tokens), 256, 0, stream>>>(args);
      check(cudaGetLastError(), "paged_attention combine");
    }
  });
}

}  // namespace specula::cuda
