// The browser viewer's cases (test_web.js), one GoogleTest each: each runs `node test_web.js
// CASE`, which serves build-web/ and drives Debian's chromium, and passes when it does. The
// cases compare the page with the desktop viewer, which needs the suite's X display.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/test_util.h"

namespace {

void run_case(const std::string& name) {
  const std::string command = "cd " DPSCOPE_SOURCE_DIR "/tests/web && DPSCOPE_WEB_DIR=" DPSCOPE_WEB_DIR
                              " DPSCOPE_BIN_DIR=" DPSCOPE_BIN_DIR " DPSCOPE_SOURCE_DIR=" DPSCOPE_SOURCE_DIR
                              " timeout 280 node test_web.js " + name;
  const auto result = dpscope::testing::run_command(command);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

TEST(Web, ALinkOpensAtItsStepAsTheDesktopDoes) { run_case("ALinkOpensAtItsStepAsTheDesktopDoes"); }
TEST(Web, KeysStepAndGCopiesTheLinkThatOpensThere) { run_case("KeysStepAndGCopiesTheLinkThatOpensThere"); }
TEST(Web, TheLinksClockScaleAndThemeAreShown) { run_case("TheLinksClockScaleAndThemeAreShown"); }
TEST(Web, AHiDpiScreenGetsItsPixels) { run_case("AHiDpiScreenGetsItsPixels"); }
TEST(Web, CompareOpensTwoRuns) { run_case("CompareOpensTwoRuns"); }
TEST(Web, ThePickerAndADroppedFileOpen) { run_case("ThePickerAndADroppedFileOpen"); }
TEST(Web, AProfilerTraceOpens) { run_case("AProfilerTraceOpens"); }
TEST(Web, BadInputIsRefusedInOneLine) { run_case("BadInputIsRefusedInOneLine"); }
TEST(Web, AGalleryOpensEachLessonAtItsMoment) { run_case("AGalleryOpensEachLessonAtItsMoment"); }
TEST(Web, ServeGivesWasmItsType) { run_case("ServeGivesWasmItsType"); }

}  // namespace
