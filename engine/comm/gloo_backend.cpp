// The Gloo backend (see gloo_backend.h): one communication thread per group runs the queued
// collectives in order with Gloo's options-style collectives and, for reduce-scatter, Gloo's
// halving-doubling algorithm (GlooReduceScatter, Note [Gloo reduce-scatter]).
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

// reduce_scatter runs in segments of at most this many bytes of input (all ranks' chunks): Gloo's
// algorithm counts elements and bytes in int and allocates two more buffers of the segment's
// size, so this bounds both the sizes it sees and the memory it takes.
constexpr int64_t kSegmentBytes = int64_t{8} << 20;

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

class GlooProcessGroup final : public ProcessGroup {
 public:
  GlooProcessGroup(std::shared_ptr<c10d::Store> store, int rank, int size,
                   ProcessGroupOptions options);
  ~GlooProcessGroup() override;

  std::string backend_name() const override { return "gloo"; }

 protected:
  void enqueue(std::shared_ptr<Request> request) override;

 private:
  void comm_loop();
  void run(Request& request);
  void run_broadcast(Request& request);
  void run_all_reduce(Request& request);
  void run_all_gather(Request& request);
  void run_reduce_scatter(Request& request);
  void run_barrier(Request& request);
  void leave();
  std::exception_ptr fail(const Request& request, const std::string& what);
  std::string describe(const Request& request) const;

  const std::string prefix_;  // store keys of this group instance
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> context_;

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<std::shared_ptr<Request>> queue_;
  bool stopping_ = false;

  std::string broken_;  // comm thread only: the first Gloo failure, refusing later collectives
  std::thread comm_thread_;
};

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
  comm_thread_ = std::thread([this] { comm_loop(); });
}

GlooProcessGroup::~GlooProcessGroup() {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  comm_thread_.join();
  leave();
  stop_heartbeat();
}

void GlooProcessGroup::enqueue(std::shared_ptr<Request> request) {
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    queue_.push_back(std::move(request));
  }
  queue_cv_.notify_one();
}

// Runs requests in queue order until stopped, and on stopping runs what is still queued, so
// every Work is finished.
void GlooProcessGroup::comm_loop() {
  for (;;) {
    std::shared_ptr<Request> request;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      request = std::move(queue_.front());
      queue_.pop_front();
    }
    const int64_t begin_ns = trace::now_ns();
    std::exception_ptr error;
    try {
      run(*request);
    } catch (const Unsupported& refusal) {
      error = std::make_exception_ptr(CommError(describe(*request) + ": " + refusal.what()));
    } catch (const CommError&) {
      error = std::current_exception();
    } catch (const gloo::IoException& failure) {
      error = fail(*request, std::string("Gloo: ") + failure.what() +
                                 ". A peer rank probably exited, crashed or stopped issuing "
                                 "collectives (see its output); ranks must issue the same "
                                 "collectives in the same order (DPSCOPE_CHECK_COLLECTIVES=1 "
                                 "checks it)");
    } catch (const c10::Error& failure) {
      error = fail(*request, failure.what_without_backtrace());
    } catch (const std::exception& failure) {
      error = fail(*request, failure.what());
    }
    request->work->finish(begin_ns, trace::now_ns(), error);
  }
}

// Any failure but a refusal may leave the ranks at different points of the collective, so the
// group is broken from now on.
std::exception_ptr GlooProcessGroup::fail(const Request& request, const std::string& what) {
  broken_ = describe(request) + " failed";
  return std::make_exception_ptr(CommError(describe(request) + " failed: " + what));
}

std::string GlooProcessGroup::describe(const Request& request) const {
  return std::string(trace::to_string(request.op)) + " #" + std::to_string(request.work->seq()) +
         " on gloo group '" + options().name + "', rank " + std::to_string(rank());
}

void GlooProcessGroup::run(Request& request) {
  if (!broken_.empty()) {
    throw CommError(describe(request) + ": not run, because " + broken_ +
                    " before it and the group is unusable after a failure; see that error");
  }
  switch (request.op) {
    case trace::CollectiveOp::Broadcast: return run_broadcast(request);
    case trace::CollectiveOp::AllReduce: return run_all_reduce(request);
    case trace::CollectiveOp::AllGather: return run_all_gather(request);
    case trace::CollectiveOp::ReduceScatter: return run_reduce_scatter(request);
    case trace::CollectiveOp::Barrier: return run_barrier(request);
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
  const int64_t segment = std::max<int64_t>(1, kSegmentBytes / (ranks * element));
  const at::Tensor rows =
      (request.input.is_cpu() ? request.input : request.input.to(at::kCPU)).view({ranks, n});
  const at::Tensor scratch = at::empty({ranks * std::min(segment, n)},
                                       rows.options().dtype(type));
  at::Tensor output = host_copy(request.output, type);
  for (int64_t begin = 0; begin < n; begin += segment) {
    const int64_t s = std::min(segment, n - begin);
    at::Tensor block = scratch.narrow(0, 0, ranks * s);
    block.view({ranks, s}).copy_(rows.narrow(1, begin, s));
    dispatch_reduction(type, [&](auto tag) {
      using T = typename decltype(tag)::type;
      GlooReduceScatter<T> algorithm(context_, static_cast<T*>(block.data_ptr()),
                                     static_cast<int>(ranks * s),
                                     std::vector<int>(ranks, static_cast<int>(s)),
                                     request.reduce == ReduceOp::Max
                                         ? gloo::ReductionFunction<T>::max
                                         : gloo::ReductionFunction<T>::sum);
      algorithm.run();
    });
    output.narrow(0, begin, s).copy_(block.narrow(0, 0, s));
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

// A wait on Gloo's bound buffers (GlooReduceScatter's) fails as soon as the peer's connection
// closes, even when the awaited bytes arrived before; so a rank that finished its last
// collective waits here, through the store, until every rank has finished theirs before it
// closes its connections. Bounded, so that ranks destroying groups in different orders or a
// peer that never gets here cost seconds, not a hang. A broken group skips it: its peers may be
// gone.
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

}  // namespace dpscope::comm
