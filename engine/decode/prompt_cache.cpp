#include "decode/prompt_cache.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>

#include "decode/draft_policy.h"

namespace specula {

PromptCache::PromptCache(int max_blocks) : max_blocks_(max_blocks) {
  if (max_blocks < 1) throw std::invalid_argument("a prompt cache needs room for at least one block");
}

PromptCache::~PromptCache() { clear(); }

KvCache& PromptCache::cache_for(Backend& backend, const Model& target, int session_tokens) {
  const int block_size = cache_ ? cache_->block_size() : 16;
  const auto blocks = [block_size](int tokens) { return (tokens + block_size - 1) / block_size; };
  const int needed = max_blocks_ + blocks(session_tokens);
  if (!cache_ || backend_ != &backend || model_ != &target || cache_->num_blocks() < needed) {
    // Room for any one-candidate session whose prompt and completion fit the context (serve
    // cuts n_predict to it; decode_cache_tokens adds drafts and slack), so that prompts
    // growing by a keystroke do not make it anew, which would lose what it keeps.
    const int one_candidate = blocks(target.config.context_length + DraftPolicy::kMaxDraft + 1 + 2 * block_size);
    clear();
    cache_.reset();  // its memory goes before the larger cache's is asked for
    cache_ = backend.create_cache(target, std::max(needed, max_blocks_ + one_candidate) * block_size);
    backend_ = &backend;
    model_ = &target;
  }
  return *cache_;
}

PromptCache::Node* PromptCache::longest_match(std::span<const int> prompt, int& matched) {
  const size_t block_size = static_cast<size_t>(cache_->block_size());
  Node* node = &root_;
  size_t depth = 0;
  while ((depth + 1) * block_size <= prompt.size()) {
    const std::span<const int> block = prompt.subspan(depth * block_size, block_size);
    const auto it = node->children.find(std::vector<int>(block.begin(), block.end()));
    if (it == node->children.end()) break;
    node = it->second.get();
    node->used = tick_;
    ++depth;
  }
  matched = static_cast<int>(depth * block_size);
  return node;
}

PromptReuse::Start PromptCache::begin(KvCache& cache, std::span<const int> prompt) {
  ++lookups_;
  if (&cache != cache_.get() || prompt.size() < 2) return {cache.create(), 0};
  ++tick_;
  int matched = 0;
  Node* source = longest_match(prompt, matched);
  const int limit = static_cast<int>(prompt.size()) - 1;  // the last token's logits are computed
  int cached = std::min(matched, limit);
  if (cached == matched) {
    // within the next block: the child that shares the most tokens with the rest of the prompt
    Node* best = nullptr;
    int best_shared = 0;
    const std::span<const int> rest = prompt.subspan(static_cast<size_t>(matched));
    for (const auto& [tokens, child] : source->children) {
      const size_t most = std::min({tokens.size(), rest.size(), static_cast<size_t>(limit - matched)});
      const int shared = static_cast<int>(std::mismatch(tokens.begin(), tokens.begin() + static_cast<long>(most),
                                                        rest.begin()).first - tokens.begin());
      if (shared > best_shared) {
        best = child.get();
        best_shared = shared;
      }
    }
    if (best) {
      best->used = tick_;
      source = best;
      cached = matched + best_shared;
    }
  }
  if (cached == 0) return {cache.create(), 0};
  const int seq = cache.fork(source->seq);
  cache.truncate(seq, cached);  // a block cut within is copied on the session's first write
  ++hits_;
  reused_ += cached;
  return {seq, cached};
}

void PromptCache::keep(KvCache& cache, int seq, std::span<const int> prompt) {
  if (&cache != cache_.get()) return;
  const size_t block_size = static_cast<size_t>(cache.block_size());
  Node* node = &root_;
  for (size_t depth = 0; (depth + 1) * block_size <= prompt.size(); ++depth) {
    const std::span<const int> block = prompt.subspan(depth * block_size, block_size);
    std::vector<int> key(block.begin(), block.end());
    auto it = node->children.find(key);
    if (it == node->children.end()) {
      auto child = std::make_unique<Node>();
      child->block = key;
      child->parent = node;
      child->seq = cache.fork(seq);
      cache.truncate(child->seq, static_cast<int>((depth + 1) * block_size));
      hold(child->seq, +1);
      ++nodes_;
      it = node->children.emplace(std::move(key), std::move(child)).first;
    }
    node = it->second.get();
    node->used = tick_;
  }
  evict_to_bound();
  publish();
}

// Counts the blocks of a node's sequence as held (delta +1) or no longer (-1).
void PromptCache::hold(int seq, int delta) {
  for (const int32_t block : cache_->block_table(seq)) {
    const auto it = held_.try_emplace(block, 0).first;
    it->second += delta;
    if (it->second == 0) held_.erase(it);
  }
}

// The least recently used leaves go until the kept prompts hold no more than the bound.
void PromptCache::evict_to_bound() {
  while (blocks_held() > max_blocks_) {
    Node* oldest = nullptr;
    std::vector<Node*> pending{&root_};
    while (!pending.empty()) {
      Node* n = pending.back();
      pending.pop_back();
      for (const auto& entry : n->children) pending.push_back(entry.second.get());
      if (n != &root_ && n->children.empty() && (!oldest || n->used < oldest->used)) oldest = n;
    }
    if (!oldest) break;
    remove_leaf(oldest);
  }
}

void PromptCache::remove_leaf(Node* leaf) {
  hold(leaf->seq, -1);
  cache_->release(leaf->seq);
  --nodes_;
  leaf->parent->children.erase(leaf->block);  // destroys the leaf
}

void PromptCache::clear() {
  std::vector<Node*> pending{&root_};
  while (!pending.empty()) {
    Node* n = pending.back();
    pending.pop_back();
    for (const auto& entry : n->children) pending.push_back(entry.second.get());
    if (n != &root_ && cache_ && cache_->alive(n->seq)) cache_->release(n->seq);
  }
  root_.children.clear();
  held_.clear();
  nodes_ = 0;
  publish();
}

void PromptCache::publish() {
  blocks_ = blocks_held();
  tokens_ = nodes_ * (cache_ ? cache_->block_size() : 0);
}

PromptCacheStats PromptCache::stats() const {
  return {.max_blocks = max_blocks_,
          .blocks = blocks_.load(),
          .tokens = tokens_.load(),
          .lookups = lookups_.load(),
          .hits = hits_.load(),
          .tokens_reused = reused_.load()};
}

}  // namespace specula
