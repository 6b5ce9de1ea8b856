// How many intra-op threads a rank computes on when the user did not say (--threads): shared by
// `dpscope train` and the tutorials' sessions. No LibTorch; the caller passes the number to
// at::set_num_threads.
#pragma once

namespace dpscope::train {

// Note [One thread a rank on an emulated link]
// Off an emulated link a rank takes its share of the host's cores (cores / ranks on the host,
// at least 1), as torchrun's OMP_NUM_THREADS advice does. On an emulated link it takes one: the
// run stands for a cluster, and its timing lessons read the cluster clock, which counts the CPU
// time of the thread that computes (Note [Cluster clock]); work that LibTorch handed to other
// threads of its pool would be left out. --threads N still sets N, and the cluster clock then
// says in one line that it counts one thread.
int default_intra_op_threads(int local_world_size, bool on_emulated_link);

// Whether the launcher asked for an emulated link (DPSCOPE_LINK_GBPS is set and not empty).
bool emulated_link_in_environment();

}  // namespace dpscope::train
