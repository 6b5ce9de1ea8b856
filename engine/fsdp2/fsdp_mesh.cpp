// FsdpMesh (fsdp_mesh.h): HSDP's shard and replicate groups made over the world group's store
// (Note [HSDP mesh]), and the one function that makes any FSDP2 subgroup on Gloo or NCCL.
#include "engine/fsdp2/fsdp_mesh.h"

#include "engine/comm/gloo_backend.h"
#include "engine/comm/nccl_backend.h"
#include "engine/comm/world.h"
#include "engine/fsdp2/fsdp2_options.h"

namespace dpscope::fsdp2 {

std::string shard_group_name(int index, int shard_size) {
  const int first = index * shard_size;
  return "shard #" + std::to_string(index) + ": ranks " + std::to_string(first) +
         (shard_size > 1 ? "-" + std::to_string(first + shard_size - 1) : "");
}

std::string replicate_group_name(int index, int shard_size, int world_size) {
  std::string ranks;
  for (int rank = index; rank < world_size; rank += shard_size) {
    ranks += (ranks.empty() ? "" : ",") + std::to_string(rank);
  }
  return "replicate #" + std::to_string(index) + ": ranks " + ranks;
}

std::shared_ptr<comm::ProcessGroup> make_subgroup(const std::shared_ptr<comm::ProcessGroup>& world,
                                                  int rank, int size, int group_id, std::string name) {
  comm::ProcessGroupOptions options = world->options();
  options.group_id = static_cast<int16_t>(group_id);
  options.name = std::move(name);
  // The world group owns the store: an aliasing pointer keeps the world alive with the subgroup.
  const std::shared_ptr<c10d::Store> store(world, &world->store());
  switch (comm::parse_backend(world->backend_name())) {
    case comm::Backend::Gloo:
      return comm::make_gloo_group(store, rank, size, options);
    case comm::Backend::Nccl:
#ifdef DPSCOPE_HAVE_CUDA
      return comm::make_nccl_group(store, rank, size, options, world->device().index());
#else
      break;
#endif
  }
  throw Fsdp2Error("'" + options.name + "': this build cannot make a " + world->backend_name() +
                   " group of " + std::to_string(size) + " ranks");
}

FsdpMesh make_hsdp_mesh(const std::shared_ptr<comm::ProcessGroup>& world, int shard_group_size) {
  if (!world) throw Fsdp2Error("make_hsdp_mesh needs the world process group (got null)");
  const int n = shard_group_size;
  const int world_size = world->size();
  check_shard_group_size(n, world_size, "shard group size");
  const int replica = world->rank() / n;  // this rank's shard group, and its rank in its replicate group
  const int shard = world->rank() % n;    // its rank in its shard group, and its replicate group
  FsdpMesh mesh;
  // Shard group first, then replicate group, on every rank (See Note [HSDP mesh]).
  mesh.shard = make_subgroup(world, shard, n, kShardGroupIds + replica, shard_group_name(replica, n));
  mesh.replicate = make_subgroup(world, replica, world_size / n, kReplicateGroupIds + shard,
                                 replicate_group_name(shard, n, world_size));
  return mesh;
}

}  // namespace dpscope::fsdp2
