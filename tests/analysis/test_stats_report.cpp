// What `dpscope stats` prints: stats_json's contract (keys in order, values) and stats_text's
// report, warnings, GPU memory lines, elisions and what it says when parts are missing.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "analysis/stats_report.h"
#include "tests/analysis/stats_fixture.h"

namespace dpscope::analysis {
namespace {

using namespace dpscope::trace;

using namespace stats_fixture;

std::vector<std::string> keys(const nlohmann::ordered_json& object) {
  std::vector<std::string> out;
  for (const auto& item : object.items()) out.push_back(item.key());
  return out;
}
using Keys = std::vector<std::string>;

TEST(statsJson, ContractKeysInOrder) {
  TempDir dir;
  const std::string text = stats_json(known_stats(dir));
  EXPECT_EQ(text.find('\n'), std::string::npos);
  const auto j = nlohmann::ordered_json::parse(text);
  EXPECT_EQ(keys(j), (Keys{"schema_version", "clock", "run", "params", "buckets", "units",
                           "collective_matching", "groups", "stragglers", "ranks"}));
  EXPECT_EQ(keys(j["groups"][0]), (Keys{"grp", "name", "ranks", "collectives", "payload_bytes",
                                        "wire_bytes", "wire_bytes_per_step",
                  "busbw_gbps_median"}));
  EXPECT_EQ(keys(j["run"]),
            (Keys{"strategy", "backend", "world_size", "iterations", "model", "link", "alignment",
                  "memory_accounting"}));
  EXPECT_EQ(keys(j["collective_matching"]),
            (Keys{"collectives", "mismatches", "max_skew_ms", "mismatched", "straggler_threshold_ms"}));
  EXPECT_EQ(keys(j["params"][0]), (Keys{"index", "name", "shape", "numel", "dtype", "bucket",
                                        "rebuilt_bucket", "unit"}));
  EXPECT_EQ(keys(j["buckets"][0]), (Keys{"generation", "index", "bytes", "params"}));
  EXPECT_EQ(keys(j["units"][0]),
            (Keys{"index", "name", "numel", "padded_numel", "shard_numel", "params"}));
  const auto& rank = j["ranks"][1];
  EXPECT_EQ(keys(rank), (Keys{"rank", "iterations", "collectives", "peak_memory_bytes",
                              "step_peak_memory_bytes", "memory_after_steps_bytes", "category_max_bytes", "overlap",
                              "overlap_compute", "clock_offset_ms", "clock_uncertainty_ms", "wait_ms", "transfer_ms",
                              "buckets"}));
  EXPECT_EQ(keys(rank["iterations"][0]),
            (Keys{"iteration", "hooks", "step_ms", "loss", "collectives", "overlap", "wait_ms", "transfer_ms"}));
  EXPECT_EQ(keys(rank["iterations"][0]["collectives"]),
            (Keys{"allreduce", "broadcast", "allgather", "reduce_scatter", "barrier", "alltoall", "send_recv"}));
  EXPECT_EQ(keys(rank["collectives"][0]), (Keys{"seq", "kind", "bytes", "iteration", "begin_ms", "ms", "transfer_ms", "algbw_gbps",
                  "busbw_gbps"}));
  EXPECT_EQ(keys(j["clock"]), (Keys{"name", "link_gbps", "link_latency_us", "compute"}));
  EXPECT_EQ(keys(rank["peak_memory_bytes"]),
            (Keys{"total", "ts_ns", "parameters", "gradients", "buckets", "activations"}));
  EXPECT_EQ(keys(rank["category_max_bytes"]),
            (Keys{"parameters", "gradients", "buckets", "activations", "cuda_allocated"}));
  EXPECT_EQ(keys(rank["overlap"]),
            (Keys{"compute_ms", "comm_ms", "overlap_ms", "exposed_comm_ms"}));
  EXPECT_EQ(keys(rank["buckets"][0]), (Keys{"bucket", "bytes", "allreduces", "comm_ms", "exposed_comm_ms"}));
}

TEST(statsJson, Values) {
  TempDir dir;
  const auto j = nlohmann::json::parse(stats_json(known_stats(dir)));
  EXPECT_EQ(j["schema_version"], kSchemaVersion);
  EXPECT_EQ(j["clock"], (nlohmann::json{{"name", "measured"}, {"link_gbps", nullptr}, {"link_latency_us", nullptr}, {"compute", nullptr}}));
  EXPECT_EQ(j["run"], (nlohmann::json{{"strategy", "ddp"}, {"backend", "gloo"}, {"world_size", 2},
                                      {"iterations", 2}, {"model", "toy"}, {"link", nullptr},
                                      {"alignment", "rendezvous"}, {"memory_accounting", "tracking"}}));
  EXPECT_EQ(j["params"][0], (nlohmann::json{{"index", 0}, {"name", "net1.weight"},
                                            {"shape", {10, 10}}, {"numel", 100},
                                            {"dtype", "float32"}, {"bucket", 1},
                                            {"rebuilt_bucket", 0}, {"unit", 1}}));
  EXPECT_TRUE(j["params"][3]["rebuilt_bucket"].is_null());
  EXPECT_TRUE(j["params"][3]["unit"].is_null());
  EXPECT_EQ(j["buckets"][2],
            (nlohmann::json{{"generation", 1}, {"index", 0}, {"bytes", 440}, {"params", {1, 0}}}));
  EXPECT_EQ(j["units"][1], (nlohmann::json{{"index", 1}, {"name", "net1"}, {"numel", 110},
                                           {"padded_numel", 110}, {"shard_numel", 55},
                                           {"params", {0, 1}}}));

  // Group 0 on both ranks; group 1 (an all-gather and a barrier) on rank 0 only.
  EXPECT_EQ(j["groups"][0]["grp"], 0);
  EXPECT_EQ(j["groups"][0]["ranks"], (nlohmann::json{0, 1}));
  EXPECT_EQ(j["groups"][1]["grp"], 1);
  EXPECT_EQ(j["groups"][1]["ranks"], (nlohmann::json{0}));
  EXPECT_EQ(j["groups"][1]["collectives"], 2);
  EXPECT_EQ(j["groups"][1]["wire_bytes"], 0) << "one rank sends nothing";

  const auto& r0 = j["ranks"][0];
  EXPECT_EQ(r0["rank"], 0);
  EXPECT_EQ(r0["overlap_compute"], "phases") << "no GPU kernels: the phases are the compute";
  ASSERT_FALSE(r0["buckets"].empty());
  for (const auto& b : r0["buckets"]) {
    // Each bucket's all-reduce bytes on the rank, as its collectives carry them.
    ASSERT_TRUE(b.contains("bytes")) << b;
    EXPECT_TRUE(b["bytes"].is_number_integer() && b["bytes"].get<int64_t>() > 0) << b;
  }
  EXPECT_EQ(r0["iterations"][1],
            (nlohmann::json{{"iteration", 1}, {"hooks", 4}, {"step_ms", 10.25}, {"loss", 1.25},
                            {"collectives", {{"allreduce", 2}, {"broadcast", 0}, {"allgather", 0},
                                             {"reduce_scatter", 0}, {"barrier", 1}, {"alltoall", 0},
                                             {"send_recv", 0}}},
                            {"overlap", {{"compute_ms", 7.0}, {"comm_ms", 3.5}, {"overlap_ms", 1.5},
                                         {"exposed_comm_ms", 2.0}}},
                            // seq 3 and 4 do not match across the ranks: no split.
                            {"wait_ms", 0.0},
                            {"transfer_ms", 0.0}}));
  // Iteration 0: seq 1 [4200, 6200] waits for rank 1's begin at 5000 (0.8 ms), then transfers
  // 1.2 ms; seq 2 [6500, 7500] ends before rank 1 begins it at 8500: all 1 ms of it waiting.
  EXPECT_DOUBLE_EQ(r0["iterations"][0]["wait_ms"].get<double>(), 1.8);
  EXPECT_DOUBLE_EQ(r0["iterations"][0]["transfer_ms"].get<double>(), 1.2);
  // The broadcast's 660 B moved in its 0.5 ms transfer: 660 x 8 bits / 0.5 ms = 0.01056 Gb/s, a
  // broadcast's busbw its algbw (Note [Bus bandwidth]). The unmatched all-gather has none.
  EXPECT_EQ(r0["collectives"][0],
            (nlohmann::json{{"seq", 0}, {"kind", "broadcast"}, {"bytes", 660},
                            {"iteration", nullptr}, {"begin_ms", 0.2}, {"ms", 0.6},
                            {"transfer_ms", 0.5}, {"algbw_gbps", 0.01056}, {"busbw_gbps", 0.01056}}));
  EXPECT_EQ(r0["collectives"][5],
            (nlohmann::json{{"seq", 0}, {"kind", "allgather"}, {"bytes", 100}, {"iteration", 0},
                            {"begin_ms", 1.5}, {"ms", 0.5}, {"transfer_ms", nullptr},
                            {"algbw_gbps", nullptr}, {"busbw_gbps", nullptr}}));
  EXPECT_EQ(r0["peak_memory_bytes"],
            (nlohmann::json{{"total", 7000}, {"ts_ns", us(8000)}, {"parameters", 1000},
                            {"gradients", 2000}, {"optimizer_state", 3000},
                            {"activations", 1000}}));
  EXPECT_EQ(r0["category_max_bytes"],
            (nlohmann::json{{"parameters", 1000}, {"gradients", 2000}, {"optimizer_state", 3000},
                            {"activations", 4000}, {"allocator_total", 7200}}));
  EXPECT_EQ(r0["overlap"]["compute_ms"], 15.0);
  EXPECT_EQ(r0["overlap"]["comm_ms"], 7.6);
  EXPECT_NEAR(r0["overlap"]["overlap_ms"].get<double>(), 4.5, 1e-9);
  EXPECT_EQ(r0["overlap"]["exposed_comm_ms"], 3.1);
  const auto& r1 = j["ranks"][1];
  EXPECT_TRUE(r1["iterations"][0]["loss"].is_null());
  EXPECT_EQ(r1["iterations"][0]["step_ms"], 11.0);
  EXPECT_EQ(r1["peak_memory_bytes"]["total"], 5500);
}

TEST(statsText, ReportAndWarnings) {
  TempDir dir;
  const std::string text = stats_text(known_stats(dir));
  EXPECT_NE(text.find("run: strategy ddp, backend gloo, model toy, world size 2, 2 iterations"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("WARNING: rank 1 dropped 3 events"), std::string::npos) << text;
  EXPECT_NE(text.find("WARNING: rank 1 did not finish: status \"interrupted (SIGINT)\""),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("WARNING: rank 0"), std::string::npos) << text;
  EXPECT_NE(text.find("buckets (generation 0: initial plan, 1: rebuilt)"), std::string::npos);
  EXPECT_NE(text.find("units:"), std::string::npos);
  EXPECT_NE(text.find("overlap: compute 15.000 ms, comm 7.600 ms, hidden 4.500 ms, exposed comm "
                      "3.100 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("peak memory 0.01 MiB; at that moment (MiB): parameters 0.00"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("     1     10.250     1.2500      4"), std::string::npos) << text;
  // rank 0: 9.5 and 10.25; rank 1: only iteration 0 has a step time. Two iterations are too
  // few to leave out the first two (Note [Steady steps]).
  EXPECT_NE(text.find("step_ms over 2 iterations from 0: median 9.875, min 9.500, max 10.250"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("step_ms over 1 iterations from 0: median 11.000"), std::string::npos) << text;
}

// A rank whose writer died leaves status 'running'; the report says so.
TEST(statsText, WriterDiedWarning) {
  TempDir dir;
  const std::string path = dir.file("running.dpscope");
  {
    Writer w(path);
    w.put_rank(rank_row(0, "complete", 0));
    w.put_rank(rank_row(1, "running", 0));
    w.finish();
  }
  Reader reader(path);
  const std::string text = stats_text(compute_stats(reader));
  EXPECT_NE(text.find("WARNING: rank 1 did not finish: status \"running\""), std::string::npos)
      << text;
  EXPECT_EQ(text.find("WARNING: rank 0"), std::string::npos) << text;
}


// A run on a GPU samples the CUDA caching allocator; the categories count host memory only, and
// the report says where the GPU's memory is (docs/gpu.md).
TEST(statsText, GpuMemoryFromTheCudaCachingAllocator) {
  TempDir dir;
  const RunStats s = stats_of_trace(dir, "gpu.dpscope", [](Writer& w) {
    w.put_rank(rank_row(0, "complete", 0));
    w.add_memory(sample(0, 0, MemoryCategory::Data, 1 << 20));
    w.add_memory(sample(0, 0, MemoryCategory::CudaAllocated, 64 << 20));
    w.add_memory(sample(0, 0, MemoryCategory::CudaReserved, 80 << 20));
    w.add_memory(sample(0, 10, MemoryCategory::CudaAllocated, 66 << 20));
    w.add_memory(sample(0, 10, MemoryCategory::CudaReserved, 80 << 20));
  });
  ASSERT_TRUE(s.ranks[0].sampled_gpu_memory());
  EXPECT_EQ(s.ranks[0].largest(MemoryCategory::CudaAllocated), 66 << 20);
  EXPECT_EQ(s.ranks[0].largest(MemoryCategory::Parameters), 0);
  const std::string text = stats_text(s);
  EXPECT_NE(text.find("GPU memory (CUDA caching allocator): largest cuda_allocated 66.00 MiB, "
                      "cuda_reserved 80.00 MiB; the memory above is the host's only"),
            std::string::npos)
      << text;
}

// By ownership (a GPU run's default) the categories are the GPU's: the report says so, and the
// peak by category adds up to cuda_allocated.
TEST(statsText, GpuMemoryByOwnership) {
  TempDir dir;
  const RunStats s = stats_of_trace(dir, "gpu-ownership.dpscope", [](Writer& w) {
    w.set_meta(dpscope::trace::meta_key::kMemoryAccounting,
               dpscope::trace::to_string(dpscope::trace::MemoryAccounting::Ownership));
    w.put_rank(rank_row(0, "complete", 0));
    w.add_memory(sample(0, 0, MemoryCategory::Parameters, 8 << 20));
    w.add_memory(sample(0, 0, MemoryCategory::Activations, 56 << 20));
    w.add_memory(sample(0, 0, MemoryCategory::CudaAllocated, 64 << 20));
    w.add_memory(sample(0, 0, MemoryCategory::CudaReserved, 80 << 20));
  });
  EXPECT_EQ(s.memory_accounting, dpscope::trace::MemoryAccounting::Ownership);
  EXPECT_EQ(s.ranks[0].memory_peak.total_bytes, 64 << 20);
  const std::string text = stats_text(s);
  EXPECT_NE(text.find("memory: by ownership"), std::string::npos) << text;
  EXPECT_NE(text.find("cuda_reserved 80.00 MiB; the memory above is the GPU's, by ownership"), std::string::npos)
      << text;
  EXPECT_EQ(nlohmann::json::parse(stats_json(s))["run"]["memory_accounting"], "ownership");
}

// In the known run only rank 1 sampled cuda_allocated: only its section has the line.
TEST(statsText, GpuMemoryLineOnlyForRanksThatSampledIt) {
  TempDir dir;
  const std::string text = stats_text(known_stats(dir));
  const size_t rank1 = text.find("\nrank 1");
  ASSERT_NE(rank1, std::string::npos) << text;
  EXPECT_GT(text.find("GPU memory"), rank1) << text;
  EXPECT_NE(text.find("GPU memory"), std::string::npos) << text;
}

// Long runs show their first and last iterations; the JSON keeps them all.
TEST(statsText, LongRunsElided) {
  TempDir dir;
  const RunStats s = stats_of_trace(dir, "long.dpscope", [](Writer& w) {
    w.put_rank(rank_row(0, "complete", 0));
    w.add_name(kIteration, "iteration");
    for (int i = 0; i < 100; ++i) w.add_event(phase(0, kIteration, i * 10, i * 10 + 5, i));
  });
  const std::string text = stats_text(s);
  EXPECT_NE(text.find("... 80 more iterations"), std::string::npos) << text;
  EXPECT_NE(text.find("step_ms over 98 iterations from 2: median 0.005"), std::string::npos) << text;
  EXPECT_NE(text.find("     9      0.005"), std::string::npos) << text;
  EXPECT_EQ(text.find("    10      0.005"), std::string::npos) << text;
  EXPECT_NE(text.find("    99      0.005"), std::string::npos) << text;
  EXPECT_EQ(nlohmann::json::parse(stats_json(s))["ranks"][0]["iterations"].size(), 100u);
}


// Bad input is analysed without a crash and the report says what is missing: a rank with no
// phases (compute unknown), one with no collectives, a rank whose writer died (status running),
// a file of one rank.
TEST(statsText, MissingPartsAreSaid) {
  TempDir dir;
  const RunStats s = stats_of_trace(dir, "partial.dpscope", [](Writer& w) {
    add_names(w);
    w.put_rank(rank_row(0, "complete", 0));
    w.put_rank(rank_row(1, "running", 0));
    // Rank 0: collectives but no phases. Rank 1: a phase but no collectives.
    w.add_event(collective(0, CollectiveOp::AllReduce, 0, 0, 64, 0, 10, 0));
    w.add_event(phase(1, kForward, 0, 5, 0));
  });
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[0].compute_phases, 0);
  EXPECT_EQ(s.ranks[1].compute_phases, 1);
  EXPECT_EQ(s.mismatches, 1);  // rank 1 never ran seq 0
  const std::string text = stats_text(s);
  EXPECT_NE(text.find("no forward, backward or optimizer_step phases recorded: compute, overlap and "
                      "exposed comm below are unknown"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("no collectives recorded"), std::string::npos) << text;
  EXPECT_NE(text.find("WARNING: rank 1 did not finish"), std::string::npos) << text;
  EXPECT_NE(text.find("ran on 1 of 2 ranks"), std::string::npos) << text;
  EXPECT_NE(text.find("peak memory: no memory samples"), std::string::npos) << text;
  EXPECT_NO_THROW(nlohmann::json::parse(stats_json(s)));

  const RunStats alone = stats_of_trace(dir, "single.dpscope", [](Writer& w) {
    add_names(w);
    w.put_rank(rank_row(0, "complete", 0));
    w.add_event(phase(0, kForward, 0, 5, 0));
  });
  EXPECT_TRUE(alone.matches.empty());
  EXPECT_EQ(alone.ranks.at(0).overlap.compute_ms, 0.005);
  EXPECT_NE(stats_text(alone).find("no collectives recorded"), std::string::npos);
}

}  // namespace
}  // namespace dpscope::analysis
