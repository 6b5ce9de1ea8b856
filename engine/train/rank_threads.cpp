// The default intra-op thread count of a rank (rank_threads.h).
#include "engine/train/rank_threads.h"

#include <algorithm>
#include <cstdlib>
#include <thread>

#include "core/link_model.h"

namespace dpscope::train {

int default_intra_op_threads(int local_world_size, bool on_emulated_link) {
  if (on_emulated_link) return 1;  // See Note [One thread a rank on an emulated link]
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, local_world_size));
}

bool emulated_link_in_environment() {
  const char* gbps = std::getenv(core::kLinkGbpsEnv);
  return gbps && *gbps;
}

}  // namespace dpscope::train
