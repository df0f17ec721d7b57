// Naive float64 references of the CUDA kernels (see reference.h).
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <functional>

namespace specula::cuda::reference {

std::vector<double> embedding(const std::vector<float>& table, int dim, const std::vector<int32_t>& tokens) {
  std::vector<double> out;
  for (int32_t t : tokens) {
    for (int c = 0; c < dim; ++c) out.push_back(table[static_cast<size_t>(t) * dim + c]);
  }
  return out;
}

std::vector<double> rmsnorm(const std::vector<float>& x, const std::vector<float>& weight,
                            const std::vector<int32_t>& rows, int dim, float eps) {
  std::vector<double> out;
  for (int32_t r : rows) {
    const float* src = x.data() + static_cast<size_t>(r) * dim;
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(src[i]) * src[i];
    const double scale = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i) out.push_back(weight[i] * scale * src[i]);
  }
  return out;
}

std::vector<double> rope(const std::vector<float>& qk, int row_stride, const std::vector<int32_t>& positions,
                         int n_rot_heads, int head_dim, const std::vector<double>& frequencies, bool halves) {
  std::vector<double> out(qk.begin(), qk.end());
  const int half = head_dim / 2;
  for (size_t t = 0; t < positions.size(); ++t) {
    for (int h = 0; h < n_rot_heads; ++h) {
      double* v = out.data() + t * row_stride + h * head_dim;
      for (int i = 0; i < half; ++i) {
        const double angle = positions[t] * frequencies[static_cast<size_t>(i)];
        double& a = halves ? v[i] : v[2 * i];
        double& b = halves ? v[i + half] : v[2 * i + 1];
        const double a0 = a, b0 = b;
        a = a0 * std::cos(angle) - b0 * std::sin(angle);
        b = a0 * std::sin(angle) + b0 * std::cos(angle);
      }
    }
  }
  return out;
}

std::vector<double> add_bias(const std::vector<float>& rows, int row_stride, const std::vector<float>& bias) {
  std::vector<double> out(rows.begin(), rows.end());
  for (size_t at = 0; at < out.size(); at += static_cast<size_t>(row_stride)) {
    for (size_t i = 0; i < bias.size(); ++i) out[at + i] += bias[i];
  }
  return out;
}

std::vector<double> head_rmsnorm(const std::vector<float>& x, int row_stride, int n_heads, int head_dim,
                                 const std::vector<float>& weight, float eps) {
  std::vector<double> out(x.begin(), x.end());
  for (size_t at = 0; at < out.size(); at += static_cast<size_t>(row_stride)) {
    for (int h = 0; h < n_heads; ++h) {
      double* head = out.data() + at + static_cast<size_t>(h) * head_dim;
      double ss = 0.0;
      for (int i = 0; i < head_dim; ++i) ss += head[i] * head[i];
      const double scale = 1.0 / std::sqrt(ss / head_dim + eps);
      for (int i = 0; i < head_dim; ++i) head[i] = weight[static_cast<size_t>(i)] * scale * head[i];
    }
  }
  return out;
}

std::vector<double> swiglu(const std::vector<float>& gate_up, int hidden) {
  std::vector<double> out;
  for (size_t t = 0; t < gate_up.size() / (2 * static_cast<size_t>(hidden)); ++t) {
    for (int i = 0; i < hidden; ++i) {
      const double g = gate_up[t * 2 * hidden + i], u = gate_up[t * 2 * hidden + hidden + i];
      out.push_back(g / (1.0 + std::exp(-g)) * u);
    }
  }
  return out;
}

std::vector<double> gemm(const std::vector<float>& x, const std::vector<float>& w, int m, int n, int k) {
  std::vector<double> y(static_cast<size_t>(m) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < n; ++j) {
      double s = 0.0;
      for (int l = 0; l < k; ++l) s += static_cast<double>(x[static_cast<size_t>(i) * k + l]) * w[static_cast<size_t>(j) * k + l];
      y[static_cast<size_t>(i) * n + j] = s;
    }
  }
  return y;
}

std::vector<double> attention(const AttentionCase& c) {
  const int hd = c.head_dim, group = c.n_heads / c.n_kv_heads, kv_dim = c.n_kv_heads * hd;
  const size_t n_tokens = c.positions.size();
  std::vector<double> out(n_tokens * c.n_heads * hd, 0.0);
  for (size_t t = 0; t < n_tokens; ++t) {
    const int s = c.token_seq[t];
    for (int h = 0; h < c.n_heads; ++h) {
      const int kvh = h / group;
      const float* q = c.q.data() + t * c.n_heads * hd + h * hd;
      std::vector<double> scores;
      std::vector<size_t> slots;
      for (int j = 0; j <= c.positions[t]; ++j) {
        const size_t slot = static_cast<size_t>(c.block_tables[c.table_offsets[s] + j / c.block_size]) * c.block_size +
                            j % c.block_size;
        double dot = 0.0;
        for (int d = 0; d < hd; ++d) dot += static_cast<double>(q[d]) * c.k_cache[slot * kv_dim + kvh * hd + d];
        scores.push_back(dot / std::sqrt(static_cast<double>(hd)));
        slots.push_back(slot);
      }
      const double m = *std::max_element(scores.begin(), scores.end());
      double sum = 0.0;
      for (double& s2 : scores) sum += (s2 = std::exp(s2 - m));
      for (size_t j = 0; j < scores.size(); ++j) {
        for (int d = 0; d < hd; ++d) {
          out[t * c.n_heads * hd + h * hd + d] += scores[j] / sum * c.v_cache[slots[j] * kv_dim + kvh * hd + d];
        }
      }
    }
  }
  return out;
}

int argmax(const float* row, int vocab) {
  int best = 0;
  for (int i = 1; i < vocab; ++i) {
    if (row[i] > row[best]) best = i;
  }
  return best;
}

std::vector<double> sampling_probs(const float* row, int vocab, float temperature, int top_k, float top_p,
                                   float min_p) {
  std::vector<double> p(static_cast<size_t>(vocab), 0.0);
  if (temperature <= 0.0f) {
    p[static_cast<size_t>(argmax(row, vocab))] = 1.0;
    return p;
  }
  const double m = *std::max_element(row, row + vocab);
  for (int i = 0; i < vocab; ++i) p[i] = std::exp((row[i] - m) / temperature);
  std::vector<double> sorted(p);
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  double keep_from = 0.0;
  if (top_k > 0 && top_k < vocab) keep_from = sorted[static_cast<size_t>(top_k) - 1];
  if (top_p < 1.0f) {
    double total = 0.0;
    for (double v : sorted) total += v;
    double running = 0.0;
    for (double v : sorted) {  // all values equal to v are kept together
      if (v < keep_from) break;  // the top-k set holds less than top_p of the mass
      running += v;
      if (running >= top_p * total) {
        keep_from = std::max(keep_from, v);
        break;
      }
    }
  }
  keep_from = std::max(keep_from, static_cast<double>(min_p));
  double kept = 0.0;
  for (double& v : p) kept += (v = v >= keep_from ? v : 0.0);
  for (double& v : p) v /= kept;
  return p;
}

int sample(const float* probs, int vocab, float u) {
  double total = 0.0;
  for (int i = 0; i < vocab; ++i) total += probs[i];
  double running = 0.0;
  int last = 0;
  for (int i = 0; i < vocab; ++i) {
    if (probs[i] > 0.0f) last = i;
    running += probs[i];
    if (u * total < running) return i;
  }
  return last;
}

Verdict verify(const float* p, const float* q, int vocab, int draft_token, float u_accept, float u_residual) {
  std::vector<float> residual(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) residual[i] = std::max(p[i] - q[i], 0.0f);
  return {static_cast<double>(u_accept) * q[draft_token] < p[draft_token], sample(residual.data(), vocab, u_residual)};
}

}  // namespace specula::cuda::reference
