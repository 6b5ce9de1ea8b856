// FSDP2's pieces in one process: dim-0 chunking against torch.chunk and the stats' rows, the
// copy-in orders of the all-gather and reduce-scatter by hand, both collectives simulated across
// ranks, CPU offload's host shard, and the options and parameters fully_shard refuses.
#include <gtest/gtest.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/param_rows.h"
#include "engine/comm/device_mesh.h"
#include "engine/fsdp2/dim0_chunks.h"
#include "engine/fsdp2/fsdp2_options.h"
#include "engine/fsdp2/fsdp_collectives.h"
#include "engine/fsdp2/fsdp_param.h"

using namespace dpscope::fsdp2;

namespace {

TEST(Fsdp2Chunks, TenRowsOnFourRanksLeaveTheLastChunkShort) {
  const Dim0Chunks chunks(10, 4);
  EXPECT_EQ(chunks.padded_rows, 3);
  EXPECT_EQ(std::vector<int64_t>({chunks.rows_of(0), chunks.rows_of(1), chunks.rows_of(2), chunks.rows_of(3)}),
            std::vector<int64_t>({3, 3, 3, 1}));
  EXPECT_EQ(chunks.first_row(3), 9);
  EXPECT_EQ(chunks.padding_rows_of(3), 2);
}

TEST(Fsdp2Chunks, FewerRowsThanRanksLeaveEmptyChunks) {
  const Dim0Chunks three(3, 4);
  EXPECT_EQ(three.padded_rows, 1);
  EXPECT_EQ(three.rows_of(2), 1);
  EXPECT_EQ(three.rows_of(3), 0);
  EXPECT_EQ(three.first_row(3), 3);
  // torch.chunk(5 rows, 4) returns 3 chunks of 2, 2 and 1 rows: the fourth rank's is empty.
  const Dim0Chunks five(5, 4);
  EXPECT_EQ(five.padded_rows, 2);
  EXPECT_EQ(five.rows_of(2), 1);
  EXPECT_EQ(five.rows_of(3), 0);
  EXPECT_EQ(five.padding_rows_of(3), 2);
}

TEST(Fsdp2Chunks, AgreeWithTorchChunkForEveryShape) {
  for (int64_t rows = 1; rows <= 13; ++rows) {
    for (int world = 1; world <= 5; ++world) {
      const std::vector<at::Tensor> torch_chunks = at::arange(rows).chunk(world, 0);
      const Dim0Chunks chunks(rows, world);
      for (int r = 0; r < world; ++r) {
        const int64_t expected = r < static_cast<int>(torch_chunks.size()) ? torch_chunks[r].size(0) : 0;
        EXPECT_EQ(chunks.rows_of(r), expected) << rows << " rows, world " << world << ", rank " << r;
        if (expected > 0) {
          EXPECT_EQ(chunks.first_row(r), torch_chunks[r][0].item<int64_t>());
        }
      }
    }
  }
}

// The stats' rows (Note [Rows from the trace]) repeat the engine's chunking: the same range for
// every rank, dim-0 size and world size, empty chunks included.
TEST(Fsdp2Chunks, StatsRowsAgreeWithTheEngine) {
  for (int64_t rows = 0; rows <= 40; ++rows) {
    for (int world = 1; world <= 8; ++world) {
      const Dim0Chunks chunks(rows, world);
      const std::vector<dpscope::analysis::RowRange> ranges = dpscope::analysis::dim0_row_ranges(rows, world);
      ASSERT_EQ(ranges.size(), static_cast<size_t>(world));
      for (int r = 0; r < world; ++r) {
        EXPECT_EQ(ranges[r].begin, chunks.first_row(r)) << rows << " rows, world " << world << ", rank " << r;
        EXPECT_EQ(ranges[r].end, chunks.first_row(r) + chunks.rows_of(r)) << rows << " rows, world " << world << ", rank " << r;
      }
    }
  }
}

// Two parameters on 2 ranks: a [5] vector (chunks of 3 rows: 3 and 2 real) and a [3, 2] matrix
// (chunks of 2 rows: 2 and 1 real), so every rank's part is 3 + 4 = 7 elements.
TEST(Fsdp2CopyIn, ReduceScatterInputIsPerRankChunksInGroupOrder) {
  const at::Tensor a = at::arange(1, 6, at::kFloat);
  const at::Tensor b = at::arange(10, 16, at::kFloat).view({3, 2});
  const ChunkLayout layout = chunk_layout({3, 4}, 2);
  EXPECT_EQ(layout.offsets, std::vector<int64_t>({0, 3}));
  EXPECT_EQ(layout.rank_numel, 7);
  const at::Tensor input = foreach_reduce_scatter_copy_in({a, b}, {Dim0Chunks(5, 2), Dim0Chunks(3, 2)}, layout, at::kFloat);
  const std::vector<float> expected = {1, 2, 3, 10, 11, 12, 13,   // rank 0: a[0:3], b[0:2]
                                       4, 5, 0, 14, 15, 0, 0};    // rank 1: a[3:5] + pad, b[2] + pad
  EXPECT_TRUE(input.equal(at::tensor(expected))) << input;
  // This rank's rows in a reduce-scatter output of rank 1: a's 2 rows, then b's 1 row of 2.
  const at::Tensor output = input.narrow(0, 7, 7);
  EXPECT_TRUE(view_out_sharded_grad(output, layout, 0, 2, 1).equal(at::tensor({4.f, 5.f})));
  EXPECT_TRUE(view_out_sharded_grad(output, layout, 1, 1, 2).equal(at::tensor({14.f, 15.f})));
}

TEST(Fsdp2CopyIn, AllGatherInputIsThisRanksPartInGroupOrder) {
  const ChunkLayout layout = chunk_layout({3, 2}, 3);
  const AllGatherBuffers buffers =
      foreach_all_gather_copy_in({at::full({3}, 7.f), at::full({2}, 8.f)}, layout, 1, at::kFloat, at::kCPU);
  EXPECT_EQ(buffers.output.numel(), 15);
  EXPECT_EQ(buffers.input.data_ptr(), buffers.output.narrow(0, 5, 5).data_ptr());
  EXPECT_TRUE(buffers.input.equal(at::tensor({7.f, 7.f, 7.f, 8.f, 8.f})));
  // The copy-out takes each parameter's column block from every rank's part, rank after rank.
  buffers.output.copy_(at::arange(15, at::kFloat));
  const at::Tensor first = at::empty({9});
  const at::Tensor second = at::empty({6});
  foreach_all_gather_copy_out(buffers.output, layout, {first, second});
  EXPECT_TRUE(first.equal(at::tensor({0.f, 1.f, 2.f, 5.f, 6.f, 7.f, 10.f, 11.f, 12.f})));
  EXPECT_TRUE(second.equal(at::tensor({3.f, 4.f, 8.f, 9.f, 13.f, 14.f})));
}

// Every rank's FsdpParams of the same parameters, and the collectives done by hand between them.
struct SimulatedRanks {
  std::vector<at::Tensor> originals;
  std::vector<std::vector<std::unique_ptr<FsdpParam>>> ranks;  // [rank][parameter]
  ChunkLayout layout;
};

SimulatedRanks shard_everywhere(const std::vector<std::vector<int64_t>>& shapes, int world) {
  SimulatedRanks sim;
  torch::manual_seed(3);
  for (const auto& shape : shapes) sim.originals.push_back(torch::randn(shape));
  std::vector<int64_t> chunk_numels;
  for (int r = 0; r < world; ++r) {
    sim.ranks.emplace_back();
    for (size_t i = 0; i < shapes.size(); ++i) {
      at::Tensor param = sim.originals[i].clone().requires_grad_(true);
      sim.ranks[r].push_back(std::make_unique<FsdpParam>(param, "p" + std::to_string(i), r, world));
      if (r == 0) chunk_numels.push_back(sim.ranks[r][i]->padded_chunk_numel());
    }
  }
  sim.layout = chunk_layout(chunk_numels, world);
  return sim;
}

// Shapes no world size here divides, a matrix with fewer rows than ranks, and a vector.
const std::vector<std::vector<int64_t>> kShapes = {{10, 3}, {3, 4}, {7}, {1, 2}};

TEST(Fsdp2Simulated, AllGatherRebuildsEveryParameterOnEveryWorldSize) {
  for (int world = 2; world <= 4; ++world) {
    SimulatedRanks sim = shard_everywhere(kShapes, world);
    std::vector<at::Tensor> inputs;
    for (int r = 0; r < world; ++r) {
      std::vector<at::Tensor> shards;
      for (const auto& param : sim.ranks[r]) shards.push_back(param->padded_shard());
      inputs.push_back(foreach_all_gather_copy_in(shards, sim.layout, r, at::kFloat, at::kCPU).input);
    }
    const at::Tensor gathered = at::cat(inputs);  // what the all-gather leaves on every rank
    std::vector<at::Tensor> outputs;
    for (const auto& param : sim.ranks[0]) {
      param->alloc_unsharded();
      outputs.push_back(param->all_gather_output());
    }
    foreach_all_gather_copy_out(gathered, sim.layout, outputs);
    for (size_t i = 0; i < kShapes.size(); ++i) {
      EXPECT_TRUE(sim.ranks[0][i]->unsharded_param().detach().equal(sim.originals[i]))
          << "parameter " << i << " on " << world << " ranks";
      sim.ranks[0][i]->free_unsharded();
      EXPECT_FALSE(sim.ranks[0][i]->is_allocated());
    }
  }
}

TEST(Fsdp2Simulated, ReduceScatterLeavesEachRankTheAverageOfItsRows) {
  for (int world = 2; world <= 4; ++world) {
    SimulatedRanks sim = shard_everywhere(kShapes, world);
    std::vector<std::vector<at::Tensor>> grads(world);  // [rank][parameter]
    std::vector<at::Tensor> sums;
    std::vector<Dim0Chunks> chunks;
    for (size_t i = 0; i < kShapes.size(); ++i) {
      sums.push_back(at::zeros(kShapes[i]));
      chunks.push_back(sim.ranks[0][i]->chunks());
      for (int r = 0; r < world; ++r) {
        grads[r].push_back(torch::randn(kShapes[i]));
        sums[i] += grads[r][i];
      }
    }
    at::Tensor reduced = at::zeros({world * sim.layout.rank_numel});
    for (int r = 0; r < world; ++r) reduced += foreach_reduce_scatter_copy_in(grads[r], chunks, sim.layout, at::kFloat);
    reduced /= world;  // ReduceOp::Average
    for (int r = 0; r < world; ++r) {
      const at::Tensor output = reduced.narrow(0, r * sim.layout.rank_numel, sim.layout.rank_numel);
      for (size_t i = 0; i < kShapes.size(); ++i) {
        FsdpParam& param = *sim.ranks[r][i];
        param.accumulate_sharded_grad(view_out_sharded_grad(output, sim.layout, i,
                                                            chunks[i].rows_of(r), param.row_numel()));
        const at::Tensor expected = (sums[i] / world).narrow(0, chunks[i].first_row(r), chunks[i].rows_of(r));
        EXPECT_TRUE(param.sharded_param().grad().allclose(expected))
            << "parameter " << i << ", rank " << r << " of " << world;
        EXPECT_EQ(param.sharded_param().sizes().vec(), expected.sizes().vec());
      }
    }
  }
}

TEST(Fsdp2Param, ShardedParameterIsThisRanksRowsAndALeaf) {
  const at::Tensor original = torch::randn({10, 3});
  at::Tensor param = original.clone().requires_grad_(true);
  const FsdpParam sharded(param, "w", 3, 4);
  EXPECT_EQ(sharded.sharded_param().sizes().vec(), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(sharded.sharded_param().is_leaf());
  EXPECT_TRUE(sharded.sharded_param().requires_grad());
  EXPECT_TRUE(sharded.sharded_param().detach().equal(original.narrow(0, 9, 1)));
  // The padded shard: the row, then two rows of zeros.
  EXPECT_EQ(sharded.padded_shard().numel(), 9);
  EXPECT_TRUE(sharded.padded_shard().narrow(0, 3, 6).eq(0).all().item<bool>());
  EXPECT_FALSE(sharded.is_allocated());  // the unsharded parameter's memory is gone
  EXPECT_EQ(param.sizes().vec(), original.sizes().vec());
}

// CPUOffloadPolicy on the CPU (Note [FSDP2 CPU offload]): the shard on the host, not pinned
// (pinning is for a GPU to copy from, and a CPU build has none), the same rows as without
// offload; the view-out's gradients land on the host and add up.
TEST(Fsdp2Param, CpuOffloadKeepsTheShardAndItsGradientOnTheHost) {
  const at::Tensor original = torch::randn({10, 3});
  at::Tensor plain_param = original.clone().requires_grad_(true);
  at::Tensor offload_param = original.clone().requires_grad_(true);
  const FsdpParam plain(plain_param, "w", 1, 4);
  FsdpParam offloaded(offload_param, "w", 1, 4, at::kFloat, OffloadPolicy::cpu());
  EXPECT_TRUE(offloaded.padded_shard().is_cpu());
  EXPECT_FALSE(offloaded.padded_shard().is_pinned());
  EXPECT_TRUE(offloaded.sharded_param().detach().equal(plain.sharded_param().detach()));
  EXPECT_TRUE(offloaded.all_gather_output().is_cpu()) << "the compute device: the parameter's";
  offloaded.accumulate_sharded_grad(at::full({9}, 1.f));
  offloaded.accumulate_sharded_grad(at::full({9}, 2.f));
  EXPECT_TRUE(offloaded.sharded_param().grad().is_cpu());
  EXPECT_TRUE(offloaded.sharded_param().grad().equal(at::full({3, 3}, 3.f)));
  EXPECT_EQ(OffloadPolicy::cpu().text(), "cpu");
  EXPECT_EQ(OffloadPolicy::none().text(), "none");
}

TEST(Fsdp2Param, RefusesParametersItCannotShardByName) {
  auto message = [](at::Tensor param) {
    try {
      FsdpParam p(std::move(param), "layer.scale", 0, 2);
    } catch (const Fsdp2Error& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message(torch::ones(at::IntArrayRef{}).requires_grad_(true)).find("'layer.scale' has no dimensions"),
            std::string::npos);
  EXPECT_NE(message(torch::ones({2}, at::kDouble).requires_grad_(true)).find("is Double"),
            std::string::npos);
  EXPECT_NE(message(torch::ones({2})).find("does not require grad"), std::string::npos);
}

TEST(Fsdp2Options, ReshardAfterForwardSpellings) {
  EXPECT_EQ(parse_reshard_spec("true", "--reshard-after-forward").mode, ReshardAfterForward::Reshard);
  EXPECT_EQ(parse_reshard_spec("false", "--reshard-after-forward").mode, ReshardAfterForward::Keep);
  const ReshardSpec two = parse_reshard_spec("2", "--reshard-after-forward");
  EXPECT_EQ(two.mode, ReshardAfterForward::ToGroupSize);
  EXPECT_EQ(two.group_size, 2);
  EXPECT_EQ(two.text(), "2");
  EXPECT_EQ(ReshardSpec::keep().text(), "false");
  for (const char* bad : {"0", "-1", "2x", "yes", ""}) {
    try {
      parse_reshard_spec(bad, "--reshard-after-forward");
      ADD_FAILURE() << "'" << bad << "' was accepted";
    } catch (const std::invalid_argument& error) {
      EXPECT_NE(std::string(error.what()).find("--reshard-after-forward '"), std::string::npos);
    }
  }
}

std::string resolve_error(int n, int world) {
  try {
    resolve_reshard(ReshardSpec::to_group_size(n), world);
  } catch (const Fsdp2Error& error) {
    return error.what();
  }
  return "accepted";
}

TEST(Fsdp2Options, IntFormLargerThanTheWorldOrNotDividingItIsRefused) {
  EXPECT_NE(resolve_error(8, 4).find("reshard_after_forward 8: the int form is the size of the "
                                     "group parameters are resharded to after forward, and must be "
                                     "a factor of the size of the group they are sharded over "
                                     "(the world, or HSDP's shard group) 4 (1..4)"),
            std::string::npos)
      << resolve_error(8, 4);
  EXPECT_NE(resolve_error(3, 4).find("HSDP's shard group) 4 (1..4)"), std::string::npos);
  EXPECT_EQ(resolve_reshard(ReshardSpec::to_group_size(4), 4), ReshardAfterForward::Reshard);
  EXPECT_EQ(resolve_reshard(ReshardSpec::to_group_size(1), 4), ReshardAfterForward::Keep);
  EXPECT_EQ(resolve_reshard(ReshardSpec::to_group_size(2), 4), ReshardAfterForward::ToGroupSize);
}

std::string shard_group_size_error(int n, int world) {
  try {
    dpscope::comm::check_shard_group_size(n, world, "--shard-group-size");
  } catch (const dpscope::comm::CommError& error) {
    return error.what();
  }
  return "accepted";
}

// See Note [HSDP mesh]: N divides the world; the groups are named by their ranks.
TEST(HsdpMesh, ShardGroupSizeDividesTheWorldAndGroupsAreNamedByTheirRanks) {
  EXPECT_EQ(shard_group_size_error(2, 4), "accepted");
  EXPECT_EQ(shard_group_size_error(1, 4), "accepted");
  EXPECT_EQ(shard_group_size_error(4, 4), "accepted");
  EXPECT_EQ(shard_group_size_error(3, 6), "accepted");
  EXPECT_NE(shard_group_size_error(4, 6).find("--shard-group-size 4: HSDP shards each parameter "
                                              "over groups of N ranks"),
            std::string::npos);
  EXPECT_NE(shard_group_size_error(4, 6).find("give one of 1, 2, 3, 6"), std::string::npos);
  EXPECT_NE(shard_group_size_error(8, 4).find("must divide the world size 4"), std::string::npos);
  EXPECT_NE(shard_group_size_error(0, 4).find("--shard-group-size 0"), std::string::npos);
  EXPECT_EQ(dpscope::comm::shard_group_name(1, 2), "shard #1: ranks 2-3");
  EXPECT_EQ(dpscope::comm::shard_group_name(3, 1), "shard #3: ranks 3");
  EXPECT_EQ(dpscope::comm::replicate_group_name(1, 2, 6), "replicate #1: ranks 1,3,5");
  EXPECT_EQ(dpscope::comm::replicate_group_name(0, 3, 6), "replicate #0: ranks 0,3");
}

}  // namespace
