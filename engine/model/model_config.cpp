// What a ModelConfig says beyond its sizes: the architectures, their rope styles, and the
// rotary frequencies with their scaling.
#include <algorithm>
#include <cmath>

#include "model/model.h"

namespace specula {

namespace {

struct Architecture {
  std::string_view name;
  RopeStyle rope_style;  // the layout of its GGUF files, which loaders of other formats follow
};

constexpr Architecture kArchitectures[] = {
    {"llama", RopeStyle::Adjacent},
    {"qwen2", RopeStyle::Halves},
    {"qwen3", RopeStyle::Halves},
    {"qwen3moe", RopeStyle::Halves},
    {"gemma3", RopeStyle::Halves},
    {"gpt-oss", RopeStyle::Halves},
    {"starcoder2", RopeStyle::Halves},
};

// YaRN's correction dimension: the pair index (fractional) whose wavelength turns
// `rotations` times over the original context.
double yarn_correction_dim(double rotations, int head_dim, double theta, int original_context) {
  return head_dim * std::log(original_context / (rotations * 2.0 * M_PI)) / (2.0 * std::log(theta));
}

// transformers' _compute_yarn_parameters with truncate false (gpt-oss): the extrapolated
// (original) frequency where the ramp is 0, the interpolated one (divided by the factor)
// where it is 1, linear between the correction dimensions of beta_fast and beta_slow.
double yarn_frequency(const ModelConfig& c, double original, int pair) {
  const int d = c.head_dim();
  const double theta = c.rope_theta;
  const double low = std::max(0.0, yarn_correction_dim(c.rope_yarn_beta_fast, d, theta, c.rope_yarn_original_context));
  double high = std::min(d - 1.0, yarn_correction_dim(c.rope_yarn_beta_slow, d, theta, c.rope_yarn_original_context));
  if (low == high) high += 0.001;
  const double ramp = std::clamp((pair - low) / (high - low), 0.0, 1.0);
  return original / c.rope_yarn_factor * ramp + original * (1.0 - ramp);
}

}  // namespace

std::string_view rope_style_name(RopeStyle style) {
  return style == RopeStyle::Adjacent ? "adjacent" : "halves";
}

std::optional<RopeStyle> architecture_rope_style(std::string_view architecture) {
  for (const Architecture& a : kArchitectures) {
    if (a.name == architecture) return a.rope_style;
  }
  return std::nullopt;
}

std::string supported_architectures() {
  std::string names;
  for (const Architecture& a : kArchitectures) names += (names.empty() ? "" : ", ") + std::string(a.name);
  return names;
}

std::vector<double> ModelConfig::rope_frequencies(bool sliding) const {
  const int d = head_dim();
  std::vector<double> frequencies(static_cast<size_t>(d / 2));
  for (int i = 0; i < d / 2; ++i) {
    if (sliding && !sliding_rope_as_global) {  // gemma3: llama.cpp scales no sliding layer's frequencies (freq_scale_swa 1)
      frequencies[static_cast<size_t>(i)] = std::pow(static_cast<double>(sliding_rope_theta), -2.0 * i / d);
      continue;
    }
    double f = std::pow(static_cast<double>(rope_theta), -2.0 * i / d);
    if (rope_yarn_factor > 1.0f) f = yarn_frequency(*this, f, i);
    if (rope_linear_factor != 1.0f) f /= rope_linear_factor;
    if (!rope_freq_factors.empty()) f /= rope_freq_factors[static_cast<size_t>(i)];
    frequencies[static_cast<size_t>(i)] = f;
  }
  return frequencies;
}

float ModelConfig::rope_magnitude() const {
  return rope_yarn_factor > 1.0f ? 0.1f * std::log(rope_yarn_factor) + 1.0f : 1.0f;
}

std::vector<float> llama3_rope_factors(double theta, int head_dim, double factor, double low_freq_factor,
                                       double high_freq_factor, double original_context) {
  const double low_freq_wavelength = original_context / low_freq_factor;
  const double high_freq_wavelength = original_context / high_freq_factor;
  std::vector<float> factors;
  for (int i = 0; i < head_dim / 2; ++i) {
    const double wavelength = 2.0 * M_PI / std::pow(theta, -2.0 * i / head_dim);
    if (wavelength < high_freq_wavelength) {
      factors.push_back(1.0f);
    } else if (wavelength > low_freq_wavelength) {
      factors.push_back(static_cast<float>(factor));
    } else {
      const double smooth = (original_context / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor);
      factors.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / factor + smooth)));
    }
  }
  return factors;
}

}  // namespace specula
