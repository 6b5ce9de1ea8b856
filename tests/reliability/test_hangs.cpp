// Hangs on purpose (docs/hangs.md): a rank of a real `dpscope train` job skips or resizes a
// collective (DPSCOPE_FAULT :skip, :resize) under a 3-second --timeout. The run stops within the
// timeout + 10 s, every trace file reads, the collectives never completed are in them, and
// `dpscope stats --json`'s hang section names the culprit, the group, the sequence number, the
// kind and the bucket or unit.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <set>
#include <ostream>

#include "engine/fault/fault_injection.h"
#include "tests/reliability/reliability_util.h"
#include "trace/collective_state.h"

using namespace dpscope::testing;

namespace {

constexpr int kTimeoutSeconds = 3;

struct HangCase {
  const char* name;
  const char* environment;  // DPSCOPE_FAULT=... and more
  int ranks;
  const char* strategy;
  const char* extra;  // more train flags
  int culprit;
  const char* kind;   // the kind of the first disagreement's collective on the others
  const char* tag;    // "bucket" or "unit": the engine tag the first disagreement carries
};

void PrintTo(const HangCase& c, std::ostream* out) { *out << c.environment << " " << c.strategy; }

class Hang : public ::testing::TestWithParam<HangCase> {};

}  // namespace

TEST_P(Hang, StopsInTimeEveryTraceReadsAndTheCulpritIsNamed) {
  const HangCase& c = GetParam();
  TempDir dir;
  const std::string traces = dir.file("t");
  const CommandResult result =
      launch(c.environment, c.ranks, traces,
             train_command(c.strategy, 12, "--model mlp --data digits --timeout " +
                                               std::to_string(kTimeoutSeconds) + " " + c.extra));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_TRUE(contains(result.output, "dpscope launch: hang: ")) << result.output;
  EXPECT_TRUE(contains(result.output, "culprit: rank " + std::to_string(c.culprit))) << result.output;

  const auto files = read_all_traces(traces);
  EXPECT_EQ(files.size(), static_cast<size_t>(c.ranks + 1)) << "every rank's file and run.sqlite";
  // Stopped within the timeout + 10 s of the first collective a rank never completed: from its
  // issue to the moment the last rank's recorder closed.
  dpscope::trace::Reader merged(traces + "/run.sqlite");
  int64_t first_stuck_ns = INT64_MAX;
  for (const auto& e : merged.events_of_kind(dpscope::trace::EventKind::Collective)) {
    if (e.flags & dpscope::trace::kFlagNotCompleted) {
      first_stuck_ns = std::min(first_stuck_ns, e.enqueue_ns != dpscope::trace::kNone64 ? e.enqueue_ns : e.begin_ns);
    }
  }
  ASSERT_NE(first_stuck_ns, INT64_MAX) << "no collective recorded as never completed";
  // Every collective a rank issued is in its trace, numbered without a gap: a skipped one takes
  // no sequence number.
  std::map<int, std::set<int64_t>> seqs;
  for (const auto& e : merged.events_of_kind(dpscope::trace::EventKind::Collective)) {
    if (e.grp == 0) seqs[e.rank].insert(e.seq);
  }
  // Every rank was inside a collective when the run stopped, and its trace keeps it: one that
  // failed, or one pending when its rank ended (SIGTERM from the launcher, an abort), which the
  // flush guard records (Note [Pending collectives]).
  std::set<int> stuck_ranks;
  for (const auto& e : merged.events_of_kind(dpscope::trace::EventKind::Collective)) {
    if (e.flags & dpscope::trace::kFlagNotCompleted) stuck_ranks.insert(e.rank);
  }
  EXPECT_EQ(stuck_ranks.size(), static_cast<size_t>(c.ranks)) << "a rank's trace lost the collective it was in";
  for (const auto& [rank, numbers] : seqs) {
    EXPECT_EQ(*numbers.rbegin() + 1, static_cast<int64_t>(numbers.size())) << "rank " << rank << "'s sequence numbers have a gap";
  }
  for (const auto& rank : merged.ranks()) {
    EXPECT_LE(rank.end_ns - first_stuck_ns, (kTimeoutSeconds + 10) * int64_t{1'000'000'000})
        << "rank " << rank.rank << " ended " << (rank.end_ns - first_stuck_ns) / 1e9 << " s after the hang began";
    EXPECT_NE(rank.status, "complete") << "rank " << rank.rank;
  }

  const CommandResult stats = run_command(dpscope_bin() + " stats --json " + traces + "/run.sqlite");
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  const nlohmann::json json = nlohmann::json::parse(stats.output);
  const nlohmann::json& hang = json["hang"];
  ASSERT_TRUE(hang.is_object()) << stats.output;
  EXPECT_EQ(hang["culprit"], c.culprit) << hang.dump();
  const nlohmann::json& first = hang["first_disagreement"];
  ASSERT_TRUE(first.is_object()) << hang.dump();
  EXPECT_EQ(first["group"], 0);
  EXPECT_EQ(first["group_name"], "world");
  EXPECT_TRUE(first["seq"].is_number_integer());
  bool others_named = false;
  for (const auto& collective : first["collectives"]) {
    EXPECT_EQ(collective["seq"], first["seq"]);
    if (collective["rank"] == c.culprit) continue;
    EXPECT_EQ(collective["kind"], c.kind) << collective.dump();
    EXPECT_TRUE(collective[c.tag].is_number_integer()) << collective.dump();
    others_named = true;
  }
  EXPECT_TRUE(others_named) << hang.dump();
  EXPECT_TRUE(contains(hang["sentence"].get<std::string>(), "rank " + std::to_string(c.culprit)))
      << hang["sentence"];
  EXPECT_TRUE(contains(hang["sentence"].get<std::string>(),
                       std::string(c.kind) + " #" + std::to_string(first["seq"].get<int64_t>())))
      << hang["sentence"];
  // The text report says the same.
  const CommandResult text = run_command(dpscope_bin() + " stats " + traces + "/run.sqlite");
  EXPECT_TRUE(contains(text.output, "hang: " + hang["sentence"].get<std::string>())) << text.output;
}

INSTANTIATE_TEST_SUITE_P(
    reliability, Hang,
    ::testing::Values(
        // DDP, 3 buckets: rank 1 skips iteration 3's first all-reduce.
        HangCase{"DdpSkippedBucket", "DPSCOPE_FAULT=allreduce#8@1:skip", 2, "ddp",
                 "--bucket-cap-mb 0.12 --first-bucket-mb 0.12", 1, "allreduce", "bucket"},
        // DDP: rank 0 all-reduces a bucket with half its elements.
        HangCase{"DdpResizedBucket", "DPSCOPE_FAULT=allreduce#6@0:resize", 2, "ddp",
                 "--bucket-cap-mb 0.12 --first-bucket-mb 0.12", 0, "allreduce", "bucket"},
        // FSDP2: rank 1 skips a unit's all-gather.
        HangCase{"Fsdp2SkippedAllGather", "DPSCOPE_FAULT=allgather#9@1:skip", 2, "fsdp2",
                 "--wrap-min-params 1000", 1, "allgather", "unit"},
        // Three ranks: the majority tells.
        HangCase{"DdpSkippedOnThreeRanks", "DPSCOPE_FAULT=allreduce#5@2:skip", 3, "ddp",
                 "--bucket-cap-mb 0.12 --first-bucket-mb 0.12", 2, "allreduce", "bucket"},
        // Check mode stops at the first mismatch, long before the timeout.
        HangCase{"CheckModeStopsAtOnce", "DPSCOPE_CHECK_COLLECTIVES=1 DPSCOPE_FAULT=allreduce#8@1:skip", 2,
                 "ddp", "--bucket-cap-mb 0.12 --first-bucket-mb 0.12", 1, "allreduce", "bucket"}),
    [](const ::testing::TestParamInfo<HangCase>& info) { return std::string(info.param.name); });

TEST(reliability, SkipAndResizeAreParsedOnlyAtCollectives) {
  using dpscope::fault::FaultAction;
  using dpscope::fault::parse_fault_spec;
  EXPECT_EQ(parse_fault_spec("allreduce#41@1:skip").action, FaultAction::Skip);
  EXPECT_EQ(parse_fault_spec("allgather@0:resize").action, FaultAction::Resize);
  EXPECT_EQ(parse_fault_spec("barrier#2@1:skip").occurrence, 2);
  for (const char* bad : {"backward@1:skip", "optimizer_step@0:resize", "barrier@1:resize", "allreduce@1:drop"}) {
    EXPECT_THROW(parse_fault_spec(bad), std::invalid_argument) << bad;
  }
}
