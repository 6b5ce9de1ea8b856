// The ownership registry: the storages the engine owns and the memory category each is owned as,
// so that a memory sample can split a device's memory by category on any device — the CPU, a GPU
// or `meta` — by summing the bytes of the storages it knows, each once.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/intrusive_ptr.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "trace/schema.h"

namespace dpscope::memory {

using trace::MemoryCategory;

// Note [Ownership accounting]
// The tracking allocator (Note [Memory categories]) sees LibTorch's CPU allocator only; on a GPU
// the device's memory is the CUDA caching allocator's, which says how much it holds and not what
// for. Ownership accounting asks the owners instead: whenever the engine makes or learns of a
// tensor it keeps — a parameter, a gradient it keeps, a bucket, a flat parameter, a shard, a full
// parameter or gradient, an optimizer's state, the data — it claims the tensor's storage under a
// category (claim(), or count_as() where the tracking allocator is retagged too). The registry
// holds a weak reference to each claimed StorageImpl, keyed by it:
//   - a storage is counted once, however many tensors view it (a bucket and the gradients that
//     are its views; a data set and the batches sliced from it);
//   - a storage claimed again takes its latest category, as retag() does, so the two accountings
//     agree on a storage that changes role (a gradient made by backward, kept by DDP);
//   - a storage that dies drops out by itself (its weak reference expires; entries are pruned at
//     each sample and when the registry has doubled since the last prune), so nothing need be
//     released by hand; a storage whose memory is emptied and refilled in place (FSDP's full
//     parameters, Note [Full parameter storage]) is counted at its current size, 0 while empty.
// At a sample (MemorySampler, ownership mode) the owned bytes on the run's device are summed by
// category; what the device's allocator holds beyond them is `activations` (and, on the CPU,
// `other` keeps the tracking allocator's uncategorised bytes), so the categories add up to the
// allocator's total. A sample walks this registry, never the autograd graph.
//
// Which tensors of each strategy go to which category (the glossary; `own` where the tensor was
// made under that category's CategoryScope, `count_as` where the engine learns its role later):
//   parameters       the model's parameters and buffers as built (train's build_model, the
//                    tutorials'); DDP: them again after its broadcast, buffers too; FSDP1, FSDP2:
//                    the module's buffers (the parameters become views of full parameters);
//                    ZeRO-1: its flat parameter buffer, which the parameters view
//   gradients        DDP: each parameter's .grad once backward is finalized (with
//                    gradient_as_bucket_view it views a bucket and stays buckets); ZeRO-1: its
//                    flat gradient buffer, which the parameters' .grad view
//   buckets          DDP: each bucket's flat gradient buffer; FSDP1: the reduce-scatter
//                    bucketer's packed input
//   full_parameters  FSDP1: each unit's full flat parameter (its storage emptied and refilled, in
//                    the compute dtype) and the all-gather input cast or copied to the compute
//                    device; FSDP2: each parameter's all-gather output (the unsharded parameter
//                    views it), a group's all-gather buffer, the post-forward slices of
//                    reshard_after_forward N, a state dict's gathers
//   shards           FSDP1: each unit's local fp32 shard; FSDP2: each parameter's padded local
//                    dim-0 shard (on the host with CPU offload)
//   gradient_shards  FSDP1: the reduce-scatter's output and the shard's .grad (NO_SHARD: the
//                    reduced full gradient, which becomes it); FSDP2: the reduce-scatter's output
//                    and each sharded parameter's .grad; ZeRO-1: its reduce-scattered shard
//   full_gradients   FSDP1: a unit's flat gradient from its autograd node until it is reduced
//                    (and its cast to the reduce dtype); FSDP2: the unsharded parameters' .grad
//                    and the reduce-scatter's copy-in buffer
//   optimizer_state  every strategy: the optimizer's state tensors after each step (SGD's
//                    momentum, Adam's moments; ZeRO-1: its shard's)
//   data             the data set as loaded and each batch drawn from it, on the run's device
//                    once moved there
// Everything else of the device is activations: forward's and backward's tensors, temporaries,
// and on a GPU the caching allocator's rounding of every block.
// Thread-safe: one mutex around the map.
class OwnershipRegistry {
 public:
  // Installs the process's registry (once per process; later calls return the same one). The
  // engine claims storages only while one is installed, so a run that does not account by
  // ownership pays one atomic load per claim site. Lives until the process exits.
  static OwnershipRegistry& install();
  // The installed registry, or null before install().
  static OwnershipRegistry* installed();

  // Claims the storage under `tensor` (a view claims its whole storage) as `category`, replacing
  // the category it was claimed as before. Nothing for an undefined tensor or one without
  // storage. Throws std::invalid_argument for a category that is an allocator read-out
  // (AllocatorTotal, Cuda*), Activations (the remainder) or Other (never owned).
  void claim(const at::Tensor& tensor, MemoryCategory category);
  // Forgets the storage under `tensor`: its bytes go back to the remainder while it lives.
  void release(const at::Tensor& tensor);

  // The bytes of the live claimed storages on `device` (a device of a type without index matches
  // every index of it), by category, each storage once; drops the dead ones.
  std::array<int64_t, trace::kMemoryCategoryCount> owned_bytes(c10::Device device);
  // How many storages are claimed and alive (after dropping the dead ones).
  size_t size();
  // Forgets every claim (tests).
  void clear();

 private:
  OwnershipRegistry() = default;
  void prune_locked();

  struct Entry {
    c10::weak_intrusive_ptr<c10::StorageImpl> storage;
    MemoryCategory category;
  };
  std::mutex mutex_;
  std::unordered_map<const c10::StorageImpl*, Entry> entries_;
  size_t size_after_prune_ = 0;
};

// Claims `tensor`'s storage as `category` in the installed registry; nothing without one. For a
// tensor made under a CategoryScope of the same category, so the tracking allocator counts it so
// already.
void own(const at::Tensor& tensor, MemoryCategory category);

// Counts `tensor`'s storage as `category` in both accountings: retags it in the installed
// tracking allocator and claims it in the installed registry (each only where installed). For the
// points where the engine learns what a storage holds after it was made: a gradient backward
// made, an optimizer's state made inside step(), parameters after the broadcast.
void count_as(const at::Tensor& tensor, MemoryCategory category);

}  // namespace dpscope::memory
