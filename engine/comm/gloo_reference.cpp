// GlooReference (see gloo_reference.h): the benchmark's raw Gloo all-reduce. Set up and called
// exactly as gloo_backend.cpp sets up a group and runs a float32 sum, minus everything around it.
#include "engine/comm/gloo_reference.h"

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>

#include <atomic>
#include <string>
#include <utility>

#include "engine/comm/gloo_device.h"
#include "engine/comm/gloo_store.h"
#include "engine/comm/process_group.h"

namespace dpscope::comm {
namespace {

// Store keys of one instance: ranks create their references in the same order, so a per-process
// count names the same instance on every rank and keeps a later one from reading the addresses an
// earlier one left in the store.
std::string reference_prefix() {
  static std::atomic<int> created{0};
  return "dpscope/gloo-reference" + std::to_string(created++) + "/";
}

}  // namespace

GlooReference::GlooReference(std::shared_ptr<c10d::Store> store, int rank, int size,
                             std::chrono::milliseconds timeout)
    : timeout_(timeout) {
  GlooDevice device = make_gloo_device(rank, size);
  context_ = std::make_shared<gloo::rendezvous::Context>(rank, size);
  // Before connecting, as in the backend: the pairs take their timeout from the context.
  context_->setTimeout(timeout);
  try {
    GlooStore gloo_store(std::move(store), reference_prefix(), timeout);
    context_->connectFullMesh(gloo_store, device.device);
  } catch (const std::exception& error) {
    throw CommError("rank " + std::to_string(rank) + ": raw gloo reference of " +
                    std::to_string(size) + " ranks could not connect over " +
                    device.description + ": " + error.what());
  }
}

GlooReference::GlooReference(std::shared_ptr<gloo::rendezvous::Context> context,
                             std::chrono::milliseconds timeout)
    : context_(std::move(context)), timeout_(timeout), tag_(uint32_t{1} << 31) {}

GlooReference::~GlooReference() = default;

void GlooReference::all_reduce_sum(float* data, size_t count) {
  if (count == 0) return;
  gloo::AllreduceOptions opts(context_);
  opts.setOutput(data, count);
  // gloo::sum is overloaded; the pointer type picks the options-style one, as in the backend.
  void (*sum)(void*, const void*, const void*, size_t) = &gloo::sum<float>;
  opts.setReduceFunction(sum);
  opts.setTag(tag_++);
  opts.setTimeout(timeout_);
  gloo::allreduce(opts);
}

}  // namespace dpscope::comm
