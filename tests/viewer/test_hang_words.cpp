// What the viewer says of a hung run (viewer/hang_words.h): who waits for whom in the header and
// the narration, from the analysis's HangReport; nothing for a run that completed.
#include <gtest/gtest.h>

#include "viewer/hang_words.h"

using dpscope::analysis::HangCollective;
using dpscope::analysis::HangReport;
using dpscope::trace::CollectiveEndState;

namespace {

HangCollective pending(int32_t rank, int64_t seq, double seconds) {
  HangCollective c;
  c.rank = rank;
  c.seq = seq;
  c.op = dpscope::trace::CollectiveOp::AllReduce;
  c.state = CollectiveEndState::Started;
  c.issued_ns = 1'000'000'000;
  c.end_ns = c.issued_ns + static_cast<int64_t>(seconds * 1e9);
  return c;
}

}  // namespace

TEST(HangWords, SayWhoWaitsForWhomAndHowLong) {
  HangReport hang;
  hang.culprit = 1;
  hang.missing_ranks = {1};
  dpscope::analysis::HangGroup world;
  for (int32_t r : {0, 1, 2}) {
    dpscope::analysis::HangRank rank;
    rank.rank = r;
    // The culprit is stuck too (in a later collective of its own): it waits for nobody.
    rank.pending.push_back(pending(r, r == 1 ? 42 : 41, r == 0 ? 5.0 : 4.5));
    world.ranks.push_back(rank);
  }
  hang.groups.push_back(world);
  EXPECT_EQ(dpscope::view::hang_who_waits(hang), "ranks 0, 2 wait in allreduce #41 for rank 1, which never issued it");
  EXPECT_EQ(dpscope::view::hang_header_piece(hang),
            "hang: ranks 0, 2 wait in allreduce #41 for rank 1, which never issued it, stuck 5.0 s");
  hang.missing_ranks.clear();
  EXPECT_EQ(dpscope::view::hang_who_waits(hang), "ranks 0, 2 wait in allreduce #41 for rank 1, which diverged");
  EXPECT_EQ(dpscope::view::hang_header_piece(std::nullopt), "");
  hang.culprit = dpscope::trace::kNone;
  EXPECT_EQ(dpscope::view::hang_who_waits(hang), "");
}
