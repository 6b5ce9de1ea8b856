// One rank's file of a sharded checkpoint, FSDP1's and FSDP2's alike: a c10 dict pickled with
// torch::pickle_save (readable with torch.load in Python), named shard-rank<R>-of-<W>.pt inside
// the checkpoint's directory. Each engine decides what the dict holds and wraps the problems
// these functions report in its own error (FsdpError, Fsdp2Error), naming the file.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>

namespace dpscope::replica {

// DIR/shard-rank<R>-of-<W>.pt.
std::string shard_file_path(const std::string& dir, int rank, int world_size);

// The world size the shard files in `dir` were written at; nullopt with `problem` saying why
// ("no shard-rank<R>-of-<W>.pt in DIR", or that the directory mixes world sizes).
std::optional<int> saved_world_size(const std::string& dir, std::string* problem);

// Writes `dict` to `path`, creating its directory. False when the file could not be written.
bool write_dict_file(const std::string& path, const c10::impl::GenericDict& dict);

// The dict in `path`; nullopt with `problem` saying what is wrong with the file ("cannot be
// read", "is not a pickled dict (...)", "holds no dict").
std::optional<c10::impl::GenericDict> read_dict_file(const std::string& path, std::string* problem);

// dict[key], or nullopt when the file has no such entry.
std::optional<c10::IValue> dict_entry(const c10::impl::GenericDict& dict, const std::string& key);

}  // namespace dpscope::replica
