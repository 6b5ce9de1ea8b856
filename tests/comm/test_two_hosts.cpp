// Two hosts on one machine: network namespaces joined by a veth pair, each running
// `dpscope launch -n 2 --nnodes 2` of the Gloo worker, or torchrun's static form of
// `dpscope train`, so ranks meet over a real network link (TCPStore on host A, Gloo pairs across
// the link). Needs root for `ip netns`; skipped otherwise.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "tests/test_util.h"
#include "tests/two_hosts.h"
#include "trace/reader.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
using dpscope::testing::TwoHosts;

TEST(twoHosts, FourRanksOnTwoHostsOverGlooTcp) {
  TwoHosts hosts;
  if (!hosts.ready()) GTEST_SKIP() << "ip netns is not available here: " << hosts.error();
  TempDir dir;
  const std::string worker = std::string(DPSCOPE_BIN_DIR) + "/gloo_worker";
  auto node = [&](const std::string& ns, int node_rank) {
    return "ip netns exec " + ns + " " + dpscope_bin() +
           " launch -n 2 --nnodes 2 --node-rank " + std::to_string(node_rank) +
           " --master-addr 10.77.0.1 --master-port 29555 --trace-dir " + dir.file("traces") +
           " -- " + worker + " > " + dir.file("node" + std::to_string(node_rank) + ".txt") +
           " 2>&1; echo $? > " + dir.file("status" + std::to_string(node_rank));
  };
  run_command("(" + node(hosts.a(), 0) + ") & (" + node(hosts.b(), 1) + ") & wait");
  for (int node_rank : {0, 1}) {
    const std::string n = std::to_string(node_rank);
    EXPECT_EQ(run_command("cat " + dir.file("status" + n)).output, "0\n")
        << run_command("cat " + dir.file("node" + n + ".txt")).output;
  }
  const std::string log = run_command("cat " + dir.file("node1.txt")).output;
  EXPECT_NE(log.find("[3] rank 3: 0 failures"), std::string::npos) << log;
  // Each node merges its own ranks.
  dpscope::trace::Reader node1(dir.file("traces") + "/run-node1.sqlite");
  auto ranks = node1.ranks();
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_EQ(ranks[0].rank, 2);
  EXPECT_EQ(ranks[1].rank, 3);
}

// torchrun as on a cluster: one per host, static rendezvous. Host A's agent serves the store on
// --master_port (TORCHELASTIC_USE_AGENT_STORE=True); all four ranks join it as clients.
TEST(twoHosts, TorchrunStaticFormOnTwoHosts) {
  if (run_command("/usr/bin/python3 -c 'import torch.distributed.run'").exit_code != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch.distributed.run";
  }
  TwoHosts hosts;
  if (!hosts.ready()) GTEST_SKIP() << "ip netns is not available here: " << hosts.error();
  TempDir dir;
  const std::string trace = dir.file("t.sqlite");
  // Debian's torchrun 1.13 under Python 3.11 needs --redirects 1 --tee 1 (docs/communication.md).
  auto node = [&](const std::string& ns, int node_rank) {
    const std::string n = std::to_string(node_rank);
    return "ip netns exec " + ns +
           " timeout -k 5 240 /usr/bin/python3 -m torch.distributed.run --redirects 1 --tee 1 "
           "--nnodes 2 --node_rank " + n + " --master_addr 10.77.0.1 --master_port 29556 "
           "--nproc_per_node 2 --no_python " + dpscope_bin() +
           " train --model toy --steps 2 --trace " + trace + " > " + dir.file("node" + n + ".txt") +
           " 2>&1; echo $? > " + dir.file("status" + n);
  };
  run_command("(" + node(hosts.a(), 0) + ") & (" + node(hosts.b(), 1) + ") & wait");
  for (int node_rank : {0, 1}) {
    const std::string n = std::to_string(node_rank);
    EXPECT_EQ(run_command("cat " + dir.file("status" + n)).output, "0\n")
        << run_command("cat " + dir.file("node" + n + ".txt")).output;
  }
  const std::string log = run_command("cat " + dir.file("node0.txt")).output;
  EXPECT_NE(log.find("4 rank(s)"), std::string::npos) << log;
  EXPECT_NE(log.find("the ranks ran on several hosts"), std::string::npos) << log;
  // Several hosts: each rank leaves its own file, complete.
  for (int rank = 0; rank < 4; ++rank) {
    const std::string file = dir.file("t.rank" + std::to_string(rank) + ".sqlite");
    ASSERT_TRUE(std::filesystem::exists(file)) << file << "\n" << log;
    dpscope::trace::Reader reader(file);
    const auto ranks = reader.ranks();
    ASSERT_EQ(ranks.size(), 1u);
    EXPECT_EQ(ranks[0].rank, rank);
    EXPECT_EQ(ranks[0].status, "complete") << file;
  }
}
