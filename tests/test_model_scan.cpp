// The model scan on fake stores built in a temporary home, filled with real GGUF files
// written by the engine's writer (stories260K converted, random models with its vocabulary
// or another, a byte-level BPE vocabulary of llama.cpp's) and Hugging Face snapshots of
// real safetensors models: every model is found under its store's name, described from
// its headers, judged loadable exactly when load_model loads it (with load_model's reason
// when not), and offered the drafts that share its vocabulary; links that loop or leave
// the store, unreadable folders, broken manifests and files that are not GGUF are skipped
// with a reason.
#include <QTemporaryDir>
#include <QtTest>

#include <linux/capability.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "model/gguf.h"
#include "model/model.h"
#include "model/model_export.h"
#include "model/model_scan.h"
#include "model/safetensors.h"
#include "shared_data.h"
#include "small_models.h"

using namespace specula;
using specula::test::small_llama;
using specula::test::write_unrunnable_variant;
namespace fs = std::filesystem;

namespace {

const std::string kDigest(64, 'a');  // the stories blob's digest in the fake Ollama store
const std::string kRevision = "0123456789abcdef0123456789abcdef01234567";

void write_text(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// `model_gguf` with the tokenizer.* keys of `vocab_gguf` instead of its own.
void write_with_vocabulary(const std::string& model_gguf, const std::string& vocab_gguf, const fs::path& out) {
  const GgufFile m = GgufFile::open(model_gguf), v = GgufFile::open(vocab_gguf);
  GgufWriter w;
  for (const auto& [key, value] : m.metadata) {
    if (!key.starts_with("tokenizer.")) w.set(key, value);
  }
  for (const auto& [key, value] : v.metadata) {
    if (key.starts_with("tokenizer.")) w.set(key, value);
  }
  for (const GgufTensorInfo& t : m.tensors) {
    w.add_tensor(t.name, t.type, t.shape, [&t](uint8_t* dst) { std::memcpy(dst, t.data, t.bytes); });
  }
  fs::create_directories(out.parent_path());
  w.write(out.string());
}

void copy_prefix(const fs::path& from, const fs::path& to, size_t bytes) {
  std::ifstream in(from, std::ios::binary);
  std::string data(bytes, '\0');
  in.read(data.data(), static_cast<std::streamsize>(bytes));
  write_text(to, data);
}

// What load_model says of `path`: "" when it loads, else its message without the path.
std::string load_verdict(const std::string& path) {
  try {
    load_model(path);
    return "";
  } catch (const ModelError& e) {
    const std::string message = e.what();
    for (const std::string& prefix : {path + ": ", path + "/"}) {
      if (message.starts_with(prefix)) return message.substr(prefix.size());
    }
    return message;
  }
}

int64_t gguf_parameters(const std::string& path) {
  int64_t n = 0;
  for (const GgufTensorInfo& t : GgufFile::open(path).tensors) n += t.cols() * t.rows();
  return n;
}

// Drops the capabilities that let root read anything from the calling thread's effective
// set, so that permission bits apply to it as to any user; restores them when destroyed.
class PermissionBitsApply {
 public:
  PermissionBitsApply() {
    if (syscall(SYS_capget, &header_, saved_) != 0) return;
    __user_cap_data_struct reduced[2];
    std::memcpy(reduced, saved_, sizeof reduced);
    reduced[0].effective &= ~((1u << CAP_DAC_OVERRIDE) | (1u << CAP_DAC_READ_SEARCH));
    dropped_ = syscall(SYS_capset, &header_, reduced) == 0;
  }
  ~PermissionBitsApply() {
    if (dropped_) syscall(SYS_capset, &header_, saved_);
  }

 private:
  __user_cap_header_struct header_{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct saved_[2] = {};
  bool dropped_ = false;
};

}  // namespace

class TestModelScan : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  fs::path home_;
  std::string target_, draft_, other_vocab_, bpe_;  // paths of the models made in initTestCase
  std::map<std::string, std::string> env_;

  fs::path ollama() const { return home_ / ".ollama/models"; }
  fs::path lmstudio() const { return home_ / ".lmstudio/models"; }
  fs::path hub() const { return home_ / ".cache/huggingface/hub"; }

  // The stores of the fake home (the Linux Ollama service's, outside any home, left out).
  std::vector<ScanRoot> roots() const {
    std::vector<ScanRoot> found = default_scan_roots([this](const char* name) -> const char* {
      const auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
    std::erase_if(found, [](const ScanRoot& r) { return r.path.starts_with("/usr/share/ollama"); });
    return found;
  }

  const FoundModel* find(const ScanResult& r, const std::string& name) {
    for (const FoundModel& m : r.models) {
      if (m.name == name) return &m;
    }
    return nullptr;
  }
  const SkippedEntry* skipped(const ScanResult& r, const std::string& path_end) {
    for (const SkippedEntry& s : r.skipped) {
      if (s.path.ends_with(path_end)) return &s;
    }
    return nullptr;
  }

  void ollama_manifest(const std::string& registry_path, const std::string& digest) {
    write_text(ollama() / "manifests" / registry_path,
               R"({"schemaVersion": 2, "config": {"mediaType": "application/vnd.docker.container.image.v1+json"},
                   "layers": [{"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:)" +
                   std::string(64, 'f') + R"("}, {"mediaType": "application/vnd.ollama.image.model", "digest": "sha256:)" +
                   digest + R"("}]})");
  }

  // models--<org>--<name>/snapshots/<revision>/<file> linking to blobs/<hash>, as the hub client lays them out.
  void hub_file(const std::string& repo, const std::string& file, const fs::path& content, const std::string& hash) {
    const fs::path repo_dir = hub() / ("models--" + repo);
    fs::create_directories(repo_dir / "blobs");
    fs::copy_file(content, repo_dir / "blobs" / hash, fs::copy_options::overwrite_existing);
    const fs::path link = repo_dir / "snapshots" / kRevision / file;
    fs::create_directories(link.parent_path());
    fs::path target = "../..";  // from snapshots/<revision>/, one more per folder of the file's path
    for ([[maybe_unused]] const auto& folder : fs::path(file).parent_path()) target /= "..";
    fs::create_symlink(target / "blobs" / hash, link);
    write_text(repo_dir / "refs/main", kRevision);
  }

 private slots:
  void initTestCase() {
    SPECULA_SHARED_FILE(bin, "models/stories260K/stories260K.bin");
    SPECULA_SHARED_FILE(tok, "models/stories260K/tok512.bin");
    SPECULA_SHARED_FILE(bpe_vocab, "tokenizers/bpe-vocab/ggml-vocab-deepseek-coder.gguf");
    SPECULA_SHARED_FILE(spm_vocab, "tokenizers/llama-spm-vocab/ggml-vocab-llama-spm.gguf");
    SPECULA_SHARED_FILE(tinystories, "models/tinystories656k/config.json");
    home_ = tmp_.path().toStdString();
    env_ = {{"HOME", home_.string()}};
    const fs::path made = home_ / "made";
    fs::create_directories(made);

    // Ollama: stories260K as two tags of one blob, a model of a byte-level BPE vocabulary
    // under a Hugging Face name, and three broken entries.
    LoadOptions with_tokenizer;
    with_tokenizer.tokenizer_path = tok;
    const auto stories = load_model(bin, with_tokenizer);
    target_ = (ollama() / "blobs" / ("sha256-" + kDigest)).string();
    fs::create_directories(ollama() / "blobs");
    write_gguf_model(*stories, target_, TensorType::F32);
    ollama_manifest("registry.ollama.ai/library/stories/260k", kDigest);
    ollama_manifest("registry.ollama.ai/library/stories/latest", kDigest);
    const int bpe_rows = static_cast<int>(GgufFile::open(bpe_vocab).find("tokenizer.ggml.tokens")->array_size());
    write_gguf_model(*small_llama(nullptr, bpe_rows, 3), (made / "bpe-weights.gguf").string(), TensorType::Q8_0);
    bpe_ = (ollama() / "blobs" / ("sha256-" + std::string(64, 'b'))).string();
    write_with_vocabulary((made / "bpe-weights.gguf").string(), bpe_vocab, bpe_);
    ollama_manifest("hf.co/someone/coder-GGUF/Q8_0", std::string(64, 'b'));
    write_text(ollama() / "manifests/registry.ollama.ai/library/broken/latest", "{\"layers\": [");
    write_text(ollama() / "blobs" / ("sha256-" + std::string(64, 'c')), std::string(4096, 'x'));
    ollama_manifest("registry.ollama.ai/library/junk/latest", std::string(64, 'c'));
    ollama_manifest("registry.ollama.ai/library/gone/latest", std::string(64, 'd'));

    // LM Studio: a draft of stories' vocabulary, one of another vocabulary, a vocabulary
    // alone, an architecture the engine lacks, a file cut in its data and one cut in its
    // header; links that loop, lead to / or nowhere.
    draft_ = (lmstudio() / "someone/tiny-GGUF/tiny-draft-q8_0.gguf").string();
    fs::create_directories(fs::path(draft_).parent_path());
    write_gguf_model(*small_llama(stories->tokenizer, 512, 1), draft_, TensorType::Q8_0);
    Vocabulary renamed = stories->tokenizer->vocabulary();
    renamed.pieces[300] = "\xe2\x96\x81zqxj";
    other_vocab_ = (lmstudio() / "someone/other-GGUF/other-vocab.gguf").string();
    fs::create_directories(fs::path(other_vocab_).parent_path());
    write_gguf_model(*small_llama(create_tokenizer(renamed), 512, 2), other_vocab_, TensorType::Q8_0);
    fs::create_directories(lmstudio() / "llama.cpp/vocab");
    fs::copy_file(spm_vocab, lmstudio() / "llama.cpp/vocab/ggml-vocab-llama-spm.gguf");
    {
      GgufWriter w;
      w.set("general.architecture", GgufValue::string("mamba"));
      w.add_tensor("token_embd.weight", TensorType::F32, {32, 4}, [](uint8_t* d) { std::memset(d, 0, 32 * 4 * 4); });
      fs::create_directories(lmstudio() / "state-spaces/mamba-GGUF");
      w.write((lmstudio() / "state-spaces/mamba-GGUF/mamba.gguf").string());
    }
    // Two files Specula reads but cannot run, as real downloads can be: a tensor of a type it
    // does not compute with (q8_1) and an architecture it lacks (mamba), each with the
    // draft's vocabulary.
    fs::create_directories(lmstudio() / "someone/unrunnable-GGUF");
    write_unrunnable_variant(draft_, (lmstudio() / "someone/unrunnable-GGUF/q8_1.gguf").string(),
                             "blk.0.ffn_down.weight", TensorType::Q8_1);
    write_unrunnable_variant(draft_, (lmstudio() / "someone/unrunnable-GGUF/mamba.gguf").string(),
                             "blk.0.ffn_down.weight", TensorType::Q8_1, "mamba");
    copy_prefix(target_, lmstudio() / "cut/data/cut-data.gguf", static_cast<size_t>(fs::file_size(target_) / 2));
    copy_prefix(target_, lmstudio() / "cut/header/cut-header.gguf", 200);
    fs::create_directory_symlink("..", lmstudio() / "someone/loop");
    fs::create_directory_symlink("/", lmstudio() / "root");
    fs::create_symlink("self.gguf", lmstudio() / "self.gguf");
    fs::create_symlink("nowhere.gguf", lmstudio() / "dangling.gguf");

    // llama.cpp's cache: stories in q8_0 as -hf names it, beside its etag file.
    const fs::path cache = home_ / ".cache/llama.cpp";
    fs::create_directories(cache);
    write_gguf_model(*stories, (cache / "someone_stories-GGUF_stories-q8_0.gguf").string(), TensorType::Q8_0);
    write_text(cache / "someone_stories-GGUF_stories-q8_0.gguf.json", R"({"etag": "x"})");

    // The hub: tinystories656k's safetensors snapshot and a GGUF repository, all links into blobs/.
    const fs::path tiny_dir = fs::path(tinystories).parent_path();
    hub_file("raincandy-u--TinyStories-656K", "config.json", tiny_dir / "config.json", std::string(40, '1'));
    hub_file("raincandy-u--TinyStories-656K", "model.safetensors", tiny_dir / "model.safetensors", std::string(64, '2'));
    hub_file("raincandy-u--TinyStories-656K", "tokenizer.json", tiny_dir / "tokenizer.json", std::string(40, '3'));
    hub_file("someone--stories-GGUF", "gguf/stories-f32.gguf", target_, std::string(64, '4'));
  }

  void rootsFollowTheEnvironment() {
    const std::vector<ScanRoot> defaults = roots();
    QCOMPARE(defaults.size(), size_t{4});
    QVERIFY(defaults[0].store == ModelStore::Ollama && defaults[0].path == ollama().string());
    QVERIFY(defaults[1].store == ModelStore::LmStudio && defaults[1].path == lmstudio().string());
    QVERIFY(defaults[2].store == ModelStore::LlamaCpp && defaults[2].path == (home_ / ".cache/llama.cpp").string());
    QVERIFY(defaults[3].store == ModelStore::HuggingFace && defaults[3].path == hub().string());

    const auto saved = env_;
    const fs::path elsewhere = home_ / "elsewhere";
    for (const char* dir : {"ollama", "llama", "hf/hub", "hub", "xdg/llama.cpp", "xdg/lm-studio/models"}) {
      fs::create_directories(elsewhere / dir);
    }
    env_["OLLAMA_MODELS"] = (elsewhere / "ollama").string();
    env_["LLAMA_CACHE"] = (elsewhere / "llama").string();
    env_["HF_HOME"] = (elsewhere / "hf").string();
    std::vector<ScanRoot> moved = roots();
    QCOMPARE(moved[0].path, (elsewhere / "ollama").string());
    QCOMPARE(moved[2].path, (elsewhere / "llama").string());
    QCOMPARE(moved[3].path, (elsewhere / "hf/hub").string());
    env_["HF_HUB_CACHE"] = (elsewhere / "hub").string();  // wins over HF_HOME
    QCOMPARE(roots().back().path, (elsewhere / "hub").string());
    env_ = saved;
    env_["XDG_CACHE_HOME"] = (elsewhere / "xdg").string();
    moved = roots();
    QCOMPARE(moved.size(), size_t{4});  // the hub has no folder under xdg: left out
    QCOMPARE(moved[2].path, (elsewhere / "xdg/lm-studio/models").string());
    QCOMPARE(moved[3].path, (elsewhere / "xdg/llama.cpp").string());
    env_ = saved;
    fs::remove_all(elsewhere);

    QVERIFY(scan_root_for(ollama().string()).store == ModelStore::Ollama);
    QVERIFY(scan_root_for(hub().string()).store == ModelStore::HuggingFace);
    QVERIFY(scan_root_for(lmstudio().string()).store == ModelStore::Folder);
  }

  // Every model found is judged as load_model judges it, and described from its header.
  void everyVerdictIsLoadModels() {
    const ScanResult r = scan_models(roots());
    QVERIFY(r.models.size() >= 10);
    for (const FoundModel& m : r.models) {
      const std::string verdict = load_verdict(m.path);
      QVERIFY2(m.loadable == verdict.empty(), (m.name + ": " + m.problem + " / " + verdict).c_str());
      QCOMPARE(m.problem, verdict);
    }
    const FoundModel* stories = find(r, "stories:260k");
    QVERIFY(stories);
    QCOMPARE(stories->path, target_);
    QCOMPARE(stories->aliases, std::vector<std::string>{"stories:latest"});
    QVERIFY(stories->store == ModelStore::Ollama);
    QCOMPARE(stories->architecture, std::string("llama"));
    QCOMPARE(stories->parameters, gguf_parameters(target_));
    QCOMPARE(parameter_count_label(stories->parameters), std::string("260K"));
    QCOMPARE(stories->bytes, static_cast<uint64_t>(fs::file_size(target_)));
    QCOMPARE(stories->weight_type, std::string("F32"));
    QCOMPARE(stories->tokenizer, std::string("llama"));
    QCOMPARE(stories->vocabulary, 512);
    QVERIFY(stories->loadable);

    const FoundModel* bpe = find(r, "hf.co/someone/coder-GGUF:Q8_0");
    QVERIFY(bpe);
    QCOMPARE(bpe->tokenizer, std::string("gpt2/deepseek-coder"));
    QCOMPARE(bpe->weight_type, std::string("Q8_0"));
    if (!bpe->loadable) QVERIFY2(bpe->problem.find("gpt2") != std::string::npos, bpe->problem.c_str());

    const FoundModel* q8 = find(r, "someone_stories-GGUF_stories-q8_0.gguf");
    QVERIFY(q8 && q8->loadable && q8->store == ModelStore::LlamaCpp);
    QCOMPARE(q8->weight_type, std::string("Q8_0"));

    const FoundModel* vocab = find(r, "llama.cpp/vocab/ggml-vocab-llama-spm.gguf");
    QVERIFY(vocab && !vocab->loadable && vocab->store == ModelStore::LmStudio);
    QVERIFY(vocab->problem.find("has no weights") != std::string::npos);
    QCOMPARE(vocab->vocabulary, 32000);
    const FoundModel* mamba = find(r, "state-spaces/mamba-GGUF/mamba.gguf");
    QVERIFY(mamba && !mamba->loadable);
    QCOMPARE(mamba->architecture, std::string("mamba"));
    QVERIFY(mamba->problem.find("architecture 'mamba' is not supported") != std::string::npos);
    const FoundModel* cut = find(r, "cut/data/cut-data.gguf");
    QVERIFY(cut && !cut->loadable);
    QVERIFY2(cut->problem.find("extends past the end of the file") != std::string::npos, cut->problem.c_str());
    QCOMPARE(cut->architecture, std::string("llama"));  // the metadata still says what it was

    const FoundModel* tiny = find(r, "raincandy-u/TinyStories-656K");
    QVERIFY(tiny && tiny->loadable && tiny->store == ModelStore::HuggingFace);
    QCOMPARE(tiny->format, std::string("safetensors"));
    QCOMPARE(tiny->architecture, std::string("llama"));
    QCOMPARE(tiny->weight_type, std::string("F32"));
    QCOMPARE(tiny->tokenizer, std::string("tokenizer.json"));
    QCOMPARE(tiny->vocabulary, 2048);
    int64_t tiny_parameters = 0;
    for (const SafetensorsTensor& t : SafetensorsFile::open(tiny->path + "/model.safetensors").tensors) {
      tiny_parameters += t.rows() * t.cols();
    }
    QCOMPARE(tiny->parameters, tiny_parameters);
    QCOMPARE(tiny->bytes, static_cast<uint64_t>(fs::file_size(tiny->path + "/model.safetensors")));
    const FoundModel* hub_gguf = find(r, "someone/stories-GGUF/gguf/stories-f32.gguf");
    QVERIFY(hub_gguf && hub_gguf->loadable);
    QCOMPARE(hub_gguf->parameters, stories->parameters);
  }

  // Same vocabulary and at most half the parameters; another vocabulary never.
  void draftsShareTheVocabulary() {
    const ScanResult r = scan_models(roots());
    const FoundModel* stories = find(r, "stories:260k");
    QVERIFY(stories);
    QCOMPARE(stories->drafts, std::vector<std::string>{draft_});
    QVERIFY(find(r, "someone/other-GGUF/other-vocab.gguf")->loadable);  // a good model, but not a draft
    QVERIFY(find(r, "someone/tiny-GGUF/tiny-draft-q8_0.gguf")->drafts.empty());
    QCOMPARE(find(r, "someone_stories-GGUF_stories-q8_0.gguf")->drafts, std::vector<std::string>{draft_});
  }

  // A file whose tensor types or architecture the engine does not run is still listed and
  // described from its header (architecture, vocabulary), with the reason it does not load:
  // the tensor, its type and the supported types; or the architecture. Never "invalid".
  void unrunnableFilesAreDescribedWithTheirReason() {
    const ScanResult r = scan_models(roots());
    const FoundModel* typed = find(r, "someone/unrunnable-GGUF/q8_1.gguf");
    QVERIFY(typed && !typed->loadable);
    QCOMPARE(typed->architecture, std::string("llama"));
    QCOMPARE(typed->vocabulary, 512);
    QVERIFY2(typed->problem.find("tensor 'blk.0.ffn_down.weight' has type q8_1") != std::string::npos, typed->problem.c_str());
    QVERIFY2(typed->problem.find("f32, f16, bf16, q8_0, q4_0, q4_K, q6_K") != std::string::npos, typed->problem.c_str());
    QVERIFY2(typed->problem.find("invalid") == std::string::npos, typed->problem.c_str());
    const FoundModel* mamba = find(r, "someone/unrunnable-GGUF/mamba.gguf");
    QVERIFY(mamba && !mamba->loadable);
    QCOMPARE(mamba->architecture, std::string("mamba"));
    QCOMPARE(mamba->vocabulary, 512);
    QVERIFY2(mamba->problem.find("architecture 'mamba' is not supported") != std::string::npos, mamba->problem.c_str());
    QVERIFY2(mamba->problem.find("invalid") == std::string::npos, mamba->problem.c_str());
  }

  // Links that loop or lead out of the store and files that are not GGUF end as reasons.
  void badEntriesAreSkippedWithAReason() {
    const ScanResult r = scan_models(roots());
    const auto reason = [&](const std::string& path_end) -> std::string {
      const SkippedEntry* s = skipped(r, path_end);
      return s ? s->reason : "(not skipped)";
    };
    QVERIFY2(reason("library/broken/latest").find("not a manifest") != std::string::npos, reason("broken/latest").c_str());
    QVERIFY2(reason("sha256-" + std::string(64, 'c')).find("wrong magic") != std::string::npos, reason("cccc").c_str());
    QCOMPARE(skipped(r, "sha256-" + std::string(64, 'c'))->name, std::string("junk:latest"));
    QVERIFY2(reason("library/gone/latest").find("is missing") != std::string::npos, reason("gone/latest").c_str());
    QVERIFY2(reason("cut-header.gguf").find("invalid GGUF file") != std::string::npos, reason("cut-header.gguf").c_str());
    QVERIFY2(reason("someone/loop").find("again") != std::string::npos, reason("someone/loop").c_str());
    QVERIFY2(reason("models/root").find("a link out of") != std::string::npos, reason("models/root").c_str());
    QVERIFY2(reason("self.gguf").find("Too many levels of symbolic links") != std::string::npos, reason("self.gguf").c_str());
    QVERIFY2(reason("dangling.gguf").find("No such file") != std::string::npos, reason("dangling.gguf").c_str());
    for (const FoundModel& m : r.models) QVERIFY2(m.path.find("/made/") == std::string::npos, m.path.c_str());
  }

  // Permission bits stop a root process only when it lacks CAP_DAC_OVERRIDE and
  // CAP_DAC_READ_SEARCH, so the scan runs with them dropped from this thread.
  void unreadableFolderIsSkipped() {
    const fs::path store = home_ / "locked-store";
    fs::create_directories(store / "locked");
    fs::copy_file(draft_, store / "locked/model.gguf");
    fs::copy_file(draft_, store / "open.gguf");
    fs::permissions(store / "locked", fs::perms::none);
    ScanResult r;
    bool denied = false;
    {
      PermissionBitsApply guard;
      std::error_code ec;
      denied = !fs::is_directory(store / "locked", ec) || fs::directory_iterator(store / "locked", ec) == fs::directory_iterator();
      if (denied) r = scan_models({{ModelStore::Folder, store.string()}});
    }
    fs::permissions(store / "locked", fs::perms::owner_all);
    if (!denied) QSKIP("permission bits do not stop this process (root with capabilities it could not drop)");
    QCOMPARE(r.models.size(), size_t{1});
    QCOMPARE(r.models[0].name, std::string("open.gguf"));
    const SkippedEntry* s = skipped(r, "locked");
    QVERIFY(s);
    QVERIFY2(s->reason.find("Permission denied") != std::string::npos, s->reason.c_str());
  }

  void cancelledScanStopsEarly() {
    ScanOptions options;
    options.cancelled = [] { return true; };
    const ScanResult r = scan_models(roots(), options);
    QVERIFY(r.models.empty());
  }

  void labels() {
    QCOMPARE(parameter_count_label(7615616512), std::string("7.6B"));
    QCOMPARE(parameter_count_label(494032768), std::string("494M"));
    QCOMPARE(parameter_count_label(0), std::string("?"));
    QCOMPARE(byte_count_label(4683073184), std::string("4.7 GB"));
    QCOMPARE(byte_count_label(12), std::string("12 B"));
  }
};

QTEST_GUILESS_MAIN(TestModelScan)
#include "test_model_scan.moc"
