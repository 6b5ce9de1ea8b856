// ProcessGroup: the engine's only door to communication. DDP and FSDP issue collectives here;
// the base class numbers, checks and traces every one of them (the one place collectives are
// traced), and a backend (Gloo, NCCL) runs them in issue order.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/comm/pending_collectives.h"
#include "trace/recorder.h"

namespace c10d {
class Store;
}

namespace dpscope::comm {

class EmulatedLink;  // link_emulation.h

enum class ReduceOp { Sum, Average, Max };
std::string_view to_string(ReduceOp op);

// What a reduce_scatter may do with its input.
enum class ScatterInput {
  Keep,       // left as it was
  Workspace,  // may be overwritten: a backend that reduces in place then needs no copy of it
};

// What the engine was doing when it issued a collective; recorded with it.
struct CollectiveTag {
  int32_t iteration = trace::kNone;
  int32_t bucket = trace::kNone;
  int32_t unit = trace::kNone;
  uint8_t flags = 0;  // trace::kFlag* bits
};

// Where the engine issued a collective: the file and line of the call, filled in by the compiler
// as std::source_location would be (a default argument of every collective). Named in the error
// a group raises for a tensor on the wrong device, and kept for test groups that check callers.
struct CallSite {
  const char* file = "";
  int line = 0;
  static constexpr CallSite here(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
    return {file, line};
  }
  // "engine/ddp/reducer.cpp:245": the path from the repository's top folder when the file lies
  // under engine/, tests/, tutorials/, cli/ or bench/, else as the compiler gave it.
  std::string str() const;
};

// The error of a collective: a backend failure, a mismatch found by the check mode, or a
// timeout. The message names the collective, its sequence number and the ranks involved.
class CommError : public std::runtime_error {
 public:
  explicit CommError(const std::string& message) : std::runtime_error(message) {}
};

class ProcessGroup;

// A handle to one issued collective. It refers to its group: wait on it before the group is
// destroyed (destroying a group finishes every queued collective, so is_completed() and error()
// stay valid, but wait() does not). Thread-safety: wait(), is_completed() and error() may be
// called from any thread; the backend calls finish() once, from the thread that ran the collective.
class Work {
 public:
  Work(ProcessGroup& group, trace::CollectiveOp op, int64_t seq, int64_t bytes,
       trace::DType dtype, CollectiveTag tag);

  // Blocks until the collective is done and rethrows its error. Waits at most the group's
  // timeout, then throws a CommError naming the collective, its sequence number and the ranks
  // not heard from. The wait is recorded on `lane` of the group's recorder. A backend may run
  // the collective on the waiting thread if it has not started yet (Note [Run on wait]). On an
  // emulated link it then sleeps until the collective's emulated end (Note [Link emulation]);
  // that hold does not count against the timeout.
  void wait(trace::LaneId lane = 0);
  // Whether the collective is done (on an emulated link: and its emulated end has passed).
  bool is_completed() const;
  // The collective's error once it failed, else null.
  std::exception_ptr error() const;
  // How long the collective itself ran, from the begin to the end recorded by the backend
  // (GPU time for NCCL), without the wait for it to start or the wake-up after: what
  // PyTorch's Work::getDuration reports. On an emulated link, the emulated time instead: from
  // when it started on the link to its emulated end, the span its trace event has. 0 until
  // completed.
  int64_t duration_ns() const;
  // The backend's own begin to end, with or without an emulated link. 0 until completed.
  int64_t real_duration_ns() const;
  // Whether the group runs its collectives on an emulated link (ProcessGroupOptions::link).
  bool on_emulated_link() const;

  trace::CollectiveOp op() const { return op_; }
  int64_t seq() const { return seq_; }
  int64_t bytes() const { return bytes_; }
  trace::DType dtype() const { return dtype_; }

  // ---- For backends.
  // The backend began running the collective at `begin_ns` (a communication thread or the
  // waiting thread is inside it). A collective that then never completes is recorded as
  // started, not merely issued (Note [Collective end state]). Call at most once, before finish().
  void started(int64_t begin_ns);
  // Marks the collective done, successfully (error null) or not, with the times it began and
  // ended on the lane where it ran (`lane`; -1: the group's comm_lane()); records it in the trace
  // with the tag's flags plus `extra_flags` (trace::kFlagGpuTime when the times come from CUDA
  // events). On an emulated link a successful collective is admitted to the link here, and
  // recorded and completed at its emulated times (Note [Link emulation]). Call exactly once, in
  // issue order among the group's Works.
  // A collective that failed is recorded as not completed (started, or issued when the backend
  // refused it before starting it; Note [Collective end state]).
  void finish(int64_t begin_ns, int64_t end_ns, std::exception_ptr error,
              uint8_t extra_flags = 0, trace::LaneId lane = -1);

  // ---- For PendingCollectives (Note [Pending collectives]).
  // Records a "stuck" mark if the collective is still pending kStuckAfter after its issue at
  // `now_ns`, once (Note [A stuck collective]). Returns whether it recorded one.
  bool record_if_stuck(int64_t now_ns);
  // Records the collective as never completed, open-ended at `end_ns` (when the rank ended),
  // unless it finished meanwhile; finish() then records nothing more.
  void record_unfinished(int64_t end_ns);

 private:
  friend class ProcessGroup;
  // For ProcessGroup::issue: a collective a fault skipped (fault::IssueFault::Skip), done at
  // once; it has no sequence number and is not recorded.
  void complete_skipped();
  // Records the collective event with mutex_ held by the caller.
  void record_locked(int64_t begin_ns, int64_t end_ns, uint8_t flags, trace::LaneId lane);
  int64_t timeout_ns() const;
  static constexpr std::chrono::seconds kStuckAfter{1};
  // is_completed() with mutex_ held.
  bool completed_locked() const;

  ProcessGroup& group_;
  const trace::CollectiveOp op_;
  const int64_t seq_;
  const int64_t bytes_;
  const trace::DType dtype_;
  const CollectiveTag tag_;
  const trace::Stamp enqueue_;  // when the caller issued it, on the issuing thread's clocks
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  int64_t duration_ns_ = 0;
  int64_t real_duration_ns_ = 0;
  int64_t release_ns_ = 0;  // complete from then on (trace clock); 0 without a hold
  int64_t started_ns_ = 0;  // when the backend began it; 0 until then
  bool recorded_ = false;   // its collective event was recorded (finish or record_unfinished)
  bool stuck_recorded_ = false;  // its "stuck" mark was recorded (record_if_stuck)
};
using WorkHandle = std::shared_ptr<Work>;

struct ProcessGroupOptions {
  // A collective not finished within this time fails (Work::wait, and the backend's own wait).
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // Where collectives are traced; may be null (nothing recorded).
  trace::Recorder* recorder = nullptr;
  // Distinguishes groups in the trace (events.grp) and in store keys.
  int16_t group_id = 0;
  std::string name = "world";
  // Before each collective, ranks compare (seq, op, bytes, dtype) through the store and fail
  // fast on a mismatch. Default: on when the environment has DPSCOPE_CHECK_COLLECTIVES=1.
  bool check_collectives = false;
  // The emulated link the group's collectives complete on; null: the real one (Note [Link
  // emulation]). Groups given the same link queue on it together, as groups share a NIC.
  std::shared_ptr<EmulatedLink> link;
  // Gloo: how many collectives of the group may run at once (communication threads), like
  // PyTorch's ProcessGroupGloo (2 threads by default). Only all-reduces of disjoint tensors
  // ever overlap, and Works still finish in issue order (Note [Collective order]). 1: strictly
  // one at a time. 0: no communication thread; each collective runs on the thread that waits
  // for it (Note [Run on wait]), so one that nobody waits for never runs: a debugger's stack
  // then shows the caller, and tests force that path with it.
  int gloo_threads = 2;
};

// Reads DPSCOPE_CHECK_COLLECTIVES from the environment.
bool check_collectives_from_env();

// Note [Run on wait]
// A collective is asynchronous so that the caller can go on (backward, the next unit's
// compute) while it runs on a communication thread. But a caller that waits for it at once
// (construction's broadcasts, FSDP's all-gathers before a unit's forward, a benchmark's
// all_reduce()->wait()) would pay two thread wake-ups for nothing: the communication thread's
// to start it and the caller's when it is done. On a machine whose cores are all busy (two
// ranks on two cores, each with Gloo's event loop thread) each wake-up may wait out another
// thread's time slice, milliseconds. So Work::wait first asks the backend to run the collective
// on the waiting thread if no communication thread has started it yet, as a thread pool's
// waiter helps with its own task. The backend takes it from its queue under the same lock and
// by the same rule as its threads do (Note [Gloo overlap]), so collectives still start in issue
// order and the concurrency limit holds; the collective is traced on the lane of the slot it
// took, as if a communication thread had run it, with trace::kFlagRanOnWaiter. A collective the backend's threads already
// run, or that must wait for an earlier one, is waited for as before.

// Note [Collective tensors on the group's device]
// Every tensor the engine hands a collective lives on the group's device(): NCCL runs only on
// its GPU, and PyTorch's DDP and FSDP likewise move their metadata (model verification's shapes,
// the rebuild order, the used-parameter map) to the device of the process group. Data tensors
// (buckets, flat parameters, shards, compressed buffers) are there already, because they are
// made from the model's parameters. Values computed on the host and read back on the host go
// through comm::HostValues (host_values.h): it copies them to the device, runs the collective and
// copies the result back, the one place such a round trip is written. ProcessGroup::issue refuses
// a tensor on any other device, naming the call site; the Gloo group also takes CUDA tensors and
// stages them through host memory itself. tests/device_generic runs DDP and FSDP with the model
// on LibTorch's meta device over a group on meta that refuses anything else and that serves
// HostValues only, which proves every path device-generic without a GPU.

// Note [Who frees a collective's tensors]
// A collective's tensors are freed by the thread that waits for it, never by the thread that
// ran it. The caller holds every tensor it hands a collective until wait() returns (HostValues
// holds an all_gather's input as well as its output), and a backend drops its own references to
// a Request's tensors before it calls work->finish() (the Gloo backend as it marks the entry
// done, NCCL's watcher as it clears the in-flight entry), so the caller's are the last. That
// keeps a tensor from being freed on a communication thread while the caller may still touch
// it, and it keeps every free visible to ThreadSanitizer: a view made by reshape or view holds
// its base through autograd metadata whose reference count is released inside LibTorch, which
// is not instrumented; a view freed on a communication thread would free its base there with no
// happens-before TSan can see (CI's DdpWorker.JoinUnevenInputsSparseGradients reported exactly
// that for the sparse path's count of nonzeros).

// Note [Collective order]
// Collectives of one group run in the order they were issued, like work on a stream: every
// rank issues the same collectives in the same order (DDP's buckets in index order, FSDP's
// units in execution order; see Note [Bucket order]), and a backend runs them one after the
// other, so the n-th collective of every rank meets the n-th of every other (the Gloo backend
// lets an all-reduce start while earlier all-reduces of other tensors still run, as PyTorch's
// ProcessGroupGloo does; Gloo matches them across ranks by seq, and every Work still finishes
// only after all earlier ones, so waiting for one means all before it are done). The sequence
// number `seq` counts collectives per group from 0; the same collective has the same seq on
// every rank, which is what the check mode compares and what the viewer links across ranks.
//
// Thread-safety: collectives may be issued from any thread, but the issue order across threads
// must be the same on every rank (the engine issues from one thread at a time).
class ProcessGroup {
 public:
  virtual ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const ProcessGroupOptions& options() const { return options_; }
  virtual std::string backend_name() const = 0;

  // ---- Collectives. Each is asynchronous: it returns once the collective is queued.
  // Tensors must be contiguous and stay alive and untouched until the Work is done; hold them
  // (views too) until wait() returns (Note [Who frees a collective's tensors]).
  // Copies root's `tensor` into every rank's `tensor`.
  // Every collective takes tensors on device() (Note [Collective tensors on the group's device]);
  // `site` names the caller in errors and is filled in by the compiler.
  WorkHandle broadcast(at::Tensor tensor, int root, CollectiveTag tag = {},
                       CallSite site = CallSite::here());
  // Reduces `tensor` across ranks in place. Average divides the sum by the group size.
  WorkHandle all_reduce(at::Tensor tensor, ReduceOp op, CollectiveTag tag = {},
                        CallSite site = CallSite::here());
  // Gathers every rank's `input` into the flat `output` (size() * input.numel(), rank order).
  WorkHandle all_gather(at::Tensor output, at::Tensor input, CollectiveTag tag = {},
                        CallSite site = CallSite::here());
  // Reduces the flat `input` (size() * output.numel()) across ranks and leaves chunk rank() of
  // the result in `output`. With ScatterInput::Workspace the input's contents are undefined
  // afterwards (FSDP hands over gradients it frees anyway, saving the backend's copy).
  WorkHandle reduce_scatter(at::Tensor output, at::Tensor input, ReduceOp op,
                            CollectiveTag tag = {}, ScatterInput input_use = ScatterInput::Keep,
                            CallSite site = CallSite::here());
  // Completes when every rank has reached it.
  WorkHandle barrier(CollectiveTag tag = {}, CallSite site = CallSite::here());

  // ---- Devices (Note [Collective tensors on the group's device]).
  // Where the group's collectives take their tensors: cpu for Gloo, cuda:<i> for NCCL.
  c10::Device device() const { return device_; }
  // Whether a collective takes a tensor on `device`: device() only, unless a backend stages
  // others itself (Gloo takes CUDA tensors through host copies).
  virtual bool takes(c10::Device device) const { return device == device_; }
  // For comm::HostValues only: a copy of the CPU tensor `host` on device() (`host` itself when
  // that is the CPU), and a CPU copy of such a tensor after its collective. A test group whose
  // device holds no values (meta) overrides both to keep the host values beside it.
  virtual at::Tensor host_to_device(const at::Tensor& host);
  virtual at::Tensor device_to_host(const at::Tensor& on_device);

  // The sequence number the next collective will get (collectives issued so far).
  int64_t next_seq() const { return issued_.load(std::memory_order_relaxed); }
  // The lane where this group's collectives run (its communication thread or stream).
  trace::LaneId comm_lane() const { return comm_lane_; }
  trace::Recorder* recorder() const { return options_.recorder; }
  c10d::Store& store() { return *store_; }

 protected:
  // `device`: where the group's collectives take their tensors (device()).
  ProcessGroup(std::shared_ptr<c10d::Store> store, int rank, int size, ProcessGroupOptions options,
               std::string_view lane_name, trace::LaneKind lane_kind,
               c10::Device device = c10::Device(c10::kCPU));

  // One collective for the backend to run. Inputs are validated before a backend sees them.
  struct Request {
    trace::CollectiveOp op;
    ReduceOp reduce = ReduceOp::Sum;
    int root = 0;
    at::Tensor input;   // broadcast/all_reduce: the tensor itself; barrier: undefined
    at::Tensor output;  // all_gather/reduce_scatter: the output; otherwise == input
    ScatterInput input_use = ScatterInput::Keep;  // reduce_scatter
    CallSite site;
    WorkHandle work;
  };
  // Runs `request` after every request queued before it (or, where a backend allows it, while
  // earlier all-reduces of other tensors still run; Note [Collective order]) and calls
  // request.work->finish() exactly once, after those of all earlier requests, having dropped
  // its references to the request's tensors (Note [Who frees a collective's tensors]) where it
  // finishes on another thread than the caller's. Must not block the
  // caller for the collective itself.
  virtual void enqueue(std::shared_ptr<Request> request) = 0;

  // Called by Work::wait before it blocks on a collective not done yet. A backend whose
  // communication threads have not started `work` may run it here, and the queued collectives
  // before it, on the waiting thread (Note [Run on wait]); it returns when that is done or
  // when it cannot help now. The default does nothing: the backend's own threads run it.
  virtual void run_on_waiting_thread(const Work& work);

  // Stops the heartbeat thread; derived destructors call it before tearing down their own state.
  void stop_heartbeat();
  // In check mode, tells the other ranks through the store that this rank leaves the group (its
  // destructor: the end of a run, or an error unwinding it), so that a rank waiting to compare a
  // collective this one will never issue stops at once instead of at the timeout (Note
  // [Check mode and a rank that left]). Derived destructors call it first. Never throws.
  void announce_leaving();

 private:
  friend class Work;
  WorkHandle issue(trace::CollectiveOp op, ReduceOp reduce, int root, at::Tensor input,
                   at::Tensor output, CollectiveTag tag, ScatterInput input_use, CallSite site);
  // Throws CommError naming `site` when `tensor` is on a device the group does not take.
  void check_device(const at::Tensor& tensor, trace::CollectiveOp op, CallSite site) const;
  void check_collective(const Work& work);
  // fault::IssueFault::Resize: narrows the collective's tensors to half the elements a rank
  // contributes (at least one), keeping an all-gather's or reduce-scatter's sizes consistent.
  void resize_for_fault(trace::CollectiveOp op, at::Tensor& input, at::Tensor& output) const;
  void compare_through_store(const Work& work);
  // For a timeout message: the ranks whose heartbeat says they have not started `seq` yet.
  std::string ranks_not_heard_from(int64_t seq);
  void heartbeat_loop();
  std::string key(std::string_view what) const;

  std::shared_ptr<c10d::Store> store_;
  const int rank_;
  const int size_;
  ProcessGroupOptions options_;
  const c10::Device device_;
  trace::LaneId comm_lane_ = 0;

  std::mutex issue_mutex_;
  int64_t next_seq_ = 0;
  std::atomic<int64_t> issued_{0};  // collectives issued so far, published by the heartbeat
  // Issued and not yet finished: recorded open-ended if the rank ends first (Note [Pending
  // collectives]). Made in the constructor, after the recorder it records into.
  std::unique_ptr<PendingCollectives> pending_;

  std::mutex heartbeat_mutex_;
  std::condition_variable heartbeat_cv_;
  bool heartbeat_stop_ = false;
  std::thread heartbeat_;
};

}  // namespace dpscope::comm
