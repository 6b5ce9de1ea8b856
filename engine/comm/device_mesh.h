// DeviceMesh: the ranks FSDP (FSDP1's flat parameters and FSDP2's fully_shard) shards a parameter
// over and, for HSDP (hybrid sharding), the ranks it is replicated across — PyTorch's 1-D
// DeviceMesh or 2-D (replicate, shard) one, as two process groups — and make_hsdp_mesh, which
// splits a world into them. In comm/, below both FSDPs, as PyTorch's torch.distributed.device_mesh.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "engine/comm/process_group.h"

namespace dpscope::comm {

// Note [HSDP mesh]
// HSDP arranges the W ranks of a world as R x N, R = W / N replicas of N ranks each, as
// PyTorch's init_device_mesh(("replicate", "shard"), (R, N)) does: world rank = r * N + s.
//  - shard group #r: ranks r*N .. r*N + N-1, contiguous (a host's ranks when the launcher puts N
//    ranks on a host); its rank is s. Parameters are sharded on dim 0 across it exactly as FSDP
//    shards them across the world (Note [Dim-0 chunks] with N ranks), and every all-gather runs
//    in it.
//  - replicate group #s: ranks s, N + s, 2N + s, ... (one of each shard group, the same shard);
//    its rank is r. Its ranks hold equal shards and, after each reduction, equal gradients.
// A group's gradients are reduced in two steps, on every rank in the same order (See Note
// [FSDP2 collective order]): a reduce-scatter in the shard group averaging over its N ranks,
// then, once it is done, an all-reduce of the result in the replicate group averaging over its
// R ranks: the average over all W ranks, as DDP's (PyTorch's foreach_reduce with its
// all_reduce_group). Every rank makes its shard group first, then its replicate group, so the
// groups' rendezvous never wait on each other. Group ids: shard #r is kShardGroupIds + r,
// replicate #s kReplicateGroupIds + s, above the post-forward groups' (fully_shard.cpp), so the
// trace tells each group apart and the analysis matches a group's collectives among its ranks.
// N = W is FSDP (replicate groups of one rank, which all-reduce nothing); N = 1 is DDP-like:
// nothing sharded, every gradient all-reduced across the world.
inline constexpr int kShardGroupIds = 20000;
inline constexpr int kReplicateGroupIds = 24000;

// The groups one rank's fully_shard works with. Copyable; the groups are shared.
struct DeviceMesh {
  std::shared_ptr<ProcessGroup> shard;      // parameters sharded on dim 0 across it
  std::shared_ptr<ProcessGroup> replicate;  // HSDP only: gradients all-reduced across it; else null

  // FSDP's 1-D mesh: `group` is the shard group.
  static DeviceMesh sharded_over(std::shared_ptr<ProcessGroup> group) { return {std::move(group), nullptr}; }
  bool hybrid() const { return replicate != nullptr; }
  // Whether gradients need the all-reduce across the replicas: a replicate group of one rank
  // (N = W) has nothing to add, and the engine issues no collective in a group of one.
  bool replicated() const { return replicate && replicate->size() > 1; }
  int shard_size() const { return shard->size(); }
  int replicate_size() const { return replicate ? replicate->size() : 1; }
  // W and this rank's place in the world (See Note [HSDP mesh]).
  int world_size() const { return shard_size() * replicate_size(); }
  int world_rank() const { return (replicate ? replicate->rank() : 0) * shard_size() + shard->rank(); }
  bool operator==(const DeviceMesh& other) const {
    return shard == other.shard && replicate == other.replicate;
  }
};

// HSDP's shard group size N against a world of `world_size` ranks: 1 <= N <= world and N
// dividing it (See Note [HSDP mesh]). Throws CommError naming `flag`, N, the world size and the
// sizes that would do.
void check_shard_group_size(int n, int world_size, std::string_view flag);

// "shard #0: ranks 0-1" and "replicate #1: ranks 1,3": the groups' names (their trace lanes say
// them) in a world of `world_size` ranks split into shard groups of `shard_size`.
std::string shard_group_name(int index, int shard_size);
std::string replicate_group_name(int index, int shard_size, int world_size);

// A group of `size` ranks in which this rank is `rank`, over `world`'s store (kept alive with the
// world group: an aliasing pointer), backend, device, link and recorder, with id `group_id` and
// `name`. Collective over the group's ranks. Throws CommError when this build has no such backend.
std::shared_ptr<ProcessGroup> make_subgroup(const std::shared_ptr<ProcessGroup>& world,
                                                  int rank, int size, int group_id, std::string name);

// Splits `world` into this rank's shard group of `shard_group_size` ranks and its replicate group
// (See Note [HSDP mesh]), both over the world's store (kept alive with it), backend, link and
// recorder. Collective over the world: every rank calls it alike. Throws CommError when the
// size does not divide the world (check_shard_group_size) or the backend cannot make groups.
DeviceMesh make_hsdp_mesh(const std::shared_ptr<ProcessGroup>& world, int shard_group_size);

}  // namespace dpscope::comm
