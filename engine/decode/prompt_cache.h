// A prompt cache across requests: the keys and values of recent prompts, kept in one target
// KV cache that outlives the sessions, so that a request whose prompt starts as an earlier
// one did prefills only the rest (an editor's requests differ from the last by the few
// tokens typed at the cursor).
//
// The prompts are a prefix tree over token ids with one node per full KV block: a node holds
// a cache sequence of the tokens from the start through its block, forked from the prompt
// that brought it, so it shares every block with its ancestors and with the sessions that
// start from it (the KV cache's reference counts). The tree is bounded in blocks; the least
// recently used leaves go first. A decode starts from the longest kept start of its prompt,
// down to the token, within a block too (the block is then copied on the first write).
// Exact: a forward's rows do not depend on how a sequence's tokens were split across calls,
// so the kept keys and values are those a full prefill computes (tests/test_prompt_cache).
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "compute/backend.h"
#include "compute/kv_cache.h"
#include "decode/decoder.h"
#include "model/model.h"

namespace specula {

// What the cache holds now and has done; read from any thread.
struct PromptCacheStats {
  int max_blocks = 0;    // the bound
  int blocks = 0;        // KV blocks the kept prompts hold
  int tokens = 0;        // distinct prompt starts kept, in tokens (whole blocks)
  long lookups = 0;      // decodes that asked for a start
  long hits = 0;         // ... and got one of at least one token
  long tokens_reused = 0;  // prompt tokens not prefilled thanks to it, summed
};

class PromptCache final : public PromptReuse {
 public:
  // Keeps at most `max_blocks` KV blocks of prompts between requests (at least 1).
  explicit PromptCache(int max_blocks);
  ~PromptCache() override;
  PromptCache(const PromptCache&) = delete;
  PromptCache& operator=(const PromptCache&) = delete;

  // The target cache for a decode needing `session_tokens` positions (decode_cache_tokens):
  // the kept one, which holds the bound's blocks beside the room of any one-candidate
  // session, made anew (and empty) when it is too small for this one (several candidates of
  // long completions), or for another backend or model. It keeps the largest room asked for.
  KvCache& cache_for(Backend& backend, const Model& target, int session_tokens);

  Start begin(KvCache& cache, std::span<const int> prompt) override;
  void keep(KvCache& cache, int seq, std::span<const int> prompt) override;

  // KV blocks the kept prompts hold (engine thread): a session's cache holds these and its own.
  int blocks_held() const { return static_cast<int>(held_.size()); }
  PromptCacheStats stats() const;
  // Lets every kept prompt go.
  void clear();

 private:
  struct Node {
    std::vector<int> block;                      // the tokens of this node's block
    int seq = -1;                                // tokens [0, depth * block_size) in the cache
    Node* parent = nullptr;
    std::map<std::vector<int>, std::unique_ptr<Node>> children;
    uint64_t used = 0;                           // tick of the last request that went through it
  };
  // The deepest node whose path is a start of `prompt` (the root when none), touching the path.
  Node* longest_match(std::span<const int> prompt, int& matched);
  void hold(int seq, int delta);
  void evict_to_bound();
  void remove_leaf(Node* leaf);
  void publish();

  const int max_blocks_;
  std::unique_ptr<KvCache> cache_;
  const Backend* backend_ = nullptr;  // what cache_ was made for
  const Model* model_ = nullptr;
  Node root_;
  int nodes_ = 0;
  uint64_t tick_ = 0;
  std::map<int32_t, int> held_;  // block -> node sequences holding it
  std::atomic<int> blocks_{0}, tokens_{0};
  std::atomic<long> lookups_{0}, hits_{0}, reused_{0};
};

}  // namespace specula
