// Span (viewer/span.h): each kind's fields come back as given through the 24-byte packing
// (Note [Span fields]), at the edges of their ranges too; a value past them is kept as kNone,
// and same_begin_index saturates to kNoEvent.
#include <gtest/gtest.h>

#include "viewer/span.h"

namespace {

using dpscope::trace::CollectiveOp;
using dpscope::trace::EventKind;
using dpscope::trace::kNone;
using dpscope::trace::UnitState;
using dpscope::view::Span;

TEST(SpanPacking, EveryKindKeepsItsFields) {
  const Span phase = Span::phase(-5, 7, Span::kFirstFieldMax, Span::kSecondFieldMax);
  EXPECT_EQ(phase.kind(), EventKind::Phase);
  EXPECT_EQ(phase.begin_ns, -5);
  EXPECT_EQ(phase.end_ns, 7);
  EXPECT_EQ(phase.name(), Span::kFirstFieldMax);
  EXPECT_EQ(phase.iteration(), Span::kSecondFieldMax);
  EXPECT_EQ(phase.bucket(), kNone);
  EXPECT_EQ(phase.seq(), kNone);
  const Span mark = Span::mark(1, 1, 0, kNone);
  EXPECT_EQ(mark.kind(), EventKind::Mark);
  EXPECT_EQ(mark.name(), 0);
  EXPECT_EQ(mark.iteration(), kNone);
  const Span launch = Span::bucket_launch(1, 1, 3, 123456);
  EXPECT_EQ(launch.kind(), EventKind::BucketLaunch);
  EXPECT_EQ(launch.bucket(), 3);
  EXPECT_EQ(launch.seq(), 123456);
  EXPECT_EQ(launch.name(), kNone);
  EXPECT_EQ(Span::hook(1, 2, 0).bucket(), 0);
  EXPECT_EQ(Span::hook(1, 2, 0).seq(), kNone);
  const Span collective = Span::collective(1, 2, CollectiveOp::ReduceScatter, 99);
  EXPECT_EQ(collective.kind(), EventKind::Collective);
  EXPECT_EQ(collective.op(), CollectiveOp::ReduceScatter);
  EXPECT_EQ(collective.seq(), 99);
  EXPECT_EQ(collective.bucket(), kNone);
  EXPECT_EQ(Span::collective_wait(1, 2, CollectiveOp::AllGather, 0).op(), CollectiveOp::AllGather);
  const Span unit = Span::unit_state(1, 2, 7, UnitState::Reducing);
  EXPECT_EQ(unit.unit(), 7);
  EXPECT_EQ(unit.state(), UnitState::Reducing);
  EXPECT_EQ(unit.op(), std::nullopt);
  const Span unknown = Span::other(1, 2, static_cast<EventKind>(20));
  EXPECT_EQ(static_cast<int>(unknown.kind()), 20);
  EXPECT_EQ(unknown.name(), kNone);
  EXPECT_EQ(unknown.op(), std::nullopt);
  EXPECT_EQ(sizeof(Span), 24u);
}

TEST(SpanPacking, ValuesPastTheFieldsAreKeptAsNone) {
  EXPECT_EQ(Span::phase(0, 1, Span::kFirstFieldMax + 1, 3).name(), kNone);
  EXPECT_EQ(Span::phase(0, 1, 2, Span::kSecondFieldMax + 1).iteration(), kNone);
  EXPECT_EQ(Span::phase(0, 1, 2, -Span::kSecondFieldMax - 1).iteration(), -Span::kSecondFieldMax - 1);
  EXPECT_EQ(Span::collective(0, 1, CollectiveOp::AllReduce, INT32_MAX).seq(), kNone);
  EXPECT_EQ(Span::collective(0, 1, static_cast<CollectiveOp>(200), 1).op(), std::nullopt);
  EXPECT_EQ(Span::unit_state(0, 1, 1, static_cast<UnitState>(200)).state(), std::nullopt);
}

TEST(SpanPacking, SameBeginIndexLeavesTheFieldsAloneAndSaturates) {
  Span s = Span::bucket_launch(10, 10, 5, 77);
  EXPECT_EQ(s.same_begin_index(), 0u);
  s.set_same_begin_index(2046);
  EXPECT_EQ(s.same_begin_index(), 2046u);
  EXPECT_EQ(s.kind(), EventKind::BucketLaunch);
  EXPECT_EQ(s.bucket(), 5);
  EXPECT_EQ(s.seq(), 77);
  s.set_same_begin_index(2047);
  EXPECT_EQ(s.same_begin_index(), Span::kNoEvent);
  s.set_same_begin_index(Span::kNoEvent);
  EXPECT_EQ(s.same_begin_index(), Span::kNoEvent);
  s.set_same_begin_index(1);
  EXPECT_EQ(s.same_begin_index(), 1u);
  EXPECT_EQ(s.seq(), 77);
  const Span fresh;
  EXPECT_EQ(fresh.kind(), EventKind::Phase);
  EXPECT_EQ(fresh.name(), kNone);
  EXPECT_EQ(fresh.iteration(), kNone);
  EXPECT_EQ(fresh.same_begin_index(), 0u);
}

}  // namespace
