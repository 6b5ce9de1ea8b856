// The world: what every rank program sets up first, as torch.distributed.init_process_group
// does. Reads torchrun's environment, meets the other ranks, hands the clock offset to the
// recorder, and creates the default process group on the chosen backend.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "engine/comm/link_emulation.h"
#include "engine/comm/process_group.h"
#include "engine/comm/rendezvous.h"
#include "trace/vocabulary.h"

namespace dpscope::comm {

// The communication library, as the trace's vocabulary names it (spelled by trace::to_string).
using trace::Backend;
// "gloo" | "nccl"; throws CommError naming the choices otherwise.
Backend parse_backend(std::string_view text);
// nccl when this build has CUDA and CUDA devices are visible, else gloo (docs/design.md).
Backend default_backend();

struct WorldOptions {
  Backend backend = Backend::Gloo;
  // How long the rendezvous waits for every rank.
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // How long a collective may take before it fails (ProcessGroupOptions::timeout); nullopt:
  // `timeout`. `dpscope train --timeout S` sets it, so a hang lesson stops in seconds while the
  // ranks still have the default to start up.
  std::optional<std::chrono::milliseconds> collective_timeout;
  trace::Recorder* recorder = nullptr;  // gets the clock offset and the group's collectives
  // The link to emulate (Note [Link emulation]); nullopt: the one DPSCOPE_LINK_GBPS and
  // DPSCOPE_LINK_LATENCY_US describe (set by `dpscope launch --link-gbps G --link-latency-us L`),
  // and none when they are unset. Check a user's values with core::check_link first.
  std::optional<core::LinkSpec> link;
};

struct World {
  LaunchEnv env;
  std::shared_ptr<c10d::Store> store;
  std::shared_ptr<ProcessGroup> group;  // every rank of the run
  ClockOffset clock;  // this rank's offset to rank 0 (also given to the recorder)
  // The emulated link the group's collectives complete on; null: the real one. Give it to
  // further groups (ProcessGroupOptions::link) so that they queue on the same link.
  std::shared_ptr<EmulatedLink> link;
};

// Sets up this rank's world. Throws CommError with the fix when the environment is incomplete
// or holds a bad link (naming the variable and the accepted range), a rank never arrives, or the
// backend is not in this build (NCCL without CUDA). With a recorder, writes the meta keys
// backend, world_size and, on an emulated link, link_gbps and link_latency_us.
World init_world(const WorldOptions& options);

}  // namespace dpscope::comm
