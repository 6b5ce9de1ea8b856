// The distributed sampler and the batch loader: exactly PyTorch's DistributedSampler and
// DataLoader(batch_size=B, drop_last=False, sampler=...) with set_epoch(e) at each epoch, so a
// rank sees the same samples in the same order as under torch.distributed.
#pragma once

#include <cstdint>
#include <vector>

namespace dpscope::data {

// torch.utils.data.DistributedSampler: with shuffle, the permutation of the data set is
// torch.randperm(n) from a generator seeded seed + epoch; without, 0..n-1. Without drop_last the
// list is padded by repeating it from its start to a multiple of num_replicas; with drop_last it
// is cut to one. Rank r takes elements r, r + num_replicas, ...
// Thread-safety: none needed (plain value).
class DistributedSampler {
 public:
  // Throws std::invalid_argument when num_replicas < 1, rank is not in [0, num_replicas) or
  // dataset_size < 0.
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, bool shuffle = true,
                     uint64_t seed = 0, bool drop_last = false);
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // This rank's indices for the current epoch (num_samples() of them).
  std::vector<int64_t> indices() const;
  int64_t num_samples() const { return num_samples_; }
  int64_t total_size() const { return total_size_; }

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  bool shuffle_;
  uint64_t seed_;
  bool drop_last_;
  int64_t epoch_ = 0;
  int64_t num_samples_ = 0;
  int64_t total_size_ = 0;
};

// Batches of indices over epochs, as a training loop that runs a fixed number of steps across
// epochs does: for epoch e = 0, 1, ...: sampler.set_epoch(e), then the sampler's indices in
// batches of batch_size, the last one smaller (drop_last=False).
class EpochBatches {
 public:
  // Throws std::invalid_argument when batch_size < 1 or the sampler yields no sample.
  EpochBatches(DistributedSampler sampler, int64_t batch_size);
  // The next batch; moves to the next epoch (set_epoch) after the last batch of one. The first
  // epoch is the sampler's epoch when it was given (0 unless set).
  std::vector<int64_t> next();
  // The epoch of the batch next() returned last (the moving on happens in the next call).
  int64_t epoch() const { return sampler_.epoch(); }
  int64_t batches_per_epoch() const;

 private:
  DistributedSampler sampler_;
  int64_t batch_size_;
  std::vector<int64_t> current_;
  int64_t position_ = 0;
  bool started_ = false;
};

}  // namespace dpscope::data
