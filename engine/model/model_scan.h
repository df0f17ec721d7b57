// The models already on this computer: GGUF files and Hugging Face safetensors directories
// in the stores of Ollama, LM Studio, llama.cpp and the Hugging Face hub, or in any folder.
//
// Everything is learnt from headers alone (GGUF metadata and tensor table, config.json and
// safetensors headers): whether a model loads is decided by load_model itself with
// LoadOptions::metadata_only, so the reason given is the one loading would give. Drafts
// are suggested by the draft drafter's own rule (check_tokenizers_match) on those headers.
//
// Walking is bounded: a symlinked folder is followed only when it leads back inside the
// store and to a folder not yet seen, so loops and links to `/` end; a symlinked file is
// followed wherever it points (the hub's snapshots are links into its blobs) when it is a
// regular file. Anything unreadable is skipped with a reason, never fatal.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace specula {

// How a folder of models is laid out.
enum class ModelStore {
  Ollama,       // manifests/<registry>/<namespace>/<model>/<tag> naming blobs/sha256-<hex>
  LmStudio,     // <publisher>/<repository>/<file>.gguf
  LlamaCpp,     // files downloaded by llama.cpp's -hf: <user>_<repository>_<file>.gguf
  HuggingFace,  // models--<org>--<name>/snapshots/<revision>/... linking into blobs/
  Folder,       // any folder: GGUF files and safetensors directories anywhere below it
};
std::string_view model_store_name(ModelStore store);  // "ollama", "lm-studio", "llama.cpp", "huggingface", "folder"

struct ScanRoot {
  ModelStore store = ModelStore::Folder;
  std::string path;  // the store's top folder (Ollama's holds manifests/ and blobs/)
};

// The stores' folders in the order they are scanned: Ollama ($OLLAMA_MODELS, else
// ~/.ollama/models, then the Linux service's /usr/share/ollama/.ollama/models), LM Studio
// (~/.lmstudio/models, ~/.cache/lm-studio/models), llama.cpp ($LLAMA_CACHE, else
// $XDG_CACHE_HOME/llama.cpp or ~/.cache/llama.cpp), the Hugging Face hub ($HF_HUB_CACHE,
// else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub or ~/.cache/huggingface/hub).
// Folders that do not exist are left out. `getenv` reads the environment (std::getenv when
// empty; tests pass their own).
std::vector<ScanRoot> default_scan_roots(const std::function<const char*(const char*)>& getenv = {});

// A folder given by the user: an Ollama store when it holds manifests/ and blobs/, a hub
// cache when it holds models--* folders, otherwise a plain folder.
ScanRoot scan_root_for(const std::string& folder);

struct FoundModel {
  std::string path;                 // what load_model takes: a GGUF file, or a safetensors directory
  std::string name;                 // as its store names it: "qwen2.5-coder:7b", "org/repo", "publisher/repo/file.gguf"
  std::vector<std::string> aliases; // other names of the same file (Ollama tags sharing a blob)
  ModelStore store = ModelStore::Folder;
  std::string format;               // "gguf" or "safetensors"
  std::string architecture;         // GGUF general.architecture, config.json's model_type; "" when not said
  int64_t parameters = 0;           // elements of every tensor the headers list; 0 when unknown
  int experts = 0;                  // a mixture of experts' per layer (GGUF <arch>.expert_count); 0: dense or unknown
  int experts_used = 0;             // of them per token (<arch>.expert_used_count)
  uint64_t bytes = 0;               // on disk: the file, or the directory's safetensors files
  std::string weight_type;          // llama.cpp's file type ("Q4_K_M"), else the tensor type of most bytes ("BF16")
  std::string tokenizer;            // GGUF tokenizer.ggml.model[/pre] ("llama", "gpt2/qwen2"), or the tokenizer file's name
  int vocabulary = 0;               // tokens of that vocabulary (0 when there is none)
  bool loadable = false;            // load_model would load it
  std::string problem;              // when not: load_model's reason, without the path in front
  std::vector<std::string> drafts;  // paths of found models that can draft for it, smallest first
};

struct SkippedEntry {
  std::string path;
  std::string name;    // the model it would have been, when a manifest or snapshot named it
  std::string reason;  // "cannot open: Permission denied", "invalid GGUF file: wrong magic ...", ...
};

struct ScanResult {
  std::vector<FoundModel> models;     // by root, then by name; each file once
  std::vector<SkippedEntry> skipped;  // what could not be read, or was not followed
};

struct ScanOptions {
  // Asked between entries; returning true ends the scan with what was found so far.
  std::function<bool()> cancelled;
};

// Scans `roots` in order. Never throws for what it finds on disk.
ScanResult scan_models(const std::vector<ScanRoot>& roots, const ScanOptions& options = {});

// "7.6B", "494M", "260K": a parameter count as people write it; "?" for 0.
std::string parameter_count_label(int64_t parameters);
// "4.7 GB", "12 MB", "900 kB": decimal units, as Ollama and Hugging Face show sizes.
std::string byte_count_label(uint64_t bytes);

}  // namespace specula
