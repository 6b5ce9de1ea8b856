// init_world: environment, rendezvous, clock offset, the emulated link if any, and the default
// group (see world.h).
#include "engine/comm/world.h"

#include <stdexcept>

#include "core/link_model.h"
#include "engine/comm/gloo_backend.h"
#include "engine/comm/nccl_backend.h"
#include "trace/vocabulary.h"

#ifdef DPSCOPE_HAVE_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace dpscope::comm {

Backend parse_backend(std::string_view text) {
  if (const std::optional<Backend> backend = trace::parse_mode(trace::kBackends, text)) return *backend;
  throw CommError("unknown backend '" + std::string(text) + "': choose gloo or nccl");
}

Backend default_backend() {
#ifdef DPSCOPE_HAVE_CUDA
  return c10::cuda::device_count() > 0 ? Backend::Nccl : Backend::Gloo;
#else
  return Backend::Gloo;
#endif
}

namespace {

// The caller's link, else the environment's (Note [Link emulation]), checked.
std::optional<core::LinkSpec> link_of(const WorldOptions& options, int rank) {
  try {
    if (options.link) {
      return core::check_link(options.link->gbps, options.link->latency_us,
                                  "WorldOptions::link.gbps", "WorldOptions::link.latency_us");
    }
    return core::link_from_env();
  } catch (const std::invalid_argument& error) {
    throw CommError("rank " + std::to_string(rank) + ": " + error.what());
  }
}

}  // namespace

World init_world(const WorldOptions& options) {
  World world;
  world.env = read_launch_env();
  const std::optional<core::LinkSpec> link = link_of(options, world.env.rank);
  world.store = rendezvous(world.env, options.timeout);
  world.clock = measure_clock_offset(*world.store, world.env);
  if (options.recorder) {
    options.recorder->set_clock_offset(world.clock.offset_ns, world.clock.uncertainty_ns);
    options.recorder->set_meta(trace::meta_key::kBackend, to_string(options.backend));
    options.recorder->set_meta(trace::meta_key::kWorldSize, std::to_string(world.env.world_size));
    if (link) record_link(*options.recorder, *link);
  }
  if (link) world.link = std::make_shared<EmulatedLink>(*link);
  ProcessGroupOptions group_options;
  group_options.timeout = options.collective_timeout.value_or(options.timeout);
  group_options.recorder = options.recorder;
  group_options.check_collectives = check_collectives_from_env();
  group_options.link = world.link;
  switch (options.backend) {
    case Backend::Gloo:
      world.group = make_gloo_group(world.store, world.env.rank, world.env.world_size,
                                    group_options);
      break;
    case Backend::Nccl:
#ifdef DPSCOPE_HAVE_CUDA
      world.group = make_nccl_group(world.store, world.env.rank, world.env.world_size,
                                    group_options, world.env.local_rank);
      break;
#else
      throw CommError("rank " + std::to_string(world.env.rank) +
                      ": this build has no NCCL backend (LibTorch without CUDA); use "
                      "--backend gloo, or build against a CUDA LibTorch");
#endif
  }
  return world;
}

}  // namespace dpscope::comm
