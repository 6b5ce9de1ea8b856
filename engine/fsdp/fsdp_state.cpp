// FSDP's state across the shards: the full state dict gathered on one rank, sharded checkpoints
// (one file per rank, loadable at another world size by resharding), and clip_grad_norm over
// every rank's shard.
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <optional>

#include "engine/fsdp/fully_sharded_data_parallel.h"
#include "engine/replica/checkpoint_file.h"
#include "engine/replica/sharded_grad_norm.h"

namespace dpscope::fsdp {

namespace {

c10::impl::GenericDict read_dict(const std::string& path) {
  std::string problem;
  std::optional<c10::impl::GenericDict> dict = replica::read_dict_file(path, &problem);
  if (!dict) {
    throw FsdpError("sharded checkpoint file " + path + " " + problem +
                    "; check the path, or write it with save_sharded_state");
  }
  return *dict;
}

c10::IValue entry(const c10::impl::GenericDict& dict, const std::string& key, const std::string& path) {
  std::optional<c10::IValue> value = replica::dict_entry(dict, key);
  if (!value) {
    throw FsdpError("sharded checkpoint file " + path + " has no '" + key +
                    "'; it was not written by save_sharded_state");
  }
  return *value;
}

// The world size the files in `dir` were written at (every file must say the same).
int saved_world_size(const std::string& dir) {
  std::string problem;
  const std::optional<int> world = replica::saved_world_size(dir, &problem);
  if (!world) {
    throw FsdpError("sharded checkpoint directory " + dir + " " + problem +
                    "; write one with save_sharded_state");
  }
  return *world;
}

}  // namespace

std::vector<std::pair<std::string, at::Tensor>> FullyShardedDataParallel::full_state_dict(
    int root, StateCopies copies) {
  c10::NoGradGuard no_grad;
  const ScopedWork work(*this, WorkScope::OutsideIterations);  // See Note [Work outside iterations]
  const auto copy = [copies](const at::Tensor& tensor) {
    return copies == StateCopies::OnHost ? tensor.cpu().clone() : tensor.clone();
  };
  std::unordered_map<std::string, at::Tensor> full_params;
  for (const auto& unit : units_) {
    const FlatParameter& flat = *unit->flat;
    if (flat.empty()) continue;
    at::Tensor full = flat.shard().detach();
    if (flat.config().sharded) {
      // Gathered in float32 from the shards themselves, not from the compute copy.
      full = at::empty({flat.padded_numel()}, full.options());
      group_->all_gather(full, flat.shard().detach(), tag(*unit, 0))->wait();
    }
    if (world_rank() != root) continue;
    for (size_t k = 0; k < flat.params().size(); ++k) {
      full_params[flat.param_names()[k]] = copy(
          full.narrow(0, flat.offsets()[k], flat.params()[k].numel())
              .view(flat.params()[k].sizes()));
    }
  }
  std::vector<std::pair<std::string, at::Tensor>> state;
  if (world_rank() != root) return state;
  for (const auto& item : module_->named_parameters()) {
    const auto it = full_params.find(item.key());
    if (it != full_params.end()) state.emplace_back(item.key(), it->second);
  }
  for (const auto& item : module_->named_buffers()) {
    at::Tensor buffer = item.value().detach();
    if (buffer.is_floating_point()) buffer = buffer.to(c10::ScalarType::Float);
    state.emplace_back(item.key(), copy(buffer.contiguous()));
  }
  return state;
}

void FullyShardedDataParallel::save_sharded_state(const std::string& dir) {
  refuse_sharded_files_under_hybrid("save_sharded_state");
  const std::string path = replica::shard_file_path(dir, group_->rank(), group_->size());
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("world_size", static_cast<int64_t>(group_->size()));
  dict.insert("rank", static_cast<int64_t>(group_->rank()));
  dict.insert("sharded", flat_param(0).config().sharded);
  c10::List<std::string> names;
  c10::List<int64_t> numels;
  for (size_t i = 0; i < units_.size(); ++i) {
    names.push_back(units_[i]->name);
    numels.push_back(units_[i]->flat->numel());
    dict.insert("shard." + std::to_string(i), units_[i]->flat->shard().detach().cpu().clone());
  }
  dict.insert("unit_names", names);
  dict.insert("unit_numels", numels);
  if (!replica::write_dict_file(path, dict)) {
    throw FsdpError("cannot write sharded checkpoint file " + path +
                    " (rank " + std::to_string(group_->rank()) + "); check that " + dir +
                    " is writable and has space");
  }
}

void FullyShardedDataParallel::load_sharded_state(const std::string& dir) {
  refuse_sharded_files_under_hybrid("load_sharded_state");
  c10::NoGradGuard no_grad;
  const int saved_world = saved_world_size(dir);
  std::vector<c10::impl::GenericDict> files;
  std::vector<std::string> paths;
  for (int rank = 0; rank < saved_world; ++rank) {
    paths.push_back(replica::shard_file_path(dir, rank, saved_world));
    files.push_back(read_dict(paths.back()));
  }
  const bool saved_sharded = entry(files[0], "sharded", paths[0]).toBool();
  const auto names = entry(files[0], "unit_names", paths[0]).toList();
  const auto numels = entry(files[0], "unit_numels", paths[0]).toList();
  if (names.size() != units_.size()) {
    throw FsdpError("sharded checkpoint " + dir + " has " + std::to_string(names.size()) +
                    " units, this model " + std::to_string(units_.size()) +
                    "; load it with the same model and wrap policy");
  }
  for (size_t i = 0; i < units_.size(); ++i) {
    FlatParameter& flat = *units_[i]->flat;
    const std::string name = names.get(i).toStringRef();
    if (name != units_[i]->name || numels.get(i).toInt() != flat.numel()) {
      throw FsdpError("sharded checkpoint " + dir + ": unit " + std::to_string(i) + " is '" + name +
                      "' of " + std::to_string(numels.get(i).toInt()) + " elements, here '" +
                      units_[i]->name + "' of " + std::to_string(flat.numel()) +
                      "; load it with the same model and wrap policy");
    }
    const std::string key = "shard." + std::to_string(i);
    // The whole flat parameter from the saved shards, then this rank's part of it.
    at::Tensor whole;
    if (saved_sharded) {
      std::vector<at::Tensor> shards;
      for (int rank = 0; rank < saved_world; ++rank) {
        shards.push_back(entry(files[static_cast<size_t>(rank)], key, paths[static_cast<size_t>(rank)]).toTensor());
      }
      whole = at::cat(shards);
    } else {
      whole = entry(files[0], key, paths[0]).toTensor();
    }
    if (whole.numel() < flat.numel()) {
      throw FsdpError("sharded checkpoint " + dir + ": unit '" + name + "' holds " +
                      std::to_string(whole.numel()) + " elements, fewer than its " +
                      std::to_string(flat.numel()) + "; the files are damaged");
    }
    at::Tensor padded = at::zeros({flat.padded_numel()}, whole.options());
    padded.narrow(0, 0, flat.numel()).copy_(whole.narrow(0, 0, flat.numel()));
    flat.shard().detach().copy_(padded.narrow(0, flat.shard_begin(), flat.shard_numel()));
  }
}

void FullyShardedDataParallel::refuse_sharded_files_under_hybrid(const char* what) const {
  if (!replicate_) return;
  throw FsdpError(std::string(what) + " under HYBRID_SHARD: each replica's shard group would "
                  "share the same shard files, which dpscope does not write yet; use "
                  "full_state_dict, or FULL_SHARD for sharded checkpoints");
}

at::Tensor FullyShardedDataParallel::clip_grad_norm(double max_norm) {
  // As PyTorch's FSDP.clip_grad_norm_, on the gradients' device: the host never waits for a value.
  return replica::clip_sharded_grad_norm(parameters(), max_norm, *group_,
                                         sharding_ == ShardingStrategy::NoShard
                                             ? replica::GradientSquares::AllOnThisRank
                                             : replica::GradientSquares::SpreadOverRanks,
                                         iteration_);
}

}  // namespace dpscope::fsdp
