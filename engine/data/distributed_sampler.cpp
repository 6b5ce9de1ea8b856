// The distributed sampler and the epoch-spanning batch loader: a line-for-line restatement of
// torch.utils.data.DistributedSampler.__iter__ and of DataLoader's batching over it.
#include "engine/data/distributed_sampler.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/randperm.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace dpscope::data {

namespace {

// Python's math.ceil(a / b) for b > 0 and any sign of a.
int64_t ceil_div(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

}  // namespace

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), shuffle_(shuffle),
      seed_(seed), drop_last_(drop_last) {
  if (num_replicas < 1) {
    throw std::invalid_argument("DistributedSampler: num_replicas must be at least 1, got " +
                                std::to_string(num_replicas));
  }
  if (rank < 0 || rank >= num_replicas) {
    throw std::invalid_argument("DistributedSampler: invalid rank " + std::to_string(rank) +
                                ", rank should be in the interval [0, " +
                                std::to_string(num_replicas - 1) + "]");
  }
  if (dataset_size < 0) {
    throw std::invalid_argument("DistributedSampler: dataset_size must be >= 0, got " +
                                std::to_string(dataset_size));
  }
  if (drop_last_ && dataset_size % num_replicas != 0) {
    num_samples_ = ceil_div(dataset_size - num_replicas, num_replicas);
  } else {
    num_samples_ = ceil_div(dataset_size, num_replicas);
  }
  total_size_ = num_samples_ * num_replicas;
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> all(static_cast<size_t>(dataset_size_));
  if (shuffle_) {
    // torch.Generator().manual_seed(seed + epoch); torch.randperm(n, generator=g).
    at::Generator g = at::make_generator<at::CPUGeneratorImpl>(
        seed_ + static_cast<uint64_t>(epoch_));
    at::Tensor perm = at::randperm(dataset_size_, g, at::kLong);
    const int64_t* p = perm.data_ptr<int64_t>();
    std::copy(p, p + dataset_size_, all.begin());
  } else {
    for (int64_t i = 0; i < dataset_size_; ++i) all[static_cast<size_t>(i)] = i;
  }
  const auto total = static_cast<size_t>(total_size_);
  if (!drop_last_) {
    // Pad by repeating the list from its start (several times over when it is short).
    const size_t n = all.size();
    all.reserve(total);
    for (size_t i = 0; all.size() < total; ++i) all.push_back(all[i % n]);
  } else {
    all.resize(total);
  }
  std::vector<int64_t> mine;
  mine.reserve(static_cast<size_t>(num_samples_));
  for (size_t i = static_cast<size_t>(rank_); i < total; i += static_cast<size_t>(num_replicas_)) {
    mine.push_back(all[i]);
  }
  return mine;
}

EpochBatches::EpochBatches(DistributedSampler sampler, int64_t batch_size)
    : sampler_(std::move(sampler)), batch_size_(batch_size) {
  if (batch_size < 1) {
    throw std::invalid_argument("EpochBatches: batch_size must be at least 1, got " +
                                std::to_string(batch_size));
  }
  if (sampler_.num_samples() < 1) {
    throw std::invalid_argument(
        "EpochBatches: the sampler yields no sample for this rank (data set of " +
        std::to_string(sampler_.num_samples()) + " samples per rank; with drop_last a data set "
        "smaller than the number of replicas leaves nothing)");
  }
}

int64_t EpochBatches::batches_per_epoch() const {
  return (sampler_.num_samples() + batch_size_ - 1) / batch_size_;
}

std::vector<int64_t> EpochBatches::next() {
  if (!started_) {
    // The first epoch is the sampler's current one (0 unless the caller set another).
    started_ = true;
    current_ = sampler_.indices();
    position_ = 0;
  } else if (position_ >= static_cast<int64_t>(current_.size())) {
    sampler_.set_epoch(sampler_.epoch() + 1);
    current_ = sampler_.indices();
    position_ = 0;
  }
  const int64_t end = std::min<int64_t>(position_ + batch_size_, current_.size());
  std::vector<int64_t> batch(current_.begin() + position_, current_.begin() + end);
  position_ = end;
  return batch;
}

}  // namespace dpscope::data
