// merge: four rank files, each with its own numbering of interned names, become one run file in
// which every event and metric still carries its own name; run-wide tables appear once; bad
// inputs fail before anything is written.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/test_util.h"
#include "trace/error.h"
#include "trace/merge.h"
#include "trace/reader.h"
#include "trace/recorder.h"

using namespace dpscope::trace;
using dpscope::testing::TempDir;

namespace {

constexpr int kRanks = 4;
constexpr int kIterations = 3;

// Rank r interns its names in a rank-dependent order, so the same name has a different id in
// every file; events of rank r carry value = r * 1000 + i to be recognised after the merge.
std::string write_rank(const TempDir& dir, int rank) {
  const std::string path = dir.file("rank" + std::to_string(rank) + ".sqlite");
  RecorderOptions options;
  options.path = path;
  options.rank = rank;
  Recorder recorder(options);
  for (int i = 0; i < rank; ++i) recorder.name("padding" + std::to_string(i));
  const NameId backward = recorder.name("backward");
  const NameId forward = recorder.name("forward");
  const NameId loss = recorder.name("loss");
  const LaneId comm = recorder.add_lane("gloo comm", LaneKind::Comm);
  recorder.set_meta("strategy", "ddp");
  recorder.set_meta("world_size", std::to_string(kRanks));
  recorder.add_param(ParamInfo{0, "fc0.weight", {4, 4}, 16, DType::Float32, true, false, 0,
                               kNone, kNone, kNone64});
  recorder.add_bucket(BucketInfo{0, 0, 64, 16, DType::Float32, {0}, {0}});
  recorder.add_unit_shard(UnitShard{0, rank, rank * 4, rank * 4 + 4, 4});
  for (int it = 0; it < kIterations; ++it) {
    const int64_t t = 1000000 * it;
    recorder.phase(0, forward, t, t + 100, it);
    recorder.phase(0, backward, t + 100, t + 300, it);
    Event collective;
    collective.kind = EventKind::Collective;
    collective.lane = comm;
    collective.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
    collective.seq = it;
    collective.begin_ns = t + 200;
    collective.end_ns = t + 400;
    collective.iteration = it;
    collective.value = rank * 1000 + it;
    recorder.record(TraceLevel::Summary, collective);
    recorder.memory(MemoryCategory::Gradients, 64 * (rank + 1), t + 150);
    recorder.metric(it, loss, rank + it / 10.0);
  }
  return path;
}

}  // namespace

TEST(Merge, FourRankFilesBecomeOneRunFile) {
  TempDir dir;
  std::vector<std::string> inputs;
  for (int rank = kRanks - 1; rank >= 0; --rank) inputs.push_back(write_rank(dir, rank));
  const std::string out = dir.file("run.sqlite");
  std::vector<double> progress;
  MergeResult result = merge_traces(inputs, out, [&](double f) { progress.push_back(f); });
  EXPECT_EQ(result.ranks, kRanks);
  EXPECT_EQ(result.events, kRanks * kIterations * 3);
  EXPECT_EQ(progress.size(), static_cast<size_t>(kRanks));
  EXPECT_DOUBLE_EQ(progress.back(), 1.0);
  EXPECT_FALSE(std::filesystem::exists(out + "-wal"));

  Reader reader(out);
  auto ranks = reader.ranks();
  ASSERT_EQ(ranks.size(), static_cast<size_t>(kRanks));
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_EQ(ranks[static_cast<size_t>(rank)].rank, rank);
    EXPECT_EQ(ranks[static_cast<size_t>(rank)].status, "complete");
  }
  EXPECT_EQ(reader.meta_value("merged_ranks"), std::to_string(kRanks));
  EXPECT_EQ(reader.meta_value("strategy"), "ddp");
  EXPECT_EQ(reader.lanes().size(), static_cast<size_t>(kRanks * 2));

  // Every phase keeps its name, whatever id it had in its rank file.
  const auto names = reader.names();
  for (int rank = 0; rank < kRanks; ++rank) {
    auto phases = reader.events_of_kind(EventKind::Phase, rank);
    ASSERT_EQ(phases.size(), static_cast<size_t>(kIterations * 2));
    for (size_t i = 0; i < phases.size(); ++i) {
      EXPECT_EQ(names[static_cast<size_t>(phases[i].name)], i % 2 == 0 ? "forward" : "backward")
          << "rank " << rank << " phase " << i;
    }
    auto collectives = reader.events_of_kind(EventKind::Collective, rank);
    ASSERT_EQ(collectives.size(), static_cast<size_t>(kIterations));
    for (int it = 0; it < kIterations; ++it) {
      EXPECT_EQ(collectives[static_cast<size_t>(it)].value, rank * 1000 + it);
      EXPECT_EQ(collectives[static_cast<size_t>(it)].lane, 1);
    }
    auto memory = reader.memory(rank);
    ASSERT_EQ(memory.size(), static_cast<size_t>(kIterations));
    EXPECT_EQ(memory[0].bytes, 64 * (rank + 1));
  }
  auto metrics = reader.metrics();
  ASSERT_EQ(metrics.size(), static_cast<size_t>(kRanks * kIterations));
  for (const Metric& metric : metrics) {
    EXPECT_EQ(metric.name, "loss");
    EXPECT_DOUBLE_EQ(metric.value, metric.rank + metric.iteration / 10.0);
  }
  EXPECT_EQ(reader.params().size(), 1u) << "run-wide tables appear once";
  EXPECT_EQ(reader.buckets().size(), 1u);
  EXPECT_EQ(reader.unit_shards().size(), static_cast<size_t>(kRanks)) << "one shard per rank";
}

TEST(Merge, AMergedFileMergesAgainWithMoreRanks) {
  TempDir dir;
  const std::string first = dir.file("first.sqlite");
  merge_traces({write_rank(dir, 0), write_rank(dir, 1)}, first);
  const std::string all = dir.file("all.sqlite");
  auto result = merge_traces({write_rank(dir, 3), first, write_rank(dir, 2)}, all);
  EXPECT_EQ(result.ranks, 4);
  Reader reader(all);
  EXPECT_EQ(reader.event_count(), kRanks * kIterations * 3);
}

TEST(Merge, TheSameRankTwiceIsAnError) {
  TempDir dir;
  const std::string rank0 = write_rank(dir, 0);
  const std::string copy = dir.file("copy.sqlite");
  std::filesystem::copy_file(rank0, copy);
  try {
    merge_traces({rank0, copy}, dir.file("out.sqlite"));
    FAIL() << "expected a TraceError";
  } catch (const TraceError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("rank 0"), std::string::npos) << message;
    EXPECT_NE(message.find(rank0), std::string::npos) << message;
    EXPECT_NE(message.find(copy), std::string::npos) << message;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.sqlite"))) << "nothing written";
}

TEST(Merge, ABadInputFailsBeforeAnythingIsWritten) {
  TempDir dir;
  const std::string bad = dir.file("bad.sqlite");
  std::ofstream(bad) << "this is not a trace";
  try {
    merge_traces({write_rank(dir, 0), bad}, dir.file("out.sqlite"));
    FAIL() << "expected a TraceError";
  } catch (const TraceError& error) {
    EXPECT_NE(std::string(error.what()).find(bad), std::string::npos) << error.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.sqlite")));
  EXPECT_THROW(merge_traces({}, dir.file("out.sqlite")), TraceError);
  const std::string rank0 = dir.file("rank0.sqlite");
  EXPECT_THROW(merge_traces({rank0}, rank0), TraceError);
}
