// FSDP results against DDP: each case trains with `dpscope train --strategy fsdp` under
// `dpscope launch`, then the same run with our DDP and with PyTorch's own DDP (python3-torch, gloo;
// tests/ddp/pytorch_ddp.py) from the same initial parameters, and requires the final parameters
// to agree to 1e-5 (float32) — across sharding strategies, nesting, prefetch, CPU offload,
// bucketing, gradient accumulation, world sizes 1 to 4 and parameter counts no world size divides.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tests/torch_oracle.h"

using dpscope::testing::dpscope_bin;
using dpscope::testing::max_abs_diffs;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
using dpscope::testing::train_for_comparison;

namespace {

const std::string kScripts = std::string(DPSCOPE_SOURCE_DIR) + "/tests/ddp/";
const std::string kDigits = std::string(DPSCOPE_SOURCE_DIR) + "/data/digits.csv.gz";

struct Case {
  int world;
  std::string model;  // shared by all three runs (also understood by pytorch_ddp.py)
  std::string fsdp;   // FSDP's own flags
  // Largest difference allowed, as a fraction of how far training moved the parameters (0: an
  // absolute 1e-5, float rounding).
  double relative_tolerance = 0;
};

void compare(const Case& c) {
  TempDir dir;
  train_for_comparison(c.world, c.model, dir.path().string(), "fsdp",
                       "--strategy fsdp " + c.fsdp + " --save-init " + dir.file("init.pt"));
  train_for_comparison(c.world, c.model, dir.path().string(), "ddp", "--strategy ddp");
  const std::string common = " --steps 8 --batch-size 16 --lr 0.05 --samples 256 " + c.model;
  const auto theirs = run_command(
      "timeout 300 " + dpscope_bin() + " launch -n " + std::to_string(c.world) + " --trace-dir " +
      dir.file("theirs") + " -- /usr/bin/python3 " + kScripts + "pytorch_ddp.py" + common +
      " --digits " + kDigits + " --init " + dir.file("init.pt") + " --out " + dir.file("theirs.pt"));
  ASSERT_EQ(theirs.exit_code, 0) << theirs.output;

  const std::vector<double> diffs = max_abs_diffs({{dir.file("fsdp.pt"), dir.file("init.pt")},
                                                   {dir.file("fsdp.pt"), dir.file("ddp.pt")},
                                                   {dir.file("fsdp.pt"), dir.file("theirs.pt")}});
  const double moved = diffs[0];
  EXPECT_GT(moved, 1e-3) << "training did not move the parameters; the comparison proves nothing";
  const double tolerance = c.relative_tolerance > 0 ? c.relative_tolerance * moved : 1e-5;
  EXPECT_LE(diffs[1], tolerance) << "against our DDP";
  EXPECT_LE(diffs[2], tolerance) << "against PyTorch's DDP";
}

// hidden 33: fc0 holds 64*33+33 = 2145 elements, fc1 33*33+33 = 1122, fc2 33*10+10 = 340 — odd
// counts, so every world size here pads.
const std::string kMlp = "--model mlp --hidden 33 --momentum 0.9";

TEST(FsdpVsDdp, FullShardOneRank) { compare({1, kMlp, "--wrap-min-params 100"}); }
TEST(FsdpVsDdp, FullShardTwoRanksRootOnly) { compare({2, kMlp, ""}); }
TEST(FsdpVsDdp, FullShardTwoRanksNested) { compare({2, kMlp, "--wrap-min-params 100"}); }
TEST(FsdpVsDdp, FullShardThreeRanksNestedPostPrefetchForwardPrefetchLimit) {
  compare({3, kMlp + " --layers 3",
           "--wrap-min-params 100 --backward-prefetch post --forward-prefetch --limit-all-gathers 1"});
}
TEST(FsdpVsDdp, FullShardFourRanksNestedNoPrefetchNoBucket) {
  compare({4, kMlp, "--wrap-min-params 100 --backward-prefetch none --reduce-bucket-mb 0"});
}
TEST(FsdpVsDdp, FullShardFourRanksCpuOffloadGradAccum) {
  compare({4, kMlp + " --grad-accum 3", "--wrap-min-params 100 --cpu-offload"});
}
TEST(FsdpVsDdp, ShardGradOpThreeRanksNestedGradAccum) {
  compare({3, kMlp + " --grad-accum 2", "--sharding grad_op --wrap-min-params 100"});
}
TEST(FsdpVsDdp, ShardGradOpTwoRanksRootOnly) { compare({2, kMlp, "--sharding grad_op"}); }
TEST(FsdpVsDdp, NoShardTwoRanksNested) { compare({2, kMlp, "--sharding no_shard --wrap-min-params 100"}); }
TEST(FsdpVsDdp, NoShardFourRanksRootOnlyGradAccum) {
  compare({4, kMlp + " --grad-accum 2", "--sharding no_shard"});
}
TEST(FsdpVsDdp, CnnTwoRanksNestedBuffers) {
  compare({2, "--model cnn --data digits --momentum 0.9", "--wrap-min-params 200"});
}
TEST(FsdpVsDdp, TransformerThreeRanksNestedRootParams) {
  // The root keeps `pos` and what the policy leaves (the layer norms); q, k, v, o, the mlp and the
  // head are units of their own.
  compare({3, "--model transformer --momentum 0.9", "--wrap-min-params 500"});
}
// The GPT-shaped model at 2 blocks of 32: a block holds 12,704 parameters and its largest layer
// 4,224, the root's own (wte, wpe, ln_f, lm_head) at most 2,871 each.
const std::string kGpt = "--model gpt --data text --layers 2 --hidden 32 --heads 4 --seq 16 --momentum 0.9";
// A unit per block, as FSDP wraps transformers: the embeddings, ln_f and lm_head stay in the root.
TEST(FsdpVsDdp, GptThreeRanksUnitPerBlock) { compare({3, kGpt, "--wrap-min-params 5000"}); }
// A unit per layer of at least 1,000 parameters (each block's four Linears, wte and lm_head);
// the LayerNorms and wpe stay in the root (the blocks are not units here).
TEST(FsdpVsDdp, GptTwoRanksShardGradOpUnitPerLayer) {
  compare({2, kGpt, "--sharding grad_op --wrap-min-params 1000"});
}
// Mixed precision: bfloat16 keeps 8 significant bits, so gradients computed from bf16 weights and
// activations are about 1% off; through 8 steps with momentum 0.9 that must stay a small part of
// how far training moved the parameters: at most 6% of it. Measured, the same on every run (the
// data, the initial weights and Gloo's reduction order are fixed): 2.33% on two ranks, 2.99% on
// three with fp32 reduction.
TEST(FsdpVsDdp, Bf16MixedPrecisionTwoRanks) {
  compare({2, kMlp, "--wrap-min-params 100 --mixed-precision bf16", 0.06});
}
TEST(FsdpVsDdp, Bf16MixedPrecisionFp32ReduceThreeRanks) {
  compare({3, kMlp, "--wrap-min-params 100 --mixed-precision bf16 --reduce-fp32", 0.06});
}

}  // namespace
