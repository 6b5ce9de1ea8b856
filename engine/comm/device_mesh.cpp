// DeviceMesh (device_mesh.h): HSDP's shard and replicate groups made over the world group's store
// (Note [HSDP mesh]), and the one function that makes any FSDP subgroup on Gloo or NCCL.
#include "engine/comm/device_mesh.h"

#include "engine/comm/gloo_backend.h"
#include "engine/comm/nccl_backend.h"
#include "engine/comm/world.h"

namespace dpscope::comm {

void check_shard_group_size(int n, int world_size, std::string_view flag) {
  if (n >= 1 && n <= world_size && world_size % n == 0) return;
  std::string sizes;
  for (int d = 1; d <= world_size; ++d) {
    if (world_size % d == 0) sizes += (sizes.empty() ? "" : ", ") + std::to_string(d);
  }
  throw CommError(std::string(flag) + " " + std::to_string(n) + ": HSDP shards each parameter "
                   "over groups of N ranks and replicates it across world / N such groups, so N "
                   "must divide the world size " + std::to_string(world_size) + "; give one of " +
                   sizes + " (N = " + std::to_string(world_size) + " is --sharding full)");
}

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

std::shared_ptr<ProcessGroup> make_subgroup(const std::shared_ptr<ProcessGroup>& world,
                                                  int rank, int size, int group_id, std::string name) {
  ProcessGroupOptions options = world->options();
  options.group_id = static_cast<int16_t>(group_id);
  options.name = std::move(name);
  // The world group owns the store: an aliasing pointer keeps the world alive with the subgroup.
  const std::shared_ptr<c10d::Store> store(world, &world->store());
  switch (parse_backend(world->backend_name())) {
    case Backend::Gloo:
      return make_gloo_group(store, rank, size, options);
    case Backend::Nccl:
#ifdef DPSCOPE_HAVE_CUDA
      return make_nccl_group(store, rank, size, options, world->device().index());
#else
      break;
#endif
  }
  throw CommError("'" + options.name + "': this build cannot make a " + world->backend_name() +
                   " group of " + std::to_string(size) + " ranks");
}

DeviceMesh make_hsdp_mesh(const std::shared_ptr<ProcessGroup>& world, int shard_group_size) {
  if (!world) throw CommError("make_hsdp_mesh needs the world process group (got null)");
  const int n = shard_group_size;
  const int world_size = world->size();
  check_shard_group_size(n, world_size, "shard group size");
  const int replica = world->rank() / n;  // this rank's shard group, and its rank in its replicate group
  const int shard = world->rank() % n;    // its rank in its shard group, and its replicate group
  DeviceMesh mesh;
  // Shard group first, then replicate group, on every rank (See Note [HSDP mesh]).
  mesh.shard = make_subgroup(world, shard, n, kShardGroupIds + replica, shard_group_name(replica, n));
  mesh.replicate = make_subgroup(world, replica, world_size / n, kReplicateGroupIds + shard,
                                 replicate_group_name(shard, n, world_size));
  return mesh;
}

}  // namespace dpscope::comm
