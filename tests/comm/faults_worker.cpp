// A rank program for test_comm_faults, run under `dpscope launch`: sets up its world with
// init_world over Gloo and then misbehaves the way its mode says, so the test can check that
// every rank fails fast with a message naming the ranks at fault instead of hanging.
//   faults_worker mismatch  collective #1 differs: rank 1 reduces 2 floats, the others 4
//   faults_worker stall     rank 1 stops issuing collectives (sleeps) after collective #0
//   faults_worker killed    rank 1 kills itself (SIGKILL) while 16 MiB all-reduces are in flight
// Exits 0 when the run went as a healthy run would, 3 after printing the CommError it got.
#include <ATen/ATen.h>

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/world.h"

using namespace dpscope::comm;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "mismatch" && mode != "stall" && mode != "killed") {
    std::fprintf(stderr, "usage: faults_worker mismatch|stall|killed\n");
    return 2;
  }
  WorldOptions options;
  // "killed" must fail on the dead peer, not time out: its timeout is far beyond any real run.
  options.timeout = std::chrono::seconds(mode == "stall" ? 8 : 120);
  try {
    World world = init_world(options);
    const int rank = world.env.rank;
    world.group->all_reduce(at::ones({4}), ReduceOp::Sum)->wait();
    if (mode == "killed") {
      std::vector<WorkHandle> in_flight;
      for (int i = 0; i < 8; ++i) {
        in_flight.push_back(world.group->all_reduce(at::ones({4 << 20}), ReduceOp::Sum));
        if (rank == 1 && i == 2) ::raise(SIGKILL);
      }
      for (auto& work : in_flight) work->wait();
    } else if (mode == "mismatch") {
      world.group->all_reduce(at::ones({rank == 1 ? 2 : 4}), ReduceOp::Sum)->wait();
    } else if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(60));
    } else {
      world.group->all_reduce(at::ones({4}), ReduceOp::Sum)->wait();
    }
    std::printf("rank %d: no error\n", rank);
    return 0;
  } catch (const CommError& error) {
    std::printf("CommError: %s\n", error.what());
    std::fflush(stdout);
    // Leave at once: a failed group does not wait for its peers at exit.
    std::_Exit(3);
  }
}
