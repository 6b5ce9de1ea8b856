// Join: training with uneven inputs, as PyTorch's torch.distributed.algorithms.Join with DDP's
// join hook. A rank that runs out of data joins and shadows the collectives of the ranks still
// training — contributing zero gradients — until every rank has joined; then all ranks take the
// final model from the last rank to join.
#pragma once

#include "engine/ddp/distributed_data_parallel.h"

namespace dpscope::ddp {

// Note [Join protocol]
// Every collective of a training rank's iteration must be matched on a joined rank:
//   training rank (forward)              joined rank (one loop round)
//   all-reduce 1 ("not joined")          all-reduce 0; sum 0 => everyone joined, leave the loop
//   bucket rebuild broadcast (once)      the same rebuild
//   buffer sync: all-reduce max(rank),   the same with -1, then the same broadcast
//     broadcast from that rank
//   all-reduce requires-sync (1 or 0)    all-reduce 0; sum 0 => no backward to shadow
//   backward: bucket all-reduces,        the same all-reduces of zeros (and the used map)
//     used-parameter map
// After the loop every rank agrees on the last joiner (all-reduce max) and broadcasts the
// parameters and buffers from it. Gradients are divided by the full world size throughout
// (PyTorch's divide_by_initial_world_size=True).

// Usage, every rank:
//   Join join(ddp);
//   for (batch : my_batches) { forward; backward; step; }
//   join.join();   // shadows the others until all are done
// Thread-safety: the training loop's thread only.
class Join {
 public:
  explicit Join(DistributedDataParallel& ddp);
  // Detaches from the DDP module (a Join that never joined leaves it as it found it).
  ~Join();
  Join(const Join&) = delete;
  Join& operator=(const Join&) = delete;

  // This rank is out of inputs: shadow the other ranks' iterations until every rank has joined,
  // then synchronise the final model. Call once.
  void join();
  // Iterations this rank shadowed in join().
  int shadowed_iterations() const { return shadowed_; }

 private:
  friend class DistributedDataParallel;
  // Called from DDP's forward on a rank still training.
  void notify_not_joined();
  int find_common_rank(int rank, bool candidate);
  void share_requires_sync(bool requires_sync);
  int64_t all_reduce_count(int64_t value);

  DistributedDataParallel& ddp_;
  bool joined_ = false;
  int shadowed_ = 0;
};

}  // namespace dpscope::ddp
