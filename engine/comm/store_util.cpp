// Store helpers shared by engine/comm (see store_util.h).
#include "engine/comm/store_util.h"

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

namespace dpscope::comm {

std::vector<uint8_t> to_bytes(std::string_view text) {
  return std::vector<uint8_t>(text.begin(), text.end());
}

std::string from_bytes(const std::vector<uint8_t>& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0) return "unknown host";
  return name;
}

std::string group_instance_prefix(std::string_view backend, int16_t group_id) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, int16_t>, int> created;
  std::lock_guard<std::mutex> lock(mutex);
  const int instance = created[{std::string(backend), group_id}]++;
  return "dpscope/pg" + std::to_string(group_id) + "/" + std::string(backend) +
         std::to_string(instance) + "/";
}

bool leave_together(c10d::Store& store, const std::string& prefix, int rank, int size,
                    std::chrono::milliseconds timeout) {
  if (size == 1) return true;
  auto key = [&](int r) { return prefix + "left/" + std::to_string(r); };
  try {
    store.set(key(rank), std::vector<uint8_t>{1});
    std::vector<std::string> keys;
    for (int r = 0; r < size; ++r) keys.push_back(key(r));
    store.wait(keys, std::min<std::chrono::milliseconds>(timeout, std::chrono::seconds(10)));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace dpscope::comm
