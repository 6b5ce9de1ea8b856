// Rendezvous: how the ranks of a run find each other. Reads torchrun's environment, meets on
// LibTorch's c10d TCPStore (hosted by rank 0, or by torchrun's agent), and measures each rank's
// clock offset to rank 0 for the trace. Everything the backends exchange (Gloo's addresses,
// NCCL's id) goes through the store returned here.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace c10d {
class Store;
}

namespace dpscope::comm {

// Who serves the rendezvous store at MASTER_ADDR:MASTER_PORT.
enum class StoreHost {
  // Rank 0 opens the TCPStore server, the other ranks connect: `dpscope launch`, and torchrun
  // with --standalone or --rdzv_backend c10d (TORCHELASTIC_USE_AGENT_STORE=False).
  Rank0,
  // torchrun's elastic agent on node 0 already serves it (its static rendezvous:
  // TORCHELASTIC_USE_AGENT_STORE=True); every rank connects as a client.
  Agent,
};

// torchrun's environment contract (docs/communication.md, Starting ranks).
struct LaunchEnv {
  int rank = 0;
  int local_rank = 0;
  int world_size = 1;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  bool launched = false;  // false: no RANK in the environment, a single rank on its own
  StoreHost store_host = StoreHost::Rank0;
  // Which attempt of an elastic run this is (TORCHELASTIC_RESTART_COUNT; StoreHost::Agent only).
  // The agent's store outlives the attempts, so each keeps its keys under its own prefix.
  int restart_count = 0;
};

// Reads RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT and
// TORCHELASTIC_USE_AGENT_STORE ("True" | "False", unset: False), and with an agent store
// TORCHELASTIC_RESTART_COUNT. Without RANK the process is a single rank (world size 1) and the
// rest is not read. With RANK, every other variable must be there and make sense; otherwise a
// CommError names the variable and says how to start the program.
LaunchEnv read_launch_env();

// Meets every rank at MASTER_ADDR:MASTER_PORT: on StoreHost::Rank0 rank 0 hosts a TCPStore and
// the others connect; on StoreHost::Agent all connect to the agent's, and the store returned
// keeps every key under "/worker/attempt_<restart_count>/", as PyTorch's workers do, so that no
// attempt reads what an earlier one left. Each rank announces itself; returns once all
// world_size ranks have arrived; after `timeout` a CommError names the ranks that never arrived.
// A single rank gets an in-process store.
std::shared_ptr<c10d::Store> rendezvous(const LaunchEnv& env, std::chrono::milliseconds timeout);

// This rank's steady-clock offset to rank 0's, in nanoseconds (add it to a local time to get
// rank 0's), and how far it may be off. Ranks on rank 0's host share its clock (CLOCK_MONOTONIC
// is system-wide): 0, exactly. Others measure round trips through the store and keep the one
// with the shortest round trip; rank 0's answer lies somewhere inside it, so the offset is
// within half of it. Every rank must call it (rank 0 answers the others). Collective: call it
// at the same point on all.
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t uncertainty_ns = 0;
};
ClockOffset measure_clock_offset(c10d::Store& store, const LaunchEnv& env, int rounds = 8);

}  // namespace dpscope::comm
