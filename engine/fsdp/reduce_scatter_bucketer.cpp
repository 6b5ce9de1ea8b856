// ReduceScatterBucketer (reduce_scatter_bucketer.h): fairscale's ReduceScatterBucketer on the
// asynchronous ProcessGroup — buckets are issued without waiting, and results are handed to the
// callbacks when the final callback waits for them.
#include "engine/fsdp/reduce_scatter_bucketer.h"

#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>

#include "engine/memory/ownership_registry.h"
#include "engine/memory/tracking_allocator.h"

namespace dpscope::fsdp {

ReduceScatterBucketer::ReduceScatterBucketer(comm::ProcessGroup& group, int64_t cap_bytes,
                                             int max_in_flight)
    : group_(group), cap_bytes_(cap_bytes), max_in_flight_(max_in_flight) {}

void ReduceScatterBucketer::wait_for_room() {
  while (max_in_flight_ > 0 && static_cast<int>(issued_.size()) >= max_in_flight_) {
    Issued oldest = std::move(issued_.front());
    issued_.pop_front();
    complete(oldest);
  }
}

ReduceScatterBucketer::~ReduceScatterBucketer() {
  // Nothing issued may outlive its tensors: wait quietly (errors were or will be reported by the
  // training loop's own wait).
  for (Issued& issued : issued_) {
    try {
      issued.work->wait();
    } catch (const std::exception&) {
    }
  }
}

int64_t ReduceScatterBucketer::shard_capacity(c10::ScalarType dtype) const {
  if (cap_bytes_ <= 0) return 0;
  return cap_bytes_ / static_cast<int64_t>(c10::elementSize(dtype)) / group_.size();
}

void ReduceScatterBucketer::reduce_scatter(const at::Tensor& input, comm::CollectiveTag tag,
                                           Callback callback) {
  c10::NoGradGuard no_grad;
  poll();
  const int64_t world = group_.size();
  const int64_t n = input.numel() / world;
  if (n > shard_capacity(input.scalar_type())) {
    wait_for_room();
    memory::CategoryScope gradient_shards(memory::MemoryCategory::GradientShards);
    at::Tensor output = at::empty({n}, input.options());
    memory::own(output, memory::MemoryCategory::GradientShards);
    Issued issued{group_.reduce_scatter(output, input, comm::ReduceOp::Sum, tag,
                                        comm::ScatterInput::Workspace),
                  input, output, {}};
    issued.callbacks.emplace_back(0, n, std::move(callback));
    issued_.push_back(std::move(issued));
    return;
  }
  Bucket& bucket = buckets_[{static_cast<int>(input.scalar_type()), input.device().index()}];
  if (bucket.offset + n > shard_capacity(input.scalar_type())) flush_bucket(bucket, tag);
  bucket.inputs.push_back(input);
  bucket.callbacks.emplace_back(bucket.offset, std::move(callback));
  bucket.offset += n;
}

void ReduceScatterBucketer::flush(comm::CollectiveTag tag) {
  for (auto& [key, bucket] : buckets_) flush_bucket(bucket, tag);
}

void ReduceScatterBucketer::flush_bucket(Bucket& bucket, comm::CollectiveTag tag) {
  if (bucket.offset == 0) return;
  wait_for_room();
  const int64_t world = group_.size();
  // Every rank's chunks of every held gradient side by side: row r holds what rank r gets.
  at::Tensor data;
  {
    memory::CategoryScope buckets(memory::MemoryCategory::Buckets);
    data = at::empty({world, bucket.offset}, bucket.inputs.front().options());
    memory::own(data, memory::MemoryCategory::Buckets);
  }
  int64_t column = 0;
  for (at::Tensor& held : bucket.inputs) {
    const int64_t n = held.numel() / world;
    data.narrow(1, column, n).copy_(held.view({world, n}));
    column += n;
    held = at::Tensor();
  }
  const at::Tensor input = data.view({-1});
  at::Tensor output;
  {
    memory::CategoryScope gradient_shards(memory::MemoryCategory::GradientShards);
    output = at::empty({bucket.offset}, input.options());
    memory::own(output, memory::MemoryCategory::GradientShards);
  }
  tag.flags |= trace::kFlagBucketed;
  Issued issued{group_.reduce_scatter(output, input, comm::ReduceOp::Sum, tag,
                                      comm::ScatterInput::Workspace),
                input, output, {}};
  for (size_t i = 0; i < bucket.callbacks.size(); ++i) {
    const int64_t begin = bucket.callbacks[i].first;
    const int64_t end = i + 1 < bucket.callbacks.size() ? bucket.callbacks[i + 1].first : bucket.offset;
    issued.callbacks.emplace_back(begin, end - begin, std::move(bucket.callbacks[i].second));
  }
  issued_.push_back(std::move(issued));
  bucket.inputs.clear();
  bucket.offset = 0;
  bucket.callbacks.clear();
}

void ReduceScatterBucketer::complete(Issued& issued) {
  issued.work->wait();
  issued.input = at::Tensor();
  for (auto& [offset, numel, callback] : issued.callbacks) {
    callback(numel == issued.output.numel() ? issued.output : issued.output.narrow(0, offset, numel));
  }
}

void ReduceScatterBucketer::poll() {
  while (!issued_.empty() && issued_.front().work->is_completed()) {
    Issued done = std::move(issued_.front());
    issued_.pop_front();
    complete(done);
  }
}

void ReduceScatterBucketer::wait_all() {
  while (!issued_.empty()) {
    Issued next = std::move(issued_.front());
    issued_.pop_front();
    complete(next);
  }
}

}  // namespace dpscope::fsdp
