// FSDP2's sharded checkpoint: each rank writes its rows of every parameter (what DTensor Shard(0)
// holds) and the buffers, with no communication; loading puts each parameter's rows back together
// from every file and takes this rank's, so a checkpoint loads at another world size too.
#include <ATen/ops/cat.h>
#include <ATen/ops/empty.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <map>
#include <optional>

#include "engine/fsdp2/fully_shard.h"
#include "engine/replica/checkpoint_file.h"

namespace dpscope::fsdp2 {

namespace {

// What every FSDP2 file says it is; FSDP1's files carry flat-parameter shards instead.
constexpr const char* kCheckpointFormat = "fsdp2 dim-0 rows";

c10::IValue checkpoint_entry(const c10::impl::GenericDict& dict, const std::string& key,
                             const std::string& path) {
  std::optional<c10::IValue> value = replica::dict_entry(dict, key);
  if (!value) {
    throw Fsdp2Error("sharded checkpoint file " + path + " has no '" + key +
                     "'; it was not written by FSDP2's save_sharded_state");
  }
  return *value;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

struct SavedFile {
  std::string path;
  c10::impl::GenericDict dict;
};

std::vector<SavedFile> read_checkpoint(const std::string& dir) {
  std::string problem;
  const std::optional<int> world = replica::saved_world_size(dir, &problem);
  if (!world) {
    throw Fsdp2Error("sharded checkpoint directory " + dir + " " + problem +
                     "; write one with save_sharded_state");
  }
  std::vector<SavedFile> files;
  for (int rank = 0; rank < *world; ++rank) {
    const std::string path = replica::shard_file_path(dir, rank, *world);
    std::optional<c10::impl::GenericDict> dict = replica::read_dict_file(path, &problem);
    if (!dict) {
      throw Fsdp2Error("sharded checkpoint file " + path + " " + problem +
                       "; every rank's file of the run must be there");
    }
    const std::optional<c10::IValue> format = replica::dict_entry(*dict, "format");
    if (!format || !format->isString() || format->toStringRef() != kCheckpointFormat) {
      throw Fsdp2Error("sharded checkpoint file " + path +
                       " was not written by FSDP2 (FSDP1's files hold flat-parameter shards); "
                       "load it with the strategy that wrote it");
    }
    files.push_back({path, *dict});
  }
  return files;
}

// The whole parameter `name` of `full_shape` from the rows each file holds: sorted by first row,
// a replica's copy of rows already read skipped, and the rows checked to cover the parameter.
at::Tensor whole_parameter(const std::vector<SavedFile>& files, const std::string& name,
                           const std::vector<int64_t>& full_shape) {
  std::map<int64_t, at::Tensor> by_first_row;
  for (const SavedFile& file : files) {
    const std::vector<int64_t> shape = checkpoint_entry(file.dict, "shape." + name, file.path).toIntVector();
    if (shape != full_shape) {
      throw Fsdp2Error("sharded checkpoint file " + file.path + ": parameter '" + name + "' has shape " +
                       shape_text(shape) + ", this model's " + shape_text(full_shape) +
                       "; load it into the model that wrote it");
    }
    const at::Tensor rows = checkpoint_entry(file.dict, "rows." + name, file.path).toTensor();
    const int64_t first = checkpoint_entry(file.dict, "first_row." + name, file.path).toInt();
    if (rows.size(0) > 0) by_first_row.emplace(first, rows);
  }
  std::vector<at::Tensor> pieces;
  int64_t next_row = 0;
  for (const auto& [first, rows] : by_first_row) {
    if (first != next_row) break;
    pieces.push_back(rows);
    next_row += rows.size(0);
  }
  const int64_t rows = full_shape.empty() ? 0 : full_shape[0];
  if (next_row != rows) {
    throw Fsdp2Error("sharded checkpoint of " + files[0].path + " and its siblings: the files hold rows [0, " +
                     std::to_string(next_row) + ") of parameter '" + name + "', which has " +
                     std::to_string(rows) + "; the files are damaged or of several runs");
  }
  return pieces.empty() ? at::empty(full_shape) : at::cat(pieces);
}

}  // namespace

void FsdpState::save_sharded_state(const std::string& dir) {
  // Named by world rank: under HSDP the replicas hold the same rows, each writes its own file.
  const std::string path = replica::shard_file_path(dir, mesh_.world_rank(), mesh_.world_size());
  c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
  dict.insert("format", std::string(kCheckpointFormat));
  dict.insert("world_size", static_cast<int64_t>(mesh_.world_size()));
  dict.insert("rank", static_cast<int64_t>(mesh_.world_rank()));
  c10::List<std::string> names;
  for (const ShardedTensor& tensor : sharded_state_dict()) {
    names.push_back(tensor.name);
    dict.insert("rows." + tensor.name, tensor.local.detach().cpu().clone());
    dict.insert("first_row." + tensor.name, tensor.first_row);
    dict.insert("shape." + tensor.name, c10::List<int64_t>(tensor.full_shape));
  }
  dict.insert("params", names);
  c10::List<std::string> buffer_names;
  for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
    buffer_names.push_back(item.key());
    dict.insert("buffer." + item.key(), item.value().detach().cpu().clone());
  }
  dict.insert("buffers", buffer_names);
  if (!replica::write_dict_file(path, dict)) {
    throw Fsdp2Error("cannot write sharded checkpoint file " + path + " (rank " +
                     std::to_string(mesh_.world_rank()) + "); check that " + dir +
                     " is writable and has space");
  }
}

void FsdpState::load_sharded_state(const std::string& dir) {
  c10::NoGradGuard no_grad;
  const std::vector<SavedFile> files = read_checkpoint(dir);
  const std::vector<ShardedTensor> mine = sharded_state_dict();
  const size_t saved = checkpoint_entry(files[0].dict, "params", files[0].path).toList().size();
  if (saved != mine.size()) {
    throw Fsdp2Error("sharded checkpoint " + dir + " holds " + std::to_string(saved) +
                     " parameters, this model " + std::to_string(mine.size()) +
                     "; load it into the model that wrote it");
  }
  for (const ShardedTensor& tensor : mine) {
    const at::Tensor whole = whole_parameter(files, tensor.name, tensor.full_shape);
    tensor.local.detach().copy_(whole.narrow(0, tensor.first_row, tensor.local.size(0)));
  }
  for (const auto& item : module_->named_buffers(/*recurse=*/true)) {
    item.value().detach().copy_(
        checkpoint_entry(files[0].dict, "buffer." + item.key(), files[0].path).toTensor());
  }
}

}  // namespace dpscope::fsdp2
