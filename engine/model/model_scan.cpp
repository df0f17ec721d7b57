#include "model/model_scan.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "model/draft_vocabulary.h"
#include "model/gguf.h"
#include "model/mapped_file.h"
#include "model/model.h"

namespace specula {

namespace {

namespace fs = std::filesystem;

constexpr int kMaxDepth = 12;                 // folders below a store's top; deeper ones are not models
constexpr size_t kMaxEntries = 200000;        // per scan: a store is never this big, a mistaken --dir / is
constexpr uint64_t kMaxJsonBytes = 1 << 20;  // a manifest or config.json is a few kB
constexpr int64_t kMaxHeaderBytes = int64_t{100} << 20;  // safetensors' own limit

bool is_gguf_name(const fs::path& p) {
  std::string ext = p.extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  return ext == ".gguf";
}

// `message` without the "path: " (or "path/") that every ModelError starts with.
std::string without_path(const std::string& message, const std::string& path) {
  for (const std::string& prefix : {path + ": ", path + "/"}) {
    if (message.starts_with(prefix)) return message.substr(prefix.size());
  }
  return message;
}

bool inside(const fs::path& path, const fs::path& tree) {
  const auto [t, p] = std::mismatch(tree.begin(), tree.end(), path.begin(), path.end());
  return t == tree.end();
}

std::string text_value(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  return v && v->type == GgufType::STRING ? v->text : std::string();
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::toupper(c); });
  return out;
}

// What a safetensors directory's headers say, read leniently (any dtype): the loader
// decides whether the model loads; this only describes it.
struct SafetensorsSummary {
  int64_t parameters = 0;
  uint64_t bytes = 0;                       // of the files
  std::map<std::string, uint64_t> by_type;  // dtype -> data bytes
};

void summarize_safetensors(const fs::path& file, SafetensorsSummary& summary) {
  try {
    FilePrefix prefix(file.string());
    summary.bytes += prefix.file_size();
    const uint8_t* start = prefix.read(8);
    if (prefix.available() < 8) return;
    int64_t header_bytes = 0;
    std::memcpy(&header_bytes, start, 8);
    if (header_bytes <= 0 || header_bytes > kMaxHeaderBytes) return;
    const uint8_t* header = prefix.read(static_cast<size_t>(8 + header_bytes));
    const auto j = nlohmann::json::parse(header + 8, header + prefix.available(), nullptr, false);
    if (!j.is_object()) return;
    for (const auto& item : j.items()) {
      const nlohmann::json& t = item.value();
      if (item.key() == "__metadata__" || !t.is_object() || !t.contains("shape") || !t["shape"].is_array()) continue;
      int64_t elements = 1;
      for (const auto& ne : t["shape"]) elements *= ne.is_number_unsigned() ? ne.get<int64_t>() : 0;
      summary.parameters += elements;
      const auto& offsets = t.value("data_offsets", nlohmann::json());
      if (t.contains("dtype") && t["dtype"].is_string() && offsets.is_array() && offsets.size() == 2 &&
          offsets[0].is_number_unsigned() && offsets[1].is_number_unsigned()) {
        summary.by_type[t["dtype"].get<std::string>()] += offsets[1].get<uint64_t>() - offsets[0].get<uint64_t>();
      }
    }
  } catch (const std::exception&) {
    // an unreadable shard is described as far as it goes; load_model says what is wrong
  }
}

// Two paths to one file (a hub blob, an Ollama blob of two tags) share this key.
std::string file_key(const fs::path& path) {
  std::error_code ec;
  const fs::path canonical = fs::weakly_canonical(path, ec);
  return ec ? path.string() : canonical.string();
}

// The verdict is load_model's own, on the headers: the Model (without weights) when it
// loads, else the reason in m.problem.
std::shared_ptr<const Model> judge(FoundModel& m) {
  LoadOptions header_only;
  header_only.metadata_only = true;
  try {
    auto model = load_model(m.path, header_only);
    m.loadable = true;
    return model;
  } catch (const std::exception& e) {
    m.problem = without_path(e.what(), m.path);
    return nullptr;
  }
}

class Scanner {
 public:
  Scanner(const ScanOptions& options, ScanResult& result) : options_(options), result_(result) {}

  void scan(const ScanRoot& root);
  void suggest_drafts();

 private:
  using FileVisit = std::function<void(const fs::path& file)>;
  using DirVisit = std::function<void(const fs::path& dir)>;

  bool stopped() {
    if (!stop_ && options_.cancelled && options_.cancelled()) stop_ = true;
    return stop_;
  }
  void skip(const fs::path& path, std::string reason, std::string name = {}) {
    result_.skipped.push_back({path.string(), std::move(name), std::move(reason)});
  }
  bool first_visit(const fs::path& dir, const struct stat& st);
  void walk(const fs::path& dir, const fs::path& tree, int depth, const FileVisit& on_file, const DirVisit& on_dir);
  // GGUF files and safetensors directories at or below `dir`, named by `name_of`.
  void find_models(const fs::path& dir, const fs::path& tree, ModelStore store,
                   const std::function<std::string(const fs::path&)>& name_of);
  void scan_ollama(const fs::path& root);
  void add_ollama_manifest(const fs::path& manifest, const fs::path& blobs, const std::string& name);
  void scan_hub(const fs::path& root);

  // Each adds the model at `path` unless its file was found before (then `name` becomes an alias).
  void add_gguf(const fs::path& path, const std::string& name, ModelStore store);
  void add_safetensors_dir(const fs::path& dir, const std::string& name, ModelStore store);
  bool seen_before(const std::string& file, const std::string& name);
  void add(FoundModel m, const std::string& file, std::shared_ptr<const Model> loaded);

  const ScanOptions& options_;
  ScanResult& result_;
  bool stop_ = false;
  size_t entries_ = 0;
  std::set<fs::path> roots_;                             // the stores scanned, canonical
  std::map<std::pair<dev_t, ino_t>, fs::path> folders_;  // every folder walked, by identity
  std::map<std::string, size_t> by_file_;                // canonical path -> index in result_.models
  // (result_.models) what load_model made of each header; null when it does not load
  std::vector<std::shared_ptr<const Model>> loaded_;
};

// A folder is walked once: a second way to it is a loop or a duplicate link.
bool Scanner::first_visit(const fs::path& dir, const struct stat& st) {
  const auto [it, added] = folders_.emplace(std::make_pair(st.st_dev, st.st_ino), dir);
  if (!added) skip(dir, "the folder " + it->second.string() + " again (a symlink loop or a second link): not followed");
  return added;
}

// Depth first, in name order, names starting with '.' left out. `on_dir` sees every folder
// before it is walked; `on_file` every regular file (or link to one).
void Scanner::walk(const fs::path& dir, const fs::path& tree, int depth, const FileVisit& on_file,
                   const DirVisit& on_dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) return skip(dir, "cannot list: " + ec.message());
  std::vector<fs::path> names;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    if (!it->path().filename().string().starts_with('.')) names.push_back(it->path());
  }
  if (ec) skip(dir, "cannot list all of it: " + ec.message());
  std::sort(names.begin(), names.end());
  for (const fs::path& path : names) {
    if (stopped()) return;
    if (++entries_ > kMaxEntries) {
      stop_ = true;
      return skip(path, "stopped after " + std::to_string(kMaxEntries) + " entries");
    }
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {  // follows links: a loop of links gives ELOOP here
      const std::string error = std::strerror(errno);
      skip(path, (fs::is_symlink(fs::symlink_status(path, ec)) ? "a link that leads nowhere: " : "") + error);
      continue;
    }
    if (S_ISREG(st.st_mode)) {
      on_file(path);
    } else if (S_ISDIR(st.st_mode)) {
      if (fs::is_symlink(fs::symlink_status(path, ec)) && !inside(fs::canonical(path, ec), tree)) {
        skip(path, "a link out of " + tree.string() + ": not followed");
      } else if (depth + 1 >= kMaxDepth) {
        skip(path, "more than " + std::to_string(kMaxDepth) + " folders deep: not searched");
      } else if (first_visit(path, st)) {
        on_dir(path);
        walk(path, tree, depth + 1, on_file, on_dir);
      }
    }
  }
}

void Scanner::find_models(const fs::path& dir, const fs::path& tree, ModelStore store,
                          const std::function<std::string(const fs::path&)>& name_of) {
  const auto consider_dir = [&](const fs::path& d) {
    std::error_code ec;
    if (!fs::is_regular_file(d / "config.json", ec)) return;
    for (fs::directory_iterator it(d, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      if (it->path().extension() == ".safetensors") return add_safetensors_dir(d, name_of(d), store);
    }
  };
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return skip(dir, std::strerror(errno));
  if (!first_visit(dir, st)) return;
  consider_dir(dir);
  walk(
      dir, tree, 0,
      [&](const fs::path& file) {
        if (is_gguf_name(file)) add_gguf(file, name_of(file), store);
      },
      consider_dir);
}

void Scanner::scan(const ScanRoot& root) {
  const size_t first = result_.models.size();
  std::error_code ec;
  const fs::path top = fs::canonical(root.path, ec);
  if (ec) return skip(root.path, ec.message());
  if (!roots_.insert(top).second) return;  // given twice (a --dir that is also a store)
  switch (root.store) {
    case ModelStore::Ollama: scan_ollama(top); break;
    case ModelStore::HuggingFace: scan_hub(top); break;
    case ModelStore::LmStudio:
    case ModelStore::LlamaCpp:
    case ModelStore::Folder:
      find_models(top, top, root.store, [&](const fs::path& p) {
        const fs::path relative = p.lexically_relative(top);
        return relative == "." ? p.filename().string() : relative.generic_string();
      });
      break;
  }
  // by name within the root, keeping loaded_ in step
  std::vector<size_t> order(result_.models.size() - first);
  for (size_t i = 0; i < order.size(); ++i) order[i] = first + i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return result_.models[a].name < result_.models[b].name; });
  std::vector<FoundModel> models;
  std::vector<std::shared_ptr<const Model>> loaded;
  for (size_t i : order) {
    models.push_back(std::move(result_.models[i]));
    loaded.push_back(std::move(loaded_[i]));
  }
  std::move(models.begin(), models.end(), result_.models.begin() + static_cast<std::ptrdiff_t>(first));
  std::move(loaded.begin(), loaded.end(), loaded_.begin() + static_cast<std::ptrdiff_t>(first));
  for (size_t i = first; i < result_.models.size(); ++i) by_file_[file_key(result_.models[i].path)] = i;
}

// Ollama names a model by its manifest's place: registry.ollama.ai/library/qwen2.5-coder/7b
// is "qwen2.5-coder:7b", another namespace or registry stays in front ("hf.co/org/repo:Q4_K_M").
void Scanner::scan_ollama(const fs::path& root) {
  const fs::path manifests = root / "manifests", blobs = root / "blobs";
  struct stat st {};
  if (::stat(manifests.c_str(), &st) != 0) return skip(manifests, std::strerror(errno));
  if (!first_visit(manifests, st)) return;
  walk(
      manifests, root, 0,
      [&](const fs::path& manifest) {
        std::vector<std::string> parts;
        for (const auto& part : manifest.lexically_relative(manifests)) parts.push_back(part.string());
        if (parts.size() != 4) return skip(manifest, "not a manifest (expected registry/namespace/model/tag)");
        std::string name = parts[2] + ":" + parts[3];
        if (parts[0] != "registry.ollama.ai") {
          name = parts[0] + "/" + parts[1] + "/" + name;
        } else if (parts[1] != "library") {
          name = parts[1] + "/" + name;
        }
        add_ollama_manifest(manifest, blobs, name);
      },
      [](const fs::path&) {});
}

void Scanner::add_ollama_manifest(const fs::path& manifest, const fs::path& blobs, const std::string& name) {
  nlohmann::json j;
  try {
    FilePrefix file(manifest.string());
    if (file.file_size() > kMaxJsonBytes) return skip(manifest, "not a manifest: too big", name);
    const uint8_t* bytes = file.read(static_cast<size_t>(file.file_size()));
    j = nlohmann::json::parse(bytes, bytes + file.available());
  } catch (const nlohmann::json::exception& e) {
    return skip(manifest, std::string("not a manifest: ") + e.what(), name);
  } catch (const ModelError& e) {
    return skip(manifest, without_path(e.what(), manifest.string()), name);
  }
  if (!j.is_object() || !j.contains("layers") || !j["layers"].is_array()) {
    return skip(manifest, "not a manifest: no layers", name);
  }
  for (const auto& layer : j["layers"]) {
    if (!layer.is_object() || layer.value("mediaType", "") != "application/vnd.ollama.image.model") continue;
    const std::string digest = layer.value("digest", "");
    // sha256:<64 hex digits>, nothing else: the digest becomes a file name
    const bool valid = digest.size() == 71 && digest.starts_with("sha256:") &&
                       std::all_of(digest.begin() + 7, digest.end(), [](unsigned char c) { return std::isxdigit(c); });
    if (!valid) return skip(manifest, "the model layer's digest '" + digest + "' is not sha256:<hex>", name);
    const fs::path blob = blobs / ("sha256-" + digest.substr(7));
    std::error_code ec;
    if (!fs::exists(blob, ec)) return skip(manifest, "its model blob " + blob.filename().string() + " is missing", name);
    return add_gguf(blob, name, ModelStore::Ollama);
  }
  skip(manifest, "no layer of type application/vnd.ollama.image.model", name);
}

// models--org--name/snapshots/<revision>/: "org/name", with "@<revision>" when the cache
// keeps several revisions, and the file's path in the repository for a GGUF.
void Scanner::scan_hub(const fs::path& root) {
  std::error_code ec;
  std::vector<fs::path> repos;
  for (fs::directory_iterator it(root, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().starts_with("models--")) repos.push_back(it->path());
  }
  if (ec) skip(root, "cannot list: " + ec.message());
  std::sort(repos.begin(), repos.end());
  for (const fs::path& repo_dir : repos) {
    if (stopped()) return;
    std::string repo = repo_dir.filename().string().substr(8);
    if (const size_t dash = repo.find("--"); dash != std::string::npos) repo.replace(dash, 2, "/");
    std::vector<fs::path> snapshots;
    for (fs::directory_iterator it(repo_dir / "snapshots", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      snapshots.push_back(it->path());
    }
    if (ec) {
      skip(repo_dir / "snapshots", "cannot list: " + ec.message(), repo);
      continue;
    }
    std::sort(snapshots.begin(), snapshots.end());
    for (const fs::path& snapshot : snapshots) {
      const std::string base = snapshots.size() > 1 ? repo + "@" + snapshot.filename().string().substr(0, 7) : repo;
      find_models(snapshot, repo_dir, ModelStore::HuggingFace, [&](const fs::path& p) {
        const fs::path relative = p.lexically_relative(snapshot);
        return relative == "." ? base : base + "/" + relative.generic_string();
      });
    }
  }
}

bool Scanner::seen_before(const std::string& file, const std::string& name) {
  const auto it = by_file_.find(file);
  if (it == by_file_.end()) return false;
  FoundModel& first = result_.models[it->second];
  if (name != first.name && std::find(first.aliases.begin(), first.aliases.end(), name) == first.aliases.end()) {
    first.aliases.push_back(name);
  }
  return true;
}

void Scanner::add_gguf(const fs::path& path, const std::string& name, ModelStore store) {
  const std::string file = file_key(path);
  if (seen_before(file, name)) return;
  GgufFile header;
  try {
    header = GgufFile::read_header(path.string());
  } catch (const ModelError&) {
    try {  // a tensor table this engine cannot read (a type it lacks, a cut file) still has metadata
      header = GgufFile::read_header(path.string(), GgufPart::Metadata);
    } catch (const ModelError& e) {
      return skip(path, without_path(e.what(), path.string()), name);
    }
  }
  if (const GgufValue* shard = header.find("split.no"); shard && shard->is_integer() && shard->integer > 0) {
    return;  // a later shard of a split model: the first one stands for it
  }
  FoundModel m;
  m.path = path.string();
  m.name = name;
  m.store = store;
  m.format = "gguf";
  m.architecture = text_value(header, "general.architecture");
  for (const auto& [key, field] : {std::pair{".expert_count", &m.experts}, {".expert_used_count", &m.experts_used}}) {
    const GgufValue* v = header.find(m.architecture + key);
    if (v && v->is_integer() && v->integer > 0 && v->integer < (1 << 20)) *field = static_cast<int>(v->integer);
  }
  std::map<TensorType, uint64_t> by_type;
  for (const GgufTensorInfo& t : header.tensors) {
    int64_t elements = 1;
    for (int64_t ne : t.shape) elements *= ne;
    m.parameters += elements;
    by_type[t.type] += t.bytes;
  }
  std::error_code ec;
  m.bytes = fs::file_size(path, ec);
  if (const GgufValue* ftype = header.find("general.file_type"); ftype && ftype->is_integer()) {
    m.weight_type = llama_file_type_name(ftype->integer);
  }
  if (m.weight_type.empty() && !by_type.empty()) {
    const auto most = std::max_element(by_type.begin(), by_type.end(),
                                       [](const auto& a, const auto& b) { return a.second < b.second; });
    m.weight_type = upper(type_traits(most->first).name);
  }
  if (const GgufValue* tokens = header.find("tokenizer.ggml.tokens")) {
    m.tokenizer = text_value(header, "tokenizer.ggml.model");
    if (m.tokenizer.empty()) m.tokenizer = "llama";  // the loader's default
    if (const std::string pre = text_value(header, "tokenizer.ggml.pre"); !pre.empty()) m.tokenizer += "/" + pre;
    m.vocabulary = static_cast<int>(tokens->array_size());
  }
  std::shared_ptr<const Model> loaded = judge(m);
  add(std::move(m), file, std::move(loaded));
}

void Scanner::add_safetensors_dir(const fs::path& dir, const std::string& name, ModelStore store) {
  const std::string file = file_key(dir);
  if (seen_before(file, name)) return;
  FoundModel m;
  m.path = dir.string();
  m.name = name;
  m.store = store;
  m.format = "safetensors";
  try {
    FilePrefix config((dir / "config.json").string());
    const uint8_t* bytes = config.read(static_cast<size_t>(std::min<uint64_t>(config.file_size(), kMaxJsonBytes)));
    const auto j = nlohmann::json::parse(bytes, bytes + config.available(), nullptr, false);
    if (j.is_object()) m.architecture = j.value("model_type", "");
  } catch (const std::exception&) {
    // load_model names what is wrong with config.json
  }
  SafetensorsSummary summary;
  std::vector<fs::path> shards;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->path().extension() == ".safetensors") shards.push_back(it->path());
  }
  for (const fs::path& shard : shards) summarize_safetensors(shard, summary);
  m.parameters = summary.parameters;
  m.bytes = summary.bytes;
  if (!summary.by_type.empty()) {
    m.weight_type = std::max_element(summary.by_type.begin(), summary.by_type.end(), [](const auto& a, const auto& b) {
                      return a.second < b.second;
                    })->first;
  }
  for (const char* file : {"tokenizer.model", "tokenizer.json"}) {
    if (m.tokenizer.empty() && fs::exists(dir / file, ec)) m.tokenizer = file;
  }
  std::shared_ptr<const Model> loaded = judge(m);
  if (loaded && loaded->tokenizer) m.vocabulary = loaded->tokenizer->size();
  add(std::move(m), file, std::move(loaded));
}

void Scanner::add(FoundModel m, const std::string& file, std::shared_ptr<const Model> loaded) {
  by_file_[file] = result_.models.size();
  result_.models.push_back(std::move(m));
  loaded_.push_back(std::move(loaded));
}

// A draft has at most half the target's parameters (else it saves little) and passes the
// draft drafter's tokenizer check against it; both need a vocabulary.
void Scanner::suggest_drafts() {
  std::vector<FoundModel>& models = result_.models;
  for (size_t t = 0; t < models.size(); ++t) {
    if (!loaded_[t] || !loaded_[t]->tokenizer) continue;
    std::vector<size_t> drafts;
    for (size_t d = 0; d < models.size(); ++d) {
      if (d == t || !loaded_[d] || !loaded_[d]->tokenizer || models[d].parameters <= 0 ||
          2 * models[d].parameters > models[t].parameters) {
        continue;
      }
      try {
        check_tokenizers_match(*loaded_[t], *loaded_[d]);
        drafts.push_back(d);
      } catch (const std::invalid_argument&) {
        // another vocabulary: not a draft for this one
      }
    }
    std::stable_sort(drafts.begin(), drafts.end(),
                     [&](size_t a, size_t b) { return models[a].parameters < models[b].parameters; });
    for (size_t d : drafts) models[t].drafts.push_back(models[d].path);
  }
}

}  // namespace

std::string_view model_store_name(ModelStore store) {
  switch (store) {
    case ModelStore::Ollama: return "ollama";
    case ModelStore::LmStudio: return "lm-studio";
    case ModelStore::LlamaCpp: return "llama.cpp";
    case ModelStore::HuggingFace: return "huggingface";
    case ModelStore::Folder: return "folder";
  }
  return "folder";
}

std::vector<ScanRoot> default_scan_roots(const std::function<const char*(const char*)>& getenv) {
  const auto var = [&](const char* name) -> std::string {
    const char* v = getenv ? getenv(name) : std::getenv(name);
    return v ? v : "";
  };
  const std::string home = var("HOME");
  const auto in_home = [&](const std::string& relative) { return home.empty() ? std::string() : home + "/" + relative; };
  const std::string cache = var("XDG_CACHE_HOME").empty() ? in_home(".cache") : var("XDG_CACHE_HOME");
  const auto or_else = [](const std::string& a, const std::string& b) { return a.empty() ? b : a; };
  const std::string hf_home = var("HF_HOME");
  const std::pair<ModelStore, std::string> candidates[] = {
      {ModelStore::Ollama, or_else(var("OLLAMA_MODELS"), in_home(".ollama/models"))},
      {ModelStore::Ollama, "/usr/share/ollama/.ollama/models"},
      {ModelStore::LmStudio, in_home(".lmstudio/models")},
      {ModelStore::LmStudio, cache.empty() ? "" : cache + "/lm-studio/models"},
      {ModelStore::LlamaCpp, or_else(var("LLAMA_CACHE"), cache.empty() ? "" : cache + "/llama.cpp")},
      {ModelStore::HuggingFace,
       or_else(var("HF_HUB_CACHE"), hf_home.empty() ? (cache.empty() ? "" : cache + "/huggingface/hub") : hf_home + "/hub")},
  };
  std::vector<ScanRoot> roots;
  std::set<std::string> seen;
  for (const auto& [store, path] : candidates) {
    std::error_code ec;
    if (path.empty() || !fs::is_directory(path, ec)) continue;
    if (seen.insert(fs::canonical(path, ec).string()).second) roots.push_back({store, path});
  }
  return roots;
}

ScanRoot scan_root_for(const std::string& folder) {
  std::error_code ec;
  if (fs::is_directory(fs::path(folder) / "manifests", ec) && fs::is_directory(fs::path(folder) / "blobs", ec)) {
    return {ModelStore::Ollama, folder};
  }
  for (fs::directory_iterator it(folder, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().starts_with("models--")) return {ModelStore::HuggingFace, folder};
  }
  return {ModelStore::Folder, folder};
}

ScanResult scan_models(const std::vector<ScanRoot>& roots, const ScanOptions& options) {
  ScanResult result;
  Scanner scanner(options, result);
  for (const ScanRoot& root : roots) scanner.scan(root);
  scanner.suggest_drafts();
  return result;
}

std::string parameter_count_label(int64_t parameters) {
  if (parameters <= 0) return "?";
  static const std::pair<double, const char*> kUnits[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "K"}};
  for (const auto& [unit, suffix] : kUnits) {
    if (parameters >= unit) {
      const double v = static_cast<double>(parameters) / unit;
      char text[32];
      std::snprintf(text, sizeof text, v < 10 ? "%.1f%s" : "%.0f%s", v, suffix);
      return text;
    }
  }
  return std::to_string(parameters);
}

std::string byte_count_label(uint64_t bytes) {
  static const std::pair<double, const char*> kUnits[] = {{1e12, "TB"}, {1e9, "GB"}, {1e6, "MB"}, {1e3, "kB"}};
  for (const auto& [unit, suffix] : kUnits) {
    if (static_cast<double>(bytes) >= unit) {
      const double v = static_cast<double>(bytes) / unit;
      char text[32];
      std::snprintf(text, sizeof text, v < 10 ? "%.1f %s" : "%.0f %s", v, suffix);
      return text;
    }
  }
  return std::to_string(bytes) + " B";
}

}  // namespace specula
