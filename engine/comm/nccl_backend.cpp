// The NCCL backend (see nccl_backend.h): NCCL collectives on one communication stream per group,
// ordered after the caller's compute stream with CUDA events (Note [Streams]), and one watcher
// thread per group that finishes each Work once its end event has completed on the GPU.
#include "engine/comm/nccl_backend.h"

#include <ATen/core/Tensor.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorOptions.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/util/Exception.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "engine/comm/store_util.h"

#if NCCL_VERSION_CODE < NCCL_VERSION(2, 13, 0)
#error "the nccl backend needs NCCL 2.13 or newer (ncclAvg, ncclBfloat16, ncclGetLastError)"
#endif

// Note [Streams]
// Three streams of the group's device take part:
//  - the compute stream: the current stream of the device on the thread that issues a collective
//    (for DDP's buckets, the autograd thread). It wrote the collective's input.
//  - the communication stream, one per group (a high-priority stream from LibTorch's pool, so its
//    kernels get the SMs ahead of queued compute kernels): every collective of the group runs on
//    it, in issue order (Note [Collective order]).
//  - the anchor stream, private and otherwise idle: it only timestamps the clock anchors.
// Who waits for whom:
//  1. Communication waits for compute, at the issue point: enqueue() records an event on the
//     compute stream and makes the communication stream wait for it (cudaStreamWaitEvent). The
//     collective starts on the GPU once everything queued on the compute stream before the issue
//     (the kernels that wrote the gradient) is done; the host waits for nothing, so a ready
//     bucket's all-reduce is launched at once while backward goes on queuing kernels. Kernels
//     queued on the compute stream after the issue are not waited for: they must leave the
//     collective's tensors alone until it is done (ProcessGroup's contract).
//  2. Compute waits for communication only when asked: wait_on_stream() makes the current stream
//     wait for the collective's end event (no host synchronisation); Work::wait() blocks the host
//     until the watcher saw the end event complete, after which any stream may use the result.
//     FSDP waits on the stream for a unit's all-gather before its forward and for the
//     reduce-scatters it accumulates at the end of backward, as fairscale's FSDP orders its
//     all-gather and post-backward streams with events; its rate limits (limit_all_gathers,
//     limit_reduce_scatters) wait on the host, as PyTorch's do. DDP's Reducer waits on the host
//     for each bucket (PyTorch's lets the stream wait), so a GPU trace's host lanes show that wait.
//  3. The host waits for communication on the watcher thread only: it polls the end events in
//     order (they complete in order: one stream) and finishes each Work when its end event has
//     completed.
// Memory: the caching allocator hands a freed block to the next allocation on the stream it was
// allocated on, so a tensor the engine drops while the communication stream still reads or
// writes it could be overwritten by a compute kernel. Two things prevent it: enqueue() records
// every tensor of the collective on the communication stream (recordStream), so the allocator
// does not reuse the block before that stream has passed the point of the free; and the Request
// keeps the tensors alive until the end event has completed. After a failure the communicator is
// aborted and the Works are finished at once; their tensors are released then, and recordStream
// alone holds their memory back until the stream has drained.
// Times: a begin and an end event bracket each NCCL call on the communication stream. The begin
// event completes when the stream has passed the wait for the compute stream and every earlier
// collective, i.e. when the collective starts on the GPU. GPU times become host times through an
// anchor: a (host ns, event) pair taken on the idle anchor stream, renewed every few seconds so
// that cudaEventElapsedTime's float milliseconds stay precise to a microsecond and the GPU's clock
// cannot drift away from the host's.

namespace dpscope::comm {
namespace {

// How old the clock anchor may grow: a float of milliseconds resolves a microsecond up to ~16 s.
constexpr int64_t kAnchorPeriodNs = int64_t{5} * 1000 * 1000 * 1000;
// The watcher polls an end event at intervals growing from kPollMin to kPollMax: short
// collectives finish promptly, long ones cost little CPU and at most kPollMax of latency.
constexpr auto kPollMin = std::chrono::microseconds(20);
constexpr auto kPollMax = std::chrono::microseconds(1000);

// Our own refusal of a request (an unsupported dtype, op or device). Every rank refuses the same
// request, so unlike an NCCL failure it leaves the group usable.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::string nccl_error(ncclResult_t result, ncclComm_t comm) {
  std::string text = std::string("NCCL: ") + ncclGetErrorString(result);
  const char* last = ncclGetLastError(comm);
  if (last && *last) text += " (" + std::string(last) + ")";
  return text;
}

std::string seconds(std::chrono::milliseconds duration) {
  std::ostringstream out;
  out << std::chrono::duration_cast<std::chrono::duration<double>>(duration).count() << " s";
  return out.str();
}

bool has_primary_context(int device) {
  try {
    return at::detail::getCUDAHooks().hasPrimaryContext(device);
  } catch (const c10::Error&) {
    return false;
  }
}

// Makes `device` current on this thread for its lifetime, without throwing (destructors use it
// too). Unlike LibTorch 1.13's CUDAGuard it does not switch back to a device that has no context
// yet: a thread's current device is 0 until set, and making it current again would create a
// context, and take memory, on GPU 0 in every rank's process.
class DeviceScope {
 public:
  explicit DeviceScope(int device) : device_(device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    if (previous_ != device_) (void)cudaSetDevice(device_);
  }
  ~DeviceScope() {
    if (previous_ >= 0 && previous_ != device_ && has_primary_context(previous_)) {
      (void)cudaSetDevice(previous_);
    }
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  const int device_;
  int previous_ = -1;
};

// A CUDA event of one device (the raw API: stable across LibTorch 1.13 and 2.x).
class Event {
 public:
  Event(c10::DeviceIndex device, unsigned int flags) : device_(device) {
    DeviceScope scope(device);
    C10_CUDA_CHECK(cudaEventCreateWithFlags(&event_, flags));
  }
  ~Event() {
    DeviceScope scope(device_);
    (void)cudaEventDestroy(event_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  cudaEvent_t get() const { return event_; }
  c10::DeviceIndex device() const { return device_; }

 private:
  const c10::DeviceIndex device_;
  cudaEvent_t event_ = nullptr;
};

// A stream of our own (the anchor stream), destroyed on its device.
struct DestroyStream {
  c10::DeviceIndex device;
  void operator()(cudaStream_t stream) const {
    DeviceScope scope(device);
    (void)cudaStreamDestroy(stream);
  }
};
using OwnedStream = std::unique_ptr<CUstream_st, DestroyStream>;

// The end events of collectives in flight, by Work, for wait_on_stream(): Work has no slot for a
// backend's data. An entry is removed before its Work is finished. Never destroyed, so that a
// group destroyed during static destruction still finds it.
struct StreamWaits {
  std::mutex mutex;
  std::unordered_map<const Work*, std::shared_ptr<Event>> end_events;
};

StreamWaits& stream_waits() {
  static StreamWaits* waits = new StreamWaits;
  return *waits;
}

// The NCCL type that reduces tensors of `type`.
ncclDataType_t reduction_type(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return ncclFloat32;
    case c10::ScalarType::Double: return ncclFloat64;
    case c10::ScalarType::Half: return ncclFloat16;
    case c10::ScalarType::BFloat16: return ncclBfloat16;
    case c10::ScalarType::Long: return ncclInt64;
    case c10::ScalarType::Int: return ncclInt32;
    case c10::ScalarType::Char: return ncclInt8;
    case c10::ScalarType::Byte: return ncclUint8;
    default:
      throw Unsupported(std::string("dtype ") + c10::toString(type) +
                        " cannot be reduced by the nccl backend (it reduces float32, float64, "
                        "float16, bfloat16, int64, int32, int8 and uint8); convert the tensor "
                        "first");
  }
}

ncclRedOp_t reduction_op(ReduceOp op, c10::ScalarType type) {
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Max: return ncclMax;
    case ReduceOp::Average:
      if (!c10::isFloatingType(type)) {
        throw Unsupported(std::string("average of a ") + c10::toString(type) +
                          " tensor is not supported; reduce with sum and divide it yourself");
      }
      return ncclAvg;
  }
  throw Unsupported("unknown reduce op");
}

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi -L prints it.
std::string uuid_text(const cudaUUID_t& uuid) {
  std::string text = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
  }
  return text;
}

c10::DeviceIndex checked_device(int rank, int device_index) {
  const int count = c10::cuda::device_count();
  if (count == 0) {
    throw CommError("rank " + std::to_string(rank) +
                    ": the nccl backend needs a CUDA device and this process sees none (check "
                    "CUDA_VISIBLE_DEVICES and the driver); use --backend gloo");
  }
  if (device_index < 0 || device_index >= count) {
    throw CommError("rank " + std::to_string(rank) + ": device cuda:" +
                    std::to_string(device_index) + " does not exist; this process sees " +
                    std::to_string(count) + " CUDA device(s). Start at most " +
                    std::to_string(count) + " ranks per host (each rank uses cuda:LOCAL_RANK), "
                    "or use --backend gloo");
  }
  return static_cast<c10::DeviceIndex>(device_index);
}

class NcclProcessGroup final : public ProcessGroup {
 public:
  NcclProcessGroup(std::shared_ptr<c10d::Store> store, int rank, int size,
                   ProcessGroupOptions options, int device_index);
  ~NcclProcessGroup() override;

  std::string backend_name() const override { return "nccl"; }

 protected:
  void enqueue(std::shared_ptr<Request> request) override;

 private:
  // One collective between enqueue() and its Work's finish().
  struct InFlight {
    std::shared_ptr<Request> request;  // holds the tensors until the end event has completed
    std::unique_ptr<Event> begin;      // null when the collective was not launched
    std::shared_ptr<Event> end;        // shared with stream_waits()
    std::exception_ptr error;          // set when it was refused or failed to launch
    int64_t host_ns = 0;               // when it was refused or failed to launch
  };
  // The arguments of one NCCL call.
  struct Call {
    const void* send = nullptr;
    void* recv = nullptr;
    size_t count = 0;
    ncclDataType_t type = ncclUint8;
    ncclRedOp_t op = ncclSum;
  };

  void check_distinct_devices();
  ncclUniqueId exchange_unique_id();
  Call prepare(const Request& request) const;
  void check_device(const at::Tensor& tensor) const;
  void launch(InFlight& entry);
  void record_on_comm_stream(const at::Tensor& tensor) const;
  void watch_loop();
  void complete(InFlight& entry);
  std::exception_ptr await(const InFlight& entry);
  std::exception_ptr fail(const InFlight& entry, const std::string& what);
  // The error of a collective refused ("not run") or cut short ("aborted") by an earlier failure.
  std::string not_run(const Request& request, const std::string& outcome,
                      const std::string& because) const;
  void take_anchor();
  int64_t host_time(const Event& event, int64_t fallback_ns) const;
  bool leave();
  std::string describe(const Request& request) const;

  const std::string prefix_;  // store keys of this group instance
  const c10::DeviceIndex device_;
  const c10::cuda::CUDAStream comm_stream_;
  OwnedStream anchor_stream_;
  at::Tensor barrier_buffer_;  // the one float that barrier() all-reduces
  ncclComm_t comm_ = nullptr;

  // Serialises launches with the watcher's abort: an aborted communicator is freed, so nothing
  // may be launched on it during or after the abort. Also guards broken_, aborted_ and ready_.
  std::mutex launch_mutex_;
  std::string broken_;     // the first failure; later collectives are refused
  bool aborted_ = false;   // comm_ was aborted (written by the watcher only)
  std::unique_ptr<Event> ready_;  // re-recorded on the compute stream at each launch

  // Watcher thread only (after construction): the clock anchor of Note [Streams].
  int64_t anchor_host_ns_ = 0;
  std::unique_ptr<Event> anchor_event_;

  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<InFlight> queue_;
  bool stopping_ = false;
  std::thread watcher_;
};

NcclProcessGroup::NcclProcessGroup(std::shared_ptr<c10d::Store> store, int rank, int size,
                                   ProcessGroupOptions options, int device_index)
    : ProcessGroup(std::move(store), rank, size, std::move(options), "nccl stream",
                   trace::LaneKind::Stream,
                   c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_index))),
      prefix_(group_instance_prefix("nccl", this->options().group_id)),
      device_(checked_device(rank, device_index)),
      comm_stream_(c10::cuda::getStreamFromPool(/*isHighPriority=*/true, device_)) {
  DeviceScope scope(device_);
  cudaStream_t anchor = nullptr;
  C10_CUDA_CHECK(cudaStreamCreateWithFlags(&anchor, cudaStreamNonBlocking));
  anchor_stream_ = OwnedStream(anchor, DestroyStream{device_});
  ready_ = std::make_unique<Event>(device_, cudaEventDisableTiming);
  // Its value is never read: a barrier only needs every rank to take part in an all-reduce.
  barrier_buffer_ =
      at::empty({1}, at::TensorOptions().device(at::kCUDA, device_).dtype(at::kFloat));
  record_on_comm_stream(barrier_buffer_);
  take_anchor();
  check_distinct_devices();
  const ncclUniqueId id = exchange_unique_id();
  const ncclResult_t result = ncclCommInitRank(&comm_, size, id, rank);
  if (result != ncclSuccess) {
    throw CommError("rank " + std::to_string(rank) + ": nccl group '" + this->options().name +
                    "' of " + std::to_string(size) + " ranks could not be set up on cuda:" +
                    std::to_string(device_) + ": " + nccl_error(result, nullptr) +
                    ". Check that every rank was started with the same WORLD_SIZE and can reach "
                    "the others (NCCL_SOCKET_IFNAME picks the interface); NCCL_DEBUG=INFO shows "
                    "NCCL's own account");
  }
  watcher_ = std::thread([this] { watch_loop(); });
}

NcclProcessGroup::~NcclProcessGroup() {
  announce_leaving();  // See Note [Check mode and a rank that left]
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  watcher_.join();
  const bool everyone_left = leave();
  if (!aborted_) {
    DeviceScope scope(device_);
    if (broken_.empty() && everyone_left) {
      (void)ncclCommDestroy(comm_);
    } else {
      (void)ncclCommAbort(comm_);
    }
  }
  stop_heartbeat();
}

// NCCL cannot run two ranks of one communicator on one GPU: it fails in ncclCommInitRank with a
// message about duplicate GPUs, or hangs. Every rank publishes its device's UUID (unique across
// hosts, and the same whatever CUDA_VISIBLE_DEVICES calls the device), so that every rank finds
// a shared GPU and says so, before NCCL is asked.
void NcclProcessGroup::check_distinct_devices() {
  cudaDeviceProp properties;
  C10_CUDA_CHECK(cudaGetDeviceProperties(&properties, device_));
  const std::string uuid = uuid_text(properties.uuid);
  auto slot = [&](int r) { return prefix_ + "device/" + std::to_string(r); };
  store().set(slot(rank()), to_bytes(uuid + " cuda:" + std::to_string(device_) + " on host " +
                                     host_name()));
  std::vector<std::string> keys;
  for (int r = 0; r < size(); ++r) keys.push_back(slot(r));
  try {
    store().wait(keys, options().timeout);
  } catch (const std::exception&) {
    std::string absent;
    for (int r = 0; r < size(); ++r) {
      if (!store().check({slot(r)})) absent += (absent.empty() ? "" : ", ") + std::to_string(r);
    }
    throw CommError("rank " + std::to_string(rank()) + ": ranks " + absent +
                    " never joined nccl group '" + options().name + "' within " +
                    seconds(options().timeout) +
                    "; they failed or are stuck before it (see their output)");
  }
  std::vector<std::string> devices;
  std::map<std::string, std::vector<int>> ranks_by_uuid;
  for (int r = 0; r < size(); ++r) {
    devices.push_back(from_bytes(store().get(slot(r))));
    ranks_by_uuid[devices.back().substr(0, devices.back().find(' '))].push_back(r);
  }
  for (const auto& [gpu, ranks] : ranks_by_uuid) {
    if (ranks.size() < 2) continue;
    std::string users;
    for (size_t i = 0; i < ranks.size(); ++i) {
      users += (i ? "; rank " : "rank ") + std::to_string(ranks[i]) + " uses " + devices[ranks[i]];
    }
    throw CommError("rank " + std::to_string(rank()) + ": nccl group '" + options().name +
                    "' has two ranks on one GPU (" + users +
                    "), and NCCL cannot run two ranks of a group on one device. Start at most "
                    "as many ranks per host as it has GPUs (each rank uses cuda:LOCAL_RANK), or "
                    "use --backend gloo");
  }
}

ncclUniqueId NcclProcessGroup::exchange_unique_id() {
  ncclUniqueId id;
  const std::string key = prefix_ + "id";
  if (rank() == 0) {
    const ncclResult_t result = ncclGetUniqueId(&id);
    if (result != ncclSuccess) {
      throw CommError("rank 0: nccl group '" + options().name +
                      "' could not create its NCCL id: " + nccl_error(result, nullptr) +
                      ". NCCL_SOCKET_IFNAME picks the interface; NCCL_DEBUG=INFO shows why");
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(&id);
    store().set(key, std::vector<uint8_t>(bytes, bytes + sizeof id));
    return id;
  }
  try {
    store().wait({key}, options().timeout);
  } catch (const std::exception&) {
    throw CommError("rank " + std::to_string(rank()) + ": rank 0 never published the NCCL id of "
                    "group '" + options().name + "' within " + seconds(options().timeout) +
                    "; it failed or is stuck (see its output)");
  }
  const std::vector<uint8_t> bytes = store().get(key);
  if (bytes.size() != sizeof id) {
    throw CommError("rank " + std::to_string(rank()) + ": the NCCL id of group '" +
                    options().name + "' in the store has " + std::to_string(bytes.size()) +
                    " bytes, not " + std::to_string(sizeof id) +
                    "; every rank must run the same dpscope build and NCCL version");
  }
  std::memcpy(&id, bytes.data(), sizeof id);
  return id;
}

std::string NcclProcessGroup::describe(const Request& request) const {
  return std::string(trace::to_string(request.op)) + " #" + std::to_string(request.work->seq()) +
         " on nccl group '" + options().name + "', rank " + std::to_string(rank()) + " (cuda:" +
         std::to_string(device_) + ")";
}

std::string NcclProcessGroup::not_run(const Request& request, const std::string& outcome,
                                      const std::string& because) const {
  return describe(request) + ": " + outcome + ", because " + because +
         " before it and the group is unusable after a failure; see that error";
}

void NcclProcessGroup::check_device(const at::Tensor& tensor) const {
  if (tensor.is_cuda() && tensor.device().index() == device_) return;
  throw Unsupported("the tensor is on " + tensor.device().str() + ", but this group runs on cuda:" +
                    std::to_string(device_) + "; move it there first, or use a gloo group for "
                    "tensors elsewhere");
}

// broadcast and all_gather move bytes, so they take any dtype; an all_gather whose input is
// chunk rank() of its output is NCCL's in-place case, as is the analogous reduce_scatter.
NcclProcessGroup::Call NcclProcessGroup::prepare(const Request& request) const {
  Call call;
  switch (request.op) {
    case trace::CollectiveOp::Broadcast:
      check_device(request.input);
      call.send = request.input.data_ptr();
      call.recv = request.input.data_ptr();
      call.count = request.input.nbytes();
      break;
    case trace::CollectiveOp::AllReduce:
      check_device(request.input);
      call.send = request.input.data_ptr();
      call.recv = request.input.data_ptr();
      call.count = static_cast<size_t>(request.input.numel());
      call.type = reduction_type(request.input.scalar_type());
      call.op = reduction_op(request.reduce, request.input.scalar_type());
      break;
    case trace::CollectiveOp::AllGather:
      check_device(request.input);
      call.send = request.input.data_ptr();
      call.recv = request.output.data_ptr();
      call.count = request.input.nbytes();
      break;
    case trace::CollectiveOp::ReduceScatter:
      check_device(request.input);
      call.send = request.input.data_ptr();
      call.recv = request.output.data_ptr();
      call.count = static_cast<size_t>(request.output.numel());
      call.type = reduction_type(request.input.scalar_type());
      call.op = reduction_op(request.reduce, request.input.scalar_type());
      break;
    case trace::CollectiveOp::Barrier:
      call.send = barrier_buffer_.data_ptr();
      call.recv = barrier_buffer_.data_ptr();
      call.count = 1;
      call.type = ncclFloat32;
      break;
    case trace::CollectiveOp::AllToAll:
    case trace::CollectiveOp::SendRecv:
      throw Unsupported(std::string(trace::to_string(request.op)) +
                        " is not a collective the engine issues (only imported profiler traces record it)");
  }
  return call;
}

void NcclProcessGroup::record_on_comm_stream(const at::Tensor& tensor) const {
  if (tensor.defined()) {
    c10::cuda::CUDACachingAllocator::recordStream(tensor.storage().data_ptr(), comm_stream_);
  }
}

// Runs on the caller's thread, under ProcessGroup's issue lock, so launches are in seq order.
void NcclProcessGroup::enqueue(std::shared_ptr<Request> request) {
  InFlight entry;
  entry.request = std::move(request);
  try {
    launch(entry);
  } catch (const Unsupported& refusal) {
    entry.error = std::make_exception_ptr(CommError(describe(*entry.request) + ": " +
                                                    refusal.what()));
  } catch (const CommError&) {
    entry.error = std::current_exception();
  }
  if (entry.error) {
    entry.begin.reset();
    entry.end.reset();
    entry.host_ns = trace::now_ns();
  } else {
    std::lock_guard<std::mutex> lock(stream_waits().mutex);
    stream_waits().end_events[entry.request->work.get()] = entry.end;
  }
  {
    std::lock_guard<std::mutex> lock(queue_mutex_);
    queue_.push_back(std::move(entry));
  }
  queue_cv_.notify_one();
}

// Note [Streams], 1: the communication stream waits for the compute stream; the host does not.
void NcclProcessGroup::launch(InFlight& entry) {
  const Request& request = *entry.request;
  const Call call = prepare(request);
  std::lock_guard<std::mutex> lock(launch_mutex_);
  if (!broken_.empty()) throw CommError(not_run(request, "not run", broken_));
  try {
    DeviceScope scope(device_);
    const c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(device_);
    const cudaStream_t comm = comm_stream_.stream();
    C10_CUDA_CHECK(cudaEventRecord(ready_->get(), compute.stream()));
    C10_CUDA_CHECK(cudaStreamWaitEvent(comm, ready_->get(), 0));
    record_on_comm_stream(request.input);
    if (!request.output.is_same(request.input)) record_on_comm_stream(request.output);
    entry.begin = std::make_unique<Event>(device_, cudaEventDefault);
    entry.end = std::make_shared<Event>(device_, cudaEventDefault);
    C10_CUDA_CHECK(cudaEventRecord(entry.begin->get(), comm));
    ncclResult_t result = ncclSuccess;
    if (call.count > 0) {
      switch (request.op) {
        case trace::CollectiveOp::Broadcast:
          result = ncclBroadcast(call.send, call.recv, call.count, call.type, request.root,
                                 comm_, comm);
          break;
        case trace::CollectiveOp::AllReduce:
        case trace::CollectiveOp::Barrier:
          result = ncclAllReduce(call.send, call.recv, call.count, call.type, call.op, comm_,
                                 comm);
          break;
        case trace::CollectiveOp::AllGather:
          result = ncclAllGather(call.send, call.recv, call.count, call.type, comm_, comm);
          break;
        case trace::CollectiveOp::ReduceScatter:
          result = ncclReduceScatter(call.send, call.recv, call.count, call.type, call.op, comm_,
                                     comm);
          break;
        case trace::CollectiveOp::AllToAll:
        case trace::CollectiveOp::SendRecv:
          break;  // refused by prepare()
      }
    }
    if (result != ncclSuccess) throw std::runtime_error(nccl_error(result, comm_));
    C10_CUDA_CHECK(cudaEventRecord(entry.end->get(), comm));
  } catch (const c10::Error& failure) {
    broken_ = describe(request) + " failed";
    throw CommError(broken_ + ": " + failure.what_without_backtrace());
  } catch (const std::exception& failure) {
    broken_ = describe(request) + " failed";
    throw CommError(broken_ + ": " + failure.what());
  }
}

// Finishes the queued collectives in order until stopped, and on stopping those still queued,
// so every Work is finished.
void NcclProcessGroup::watch_loop() {
  DeviceScope scope(device_);
  for (;;) {
    InFlight entry;
    {
      std::unique_lock<std::mutex> lock(queue_mutex_);
      queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      entry = std::move(queue_.front());
      queue_.pop_front();
    }
    complete(entry);
  }
}

// Note [Streams], 3: waits for the end event, converts the GPU times, releases the tensors and
// finishes the Work.
void NcclProcessGroup::complete(InFlight& entry) {
  int64_t begin_ns = entry.host_ns;
  int64_t end_ns = entry.host_ns;
  std::exception_ptr error = entry.error;
  if (!error) {
    begin_ns = trace::now_ns();
    // The watcher has reached it: every collective before it completed, so it runs on the GPU
    // now, as the flight recorder's watchdog discovers a start (Note [Collective end state]).
    entry.request->work->started(begin_ns);
    error = await(entry);
    end_ns = trace::now_ns();
    if (!error) {
      if (end_ns - anchor_host_ns_ > kAnchorPeriodNs) take_anchor();
      begin_ns = host_time(*entry.begin, begin_ns);
      end_ns = host_time(*entry.end, end_ns);
    }
    std::lock_guard<std::mutex> lock(stream_waits().mutex);
    stream_waits().end_events.erase(entry.request->work.get());
  }
  // After an error the times are the host's, not the events'.
  const WorkHandle work = entry.request->work;
  entry = InFlight{};
  work->finish(begin_ns, end_ns, error, error ? 0 : trace::kFlagGpuTime);
}

// Polls the end event until it completes, the communicator reports an error, or the timeout
// passes. The clock starts when the previous collective has ended: time queued behind it is not
// this collective's.
std::exception_ptr NcclProcessGroup::await(const InFlight& entry) {
  if (aborted_) {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    return std::make_exception_ptr(CommError(not_run(*entry.request, "aborted", broken_)));
  }
  const auto deadline = std::chrono::steady_clock::now() + options().timeout;
  auto pause = kPollMin;
  for (;;) {
    const cudaError_t status = cudaEventQuery(entry.end->get());
    if (status == cudaSuccess) return nullptr;
    // cudaErrorNotReady is not sticky, but would linger as this thread's last error.
    (void)cudaGetLastError();
    if (status != cudaErrorNotReady) {
      return fail(entry, std::string("CUDA: ") + cudaGetErrorString(status));
    }
    ncclResult_t async = ncclSuccess;
    const ncclResult_t result = ncclCommGetAsyncError(comm_, &async);
    if (result != ncclSuccess || async != ncclSuccess) {
      return fail(entry, nccl_error(result != ncclSuccess ? result : async, comm_) +
                             ". A peer rank probably exited, crashed or stopped issuing "
                             "collectives (see its output); ranks must issue the same "
                             "collectives in the same order (DPSCOPE_CHECK_COLLECTIVES=1 checks "
                             "it); NCCL_DEBUG=INFO shows NCCL's own account");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return fail(entry, "it did not end on the GPU within " + seconds(options().timeout) +
                             " and NCCL reported no error. A rank that crashed, stopped or "
                             "issued different collectives blocks the others: check their "
                             "output, run with DPSCOPE_CHECK_COLLECTIVES=1 to compare the "
                             "collectives, or raise the timeout");
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, kPollMax);
  }
}

// Aborts the communicator, so that no kernel stays stuck in it and the communication stream
// drains, and marks the group broken.
std::exception_ptr NcclProcessGroup::fail(const InFlight& entry, const std::string& what) {
  const std::string failed = describe(*entry.request) + " failed";
  {
    std::lock_guard<std::mutex> lock(launch_mutex_);
    if (broken_.empty()) broken_ = failed;
    (void)ncclCommAbort(comm_);
    aborted_ = true;
  }
  return std::make_exception_ptr(
      CommError(failed + ": " + what + ". The group's NCCL communicator was aborted"));
}

// Pairs the host clock with a GPU event on the idle anchor stream: the event completes between
// the two host readings, so their midpoint is its host time, to within half their distance
// (microseconds). A failure keeps the previous anchor; the CUDA error shows in the next query.
void NcclProcessGroup::take_anchor() {
  try {
    auto event = std::make_unique<Event>(device_, cudaEventDefault);
    const int64_t before = trace::now_ns();
    C10_CUDA_CHECK(cudaEventRecord(event->get(), anchor_stream_.get()));
    C10_CUDA_CHECK(cudaEventSynchronize(event->get()));
    const int64_t after = trace::now_ns();
    anchor_host_ns_ = before + (after - before) / 2;
    anchor_event_ = std::move(event);
  } catch (const c10::Error&) {
    if (!anchor_event_) throw;
  }
}

// `event`'s GPU time on the host clock; `fallback_ns` if CUDA cannot time it.
int64_t NcclProcessGroup::host_time(const Event& event, int64_t fallback_ns) const {
  float ms = 0;
  if (cudaEventElapsedTime(&ms, anchor_event_->get(), event.get()) != cudaSuccess) {
    (void)cudaGetLastError();
    return fallback_ns;
  }
  return anchor_host_ns_ + std::llround(static_cast<double>(ms) * 1e6);
}

// ncclCommDestroy flushes the communicator's outstanding traffic with its peers, which blocks
// while a peer is gone; so a rank destroys it only once every rank has reached its destruction
// (waiting through the store, bounded as Gloo's leave is) and aborts it otherwise.
bool NcclProcessGroup::leave() {
  return broken_.empty() && leave_together(store(), prefix_, rank(), size(), options().timeout);
}

}  // namespace

std::shared_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<c10d::Store> store, int rank,
                                              int size, ProcessGroupOptions options,
                                              int device_index) {
  return std::make_shared<NcclProcessGroup>(std::move(store), rank, size, std::move(options),
                                            device_index);
}

void wait_on_stream(const WorkHandle& work, trace::LaneId lane) {
  std::shared_ptr<Event> end;
  {
    std::lock_guard<std::mutex> lock(stream_waits().mutex);
    const auto found = stream_waits().end_events.find(work.get());
    if (found != stream_waits().end_events.end()) end = found->second;
  }
  // On an emulated link the hold is on the host, where the end event cannot see it.
  if (!end || work->on_emulated_link()) {  // See Note [Link emulation]
    work->wait(lane);
    return;
  }
  DeviceScope scope(end->device());
  C10_CUDA_CHECK(cudaStreamWaitEvent(c10::cuda::getCurrentCUDAStream(end->device()).stream(),
                                     end->get(), 0));
}

}  // namespace dpscope::comm
