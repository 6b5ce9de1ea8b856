// The Gloo backend (see gloo_backend.h): communication threads per group run the queued
// collectives in order (Note [Gloo overlap]) with Gloo's options-style collectives and, for
// reduce-scatter, a ring of our own on the same unbound buffers (ring_reduce_scatter, Note [Gloo
// reduce-scatter]).
#include "engine/comm/gloo_backend.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/Exception.h>
#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/types.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "engine/comm/gloo_device.h"
#include "engine/comm/gloo_reduce_scatter.h"
#include "engine/comm/gloo_store.h"
#include "engine/comm/store_util.h"

namespace dpscope::comm {
namespace {

// A reduce_scatter whose input must be kept runs in blocks of at most this many bytes of input
// (all ranks' chunks), each copied into scratch: this bounds the scratch memory. Each block is a
// ring of its own (n - 1 more latencies), so blocks are large.
constexpr int64_t kScratchBytes = int64_t{16} << 20;

// Our own refusal of a request (an unsupported dtype or op). Every rank refuses the same
// request, so unlike a Gloo failure it leaves the group usable.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

static_assert(sizeof(gloo::float16) == sizeof(c10::Half), "both are IEEE binary16");

template <typename T>
struct Type {
  using type = T;
};

// Calls f(Type<T>{}) with the Gloo element type that reduces tensors of `type`.
template <typename F>
void dispatch_reduction(c10::ScalarType type, F&& f) {
  switch (type) {
    case c10::ScalarType::Float: return f(Type<float>{});
    case c10::ScalarType::Double: return f(Type<double>{});
    case c10::ScalarType::Half: return f(Type<gloo::float16>{});
    case c10::ScalarType::Int: return f(Type<int32_t>{});
    case c10::ScalarType::Long: return f(Type<int64_t>{});
    default:
      throw Unsupported(std::string("dtype ") + c10::toString(type) +
                        " cannot be reduced by the gloo backend (it reduces float32, float64, "
                        "float16, bfloat16, int32 and int64); convert the tensor first");
  }
}

// Gloo has no bfloat16: it is reduced in float32.
c10::ScalarType reduction_type(c10::ScalarType type) {
  return type == c10::ScalarType::BFloat16 ? c10::ScalarType::Float : type;
}

void check_reduction(const at::Tensor& tensor, ReduceOp op) {
  dispatch_reduction(reduction_type(tensor.scalar_type()), [](auto) {});
  if (op == ReduceOp::Average && !c10::isFloatingType(tensor.scalar_type())) {
    throw Unsupported(std::string("average of a ") + c10::toString(tensor.scalar_type()) +
                      " tensor is not supported; reduce with sum and divide it yourself");
  }
}

using GlooReduce = void (*)(void*, const void*, const void*, size_t);

template <typename T>
GlooReduce allreduce_function(ReduceOp op) {
  const GlooReduce max = &gloo::max<T>;
  const GlooReduce sum = &gloo::sum<T>;
  return op == ReduceOp::Max ? max : sum;
}

// `tensor` itself when Gloo can work on it in place, else a host copy in `type`.
at::Tensor host_copy(const at::Tensor& tensor, c10::ScalarType type) {
  if (tensor.is_cpu() && tensor.scalar_type() == type) return tensor;
  return tensor.to(at::Device(at::kCPU), type);
}

// Note [Gloo overlap]
// A group has options().gloo_threads communication threads (2 by default, as PyTorch's
// ProcessGroupGloo). Requests start in issue order; a request starts while earlier ones still
// run only if it and every running one are all-reduces of disjoint memory (DDP's buckets: the
// next bucket's all-reduce starts while the previous one is still in flight, which is what
// PyTorch's DDP gets from its two Gloo threads). Everything else waits until all earlier requests
// are done, so reduce-scatter, barrier, broadcast and all-gather keep strict stream order. Gloo
// matches concurrent collectives across ranks by tag (the seq), and every rank starts them in
// the same order, so the lowest unfinished collective is always running on every rank that
// issued it: no deadlock.
// A Work finishes only after every earlier Work (done results wait in the queue), so a caller
// that waits for the last collective may rely on all earlier ones, as with one thread. A
// collective is traced on the lane of the concurrency slot it ran in: slot 0 is the group's
// comm_lane(); "gloo comm 2 (<name>)" is added the first time two collectives overlap. A
// thread waiting for a collective no communication thread has started takes a slot by the
// same rule and runs it itself (Note [Run on wait]).

class GlooProcessGroup final : public ProcessGroup {
 public:
  GlooProcessGroup(std::shared_ptr<c10d::Store> store, int rank, int size,
                   ProcessGroupOptions options);
  ~GlooProcessGroup() override;

  std::string backend_name() const override { return "gloo"; }
  // The CPU, and CUDA tensors too: they are staged through host copies (host_copy).
  bool takes(c10::Device device) const override { return device.is_cpu() || device.is_cuda(); }
  const std::shared_ptr<gloo::rendezvous::Context>& context() const { return context_; }

 protected:
  void enqueue(std::shared_ptr<Request> request) override;
  void run_on_waiting_thread(const Work& work) override;

 private:
  // Which thread ran a collective (Note [Run on wait]); a waiter's is traced with
  // trace::kFlagRanOnWaiter.
  enum class Runner { CommThread, Waiter };

  struct Entry {
    std::shared_ptr<Request> request;
    enum class State { Queued, Running, Done } state = State::Queued;
    int slot = -1;
    Runner runner = Runner::CommThread;
    int64_t begin_ns = 0;
    int64_t end_ns = 0;
    std::exception_ptr error;
  };

  static bool may_overlap(const Request& a, const Request& b);
  void comm_loop();
  // Runs `entry`, which startable() returned under `lock`, in a free slot with the lock
  // released, then finishes the done entries at the front in issue order. Called by the
  // communication threads and by waiters (Note [Run on wait]); returns with `lock` held.
  void run_entry(std::unique_lock<std::mutex>& lock, const std::shared_ptr<Entry>& entry,
                 Runner runner);
  // Under queue_mutex_: the first queued entry if it may start now, else null.
  std::shared_ptr<Entry> startable() const;
  trace::LaneId lane_of_slot(int slot);
  // Runs one request; returns its error (null on success) and sets `breaks` when the failure
  // leaves the group unusable. `broken` is broken_ when the request started.
  std::exception_ptr execute(Request& request, const std::string& broken, bool& breaks);
  void run(Request& request, const std::string& broken);
  void run_broadcast(Request& request);
  void run_all_reduce(Request& request);
  void run_all_gather(Request& request);
  void run_reduce_scatter(Request& request);
  void run_barrier(Request& request);
  void leave();
  std::exception_ptr fail(const Request& request, const std::string& what, bool& breaks);
  std::string describe(const Request& request) const;

  const std::string prefix_;  // store keys of this group instance
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;

  std::mutex queue_mutex_;  // guards everything below but the threads
  std::condition_variable queue_cv_;
  std::deque<std::shared_ptr<Entry>> queue_;  // issue order, until finished
  std::vector<char> slot_busy_;
  std::vector<trace::LaneId> slot_lanes_;  // -1: not added yet
  bool stopping_ = false;
  std::string broken_;  // the first Gloo failure, refusing later collectives

  std::vector<std::thread> comm_threads_;
};

bool GlooProcessGroup::may_overlap(const Request& a, const Request& b) {
  if (a.op != trace::CollectiveOp::AllReduce || b.op != trace::CollectiveOp::AllReduce) {
    return false;
  }
  // Tensors are contiguous (ProcessGroup::issue checks), so each is one byte range.
  const auto* a_begin = static_cast<const char*>(a.input.data_ptr());
  const auto* b_begin = static_cast<const char*>(b.input.data_ptr());
  return a_begin + a.input.nbytes() <= b_begin || b_begin + b.input.nbytes() <= a_begin;
}

GlooProcessGroup::GlooProcessGroup(std::shared_ptr<c10d::Store> store, int rank, int size,
                                   ProcessGroupOptions options)
    : ProcessGroup(store, rank, size, std::move(options), "gloo comm", trace::LaneKind::Comm),
      prefix_(group_instance_prefix("gloo", this->options().group_id)) {
  GlooDevice device = make_gloo_device(rank, size);
  device_ = device.device;
  context_ = std::make_shared<gloo::rendezvous::Context>(rank, size);
  // Before connecting: the pairs take their timeout from the context as they are created.
  context_->setTimeout(this->options().timeout);
  try {
    GlooStore gloo_store(store, prefix_, this->options().timeout);
    context_->connectFullMesh(gloo_store, device_);
  } catch (const std::exception& error) {
    throw CommError("rank " + std::to_string(rank) + ": gloo group '" + this->options().name +
                    "' of " + std::to_string(size) + " ranks could not connect over " +
                    device.description + ": " + error.what() +
                    ". Check that every rank was started with the same WORLD_SIZE and that the "
                    "ranks can reach each other there (GLOO_SOCKET_IFNAME picks the interface)");
  }
  const int threads = this->options().gloo_threads;
  if (threads < 0) {
    throw CommError("rank " + std::to_string(rank) + ": gloo group '" + this->options().name + "' was given " +
                    std::to_string(threads) +
                    " communication threads; give 0 or more (ProcessGroupOptions::gloo_threads)");
  }
  // With no thread, the waiters still run in a slot (Note [Run on wait]).
  slot_busy_.assign(std::max(1, threads), 0);
  slot_lanes_.assign(std::max(1, threads), -1);
  slot_lanes_[0] = comm_lane();
  for (int i = 0; i < threads; ++i) comm_threads_.emplace_back([this] { comm_loop(); });
}

GlooProcessGroup::~GlooProcessGroup() {
  announce_leaving();  // See Note [Check mode and a rank that left]
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  for (std::thread& thread : comm_threads_) thread.join();
  leave();
  stop_heartbeat();
}

void GlooProcessGroup::enqueue(std::shared_ptr<Request> request) {
  auto entry = std::make_shared<Entry>();
  entry->request = std::move(request);
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    queue_.push_back(std::move(entry));
  }
  queue_cv_.notify_one();
}

std::shared_ptr<GlooProcessGroup::Entry> GlooProcessGroup::startable() const {
  if (std::find(slot_busy_.begin(), slot_busy_.end(), 0) == slot_busy_.end()) return nullptr;
  for (const std::shared_ptr<Entry>& entry : queue_) {
    if (entry->state != Entry::State::Queued) continue;
    // The first queued one: it may start if it may overlap every earlier one still running.
    for (const std::shared_ptr<Entry>& earlier : queue_) {
      if (earlier == entry) return entry;
      if (earlier->state == Entry::State::Running &&
          !may_overlap(*earlier->request, *entry->request)) {
        return nullptr;
      }
    }
  }
  return nullptr;
}

trace::LaneId GlooProcessGroup::lane_of_slot(int slot) {
  if (slot_lanes_[slot] < 0) {
    slot_lanes_[slot] = recorder() ? recorder()->add_lane("gloo comm " + std::to_string(slot + 1) +
                                                              " (" + options().name + ")",
                                                          trace::LaneKind::Comm)
                                   : comm_lane();
  }
  return slot_lanes_[slot];
}

// Runs requests until stopped (Note [Gloo overlap]), and on stopping runs what is still queued,
// so every Work is finished.
void GlooProcessGroup::comm_loop() {
  std::unique_lock<std::mutex> lock(queue_mutex_);
  for (;;) {
    std::shared_ptr<Entry> entry;
    queue_cv_.wait(lock, [&] {
      entry = startable();
      return entry || (stopping_ && queue_.empty());
    });
    if (!entry) return;
    run_entry(lock, entry, Runner::CommThread);
  }
}

// See Note [Run on wait]. startable() only ever returns the first queued entry, which while
// `work` is queued is `work` or one before it: the waiter runs those in order, and stops as
// soon as something earlier that it may not overlap is running on a communication thread.
void GlooProcessGroup::run_on_waiting_thread(const Work& work) {
  std::unique_lock<std::mutex> lock(queue_mutex_);
  for (;;) {
    const auto target = std::find_if(queue_.begin(), queue_.end(), [&](const auto& entry) {
      return entry->request->work.get() == &work;
    });
    if (target == queue_.end() || (*target)->state != Entry::State::Queued) return;
    const std::shared_ptr<Entry> entry = startable();
    if (!entry) return;
    run_entry(lock, entry, Runner::Waiter);
  }
}

void GlooProcessGroup::run_entry(std::unique_lock<std::mutex>& lock,
                                 const std::shared_ptr<Entry>& entry, Runner runner) {
  entry->state = Entry::State::Running;
  entry->runner = runner;
  entry->slot = static_cast<int>(std::find(slot_busy_.begin(), slot_busy_.end(), 0) -
                                 slot_busy_.begin());
  slot_busy_[entry->slot] = 1;
  const std::string broken = broken_;
  lock.unlock();

  bool breaks = false;
  entry->begin_ns = trace::now_ns();
  // A broken group refuses it before running it: issued, never started (Note [Collective end
  // state] in trace/collective_state.h).
  if (broken.empty()) entry->request->work->started(entry->begin_ns);
  entry->error = execute(*entry->request, broken, breaks);
  entry->end_ns = trace::now_ns();

  lock.lock();
  if (breaks && broken_.empty()) broken_ = describe(*entry->request) + " failed";
  // See Note [Who frees a collective's tensors]. Under the lock: startable() reads a running
  // entry's tensors.
  entry->request->input = at::Tensor();
  entry->request->output = at::Tensor();
  entry->state = Entry::State::Done;
  slot_busy_[entry->slot] = 0;
  // Finish in issue order: only the done entries at the front.
  while (!queue_.empty() && queue_.front()->state == Entry::State::Done) {
    const std::shared_ptr<Entry> done = std::move(queue_.front());
    queue_.pop_front();
    done->request->work->finish(done->begin_ns, done->end_ns, done->error,
                                done->runner == Runner::Waiter ? trace::kFlagRanOnWaiter : 0,
                                lane_of_slot(done->slot));
  }
  queue_cv_.notify_all();
}

std::exception_ptr GlooProcessGroup::execute(Request& request, const std::string& broken,
                                             bool& breaks) {
  try {
    run(request, broken);
  } catch (const Unsupported& refusal) {
    return std::make_exception_ptr(CommError(describe(request) + ": " + refusal.what()));
  } catch (const CommError&) {
    return std::current_exception();
  } catch (const gloo::IoException& failure) {
    return fail(request, std::string("Gloo: ") + failure.what() +
                             ". A peer rank probably exited, crashed or stopped issuing "
                             "collectives (see its output); ranks must issue the same "
                             "collectives in the same order (DPSCOPE_CHECK_COLLECTIVES=1 "
                             "checks it)",
                breaks);
  } catch (const c10::Error& failure) {
    return fail(request, failure.what_without_backtrace(), breaks);
  } catch (const std::exception& failure) {
    return fail(request, failure.what(), breaks);
  }
  return nullptr;
}

// Any failure but a refusal may leave the ranks at different points of the collective, so the
// group is broken from now on.
std::exception_ptr GlooProcessGroup::fail(const Request& request, const std::string& what,
                                          bool& breaks) {
  breaks = true;
  return std::make_exception_ptr(CommError(describe(request) + " failed: " + what));
}

std::string GlooProcessGroup::describe(const Request& request) const {
  return std::string(trace::to_string(request.op)) + " #" + std::to_string(request.work->seq()) +
         " on gloo group '" + options().name + "', rank " + std::to_string(rank());
}

void GlooProcessGroup::run(Request& request, const std::string& broken) {
  if (!broken.empty()) {
    throw CommError(describe(request) + ": not run, because " + broken +
                    " before it and the group is unusable after a failure; see that error");
  }
  switch (request.op) {
    case trace::CollectiveOp::Broadcast: return run_broadcast(request);
    case trace::CollectiveOp::AllReduce: return run_all_reduce(request);
    case trace::CollectiveOp::AllGather: return run_all_gather(request);
    case trace::CollectiveOp::ReduceScatter: return run_reduce_scatter(request);
    case trace::CollectiveOp::Barrier: return run_barrier(request);
    case trace::CollectiveOp::AllToAll:
    case trace::CollectiveOp::SendRecv:
      throw CommError(describe(request) + ": not a collective the engine issues (only imported "
                      "profiler traces record it)");
  }
}

void GlooProcessGroup::run_broadcast(Request& request) {
  at::Tensor& tensor = request.input;
  if (tensor.numel() == 0) return;
  at::Tensor host = host_copy(tensor, tensor.scalar_type());
  gloo::BroadcastOptions opts(context_);
  opts.setOutput(static_cast<uint8_t*>(host.data_ptr()), host.nbytes());
  opts.setRoot(request.root);
  opts.setTag(static_cast<uint32_t>(request.work->seq()));
  opts.setTimeout(options().timeout);
  gloo::broadcast(opts);
  if (!host.is_same(tensor)) tensor.copy_(host);
}

void GlooProcessGroup::run_all_reduce(Request& request) {
  at::Tensor& tensor = request.input;
  check_reduction(tensor, request.reduce);
  if (tensor.numel() == 0) return;
  at::Tensor host = host_copy(tensor, reduction_type(tensor.scalar_type()));
  dispatch_reduction(host.scalar_type(), [&](auto type) {
    using T = typename decltype(type)::type;
    gloo::AllreduceOptions opts(context_);
    opts.setOutput(static_cast<T*>(host.data_ptr()), static_cast<size_t>(host.numel()));
    opts.setReduceFunction(allreduce_function<T>(request.reduce));
    opts.setTag(static_cast<uint32_t>(request.work->seq()));
    opts.setTimeout(options().timeout);
    gloo::allreduce(opts);
  });
  if (!host.is_same(tensor)) tensor.copy_(host);
  if (request.reduce == ReduceOp::Average) tensor.div_(size());
}

void GlooProcessGroup::run_all_gather(Request& request) {
  if (request.input.numel() == 0) return;
  at::Tensor input = host_copy(request.input, request.input.scalar_type());
  at::Tensor output = host_copy(request.output, request.output.scalar_type());
  gloo::AllgatherOptions opts(context_);
  auto* out = static_cast<uint8_t*>(output.data_ptr());
  // FSDP passes its own shard as a view of the output: then the data is already in place.
  if (input.data_ptr() != out + rank() * input.nbytes()) {
    opts.setInput(static_cast<uint8_t*>(input.data_ptr()), input.nbytes());
  }
  opts.setOutput(out, output.nbytes());
  opts.setTag(static_cast<uint32_t>(request.work->seq()));
  opts.setTimeout(options().timeout);
  gloo::allgather(opts);
  if (!output.is_same(request.output)) request.output.copy_(output);
}

void GlooProcessGroup::run_reduce_scatter(Request& request) {
  check_reduction(request.input, request.reduce);
  const int64_t n = request.output.numel();
  if (n == 0) return;
  const int ranks = size();
  const c10::ScalarType type = reduction_type(request.input.scalar_type());
  const int64_t element = static_cast<int64_t>(c10::elementSize(type));
  const at::Tensor rows =
      (request.input.is_cpu() ? request.input : request.input.to(at::kCPU)).view({ranks, n});
  // An input the caller gave up (ScatterInput::Workspace, FSDP's) is reduced in place, in one
  // ring; otherwise every block is copied into scratch, as the ring reduces into the rows it is
  // given.
  const bool in_place = request.input_use == ScatterInput::Workspace &&
                        request.input.is_cpu() && request.input.scalar_type() == type;
  const int64_t block_size =
      in_place ? n : std::max<int64_t>(1, kScratchBytes / (ranks * element));
  const at::Tensor scratch = in_place ? rows.view({-1})
                                      : at::empty({ranks * std::min(block_size, n)},
                                                  rows.options().dtype(type));
  at::Tensor output = host_copy(request.output, type);
  for (int64_t begin = 0; begin < n; begin += block_size) {
    const int64_t s = std::min(block_size, n - begin);
    at::Tensor block = scratch.narrow(0, 0, ranks * s);
    if (!in_place) block.view({ranks, s}).copy_(rows.narrow(1, begin, s));
    dispatch_reduction(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      ring_reduce_scatter<T>(*context_, static_cast<T*>(block.data_ptr()),
                             static_cast<size_t>(s),
                             request.reduce == ReduceOp::Max ? gloo::ReductionFunction<T>::max
                                                             : gloo::ReductionFunction<T>::sum,
                             static_cast<uint32_t>(request.work->seq()), options().timeout);
    });
    output.narrow(0, begin, s).copy_(block.narrow(0, rank() * s, s));
  }
  if (!output.is_same(request.output)) request.output.copy_(output);
  if (request.reduce == ReduceOp::Average) request.output.div_(ranks);
}

void GlooProcessGroup::run_barrier(Request& request) {
  gloo::BarrierOptions opts(context_);
  opts.setTag(static_cast<uint32_t>(request.work->seq()));
  opts.setTimeout(options().timeout);
  gloo::barrier(opts);
}

// A rank that closes its connections while a peer's last collective still reads from them can
// fail that collective (a close with bytes left unread resets the connection); so a rank that
// finished its last collective waits here, through the store, until every rank has finished
// theirs before it closes its connections. Bounded, so that ranks destroying groups in different
// orders or a peer that never gets here cost seconds, not a hang. A broken group skips it: its
// peers may be gone.
void GlooProcessGroup::leave() {
  // A peer that never leaves (it crashed or still runs) or a store host that is gone: close
  // anyway, our own collectives are all done.
  if (broken_.empty()) leave_together(store(), prefix_, rank(), size(), options().timeout);
}

}  // namespace

std::shared_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<c10d::Store> store, int rank,
                                              int size, ProcessGroupOptions options) {
  return std::make_shared<GlooProcessGroup>(std::move(store), rank, size, std::move(options));
}

std::shared_ptr<gloo::rendezvous::Context> gloo_context_of(ProcessGroup& group) {
  auto* gloo_group = dynamic_cast<GlooProcessGroup*>(&group);
  if (!gloo_group) {
    throw CommError("rank " + std::to_string(group.rank()) + ": group '" + group.options().name +
                    "' runs on " + group.backend_name() +
                    ", not gloo; make it with make_gloo_group to use its Gloo connections");
  }
  return gloo_group->context();
}

}  // namespace dpscope::comm
