// How a rank's process asks glibc to keep freed memory: in the heap, ready for the next
// allocation, instead of handing large blocks back to the kernel. Called once at the start of
// `dpscope train` and of every tutorial, before any tensor exists. No LibTorch.
#pragma once

namespace dpscope::memory {

// Note [Freed memory stays in the heap]
// FSDP frees each unit's full parameters after use and gathers them again the next step; DDP
// and every model allocate activations and gradients anew each step. glibc serves a block above
// its mmap threshold with a fresh mapping and unmaps it when freed, and trims the heap's free top
// back to the kernel: either way the next step's allocation page-faults every page in again,
// kernel time that counts as the thread's CPU time. How much depends on the machine's memory
// state (transparent huge pages, other processes), not on the model: measured on 2 ranks of FSDP
// (mlp hidden 1024, 3 units), a step's compute varied from 19 to 34 ms of CPU time, and the
// cluster clock (analysis/cluster_clock.h) from 43 to 54 ms between runs of one command. A GPU's
// caching allocator never returns memory within a run, and neither do these settings: the mmap
// threshold and the trim threshold go to 1 GiB, so blocks stay in the heap once touched (with
// them the same runs gave 19-26 ms and 40-42 ms). Memory the trace counts (the tracking
// allocator's categories) is unchanged; only the process's resident size keeps its high mark.
// A setting given in the environment (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) is left
// as given.
void keep_freed_memory_in_heap();

}  // namespace dpscope::memory
