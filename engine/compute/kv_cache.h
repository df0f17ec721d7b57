// Paged key/value cache bookkeeping: blocks, block tables, reference counts.
//
// A sequence's cache is a list of fixed-size blocks (its block table). Forking a
// sequence shares all its blocks (reference counts go up); the first write into a
// shared block copies it (copy-on-write), so N candidates share one prefilled prompt.
// Truncating frees whole blocks at the end, so rolling back rejected draft tokens is
// O(blocks freed). This class owns no arithmetic: the backend's KvStorage holds the
// numbers, laid out by block id, and reads them through the tables below.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace specula {

// Backend-owned memory for the blocks; the cache asks it to copy a block on write.
class KvStorage {
 public:
  virtual ~KvStorage() = default;
  virtual void copy_block(int src_block, int dst_block) = 0;
};

class KvCache {
 public:
  // `num_blocks` blocks of `block_size` positions; `storage` may be null in tests of
  // the bookkeeping alone.
  KvCache(int block_size, int num_blocks, std::unique_ptr<KvStorage> storage = nullptr);

  int create();                 // a new empty sequence; returns its id
  int fork(int seq);            // a new sequence sharing all of seq's positions
  void release(int seq);        // frees the sequence and its unshared blocks
  void truncate(int seq, int length);  // keeps positions [0, length)
  // Makes room for `n` more positions at the end of `seq` (copying a shared last block
  // first) and returns the position of the first new one. Throws std::runtime_error when
  // the cache is full; the sequence is then unchanged.
  int extend(int seq, int n);

  int length(int seq) const;
  std::span<const int32_t> block_table(int seq) const;
  // Storage slot (block * block_size + offset) of a position of seq.
  int32_t slot(int seq, int position) const;

  bool alive(int seq) const;
  int block_size() const { return block_size_; }
  int num_blocks() const { return static_cast<int>(ref_counts_.size()); }
  int blocks_in_use() const;
  int free_blocks() const { return static_cast<int>(free_list_.size()); }
  int live_sequences() const;
  KvStorage* storage() const { return storage_.get(); }

 private:
  struct Sequence {
    bool alive = false;
    int length = 0;
    std::vector<int32_t> blocks;
  };
  int32_t allocate_block();
  void drop_block(int32_t block);
  Sequence& get(int seq);
  const Sequence& get(int seq) const;

  int block_size_;
  std::vector<int32_t> ref_counts_;  // (num_blocks)
  std::vector<int32_t> free_list_;   // blocks with ref count 0
  std::vector<Sequence> sequences_;  // indexed by sequence id; ids are reused after release
  std::unique_ptr<KvStorage> storage_;
};

}  // namespace specula
