// Rendezvous over c10d's TCPStore, torchrun's environment, and the clock offset to rank 0
// (see rendezvous.h).
#include "engine/comm/rendezvous.h"

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string_view>
#include <thread>

#include "engine/comm/process_group.h"
#include "engine/comm/store_util.h"
#include "trace/clock.h"

namespace dpscope::comm {
namespace {

constexpr const char* kHowToStart =
    "start it with `dpscope launch -n N -- PROGRAM` or torchrun, or unset RANK to run a single "
    "rank";
constexpr const char* kUseAgentStore = "TORCHELASTIC_USE_AGENT_STORE";

// The value of `name`; a CommError when it is unset although `needed_by` (set) requires it.
std::string require(const char* name, const char* needed_by = "RANK") {
  const char* value = std::getenv(name);
  if (!value || !*value) {
    throw CommError(std::string(needed_by) + " is set but " + name + " is not; " + kHowToStart);
  }
  return value;
}

int require_int(const char* name, int low, int high, const char* needed_by = "RANK") {
  const std::string text = require(name, needed_by);
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (*end != '\0' || value < low || value > high) {
    throw CommError(std::string(name) + "=" + text + " is not a number in " +
                    std::to_string(low) + ".." + std::to_string(high) + "; " + kHowToStart);
  }
  return static_cast<int>(value);
}

// TORCHELASTIC_USE_AGENT_STORE as torchrun writes it: Python's str() of a bool.
StoreHost read_store_host() {
  const char* value = std::getenv(kUseAgentStore);
  if (!value || !*value || std::string_view(value) == "False") return StoreHost::Rank0;
  if (std::string_view(value) == "True") return StoreHost::Agent;
  throw CommError(std::string(kUseAgentStore) + "=" + value +
                  " is neither True nor False (torchrun sets it to say whether its agent hosts "
                  "the rendezvous store); unset it unless torchrun started this rank");
}

// "A:P", and on an agent's store which one and which attempt, for messages.
std::string describe_store(const LaunchEnv& env) {
  const std::string address = env.master_addr + ":" + std::to_string(env.master_port);
  if (env.store_host == StoreHost::Rank0) return address;
  return address + " (torchrun's agent store, attempt " + std::to_string(env.restart_count) + ")";
}

// Why this rank could not open the store, and what to check.
std::string open_failure(const LaunchEnv& env, const std::string& cause) {
  const std::string who = "rank " + std::to_string(env.rank) + ": ";
  if (env.store_host == StoreHost::Agent) {
    return who + "cannot reach the rendezvous store at " + describe_store(env) + " (" + cause +
           "); is torchrun running on node 0, with the same --master_addr and --master_port on "
           "every node?";
  }
  if (env.rank == 0) {
    return who + "cannot host the rendezvous store at " + describe_store(env) + " (" + cause +
           "); is another program listening on MASTER_PORT? choose a free port";
  }
  return who + "cannot reach the rendezvous store at " + describe_store(env) + " (" + cause +
         "); is rank 0 running and MASTER_ADDR/MASTER_PORT right?";
}

// The run's store: rank 0's TCPStore, or the agent's under this attempt's prefix (the same
// "/worker/attempt_<n>" as torch.distributed's _create_c10d_store).
std::shared_ptr<c10d::Store> open_store(const LaunchEnv& env, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port);
  options.isServer = env.store_host == StoreHost::Rank0 && env.rank == 0;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    if (env.store_host == StoreHost::Rank0) {
      return std::make_shared<c10d::TCPStore>(env.master_addr, options);
    }
    return std::make_shared<c10d::PrefixStore>(
        "/worker/attempt_" + std::to_string(env.restart_count),
        c10::make_intrusive<c10d::TCPStore>(env.master_addr, options));
  } catch (const std::exception& error) {
    throw CommError(open_failure(env, error.what()));
  }
}

std::string arrival_key(int rank) { return "dpscope/rendezvous/" + std::to_string(rank); }

// Returns once all world_size ranks have called it with the same `name`: the last to arrive
// opens the gate. Keeps rank 0, when it hosts the store, from leaving while others still use it.
void store_barrier(c10d::Store& store, const std::string& name, int world_size) {
  const std::string gate = "dpscope/barrier/" + name + "/open";
  if (store.add("dpscope/barrier/" + name + "/arrived", 1) == world_size) {
    store.set(gate, to_bytes("1"));
  }
  store.wait({gate});
}

}  // namespace

LaunchEnv read_launch_env() {
  LaunchEnv env;
  const char* rank = std::getenv("RANK");
  if (!rank || !*rank) return env;
  env.launched = true;
  env.world_size = require_int("WORLD_SIZE", 1, 1 << 20);
  env.rank = require_int("RANK", 0, env.world_size - 1);
  env.local_world_size = require_int("LOCAL_WORLD_SIZE", 1, env.world_size);
  env.local_rank = require_int("LOCAL_RANK", 0, env.local_world_size - 1);
  env.master_addr = require("MASTER_ADDR");
  env.master_port = require_int("MASTER_PORT", 1, 65535);
  env.store_host = read_store_host();
  if (env.store_host == StoreHost::Agent) {
    env.restart_count =
        require_int("TORCHELASTIC_RESTART_COUNT", 0, INT_MAX, "TORCHELASTIC_USE_AGENT_STORE=True");
  }
  return env;
}

std::shared_ptr<c10d::Store> rendezvous(const LaunchEnv& env, std::chrono::milliseconds timeout) {
  if (env.world_size == 1) return std::make_shared<c10d::HashStore>();
  const std::shared_ptr<c10d::Store> store = open_store(env, timeout);
  store->set(arrival_key(env.rank), to_bytes(host_name()));
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::string absent;
    for (int r = 0; r < env.world_size; ++r) {
      if (!store->check({arrival_key(r)})) absent += (absent.empty() ? "" : ", ") + std::to_string(r);
    }
    if (absent.empty()) return store;
    if (std::chrono::steady_clock::now() >= deadline) {
      throw CommError("rank " + std::to_string(env.rank) + ": rendezvous at " +
                      describe_store(env) + " timed out; ranks " + absent +
                      " never arrived (were they started, with the same WORLD_SIZE?)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

ClockOffset measure_clock_offset(c10d::Store& store, const LaunchEnv& env, int rounds) {
  if (env.world_size == 1) return {};
  const std::string rank0_host = from_bytes(store.get(arrival_key(0)));
  auto same_host = [&](int r) { return from_bytes(store.get(arrival_key(r))) == rank0_host; };
  auto ping = [](int r, int i) {
    return "dpscope/clock/ping/" + std::to_string(r) + "/" + std::to_string(i);
  };
  auto pong = [](int r, int i) {
    return "dpscope/clock/pong/" + std::to_string(r) + "/" + std::to_string(i);
  };
  if (env.rank == 0) {
    for (int r = 1; r < env.world_size; ++r) {
      if (same_host(r)) continue;
      for (int i = 0; i < rounds; ++i) {
        store.wait({ping(r, i)});
        store.set(pong(r, i), to_bytes(std::to_string(trace::now_ns())));
      }
    }
    store_barrier(store, "clock", env.world_size);
    return {};
  }
  if (same_host(env.rank)) {
    store_barrier(store, "clock", env.world_size);
    return {};
  }
  ClockOffset best;
  int64_t best_round_trip = INT64_MAX;
  for (int i = 0; i < rounds; ++i) {
    const int64_t sent = trace::now_ns();
    store.set(ping(env.rank, i), to_bytes("1"));
    const int64_t remote = std::stoll(from_bytes(store.get(pong(env.rank, i))));
    const int64_t received = trace::now_ns();
    if (received - sent < best_round_trip) {
      best_round_trip = received - sent;
      best.offset_ns = remote - (sent + received) / 2;
      best.uncertainty_ns = (best_round_trip + 1) / 2;
    }
  }
  store_barrier(store, "clock", env.world_size);
  return best;
}

}  // namespace dpscope::comm
