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
  EXPECT_NE(a.note.find("refused: group 0's collective #2 would end on rank 0"), std::string::npos) << a.note;
  EXPECT_NE(a.note.find("before rank 1 began it"), std::string::npos) << a.note;
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

TEST(KinetoAlign, AlignNoneKeepsTheProfilersClocks) {
  ShiftedRun shifted;
  import_shifted(shifted, 250, trace::ClockAlignment::None);
  EXPECT_EQ(shifted.alignment, "none");
  EXPECT_EQ(shifted.ranks[1].clock_offset_ns, 0);
  EXPECT_NEAR(static_cast<double>(shifted.ranks[1].start_ns - shifted.ranks[0].start_ns), 250'000, 1);
}

}  // namespace
}  // namespace dpscope::formats
