// DeviceGeneric: DDP and FSDP with the model on LibTorch's meta device, over a process group on
// meta that refuses every other device (tests/device_generic/meta_process_group.h). A path that
// hands a collective a tensor off the group's device fails with the call site named; values read
// back from a collective must come through comm::HostValues. Together they prove the GPU path's
// placement (Note [Collective tensors on the group's device]) on a machine without a GPU.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tests/worker_checks.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::expect_error_on_every_rank;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;

namespace {

const std::string kWorker = std::string(DPSCOPE_BIN_DIR) + "/device_generic_worker";

struct WorkerRun {
  int exit_code;
  std::string output;
  // Rank 0's collectives: "file.cpp host|device" -> the ops issued from there.
  std::map<std::string, std::set<std::string>> sites;
};

WorkerRun launch(int world, const std::string& args) {
  TempDir dir;
  const auto result = run_command("timeout 120 " + dpscope_bin() + " launch -n " +
                                  std::to_string(world) + " --trace-dir " + dir.file("traces") +
                                  " -- " + kWorker + " " + args);
  WorkerRun run{result.exit_code, result.output, {}};
  std::istringstream lines(result.output);
  std::string line;
  const std::string marker = "rank 0: site ";  // after the launcher's "[0] " prefix
  while (std::getline(lines, line)) {
    const size_t at = line.find(marker);
    if (at == std::string::npos) continue;
    std::istringstream words(line.substr(at + marker.size()));
    std::string op, where, placement;
    if (!(words >> op >> where >> placement)) continue;
    const std::string file = where.substr(0, where.find(':'));
    run.sites[file.substr(file.rfind('/') + 1) + " " + placement].insert(op);
  }
  return run;
}

// Runs `args` on 2 ranks, expects success, and that each of `expected` ("file.cpp host|device")
// issued at least one collective.
void expect_device_generic(const std::string& args, const std::vector<std::string>& expected) {
  const WorkerRun run = launch(2, args);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("FAIL"), std::string::npos) << run.output;
  for (const std::string& site : expected) {
    EXPECT_TRUE(run.sites.count(site)) << "no collective from " << site << "\n" << run.output;
  }
}

TEST(DeviceGeneric, DdpBucketsRebuildAndVerification) {
  expect_device_generic("ddp plain", {"model_verification.cpp host", "broadcast_coalesced.cpp device",
                                      "reductions.cpp device", "reducer_buckets.cpp host"});
}

TEST(DeviceGeneric, DdpUsedParameterMap) {
  expect_device_generic("ddp find_unused", {"reducer_unused.cpp host", "reductions.cpp device"});
}

TEST(DeviceGeneric, DdpStaticGraph) {
  expect_device_generic("ddp static", {"reducer_unused.cpp host", "reducer_buckets.cpp host",
                                       "reductions.cpp device"});
}

TEST(DeviceGeneric, DdpGradientAsBucketView) {
  expect_device_generic("ddp bucket_view", {"reductions.cpp device"});
}

TEST(DeviceGeneric, DdpJoin) {
  expect_device_generic("ddp join", {"join.cpp host", "reductions.cpp device"});
}

TEST(DeviceGeneric, DdpFp16CompressionHook) {
  expect_device_generic("ddp fp16", {"comm_hook.cpp device"});
}

TEST(DeviceGeneric, DdpPowerSgdHook) {
  expect_device_generic("ddp powersgd", {"powersgd.cpp device", "reducer_buckets.cpp host"});
}

TEST(DeviceGeneric, FsdpFullShard) {
  expect_device_generic("fsdp full", {"model_verification.cpp host", "broadcast_coalesced.cpp device",
                                      "fully_sharded_data_parallel.cpp device",
                                      "reduce_scatter_bucketer.cpp device", "fsdp_state.cpp device"});
}

TEST(DeviceGeneric, FsdpShardGradOp) {
  expect_device_generic("fsdp grad_op", {"fully_sharded_data_parallel.cpp device",
                                         "reduce_scatter_bucketer.cpp device"});
}

TEST(DeviceGeneric, FsdpNoShard) { expect_device_generic("fsdp no_shard", {"fsdp_backward.cpp device"}); }

TEST(DeviceGeneric, FsdpBf16MixedPrecision) {
  expect_device_generic("fsdp bf16", {"fully_sharded_data_parallel.cpp device"});
}

// The check itself: a CPU tensor handed to the meta group fails on every rank, naming the call.
TEST(DeviceGeneric, TensorOffTheGroupsDeviceIsRefusedWithItsCallSite) {
  const WorkerRun run = launch(2, "cpu_tensor");
  expect_error_on_every_rank({run.exit_code, run.output}, 2, "device_generic_worker.cpp:");
  EXPECT_NE(run.output.find("a tensor on cpu, but the meta group 'meta' runs on meta"),
            std::string::npos) << run.output;
}

}  // namespace
