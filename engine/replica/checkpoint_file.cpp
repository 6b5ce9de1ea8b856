// Sharded checkpoint files (checkpoint_file.h): their names, the world size a directory was
// written at, and a pickled dict written and read back, with what went wrong as plain words for
// the engine's own error.
#include "engine/replica/checkpoint_file.h"

#include <torch/serialize.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <vector>

namespace dpscope::replica {

std::string shard_file_path(const std::string& dir, int rank, int world_size) {
  return (std::filesystem::path(dir) /
          ("shard-rank" + std::to_string(rank) + "-of-" + std::to_string(world_size) + ".pt"))
      .string();
}

std::optional<int> saved_world_size(const std::string& dir, std::string* problem) {
  const std::regex pattern(R"(shard-rank(\d+)-of-(\d+)\.pt)");
  int world = 0;
  std::error_code error;
  for (const auto& file : std::filesystem::directory_iterator(dir, error)) {
    std::smatch match;
    const std::string name = file.path().filename().string();
    if (!std::regex_match(name, match, pattern)) continue;
    const int files_world = std::stoi(match[2].str());
    if (world != 0 && world != files_world) {
      *problem = "mixes files of world sizes " + std::to_string(world) + " and " +
                 std::to_string(files_world) + "; keep one run's files per directory";
      return std::nullopt;
    }
    world = files_world;
  }
  if (error || world == 0) {
    *problem = "holds no sharded checkpoint (shard-rank<R>-of-<W>.pt)";
    return std::nullopt;
  }
  return world;
}

bool write_dict_file(const std::string& path, const c10::impl::GenericDict& dict) {
  std::error_code error;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), error);
  const std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return static_cast<bool>(out);
}

std::optional<c10::impl::GenericDict> read_dict_file(const std::string& path, std::string* problem) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    *problem = "cannot be read";
    return std::nullopt;
  }
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  c10::IValue value;
  try {
    value = torch::pickle_load(bytes);
  } catch (const std::exception& error) {
    *problem = std::string("is not a pickled dict (") + error.what() + ")";
    return std::nullopt;
  }
  if (!value.isGenericDict()) {
    *problem = "holds no dict";
    return std::nullopt;
  }
  return value.toGenericDict();
}

std::optional<c10::IValue> dict_entry(const c10::impl::GenericDict& dict, const std::string& key) {
  const auto it = dict.find(key);
  if (it == dict.end()) return std::nullopt;
  return it->value();
}

}  // namespace dpscope::replica
