#include "compute/kv_cache.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace specula {

KvCache::KvCache(int block_size, int num_blocks, std::unique_ptr<KvStorage> storage)
    : block_size_(block_size), storage_(std::move(storage)) {
  if (block_size <= 0 || num_blocks <= 0) {
    throw std::invalid_argument("KV cache needs a positive block size and block count");
  }
  ref_counts_.assign(static_cast<size_t>(num_blocks), 0);
  free_list_.reserve(static_cast<size_t>(num_blocks));
  // hand out low block ids first: pop_back takes the end of the list
  for (int b = num_blocks - 1; b >= 0; --b) free_list_.push_back(b);
}

KvCache::Sequence& KvCache::get(int seq) {
  if (seq < 0 || seq >= static_cast<int>(sequences_.size()) || !sequences_[seq].alive) {
    throw std::invalid_argument("unknown KV cache sequence " + std::to_string(seq));
  }
  return sequences_[static_cast<size_t>(seq)];
}

const KvCache::Sequence& KvCache::get(int seq) const {
  return const_cast<KvCache*>(this)->get(seq);
}

int32_t KvCache::allocate_block() {
  if (free_list_.empty()) throw std::runtime_error("KV cache is full");
  const int32_t block = free_list_.back();
  free_list_.pop_back();
  ref_counts_[static_cast<size_t>(block)] = 1;
  return block;
}

void KvCache::drop_block(int32_t block) {
  if (--ref_counts_[static_cast<size_t>(block)] == 0) free_list_.push_back(block);
}

int KvCache::create() {
  for (size_t i = 0; i < sequences_.size(); ++i) {
    if (!sequences_[i].alive) {
      sequences_[i] = Sequence{true, 0, {}};
      return static_cast<int>(i);
    }
  }
  sequences_.push_back(Sequence{true, 0, {}});
  return static_cast<int>(sequences_.size() - 1);
}

int KvCache::fork(int seq) {
  const Sequence source = get(seq);  // copy: create() may reallocate sequences_
  const int child = create();
  for (int32_t block : source.blocks) ++ref_counts_[static_cast<size_t>(block)];
  sequences_[static_cast<size_t>(child)].length = source.length;
  sequences_[static_cast<size_t>(child)].blocks = source.blocks;
  return child;
}

void KvCache::release(int seq) {
  Sequence& s = get(seq);
  for (int32_t block : s.blocks) drop_block(block);
  s = Sequence{};
}

void KvCache::truncate(int seq, int length) {
  Sequence& s = get(seq);
  if (length < 0 || length > s.length) {
    throw std::invalid_argument("cannot truncate a sequence of length " + std::to_string(s.length) +
                                " to " + std::to_string(length));
  }
  const size_t blocks_needed = static_cast<size_t>((length + block_size_ - 1) / block_size_);
  while (s.blocks.size() > blocks_needed) {
    drop_block(s.blocks.back());
    s.blocks.pop_back();
  }
  s.length = length;
}

int KvCache::extend(int seq, int n) {
  Sequence& s = get(seq);
  if (n < 0) throw std::invalid_argument("cannot extend a sequence by a negative count");
  const int start = s.length;
  const int end = start + n;
  const size_t blocks_needed = static_cast<size_t>((end + block_size_ - 1) / block_size_);
  const bool partial_last_shared = n > 0 && start % block_size_ != 0 &&
                                   ref_counts_[static_cast<size_t>(s.blocks.back())] > 1;
  const size_t new_blocks = blocks_needed - s.blocks.size() + (partial_last_shared ? 1 : 0);
  if (new_blocks > free_list_.size()) {
    throw std::runtime_error("KV cache is full: " + std::to_string(new_blocks) + " blocks needed, " +
                             std::to_string(free_list_.size()) + " free");
  }
  if (partial_last_shared) {
    // copy-on-write: the positions already in the shared block stay valid for the others
    const int32_t shared = s.blocks.back();
    const int32_t own = allocate_block();
    if (storage_) storage_->copy_block(shared, own);
    drop_block(shared);
    s.blocks.back() = own;
  }
  while (s.blocks.size() < blocks_needed) s.blocks.push_back(allocate_block());
  s.length = end;
  return start;
}

int KvCache::length(int seq) const { return get(seq).length; }

std::span<const int32_t> KvCache::block_table(int seq) const { return get(seq).blocks; }

int32_t KvCache::slot(int seq, int position) const {
  const Sequence& s = get(seq);
  if (position < 0 || position >= s.length) {
    throw std::out_of_range("position " + std::to_string(position) + " is outside sequence " +
                            std::to_string(seq));
  }
  return s.blocks[static_cast<size_t>(position / block_size_)] * block_size_ + position % block_size_;
}

bool KvCache::alive(int seq) const {
  return seq >= 0 && seq < static_cast<int>(sequences_.size()) && sequences_[seq].alive;
}

int KvCache::blocks_in_use() const { return num_blocks() - free_blocks(); }

int KvCache::live_sequences() const {
  return static_cast<int>(std::count_if(sequences_.begin(), sequences_.end(),
                                        [](const Sequence& s) { return s.alive; }));
}

}  // namespace specula
