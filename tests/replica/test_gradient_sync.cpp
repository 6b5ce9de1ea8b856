// engine/replica/gradient_sync.h: the one NoSyncGuard of DDP, FSDP1 and FSDP2 turns a strategy's
// gradient switch off while it lives and restores what it found, so guards nest. (Each strategy's
// accumulation under it is checked against a synced run in tests/ddp, tests/fsdp, tests/fsdp2.)
#include <gtest/gtest.h>

#include <optional>

#include "engine/replica/gradient_sync.h"

namespace dpscope::replica {
namespace {

TEST(GradientSync, OnUntilAGuardAndBackAfterIt) {
  GradientSync sync;
  EXPECT_TRUE(sync.enabled());
  {
    NoSyncGuard guard(sync);
    EXPECT_FALSE(sync.enabled());
  }
  EXPECT_TRUE(sync.enabled());
}

TEST(GradientSync, GuardsNestAndEachRestoresWhatItFound) {
  GradientSync sync;
  std::optional<NoSyncGuard> outer(std::in_place, sync);
  {
    NoSyncGuard inner(sync);
    EXPECT_FALSE(sync.enabled());
  }
  EXPECT_FALSE(sync.enabled()) << "the inner guard ended the outer one's accumulation";
  outer.reset();
  EXPECT_TRUE(sync.enabled());
}

}  // namespace
}  // namespace dpscope::replica
