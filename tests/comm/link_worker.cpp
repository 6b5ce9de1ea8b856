// link_worker: one rank of test_link_emulation's Gloo cases, run under `dpscope launch
// --link-gbps G --link-latency-us L`. comm::init_world gives its world group the emulated link
// from the environment; a second, plain group (no link) runs the same collectives for
// comparison. Prints one line per measurement for the test to check, prefixed by the launcher
// with the rank:
//   identical OP DTYPE N            the results on and off the link were equal bit for bit
//   timing OP BYTES SEQ MEASURED_NS MODEL_NS   one collective, from its issue to wait()'s return
//   queue SEQ MEASURED_NS MODEL_NS  three all-reduces issued back to back, to the last's return;
//                                   MODEL_NS is one of them
//   held SEQ CPU_NS WALL_NS         the waiting thread's CPU time and wall time in wait()
// and "FAIL ..." lines (exit 1) for results that differ. Traces into
// $DPSCOPE_TRACE_DIR/rank<RANK>.sqlite (the world group's collectives only).
#include <ATen/ATen.h>
#include <time.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/link_model.h"
#include "engine/comm/gloo_backend.h"
#include "engine/comm/world.h"
#include "trace/recorder.h"

using namespace dpscope;
using comm::ReduceOp;
using trace::CollectiveOp;

namespace {

int rank = 0;
int world_size = 1;
int failures = 0;

constexpr int64_t kMiB = int64_t{1} << 20;

int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// Random values that differ by rank: float sums then depend on the order of additions, so equal
// results mean the same algorithm ran on the same bytes.
at::Tensor random_input(int64_t n, c10::ScalarType type, int salt) {
  at::manual_seed(1000 * static_cast<uint64_t>(rank) + static_cast<uint64_t>(salt));
  return at::randn({n}, at::TensorOptions().dtype(at::kFloat)).to(type);
}

bool same_bytes(const at::Tensor& a, const at::Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0;
}

// Runs `op` on the plain group and on the linked one with the same inputs and compares the
// outputs byte for byte.
void compare(comm::ProcessGroup& plain, comm::ProcessGroup& linked, CollectiveOp op,
             ReduceOp reduce, c10::ScalarType type, int64_t n, int salt) {
  at::Tensor outputs[2];
  comm::ProcessGroup* groups[2] = {&plain, &linked};
  for (int g = 0; g < 2; ++g) {
    at::Tensor input = random_input(n, type, salt);
    comm::ProcessGroup& group = *groups[g];
    // Ranks start together: a large Gloo collective that one rank enters well after the others
    // can stall for seconds on a busy 2-core machine (4 ranks), which would only slow the test.
    group.barrier()->wait();
    switch (op) {
      case CollectiveOp::AllReduce:
        group.all_reduce(input, reduce)->wait();
        outputs[g] = input;
        break;
      case CollectiveOp::ReduceScatter:
        outputs[g] = at::empty({n / world_size}, input.options());
        group.reduce_scatter(outputs[g], input, reduce)->wait();
        break;
      case CollectiveOp::AllGather:
        outputs[g] = at::empty({n * world_size}, input.options());
        group.all_gather(outputs[g], input)->wait();
        break;
      case CollectiveOp::Broadcast:
        group.broadcast(input, world_size - 1)->wait();
        outputs[g] = input;
        break;
      case CollectiveOp::Barrier:
      case CollectiveOp::AllToAll:  // imported traces' ops: the engine has no such collective
      case CollectiveOp::SendRecv:
        return;
    }
  }
  const std::string what = std::string(trace::to_string(op)) + "/" +
                           std::string(comm::to_string(reduce)) + " " + c10::toString(type) +
                           " " + std::to_string(n);
  if (!same_bytes(outputs[0], outputs[1])) {
    std::printf("FAIL %s: the result on the emulated link differs from the plain group's\n",
                what.c_str());
    ++failures;
    return;
  }
  std::printf("identical %s\n", what.c_str());
}

void run_identical(comm::ProcessGroup& plain, comm::ProcessGroup& linked) {
  int salt = 0;
  for (int64_t n : {int64_t{1000} * world_size, int64_t{300000} * world_size}) {
    for (c10::ScalarType type : {at::kFloat, at::kBFloat16}) {
      compare(plain, linked, CollectiveOp::ReduceScatter, ReduceOp::Sum, type, n, ++salt);
      compare(plain, linked, CollectiveOp::AllReduce, ReduceOp::Sum, type, n, ++salt);
      compare(plain, linked, CollectiveOp::AllReduce, ReduceOp::Average, type, n, ++salt);
      compare(plain, linked, CollectiveOp::AllGather, ReduceOp::Sum, type, n, ++salt);
      compare(plain, linked, CollectiveOp::Broadcast, ReduceOp::Sum, type, n, ++salt);
    }
  }
}

// Issues one collective of `bytes` (the whole flat tensor) and returns its Work.
comm::WorkHandle issue(comm::ProcessGroup& group, CollectiveOp op, int64_t bytes,
                       std::vector<at::Tensor>& keep) {
  const int64_t n = bytes / 4;
  at::Tensor whole = at::ones({n});
  at::Tensor share = at::ones({n / world_size});
  keep = {whole, share};
  switch (op) {
    case CollectiveOp::AllReduce: return group.all_reduce(whole, ReduceOp::Sum);
    case CollectiveOp::ReduceScatter: return group.reduce_scatter(share, whole, ReduceOp::Sum);
    case CollectiveOp::AllGather: return group.all_gather(whole, share);
    default: return group.broadcast(whole, 0);
  }
}

void run_timing(comm::ProcessGroup& group, const core::LinkSpec& link) {
  for (CollectiveOp op :
       {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter, CollectiveOp::AllGather}) {
    for (int64_t bytes : {kMiB, 4 * kMiB, 16 * kMiB}) {
      std::vector<at::Tensor> keep;
      group.barrier()->wait();  // every rank starts together
      const int64_t begin = trace::now_ns();
      comm::WorkHandle work = issue(group, op, bytes, keep);
      work->wait();
      const int64_t measured = trace::now_ns() - begin;
      std::printf("timing %s %lld %lld %lld %lld\n", std::string(trace::to_string(op)).c_str(),
                  static_cast<long long>(bytes), static_cast<long long>(work->seq()),
                  static_cast<long long>(measured),
                  static_cast<long long>(
                      core::link_model_ns(op, work->bytes(), group.size(), link)));
    }
  }
}

// Three all-reduces of other tensors back to back: Gloo may run two at once (Note [Gloo
// overlap]), the link carries one after the other.
void run_queue(comm::ProcessGroup& group, const core::LinkSpec& link) {
  std::vector<at::Tensor> tensors;
  for (int i = 0; i < 3; ++i) tensors.push_back(at::ones({kMiB}));  // 4 MiB each
  group.barrier()->wait();
  const int64_t begin = trace::now_ns();
  std::vector<comm::WorkHandle> works;
  for (at::Tensor& t : tensors) works.push_back(group.all_reduce(t, ReduceOp::Sum));
  works.back()->wait();
  const int64_t measured = trace::now_ns() - begin;
  for (const comm::WorkHandle& work : works) {
    if (!work->is_completed()) {
      std::printf("FAIL queue: collective #%lld not completed after the last\n",
                  static_cast<long long>(work->seq()));
      ++failures;
    }
  }
  std::printf("queue %lld %lld %lld\n", static_cast<long long>(works.front()->seq()),
              static_cast<long long>(measured),
              static_cast<long long>(core::link_model_ns(CollectiveOp::AllReduce,
                                                         works.front()->bytes(), group.size(),
                                                         link)));
}

// A 16 MiB all-reduce that a communication thread has started (the 30 ms sleep leaves it time
// to take it, so the waiter does not run it itself), then the waiting thread's CPU time in wait().
void run_held(comm::ProcessGroup& group) {
  at::Tensor t = at::ones({4 * kMiB});
  group.barrier()->wait();
  comm::WorkHandle work = group.all_reduce(t, ReduceOp::Sum);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  const int64_t cpu = thread_cpu_ns();
  const int64_t wall = trace::now_ns();
  work->wait();
  std::printf("held %lld %lld %lld\n", static_cast<long long>(work->seq()),
              static_cast<long long>(thread_cpu_ns() - cpu),
              static_cast<long long>(trace::now_ns() - wall));
}

}  // namespace

int main() {
  try {
    const comm::LaunchEnv env = comm::read_launch_env();
    rank = env.rank;
    world_size = env.world_size;
    std::unique_ptr<trace::Recorder> recorder;
    if (const char* dir = std::getenv("DPSCOPE_TRACE_DIR")) {
      trace::RecorderOptions options;
      options.path = std::string(dir) + "/rank" + std::to_string(rank) + ".sqlite";
      options.rank = rank;
      options.local_rank = env.local_rank;
      recorder = std::make_unique<trace::Recorder>(options);
    }
    comm::WorldOptions world_options;
    world_options.timeout = std::chrono::seconds(60);
    world_options.recorder = recorder.get();
    comm::World world = comm::init_world(world_options);
    if (!world.link) {
      std::printf("FAIL no emulated link: run under dpscope launch --link-gbps G "
                  "--link-latency-us L\n");
      return 1;
    }
    comm::ProcessGroupOptions plain_options;
    plain_options.group_id = 1;
    plain_options.name = "plain";
    plain_options.timeout = std::chrono::seconds(60);
    {
      std::shared_ptr<comm::ProcessGroup> plain =
          comm::make_gloo_group(world.store, rank, world_size, plain_options);
      run_identical(*plain, *world.group);
    }
    run_timing(*world.group, world.link->spec());
    run_queue(*world.group, world.link->spec());
    run_held(*world.group);
    world.group.reset();
    if (recorder) recorder->close(failures ? "failed" : "complete");
  } catch (const std::exception& error) {
    std::printf("FAIL %s\n", error.what());
    return 1;
  }
  std::fflush(stdout);
  return failures ? 1 : 0;
}
