// specula-cli inspect MODEL: what a model file holds, without running it; with --cost, what
// its forwards cost on this machine (the goodput policy's cost model).
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <nlohmann/json.hpp>
#include <string>

#include "commands.h"
#include "compute/backend.h"
#include "compute/device_plan.h"
#include "model/gguf.h"
#include "model/model.h"
#include "model_options.h"

namespace specula::cli {

namespace {

struct TypeTally {
  int tensors = 0;
  size_t bytes = 0;
};

std::map<std::string, TypeTally> tally_by_type(const Model& model) {
  std::map<std::string, TypeTally> tally;
  const auto add = [&](const TensorView& v) {
    TypeTally& t = tally[std::string(type_traits(v.type).name)];
    t.tensors++;
    t.bytes += v.bytes();
  };
  const Weights& w = model.weights;
  add(w.token_embedding);
  for (const LayerWeights& L : w.layers) {
    for (const TensorView* v : L.tensors()) add(*v);
  }
  add(w.final_norm);
  if (!model.tied_output()) add(w.output);
  return tally;
}

constexpr const char* kSampleText = "Once upon a time, there was a little robot.";

nlohmann::json describe(const Tokenizer* tokenizer) {
  if (tokenizer == nullptr) return nullptr;
  const Tokenizer& tok = *tokenizer;
  const FimTokens& fim = tok.fim();
  return {{"vocab_size", tok.size()},
          {"kind", tok.model_name()},
          {"pre", tok.vocabulary().pre},
          {"end_of_generation", tok.end_of_generation()},
          {"fim", {{"prefix", fim.prefix}, {"suffix", fim.suffix}, {"middle", fim.middle}}},
          {"bos", tok.bos()},
          {"eos", tok.eos()},
          {"bos_piece", tok.bos() >= 0 && tok.bos() < tok.size() ? tok.piece(tok.bos()) : ""},
          {"eos_piece", tok.eos() >= 0 && tok.eos() < tok.size() ? tok.piece(tok.eos()) : ""},
          {"sample_text", kSampleText},
          {"sample_ids", tok.encode(kSampleText, true)}};
}

nlohmann::json describe(const Model& model) {
  const ModelConfig& c = model.config;
  nlohmann::json j;
  j["path"] = model.path;
  j["format"] = model.format;
  j["loadable"] = true;
  j["name"] = c.name;
  j["architecture"] = c.architecture;
  j["config"] = {{"dim", c.dim},           {"hidden_dim", c.hidden_dim},         {"n_layers", c.n_layers},
                 {"n_heads", c.n_heads},   {"n_kv_heads", c.n_kv_heads},         {"head_dim", c.head_dim()},
                 {"vocab_size", c.vocab_size}, {"context_length", c.context_length}, {"rope_theta", c.rope_theta},
                 {"norm_eps", c.norm_eps}};
  const LayerWeights* first = model.weights.layers.empty() ? nullptr : &model.weights.layers[0];
  j["experts"] = {{"count", c.n_experts},
                  {"used", c.n_experts_used},
                  {"hidden_dim", c.has_experts() ? c.hidden_dim : 0},
                  {"weights_renormalised", c.has_experts() && c.expert_weights_norm},
                  {"gating", c.expert_gating == ExpertGating::TopKThenSoftmax ? "top_k_then_softmax" : "softmax_then_top_k"},
                  {"biases", first && !first->expert_gate_bias.empty()},
                  {"activation", c.activation == Activation::SwigluClamped ? "clamped SwiGLU" : "gated"}};
  j["rope"] = {{"style", std::string(rope_style_name(c.rope_style))},
               {"linear_factor", c.rope_linear_factor},
               {"freq_factors", c.rope_freq_factors},
               {"yarn_factor", c.rope_yarn_factor},
               {"yarn_original_context", c.rope_yarn_original_context}};
  j["attention"] = {{"q_dim", c.q_dim()},
                    {"qkv_biases", first && !first->bq.empty()},
                    {"output_bias", first && !first->bo.empty()},
                    {"qk_norms", first && !first->q_norm.empty()},
                    {"sinks", first && !first->attn_sinks.empty()},
                    {"post_norms", first && !first->attn_post_norm.empty()},
                    {"sliding_window", c.sliding_window},
                    {"global_layer_period", c.global_layer_period},
                    {"sliding_rope_theta", c.sliding_rope_theta},
                    {"sliding_rope_as_global", c.sliding_rope_as_global}};
  j["norm"] = c.norm == NormKind::Layer ? "layer" : "rms";
  j["feed_forward"] = {{"gated", c.gated_feed_forward},
                       {"activation", c.activation == Activation::Silu       ? "silu"
                                      : c.activation == Activation::GeluTanh ? "gelu_tanh"
                                                                             : "swiglu_clamped"},
                       {"biases", first && !first->b_up.empty()}};
  j["tied_output"] = model.tied_output();
  j["weight_bytes"] = model.weight_bytes();
  // a GPU keeps Q8_0/Q4_0/Q4_K/Q6_K matrices quantized and the others in its compute type
  // (a mixture of experts has no device layout: it is refused, with no size)
  j["device_weights"] = {{"type", std::string(type_traits(device_compute_type(model.weights)).name)},
                         {"bytes", c.has_experts() ? size_t{0} : device_weight_bytes(model)},
                         {"refusal", device_refusal(model)}};
  for (const auto& [type, t] : tally_by_type(model)) j["tensor_types"][type] = {{"tensors", t.tensors}, {"bytes", t.bytes}};
  j["tokenizer"] = describe(model.tokenizer.get());
  return j;
}

void print_tokenizer(const nlohmann::json& tok);

void print_text(const nlohmann::json& j) {
  const auto& c = j["config"];
  std::printf("model         %s (%s)\n", j["name"].get<std::string>().c_str(), j["path"].get<std::string>().c_str());
  std::printf("format        %s, architecture %s\n", j["format"].get<std::string>().c_str(),
              j["architecture"].get<std::string>().c_str());
  std::printf("shape         dim %d, hidden_dim %d, layers %d, heads %d (kv %d, head_dim %d)\n", c["dim"].get<int>(),
              c["hidden_dim"].get<int>(), c["n_layers"].get<int>(), c["n_heads"].get<int>(), c["n_kv_heads"].get<int>(),
              c["head_dim"].get<int>());
  std::printf("vocabulary    %d, context %d, rope_theta %g, norm_eps %g\n", c["vocab_size"].get<int>(),
              c["context_length"].get<int>(), c["rope_theta"].get<double>(), c["norm_eps"].get<double>());
  const auto& rope = j["rope"];
  std::printf("rope          %s", rope["style"] == "adjacent" ? "adjacent pairs (2i, 2i+1)" : "halves (i, i + head_dim/2)");
  if (rope["linear_factor"].get<double>() != 1.0) std::printf(", linear scaling %g", rope["linear_factor"].get<double>());
  if (!rope["freq_factors"].empty()) std::printf(", per-pair frequency factors (llama3 scaling)");
  if (rope["yarn_factor"].get<double>() > 1.0) {
    std::printf(", YaRN scaling %g over an original context of %d", rope["yarn_factor"].get<double>(),
                rope["yarn_original_context"].get<int>());
  }
  std::printf("\n");
  const auto& attention = j["attention"];
  std::printf("attention     q %d wide%s%s%s%s\n", attention["q_dim"].get<int>(),
              attention["qkv_biases"].get<bool>() ? ", q/k/v biases" : "",
              attention["output_bias"].get<bool>() ? ", output bias" : "",
              attention["qk_norms"].get<bool>() ? ", per-head q/k norms" : "",
              attention["sinks"].get<bool>() ? ", a sink logit per head" : "");
  if (attention["post_norms"].get<bool>()) std::printf("              norms of attention's and the feed-forward's outputs\n");
  if (const int window = attention["sliding_window"].get<int>(); window > 0) {
    if (const int period = attention["global_layer_period"].get<int>(); period > 0) {
      std::printf("              sliding window of %d positions, one layer in %d global; ", window, period);
      if (attention["sliding_rope_as_global"].get<bool>()) {
        std::printf("sliding layers rotate as global ones\n");
      } else {
        std::printf("sliding layers rope_theta %g\n", attention["sliding_rope_theta"].get<double>());
      }
    } else {
      std::printf("              sliding window of %d positions on every layer\n", window);
    }
  }
  const auto& ffn = j["feed_forward"];
  std::printf("norm, ffn     %s; %s%s%s\n", j["norm"] == "layer" ? "LayerNorm with biases" : "RMSNorm",
              ffn["gated"].get<bool>() ? "gated " : "ungated ",
              ffn["activation"] == "silu" ? "SiLU" : ffn["activation"] == "gelu_tanh" ? "GELU-tanh" : "clamped SwiGLU",
              ffn["biases"].get<bool>() ? ", with biases" : "");
  if (const auto& experts = j["experts"]; experts["count"].get<int>() > 0) {
    const bool top_k_first = experts["gating"] == "top_k_then_softmax";
    std::printf("experts       %d per layer of feed-forward width %d, %d used per token (%s top %d%s%s)%s%s\n",
                experts["count"].get<int>(), experts["hidden_dim"].get<int>(), experts["used"].get<int>(),
                top_k_first ? "router logits'" : "softmax,", experts["used"].get<int>(),
                top_k_first ? ", softmax over them" : "",
                experts["weights_renormalised"].get<bool>() ? ", weights renormalised" : "",
                experts["biases"].get<bool>() ? ", with biases" : "",
                experts["activation"] == "clamped SwiGLU" ? ", clamped SwiGLU" : "");
  }
  std::printf("output        %s\n", j["tied_output"].get<bool>() ? "tied to the token embedding" : "separate matrix");
  std::printf("weights       %zu bytes (%.2f MiB)\n", j["weight_bytes"].get<size_t>(),
              static_cast<double>(j["weight_bytes"].get<size_t>()) / (1 << 20));
  for (const auto& [type, t] : j["tensor_types"].items()) {
    std::printf("  %-6s      %4d tensors, %zu bytes\n", type.c_str(), t["tensors"].get<int>(), t["bytes"].get<size_t>());
  }
  const auto& device = j["device_weights"];
  if (!device["refusal"].get<std::string>().empty()) {
    std::printf("on a GPU      not run: %s\n", device["refusal"].get<std::string>().c_str());
  } else {
    std::printf("on a GPU      %zu bytes (%.2f MiB), computing in %s\n", device["bytes"].get<size_t>(),
                static_cast<double>(device["bytes"].get<size_t>()) / (1 << 20), device["type"].get<std::string>().c_str());
  }
  print_tokenizer(j["tokenizer"]);
}

void print_tokenizer(const nlohmann::json& tok) {
  if (tok.is_null()) {
    std::printf("tokenizer     none (pass --tokenizer)\n");
    return;
  }
  std::printf("tokenizer     %s%s%s, %d pieces, bos %d %s, eos %d %s\n", tok["kind"].get<std::string>().c_str(),
              tok["pre"].get<std::string>().empty() ? "" : " ", tok["pre"].get<std::string>().c_str(),
              tok["vocab_size"].get<int>(), tok["bos"].get<int>(), tok["bos_piece"].get<std::string>().c_str(),
              tok["eos"].get<int>(), tok["eos_piece"].get<std::string>().c_str());
  std::printf("end tokens   ");
  for (const auto& id : tok["end_of_generation"]) std::printf(" %d", id.get<int>());
  std::printf("%s\n", tok["fim"]["middle"].get<int>() >= 0 ? "; fill-in-the-middle tokens present" : "");
  std::printf("sample        \"%s\" ->", tok["sample_text"].get<std::string>().c_str());
  for (const auto& id : tok["sample_ids"]) std::printf(" %d", id.get<int>());
  std::printf("\n");
}

// A GGUF file that does not load (a tensor type or an architecture the engine does not
// run) still has a header and a vocabulary to show: what it is, what its tensors hold, how
// it tokenizes, and why it does not load. Null when the header itself cannot be read.
nlohmann::json describe_header(const std::string& path, const std::string& problem) {
  GgufFile header;
  try {
    header = GgufFile::read_header(path);
  } catch (const ModelError&) {
    return nullptr;
  }
  nlohmann::json j;
  j["path"] = path;
  j["format"] = "gguf";
  j["name"] = header.get_string("general.name", std::filesystem::path(path).stem().string());
  const std::string arch = header.get_string("general.architecture", "");
  j["architecture"] = arch;
  j["loadable"] = false;
  j["problem"] = problem;
  nlohmann::json config = nlohmann::json::object();
  for (const char* key : {"embedding_length", "feed_forward_length", "block_count", "attention.head_count",
                          "attention.head_count_kv", "context_length"}) {
    if (const GgufValue* v = header.find(arch + "." + key); v && v->is_integer()) config[key] = v->integer;
  }
  j["config"] = config;
  if (const GgufValue* ftype = header.find("general.file_type"); ftype && ftype->is_integer()) {
    j["file_type"] = std::string(llama_file_type_name(ftype->integer));
  }
  size_t bytes = 0;
  j["tensor_types"] = nlohmann::json::object();
  for (const GgufTensorInfo& t : header.tensors) {
    auto& entry = j["tensor_types"][std::string(type_traits(t.type).name)];
    if (entry.is_null()) entry = {{"tensors", 0}, {"bytes", size_t{0}}, {"supported", is_supported_type(t.type)}};
    entry["tensors"] = entry["tensors"].get<int>() + 1;
    entry["bytes"] = entry["bytes"].get<size_t>() + t.bytes;
    bytes += t.bytes;
  }
  j["weight_bytes"] = bytes;
  try {
    Vocabulary vocab = gguf_vocabulary(header);
    const auto tokenizer = vocab.empty() ? nullptr : create_tokenizer(std::move(vocab));
    j["tokenizer"] = describe(tokenizer.get());
  } catch (const std::exception& e) {
    j["tokenizer"] = {{"error", e.what()}};
  }
  return j;
}

void print_header_text(const nlohmann::json& j) {
  std::printf("model         %s (%s)\n", j["name"].get<std::string>().c_str(), j["path"].get<std::string>().c_str());
  std::printf("format        %s, architecture %s", j["format"].get<std::string>().c_str(),
              j["architecture"].get<std::string>().c_str());
  if (j.contains("file_type")) std::printf(", file type %s", j["file_type"].get<std::string>().c_str());
  std::printf("\n");
  if (!j["config"].empty()) {
    std::printf("shape        ");
    for (const auto& [key, value] : j["config"].items()) std::printf(" %s %lld", key.c_str(), value.get<long long>());
    std::printf("\n");
  }
  std::printf("weights       %zu bytes (%.2f MiB)\n", j["weight_bytes"].get<size_t>(),
              static_cast<double>(j["weight_bytes"].get<size_t>()) / (1 << 20));
  for (const auto& [type, t] : j["tensor_types"].items()) {
    std::printf("  %-6s      %4d tensors, %zu bytes%s\n", type.c_str(), t["tensors"].get<int>(), t["bytes"].get<size_t>(),
                t["supported"].get<bool>() ? "" : " (not supported)");
  }
  if (j["tokenizer"].contains("error")) {
    std::printf("tokenizer     unreadable: %s\n", j["tokenizer"]["error"].get<std::string>().c_str());
  } else {
    print_tokenizer(j["tokenizer"]);
  }
  std::printf("does not load %s\n", j["problem"].get<std::string>().c_str());
}

// A mixture of experts' terms: layer(n) = dense(n) + expert_ms x U(n), at 1 to 32 tokens.
nlohmann::json describe_experts(const ForwardCost& cost) {
  nlohmann::json rows = nlohmann::json::array();
  for (int n = 1; n <= 32; n *= 2) {
    rows.push_back({{"tokens", n}, {"expected_experts", cost.experts_touched(n)}, {"forward_ms", cost.verify_seconds(n) * 1e3}});
  }
  return {{"experts", cost.n_experts},
          {"experts_per_token", cost.n_experts_used},
          {"expert_bytes", cost.expert_bytes},
          {"expert_ms_per_layer", cost.expert_seconds * 1e3},
          {"routing", cost.routing ? "seen" : "uniform"},
          {"union", rows}};
}

nlohmann::json describe(const ForwardCost& cost, const std::string& backend) {
  nlohmann::json points = nlohmann::json::array();
  for (size_t p = 0; p < cost.tokens.size(); ++p) {
    points.push_back({{"tokens", cost.tokens[p]},
                      {"forward_ms", cost.verify_seconds(cost.tokens[p]) * 1e3},
                      {"layer_ms", cost.layer_seconds[p] * 1e3},
                      {"head_ms", cost.head_seconds[p] * 1e3}});
  }
  nlohmann::json j = {{"backend", backend},           {"layers", cost.n_layers},
                      {"points", points},             {"position_ms_per_layer", cost.position_seconds * 1e3},
                      {"sample_row_ms", cost.sample_row_seconds * 1e3},
                      {"from_file", cost.from_file},  {"file", cost.file},
                      {"measure_ms", cost.measure_seconds * 1e3}};
  if (cost.n_experts > 0) j["experts"] = describe_experts(cost);
  return j;
}

}  // namespace

void add_inspect_command(CLI::App& app) {
  struct Options {
    std::string model;
    std::string tokenizer;
    bool json = false;
    bool cost = false;
    bool remeasure = false;
    std::string device = "auto";
    int threads = 0;
    std::string simd = "best";
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("inspect", "Show a model's configuration, tensor types and tokenizer");
  cmd->add_option("model", options->model, "GGUF file, llama2.c checkpoint or Hugging Face directory")->required();
  cmd->add_option("--tokenizer", options->tokenizer, "Tokenizer file for models without a vocabulary");
  cmd->add_flag("--json", options->json, "Print JSON");
  cmd->add_flag("--cost", options->cost,
                "Also show what a forward costs on this machine by batch size (measured, or read from the cost cache)");
  cmd->add_flag("--remeasure", options->remeasure, "With --cost: measure again and replace the cached figures");
  cmd->add_option("--device", options->device, "With --cost: cpu, cuda or auto (default auto)")
      ->check(CLI::IsMember({"cpu", "cuda", "auto"}));
  cmd->add_option("--threads", options->threads, "With --cost --device cpu: threads (0: one per core)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--simd", options->simd,
                  "With --cost --device cpu: the CPU kernels whose cost to show, best, portable, avx2 or avx512 (default best)")
      ->check(CLI::IsMember({"best", "portable", "avx2", "avx512"}));
  cmd->callback([options] {
    require_cpu_for_simd(options->simd, options->device);
    LoadOptions load;
    load.tokenizer_path = options->tokenizer;
    std::shared_ptr<const Model> model;
    try {
      model = load_model(options->model, load);
    } catch (const ModelError& e) {
      // a GGUF file whose header reads is described as far as it goes (the problem is part
      // of the description); --cost needs a model that runs
      const nlohmann::json header = options->cost || std::filesystem::is_directory(options->model)
                                        ? nlohmann::json()
                                        : describe_header(options->model, e.what());
      if (header.is_null()) throw CommandFailed(e.what(), 2);
      if (options->json) {
        std::printf("%s\n", header.dump(2).c_str());
      } else {
        print_header_text(header);
      }
      return;
    }
    nlohmann::json j = describe(*model);
    std::optional<ForwardCost> cost;
    std::string backend_name;
    if (options->cost) {
      std::unique_ptr<Backend> backend = options->device == "cpu" ? cpu_backend(options->simd, options->threads)
                                                                  : create_backend(device_choice(options->device));
      backend_name = backend->name();
      const std::string dir = default_cost_cache_dir();
      if (options->remeasure) {
        cost = measure_forward_cost(*backend, *model);
        if (write_cost_cache(dir, *cost)) cost->file = cost_cache_path(dir, cost->key);
      } else {
        cost = load_or_measure_forward_cost(*backend, *model, dir);
      }
      j["forward_cost"] = describe(*cost, backend_name);
    }
    if (options->json) {
      std::printf("%s\n", j.dump(2).c_str());
      return;
    }
    print_text(j);
    if (cost) std::printf("\nforward cost on %s, %s", backend_name.c_str(), format_forward_cost(*cost).c_str());
  });
}

}  // namespace specula::cli
