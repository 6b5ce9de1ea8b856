// GlooReference: a bare Gloo all-reduce with none of ProcessGroup's queue, communication thread,
// checks or tracing. It exists for benchmarks only (bench/bench_comm): the "raw Gloo" baseline the
// Gloo backend's overhead is measured against. The engine never uses it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace c10d {
class Store;
}
namespace gloo::rendezvous {
class Context;
}

namespace dpscope::comm {

// Connected the way make_gloo_group connects a group (the same GlooStore adapter, the same
// make_gloo_device interface selection, its own store keys), or on a group's own connections,
// and reduces the way the backend's
// all_reduce of a CPU float32 tensor with ReduceOp::Sum does (gloo::allreduce, same options), but
// synchronously on the calling thread. Not thread-safe: one thread calls all_reduce_sum.
class GlooReference {
 public:
  // Collective: every rank of `size` creates it, in the same order relative to its other
  // GlooReferences. Throws CommError when the ranks cannot connect within `timeout`.
  GlooReference(std::shared_ptr<c10d::Store> store, int rank, int size,
                std::chrono::milliseconds timeout);
  // On connections that already exist, a Gloo group's (gloo_context_of in gloo_backend.h): the
  // raw call then runs on the very sockets and event-loop thread the group uses. Its tags are
  // counted from 2^31, apart from the group's sequence numbers. Call all_reduce_sum only while
  // the group runs nothing, and keep the group alive as long as this.
  GlooReference(std::shared_ptr<gloo::rendezvous::Context> context,
                std::chrono::milliseconds timeout);
  // Closes its own connections (the group's stay open). Gloo does not wait for peers here, so
  // destroy it only once every rank has returned from its last all_reduce_sum (e.g. after a
  // barrier on a process group).
  ~GlooReference();
  GlooReference(const GlooReference&) = delete;
  GlooReference& operator=(const GlooReference&) = delete;

  // Sums `count` floats at `data` across ranks, in place; returns when done. Every rank must call
  // it with the same count, as many times as the others.
  void all_reduce_sum(float* data, size_t count);

 private:
  std::shared_ptr<gloo::rendezvous::Context> context_;
  const std::chrono::milliseconds timeout_;
  uint32_t tag_ = 0;  // counts calls, like the backend's sequence numbers
};

}  // namespace dpscope::comm
