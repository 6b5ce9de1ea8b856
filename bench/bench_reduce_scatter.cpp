// bench_reduce_scatter: one rank of the reduce-scatter benchmark, run as
// `build/bin/dpscope launch -n N -- build/bin/bench_reduce_scatter`. On the Gloo backend it times
// float32 sum reduce-scatters of 1, 4 and 16 MiB (the whole input, all ranks' chunks) beside
// all-reduces of the same bytes (a ring reduce-scatter is half a ring all-reduce's steps), then
// times a 4 MiB all-reduce on a fresh group before and after three small reduce-scatters (16 KiB
// in all): the case Note [Gloo reduce-scatter] is about, where Gloo's own reduce-scatter left
// the connections' send buffers at a few KiB and every later all-reduce crawled. Rank 0 prints
// the table bench/README.md quotes and `after_small_reduce_scatter_ratio <x>`.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/ones.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/gloo_backend.h"
#include "engine/comm/rendezvous.h"
#include "trace/clock.h"

using namespace dpscope;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int kRuns = 31;  // timed calls per variant and size, odd for a clean median
constexpr int kWarmup = 3;

struct Timing {
  double median_ms;
  double min_ms;
};

// Times `call` kRuns times, every rank starting each call together (a barrier before it).
Timing time_calls(comm::ProcessGroup& group, const std::function<void()>& call) {
  for (int i = 0; i < kWarmup; ++i) call();
  std::vector<double> ms;
  for (int i = 0; i < kRuns; ++i) {
    group.barrier()->wait();
    const int64_t begin = trace::now_ns();
    call();
    ms.push_back(static_cast<double>(trace::now_ns() - begin) / 1e6);
  }
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.front()};
}

Timing time_reduce_scatter(comm::ProcessGroup& group, int64_t bytes) {
  const int64_t n = bytes / 4;
  at::Tensor input = at::ones({n});
  at::Tensor output = at::empty({n / group.size()});
  return time_calls(group, [&] {
    group.reduce_scatter(output, input, comm::ReduceOp::Sum)->wait();
  });
}

Timing time_all_reduce(comm::ProcessGroup& group, int64_t bytes) {
  at::Tensor tensor = at::ones({bytes / 4});
  return time_calls(group, [&] { group.all_reduce(tensor, comm::ReduceOp::Sum)->wait(); });
}

}  // namespace

int main() {
  try {
    const comm::LaunchEnv env = comm::read_launch_env();
    if (env.world_size < 2) {
      std::fprintf(stderr, "bench_reduce_scatter: run it on 2 or more ranks: "
                           "dpscope launch -n 2 -- build/bin/bench_reduce_scatter\n");
      return 2;
    }
    std::shared_ptr<c10d::Store> store = comm::rendezvous(env, std::chrono::seconds(60));
    comm::ProcessGroupOptions options;
    options.timeout = std::chrono::seconds(120);
    std::shared_ptr<comm::ProcessGroup> group =
        comm::make_gloo_group(store, env.rank, env.world_size, options);
    const bool print = env.rank == 0;
    if (print) {
      std::printf("reduce-scatter on %d ranks (Gloo backend), median [min] of %d calls, ms\n",
                  env.world_size, kRuns);
      std::printf("%10s %22s %22s %10s\n", "bytes", "reduce-scatter", "all-reduce", "rs / ar");
    }
    for (int64_t mib : {1, 4, 16}) {
      const int64_t bytes = mib * kMiB / (4 * env.world_size) * 4 * env.world_size;
      const Timing scatter = time_reduce_scatter(*group, bytes);
      const Timing reduce = time_all_reduce(*group, bytes);
      if (print) {
        std::printf("%6lld MiB %13.2f [%6.2f] %13.2f [%6.2f] %10.2f\n",
                    static_cast<long long>(mib), scatter.median_ms, scatter.min_ms,
                    reduce.median_ms, reduce.min_ms, scatter.median_ms / reduce.median_ms);
      }
    }
    group.reset();

    // A fresh group, so that nothing before has sized its connections' buffers.
    options.group_id = 1;
    options.name = "after";
    std::shared_ptr<comm::ProcessGroup> fresh =
        comm::make_gloo_group(store, env.rank, env.world_size, options);
    const Timing before = time_all_reduce(*fresh, 4 * kMiB);
    for (int i = 0; i < 3; ++i) {
      at::Tensor input = at::ones({1024 * env.world_size});
      at::Tensor output = at::empty({1024});
      fresh->reduce_scatter(output, input, comm::ReduceOp::Sum)->wait();
    }
    const Timing after = time_all_reduce(*fresh, 4 * kMiB);
    if (print) {
      std::printf("4 MiB all-reduce on a fresh group: %.2f [%.2f] ms; after three 16 KiB "
                  "reduce-scatters: %.2f [%.2f] ms\n",
                  before.median_ms, before.min_ms, after.median_ms, after.min_ms);
      std::printf("after_small_reduce_scatter_ratio %.2f\n", after.median_ms / before.median_ms);
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "bench_reduce_scatter: %s\n", error.what());
    return 1;
  }
  return 0;
}
