// keep_freed_memory_in_heap (heap_policy.h): glibc's mmap and trim thresholds, once a process.
// See Note [Freed memory stays in the heap].
#include "engine/memory/heap_policy.h"

#include <malloc.h>

#include <cstdlib>

namespace dpscope::memory {

void keep_freed_memory_in_heap() {
  constexpr int kOneGiB = 1 << 30;
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) ::mallopt(M_MMAP_THRESHOLD, kOneGiB);
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) ::mallopt(M_TRIM_THRESHOLD, kOneGiB);
}

}  // namespace dpscope::memory
