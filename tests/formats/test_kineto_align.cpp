// Ranks on one clock for imported profiler traces (formats/kineto_align.h, Note [Aligning on
// collective ends]): the median shift of the shared blocking collectives' ends, half their
// interquartile range, the causality check; and the import on nccl_data and a rank 1 made from it
// with a known clock error (tests/formats/kineto_shift.py), where the truth is known.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analysis/stats.h"
#include "formats/kineto_align.h"
#include "tests/formats/kineto_fixture.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::formats {
namespace {

using kineto_test::shipped;
using CollectivesByGroup = std::map<int16_t, std::vector<SurveyedCollective>>;
constexpr uint8_t kAllReduce = static_cast<uint8_t>(trace::CollectiveOp::AllReduce);
constexpr uint8_t kSendRecv = static_cast<uint8_t>(trace::CollectiveOp::SendRecv);

// Collectives every `period` ns lasting `length`, their ends moved by `jitter[i]` ns.
CollectivesByGroup collectives(int count, int64_t shift, const std::vector<int64_t>& jitter = {},
                               uint8_t op = kAllReduce) {
  CollectivesByGroup by_group;
  for (int i = 0; i < count; ++i) {
    const int64_t begin = 1'000'000 * i + shift;
    const int64_t end = begin + 400'000 + (i < static_cast<int>(jitter.size()) ? jitter[i] : 0);
    by_group[0].push_back({begin, end, op});
    by_group[0].back().seq = i;  // its place in time (Note [Collective sequence numbers])
  }
  return by_group;
}

TEST(KinetoAlign, TheMedianShiftOfTheEndsIsTheOffset) {
  const CollectivesByGroup zero = collectives(9, 0);
  // Rank 1's clock reads 5 ms late; one end of nine is 300 µs late, the rest jitter by ±4 µs.
  const CollectivesByGroup one =
      collectives(9, 5'000'000, {4000, -4000, 2000, -2000, 300'000, 0, 1000, -1000, 3000});
  const Alignment a = align_ranks({{1, 0, &one}, {0, 0, &zero}}, trace::ClockAlignment::CollectiveEnds);
  EXPECT_EQ(a.method, trace::ClockAlignment::CollectiveEnds);
  EXPECT_EQ(a.note, "");
  ASSERT_EQ(a.ranks.size(), 2u);
  EXPECT_EQ(a.ranks[0].rank, 1) << "the result keeps the order given";
  EXPECT_EQ(a.ranks[0].matched, 9);
  EXPECT_EQ(a.ranks[0].offset_ns, -5'000'000 - 1000) << "the median, not the mean the late end would pull";
  EXPECT_EQ(a.ranks[0].uncertainty_ns, 2000) << "half the interquartile range of the shifts";
  EXPECT_EQ(a.ranks[1].offset_ns, 0) << "the lowest rank is the reference";
  EXPECT_EQ(a.ranks[1].uncertainty_ns, 0);
}

TEST(KinetoAlign, TheUncertaintyIsAtLeastOneMicrosecondAndTheBaseTimesCount) {
  const CollectivesByGroup zero = collectives(4, 0);
  const CollectivesByGroup one = collectives(4, 0);
  // The files' base times differ by 2 s; the profilers' own times agree.
  const Alignment a = align_ranks({{0, 2'000'000'000, &zero}, {1, 0, &one}}, trace::ClockAlignment::CollectiveEnds);
  EXPECT_EQ(a.ranks[1].offset_ns, 2'000'000'000);
  EXPECT_EQ(a.ranks[1].uncertainty_ns, 1000);
}

TEST(KinetoAlign, SendRecvAndOpsThatDisagreeAreNotMatched) {
  const CollectivesByGroup zero = collectives(4, 0, {}, kSendRecv);
  const CollectivesByGroup one = collectives(4, 7'000, {}, kSendRecv);
  EXPECT_FALSE(can_align_collective_ends({{0, 0, &zero}, {1, 0, &one}}));
  const Alignment a = align_ranks({{0, 0, &zero}, {1, 0, &one}}, trace::ClockAlignment::CollectiveEnds);
  EXPECT_EQ(a.method, trace::ClockAlignment::None);
  EXPECT_EQ(a.ranks[1].offset_ns, 0);
  EXPECT_NE(a.note.find("needs two ranks that share a blocking collective"), std::string::npos) << a.note;
  const CollectivesByGroup reduce = collectives(4, 0);
  const CollectivesByGroup broadcast = collectives(4, 0, {}, static_cast<uint8_t>(trace::CollectiveOp::Broadcast));
  EXPECT_FALSE(can_align_collective_ends({{0, 0, &reduce}, {1, 0, &broadcast}}));
  EXPECT_FALSE(can_align_collective_ends({{0, 0, &reduce}})) << "one rank has nothing to align with";
}

TEST(KinetoAlign, AShiftThatWouldEndACollectiveBeforeItsLastRankBeganIsRefused) {
  // Rank 1's collectives last 10 µs and end with rank 0's, but begin 300 µs after them in one case:
  // lined up on their ends, rank 0's end would come before rank 1 began.
  CollectivesByGroup zero = collectives(5, 0);
  CollectivesByGroup one = collectives(5, 0);
  one[0][2].begin_ns = one[0][2].end_ns + 300'000;
  one[0][2].end_ns = one[0][2].begin_ns + 10'000;
  zero[0][2].end_ns = one[0][2].end_ns - 300'000;
  const Alignment a = align_ranks({{0, 0, &zero}, {1, 0, &one}}, trace::ClockAlignment::CollectiveEnds);
  EXPECT_EQ(a.method, trace::ClockAlignment::None);
  EXPECT_EQ(a.ranks[1].offset_ns, 0);
  EXPECT_NE(a.note.find("refused: group 0's collective seq 2 would end on rank 0"), std::string::npos) << a.note;
  EXPECT_NE(a.note.find("before rank 1 began it"), std::string::npos) << a.note;
}

// Matching goes by sequence number, not by place: a rank whose recording starts one collective
// later (its seq from Kineto's Seq) still pairs each collective with the same one on the other.
TEST(KinetoAlign, CollectivesPairBySequenceNumberNotPlace) {
  CollectivesByGroup zero = collectives(6, 0);
  CollectivesByGroup one = collectives(6, 2'000'000);
  one[0].erase(one[0].begin());  // rank 1's profiler began after collective 0
  const Alignment a = align_ranks({{0, 0, &zero}, {1, 0, &one}}, trace::ClockAlignment::CollectiveEnds);
  EXPECT_EQ(a.method, trace::ClockAlignment::CollectiveEnds) << a.note;
  EXPECT_EQ(a.ranks[1].matched, 5);
  EXPECT_EQ(a.ranks[1].offset_ns, -2'000'000);
  EXPECT_EQ(a.ranks[1].uncertainty_ns, 1000);
}

TEST(KinetoAlign, NoneKeepsEveryClock) {
  const CollectivesByGroup zero = collectives(4, 0);
  const CollectivesByGroup one = collectives(4, 9'000'000);
  const Alignment a = align_ranks({{0, 0, &zero}, {1, 0, &one}}, trace::ClockAlignment::None);
  EXPECT_EQ(a.method, trace::ClockAlignment::None);
  EXPECT_EQ(a.ranks[1].offset_ns, 0);
  EXPECT_EQ(a.note, "");
}

// ---- The import, on nccl_data (rank 0 of a 2-rank A100 job) and a rank 1 made from it.

struct ShiftedRun {
  kineto_test::Imported run;
  std::vector<trace::RankInfo> ranks;
  std::string alignment;
};

// Imports nccl_data with a rank 1 whose clock is `offset_us` off and whose NCCL kernels end up
// to 20 µs apart from rank 0's.
void import_shifted(ShiftedRun& out, double offset_us, std::optional<trace::ClockAlignment> align = std::nullopt) {
  const std::string one = out.run.dir.file("rank1.json.gz");
  const testing::CommandResult made =
      testing::run_command("/usr/bin/python3 " + std::string(DPSCOPE_SOURCE_DIR) +
                           "/tests/formats/kineto_shift.py " + shipped("nccl_data.json.gz") + " " + one +
                           " 1 " + std::to_string(offset_us) + " 20 7");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  out.run.path = out.run.dir.file("run.sqlite");
  KinetoImportOptions options;
  options.inputs = {shipped("nccl_data.json.gz"), one};
  options.out = out.run.path;
  options.align = align;
  out.run.result = import_kineto(options, [&](const std::string& line) { out.run.warnings.push_back(line); });
  trace::Reader reader(out.run.path);
  out.ranks = reader.ranks();
  out.alignment = reader.meta_value(std::string(trace::meta_key::kClockAlignment));
}

TEST(KinetoAlign, AKnownClockErrorComesBackWithin20Microseconds) {
  for (const double offset_us : {-40'000.0, 250.0, 3'000'000.0}) {
    ShiftedRun shifted;
    import_shifted(shifted, offset_us);
    ASSERT_EQ(shifted.ranks.size(), 2u);
    EXPECT_EQ(shifted.alignment, "collective-ends");
    EXPECT_EQ(shifted.run.result.alignment, trace::ClockAlignment::CollectiveEnds);
    EXPECT_TRUE(shifted.run.warnings.empty()) << shifted.run.warnings.front();
    const trace::RankInfo& one = shifted.ranks[1];
    const double error_ns = std::abs(static_cast<double>(one.clock_offset_ns) + offset_us * 1e3);
    EXPECT_LE(error_ns, 20'000) << "offset " << offset_us << " µs came back as " << one.clock_offset_ns << " ns";
    EXPECT_GE(static_cast<double>(one.clock_uncertainty_ns), error_ns) << "the uncertainty covers the error";
    EXPECT_LE(one.clock_uncertainty_ns, 20'000);
    EXPECT_EQ(shifted.ranks[0].clock_offset_ns, 0);
    // The rank's times moved with it: it starts where rank 0 does.
    EXPECT_LE(std::abs(static_cast<double>(one.start_ns - shifted.ranks[0].start_ns)), 20'000);
  }
}

// Kineto's own Seq (record_param_comms, around the collective's issue) numbers the collectives
// where every one of a group has it: rank 1's file lacks the first all-reduce, yet the two
// ranks' collectives pair by Seq, and the alignment finds rank 1's 3 ms clock error.
std::string seq_rank(int rank, int first, double shift_us) {
  std::vector<std::string> events;
  events.push_back(kineto_test::x_event("user_annotation", "ProfilerStep#0", 1, 1, shift_us, 20'000));
  for (int i = first; i < 6; ++i) {
    const double at = shift_us + 1000.0 + 3000.0 * i;
    events.push_back(kineto_test::x_event("cpu_op", "record_param_comms", 1, 1, at, 1000,
                                          "\"Seq\": " + std::to_string(100 + i) +
                                              ", \"Process Group Name\": \"0\", \"Collective name\": \"allreduce\""));
    events.push_back(kineto_test::x_event("cpu_op", "nccl:all_reduce", 1, 1, at + 1, 900 + (rank ? 0.5 : 0),
                                          "\"Input Dims\": [[256]], \"Input type\": [\"float\"]"));
  }
  return kineto_test::object_trace(events, "\"rank\": " + std::to_string(rank) + ", \"world_size\": 2, \"backend\": \"nccl\"");
}

TEST(KinetoAlign, KinetosSeqPairsRanksWhoseRecordingsBeginApart) {
  kineto_test::Imported run;
  const std::string zero = run.dir.file("rank-0.json"), one = run.dir.file("rank-1.json");
  testing::write_file(zero, seq_rank(0, 0, 0));
  testing::write_file(one, seq_rank(1, 1, 3000));
  kineto_test::import_into(run, {zero, one});
  trace::Reader reader(run.path);
  std::map<int32_t, std::vector<int64_t>> seqs;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Collective)) seqs[e.rank].push_back(e.seq);
  EXPECT_EQ(seqs[0], (std::vector<int64_t>{100, 101, 102, 103, 104, 105}));
  EXPECT_EQ(seqs[1], (std::vector<int64_t>{101, 102, 103, 104, 105})) << "Kineto's Seq, not the place in the file";
  const std::vector<trace::RankInfo> ranks = reader.ranks();
  ASSERT_EQ(ranks.size(), 2u);
  EXPECT_NEAR(static_cast<double>(ranks[1].clock_offset_ns), -3'000'000, 1000);
  const analysis::RunStats stats = analysis::compute_stats(reader);
  int64_t matched = 0;
  for (const analysis::CollectiveMatch& m : stats.matches) {
    if (m.seq == 100) EXPECT_TRUE(m.mismatch) << "only rank 0 recorded it";
    else matched += m.mismatch ? 0 : 1;
  }
  EXPECT_EQ(matched, 5) << "each collective both recorded pairs with its own";
}

TEST(KinetoAlign, AlignNoneKeepsTheProfilersClocks) {
  ShiftedRun shifted;
  import_shifted(shifted, 250, trace::ClockAlignment::None);
  EXPECT_EQ(shifted.alignment, "none");
  EXPECT_EQ(shifted.ranks[1].clock_offset_ns, 0);
  EXPECT_NEAR(static_cast<double>(shifted.ranks[1].start_ns - shifted.ranks[0].start_ns), 250'000, 1);
}

}  // namespace
}  // namespace dpscope::formats
