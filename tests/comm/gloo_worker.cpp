// gloo_worker: one rank of test_gloo, run under `dpscope launch`. Checks every collective of the
// Gloo backend over op x dtype x size cases against the result computed locally from every
// rank's (deterministic) inputs, issues collectives back to back to check that they run in
// order, runs raw Gloo all-reduces on the group's own connections between its collectives (the
// baseline of bench_comm), and traces the group's collectives into
// $DPSCOPE_TRACE_DIR/rank<RANK>.sqlite when that is set. Rank 0 prints
// "expect SEQ OP DTYPE BYTES" for every collective, which the test compares with the trace.
// Also checks that reduce-scatter leaves the sockets' send buffers to the kernel (Note [Gloo
// reduce-scatter]). Prints one line per failed case and exits 1 if any failed.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/comm/dtype.h"
#include "engine/comm/gloo_backend.h"
#include "engine/comm/gloo_reference.h"
#include "engine/comm/rendezvous.h"
#include "trace/recorder.h"

using namespace dpscope;
using comm::ReduceOp;
using trace::CollectiveOp;

namespace {

int rank = 0;
int world = 1;
int failures = 0;

// Every rank's input element i: small integers, so sums over up to 8 ranks are exact in every
// dtype (float16 and bfloat16 included), and a value that depends on the rank and the index,
// so a chunk in the wrong place shows.
double value(int r, int64_t i) { return static_cast<double>((i * 3 + r * 5) % 17) - 8; }

at::Tensor make(c10::ScalarType type, int64_t n, int r, int64_t offset = 0) {
  at::Tensor values = at::empty({n}, at::TensorOptions().dtype(at::kDouble));
  double* data = values.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) data[i] = value(r, offset + i);
  return values.to(type);
}

double tolerance(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return 1e-6;
    case c10::ScalarType::Double: return 1e-12;
    case c10::ScalarType::Half: return 1e-3;
    case c10::ScalarType::BFloat16: return 1e-2;
    default: return 0;
  }
}

std::string name_of(CollectiveOp op, ReduceOp reduce) {
  std::string name(trace::to_string(op));
  if (op == CollectiveOp::AllReduce || op == CollectiveOp::ReduceScatter) {
    name += "/" + std::string(comm::to_string(reduce));
  }
  return name;
}

std::vector<double> values_of(const at::Tensor& tensor) {
  const at::Tensor values = tensor.to(at::kDouble).contiguous();
  return std::vector<double>(values.data_ptr<double>(), values.data_ptr<double>() + values.numel());
}

// Compares `got` with `expected`; prints the first bad index when they differ.
void check(const std::string& what, c10::ScalarType type, const at::Tensor& got,
           const std::vector<double>& expected) {
  const std::vector<double> data = values_of(got);
  const double tol = tolerance(type);
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!(std::abs(data[i] - expected[i]) <= tol * (1 + std::abs(expected[i])))) {  // NaN fails
      std::printf("rank %d: FAIL %s %s n=%zu: index %zu got %g expected %g\n", rank, what.c_str(),
                  c10::toString(type), expected.size(), i, data[i], expected[i]);
      ++failures;
      return;
    }
  }
}

// The reduction of every rank's element i, done as the backend does: exact sum or max, and an
// average that divides the (exact) sum in the tensor's dtype.
std::vector<double> reduced(ReduceOp reduce, c10::ScalarType type, int64_t n, int64_t offset) {
  std::vector<double> result(n);
  for (int64_t i = 0; i < n; ++i) {
    double acc = value(0, offset + i);
    for (int r = 1; r < world; ++r) {
      const double x = value(r, offset + i);
      acc = reduce == ReduceOp::Max ? std::max(acc, x) : acc + x;
    }
    result[i] = acc;
  }
  if (reduce == ReduceOp::Average && n > 0) {
    at::Tensor sums = at::empty({n}, at::TensorOptions().dtype(at::kDouble));
    std::copy(result.begin(), result.end(), sums.data_ptr<double>());
    at::Tensor averaged = sums.to(type).div_(world).to(at::kDouble);
    std::copy(averaged.data_ptr<double>(), averaged.data_ptr<double>() + n, result.begin());
  }
  return result;
}

// Rank 0 lists what it issued, for the test to compare with every rank's trace: the sequence
// number the group gave it, and the op, dtype and bytes (the input's: a rank's share for
// all_gather, all ranks' chunks for reduce_scatter, none for barrier) of the case itself.
void expect(const comm::WorkHandle& work, CollectiveOp op, c10::ScalarType type, int64_t n) {
  if (rank != 0) return;
  const bool barrier = op == CollectiveOp::Barrier;
  const int64_t bytes = barrier ? 0
                                : n * static_cast<int64_t>(c10::elementSize(type)) *
                                      (op == CollectiveOp::ReduceScatter ? world : 1);
  const trace::DType dtype = barrier ? trace::DType::UInt8 : comm::to_trace_dtype(type);
  std::printf("expect %lld %s %s %lld\n", static_cast<long long>(work->seq()),
              std::string(trace::to_string(op)).c_str(),
              std::string(trace::to_string(dtype)).c_str(), static_cast<long long>(bytes));
}

struct Issued {
  comm::WorkHandle work;
  std::function<void()> verify;  // checks the result once the work is done
  int64_t issued_ns = 0;         // trace clock just before the issue; 0: not taken
};

// Issues one collective with this rank's inputs; `verify` checks its result later.
Issued issue(comm::ProcessGroup& group, CollectiveOp op, ReduceOp reduce, c10::ScalarType type,
             int64_t n, int root) {
  const std::string what = name_of(op, reduce);
  Issued issued;
  issued.issued_ns = trace::now_ns();
  switch (op) {
    case CollectiveOp::Broadcast: {
      at::Tensor t = make(type, n, rank);
      issued.work = group.broadcast(t, root);
      issued.verify = [=] {
        check(what + " root " + std::to_string(root), type, t, values_of(make(type, n, root)));
      };
      break;
    }
    case CollectiveOp::AllReduce: {
      at::Tensor t = make(type, n, rank);
      issued.work = group.all_reduce(t, reduce);
      issued.verify = [=] { check(what, type, t, reduced(reduce, type, n, 0)); };
      break;
    }
    case CollectiveOp::AllGather: {
      at::Tensor in = make(type, n, rank);
      at::Tensor out = at::empty({n * world}, in.options());
      issued.work = group.all_gather(out, in);
      issued.verify = [=] {
        std::vector<double> expected;
        for (int r = 0; r < world; ++r) {
          for (int64_t i = 0; i < n; ++i) expected.push_back(value(r, i));
        }
        check(what, type, out, expected);
      };
      break;
    }
    case CollectiveOp::ReduceScatter: {
      at::Tensor in = make(type, n * world, rank);
      at::Tensor out = at::empty({n}, in.options());
      issued.work = group.reduce_scatter(out, in, reduce);
      issued.verify = [=] {
        check(what, type, out, reduced(reduce, type, n, rank * n));
        check(what + " (input untouched)", type, in, values_of(make(type, n * world, rank)));
      };
      break;
    }
    case CollectiveOp::Barrier:
      issued.work = group.barrier();
      issued.verify = [] {};
      break;
    case CollectiveOp::AllToAll:
    case CollectiveOp::SendRecv:
      throw std::logic_error(what + ": imported traces' op; the engine has no such collective");
  }
  expect(issued.work, op, type, n);
  return issued;
}

void wait_and_verify(Issued& issued, const std::string& what) {
  try {
    issued.work->wait();
  } catch (const std::exception& error) {
    std::printf("rank %d: FAIL %s: %s\n", rank, what.c_str(), error.what());
    ++failures;
    return;
  }
  if (!issued.work->is_completed()) {
    std::printf("rank %d: FAIL %s: not completed after wait\n", rank, what.c_str());
    ++failures;
  }
  // The duration is the backend's own span of the collective, inside issue-to-wait.
  const int64_t duration = issued.work->duration_ns();
  const int64_t since_issue = trace::now_ns() - issued.issued_ns;
  if (duration < 0 || (issued.issued_ns != 0 && duration > since_issue)) {
    std::printf("rank %d: FAIL %s: duration %lld ns, %lld ns since the issue\n", rank,
                what.c_str(), static_cast<long long>(duration),
                static_cast<long long>(since_issue));
    ++failures;
  }
  issued.verify();
}

void run_cases(comm::ProcessGroup& group) {
  const c10::ScalarType types[] = {c10::ScalarType::Float, c10::ScalarType::Double,
                                   c10::ScalarType::Half,  c10::ScalarType::BFloat16,
                                   c10::ScalarType::Int,   c10::ScalarType::Long};
  struct Variant {
    CollectiveOp op;
    ReduceOp reduce;
  };
  const Variant variants[] = {
      {CollectiveOp::Broadcast, ReduceOp::Sum},     {CollectiveOp::AllReduce, ReduceOp::Sum},
      {CollectiveOp::AllReduce, ReduceOp::Average}, {CollectiveOp::AllReduce, ReduceOp::Max},
      {CollectiveOp::AllGather, ReduceOp::Sum},     {CollectiveOp::ReduceScatter, ReduceOp::Sum},
      {CollectiveOp::ReduceScatter, ReduceOp::Average},
      {CollectiveOp::ReduceScatter, ReduceOp::Max}};
  int index = 0;
  for (const Variant& v : variants) {
    for (c10::ScalarType type : types) {
      if (v.reduce == ReduceOp::Average && !c10::isFloatingType(type)) continue;
      // 0: no communication; 100003: several of Gloo's all-reduce segments; 2^20 + 3 per rank:
      // reduce_scatter's 8 MiB segments, for 2 and more ranks.
      std::vector<int64_t> sizes = {0, 1, 3, 7, 1001};
      if (type == c10::ScalarType::Float || type == c10::ScalarType::BFloat16) {
        sizes.push_back(100003);
      }
      if (type == c10::ScalarType::Float && v.op == CollectiveOp::ReduceScatter) {
        sizes.push_back((1 << 20) + 3);
      }
      for (int64_t n : sizes) {
        const int root = index++ % world;
        Issued issued = issue(group, v.op, v.reduce, type, n, root);
        wait_and_verify(issued, name_of(v.op, v.reduce) + " " + c10::toString(type) +
                                    " n=" + std::to_string(n));
      }
    }
  }
  Issued barrier = issue(group, CollectiveOp::Barrier, ReduceOp::Sum, c10::ScalarType::Float, 0, 0);
  wait_and_verify(barrier, "barrier");
}

// FSDP's all-gather: this rank's input is its own slot of the output.
void run_in_place_all_gather(comm::ProcessGroup& group) {
  const int64_t n = 5;
  at::Tensor out = at::empty({n * world}, at::TensorOptions().dtype(at::kFloat));
  at::Tensor mine = out.narrow(0, rank * n, n);
  mine.copy_(make(at::kFloat, n, rank));
  Issued issued{group.all_gather(out, mine), [=] {
                  std::vector<double> expected;
                  for (int r = 0; r < world; ++r) {
                    for (int64_t i = 0; i < n; ++i) expected.push_back(value(r, i));
                  }
                  check("allgather in place", at::kFloat, out, expected);
                }};
  expect(issued.work, CollectiveOp::AllGather, at::kFloat, n);
  wait_and_verify(issued, "allgather in place");
}

// Collectives issued back to back run in issue order: once the last is done, all are.
void run_back_to_back(comm::ProcessGroup& group) {
  std::vector<Issued> batch;
  batch.push_back(issue(group, CollectiveOp::AllReduce, ReduceOp::Sum, at::kFloat, 1001, 0));
  batch.push_back(issue(group, CollectiveOp::Broadcast, ReduceOp::Sum, at::kDouble, 7, world - 1));
  batch.push_back(issue(group, CollectiveOp::ReduceScatter, ReduceOp::Max, at::kHalf, 3001, 0));
  batch.push_back(issue(group, CollectiveOp::AllGather, ReduceOp::Sum, at::kLong, 3, 0));
  batch.push_back(issue(group, CollectiveOp::Barrier, ReduceOp::Sum, at::kFloat, 0, 0));
  batch.push_back(issue(group, CollectiveOp::AllReduce, ReduceOp::Average, at::kBFloat16, 77, 0));
  for (size_t i = 1; i < batch.size(); ++i) {
    if (batch[i].work->seq() != batch[i - 1].work->seq() + 1) {
      std::printf("rank %d: FAIL back to back: seq %lld after %lld\n", rank,
                  static_cast<long long>(batch[i].work->seq()),
                  static_cast<long long>(batch[i - 1].work->seq()));
      ++failures;
    }
  }
  wait_and_verify(batch.back(), "back to back, last");
  for (size_t i = 0; i + 1 < batch.size(); ++i) {
    if (!batch[i].work->is_completed()) {
      std::printf("rank %d: FAIL back to back: #%lld not done after the later #%lld\n", rank,
                  static_cast<long long>(batch[i].work->seq()),
                  static_cast<long long>(batch.back().work->seq()));
      ++failures;
    }
    wait_and_verify(batch[i], "back to back #" + std::to_string(i));
  }
}

// bench_comm's raw baseline on the group's own connections: its all-reduces, tagged apart from
// the group's sequence numbers, interleave with the group's collectives and both stay right.
void run_raw_on_group_connections(comm::ProcessGroup& group) {
  comm::GlooReference raw(comm::gloo_context_of(group), std::chrono::seconds(60));
  for (int i = 0; i < 3; ++i) {
    at::Tensor t = make(at::kFloat, 1001, rank);
    raw.all_reduce_sum(t.data_ptr<float>(), static_cast<size_t>(t.numel()));
    check("raw all-reduce on the group's connections", at::kFloat, t,
          reduced(ReduceOp::Sum, at::kFloat, 1001, 0));
    Issued issued = issue(group, CollectiveOp::AllReduce, ReduceOp::Sum, at::kFloat, 7, 0);
    wait_and_verify(issued, "allreduce/sum between raw all-reduces");
  }
}

// A dtype or op the backend refuses fails that collective with a message naming it, and leaves
// the group usable.
void run_refusals(comm::ProcessGroup& group) {
  struct Refusal {
    at::Tensor tensor;
    ReduceOp reduce;
    std::string named;
  };
  const Refusal refusals[] = {
      {at::empty({3}, at::TensorOptions().dtype(at::kBool)), ReduceOp::Sum, "Bool"},
      {make(at::kLong, 4, rank), ReduceOp::Average, "average"},
  };
  for (const Refusal& refusal : refusals) {
    comm::WorkHandle work = group.all_reduce(refusal.tensor, refusal.reduce);
    expect(work, CollectiveOp::AllReduce, refusal.tensor.scalar_type(), refusal.tensor.numel());
    try {
      work->wait();
      std::printf("rank %d: FAIL refusal: all_reduce of %s did not fail\n", rank,
                  refusal.named.c_str());
      ++failures;
    } catch (const comm::CommError& error) {
      const std::string message = error.what();
      if (message.find(refusal.named) == std::string::npos ||
          message.find("rank " + std::to_string(rank)) == std::string::npos) {
        std::printf("rank %d: FAIL refusal: message does not name %s and the rank: %s\n", rank,
                    refusal.named.c_str(), message.c_str());
        ++failures;
      }
    }
  }
  // Bytes move for any dtype.
  Issued bytes = issue(group, CollectiveOp::Broadcast, ReduceOp::Sum, at::kByte, 9, 0);
  wait_and_verify(bytes, "broadcast uint8 after refusals");
}

// A group destroyed with collectives still queued runs them first: every Work is finished, with
// the right result. A second group of the same group_id made afterwards connects afresh. Both
// are untraced, so the trace holds the world group's collectives only.
void run_destroyed_with_work_queued(std::shared_ptr<c10d::Store> store) {
  comm::ProcessGroupOptions options;
  options.group_id = 1;
  options.name = "drain";
  options.timeout = std::chrono::seconds(60);
  std::vector<at::Tensor> tensors;
  std::vector<comm::WorkHandle> works;
  {
    std::shared_ptr<comm::ProcessGroup> group = comm::make_gloo_group(store, rank, world, options);
    for (int i = 0; i < 8; ++i) {
      tensors.push_back(make(at::kFloat, 1001 + i, rank));
      works.push_back(group->all_reduce(tensors.back(), ReduceOp::Sum));
    }
  }
  for (size_t i = 0; i < works.size(); ++i) {
    if (!works[i]->is_completed() || works[i]->error()) {
      std::printf("rank %d: FAIL destroyed group: collective %zu %s\n", rank, i,
                  works[i]->is_completed() ? "failed" : "was never finished");
      ++failures;
      continue;
    }
    check("allreduce/sum of a destroyed group", at::kFloat, tensors[i],
          reduced(ReduceOp::Sum, at::kFloat, tensors[i].numel(), 0));
  }
  std::shared_ptr<comm::ProcessGroup> again = comm::make_gloo_group(store, rank, world, options);
  at::Tensor t = make(at::kInt, 5, rank);
  Issued issued{again->all_reduce(t, ReduceOp::Max), [=] {
                  check("allreduce/max on a re-created group", at::kInt, t,
                        reduced(ReduceOp::Max, at::kInt, 5, 0));
                }};
  wait_and_verify(issued, "allreduce/max on a re-created group");
}

// SO_SNDBUF of every socket this process holds, by "fd socket:[inode]".
std::map<std::string, int> socket_send_buffers() {
  std::map<std::string, int> sizes;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code error;
    const std::string target = std::filesystem::read_symlink(entry.path(), error).string();
    if (error || target.rfind("socket:", 0) != 0) continue;
    const int fd = std::stoi(entry.path().filename().string());
    int size = 0;
    socklen_t length = sizeof(size);
    if (::getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &length) == 0) {
      sizes[std::to_string(fd) + " " + target] = size;
    }
  }
  return sizes;
}

// Reduce-scatters of a few KiB on a fresh group must not shrink any socket's send buffer: the
// kernel only grows one it tunes itself. Gloo's bound buffers set SO_SNDBUF to their message's
// size, which froze the group's connections at a few KiB for every later collective (Note [Gloo
// reduce-scatter]).
void run_reduce_scatter_leaves_send_buffers(std::shared_ptr<c10d::Store> store) {
  if (world == 1) return;
  comm::ProcessGroupOptions options;
  options.group_id = 2;
  options.name = "sndbuf";
  options.timeout = std::chrono::seconds(60);
  std::shared_ptr<comm::ProcessGroup> group = comm::make_gloo_group(store, rank, world, options);
  at::Tensor warm = make(at::kFloat, 64, rank);
  group->all_reduce(warm, ReduceOp::Sum)->wait();  // every connection is up
  const std::map<std::string, int> before = socket_send_buffers();
  for (int i = 0; i < 3; ++i) {
    at::Tensor input = make(at::kFloat, 1000 * world, rank);
    at::Tensor output = at::empty({1000}, input.options());
    group->reduce_scatter(output, input, ReduceOp::Sum)->wait();
  }
  const std::map<std::string, int> after = socket_send_buffers();
  for (const auto& [socket, size] : before) {
    auto now = after.find(socket);
    if (now != after.end() && now->second < size) {
      std::printf("rank %d: FAIL reduce-scatter shrank the send buffer of fd %s from %d to %d "
                  "bytes\n",
                  rank, socket.c_str(), size, now->second);
      ++failures;
    }
  }
}

}  // namespace

int main() {
  try {
    const comm::LaunchEnv env = comm::read_launch_env();
    rank = env.rank;
    world = env.world_size;
    std::shared_ptr<c10d::Store> store = comm::rendezvous(env, std::chrono::seconds(60));
    std::unique_ptr<trace::Recorder> recorder;
    if (const char* dir = std::getenv("DPSCOPE_TRACE_DIR")) {
      trace::RecorderOptions options;
      options.path = std::string(dir) + "/rank" + std::to_string(rank) + ".sqlite";
      options.rank = rank;
      options.local_rank = env.local_rank;
      recorder = std::make_unique<trace::Recorder>(options);
      recorder->set_meta("backend", "gloo");
      recorder->set_meta("world_size", std::to_string(world));
      const comm::ClockOffset clock = comm::measure_clock_offset(*store, env);
      recorder->set_clock_offset(clock.offset_ns, clock.uncertainty_ns);
    }
    comm::ProcessGroupOptions options;
    options.recorder = recorder.get();
    options.timeout = std::chrono::seconds(60);
    {
      std::shared_ptr<comm::ProcessGroup> group =
          comm::make_gloo_group(store, rank, world, options);
      if (group->backend_name() != "gloo") {
        std::printf("rank %d: FAIL backend_name() is %s\n", rank, group->backend_name().c_str());
        ++failures;
      }
      run_cases(*group);
      run_in_place_all_gather(*group);
      run_back_to_back(*group);
      run_raw_on_group_connections(*group);
      run_refusals(*group);
      run_destroyed_with_work_queued(store);
      run_reduce_scatter_leaves_send_buffers(store);
    }
    if (recorder) recorder->close(failures ? "failed" : "complete");
  } catch (const std::exception& error) {
    std::printf("rank %d: FAIL %s\n", rank, error.what());
    return 1;
  }
  std::printf("rank %d: %d failures\n", rank, failures);
  return failures ? 1 : 0;
}
