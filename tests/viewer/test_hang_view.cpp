// A hung run in dpscope-view, headless (docs/hangs.md): tutorial 21's scenario (a) trained for
// real (rank 1 never issues bucket 0's all-reduce; rank 0 waits in it until a 2 s timeout), then
// drawn: the narration of its step says who waits for whom, and the pending all-reduce is
// outlined in the error colour to the trace's end.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/test_util.h"
#include "tests/viewer/screenshot_json.h"

using dpscope::testing::CommandResult;
using dpscope::testing::run_command;
using dpscope::testing::screenshot_json;
using dpscope::testing::TempDir;

TEST(ViewerHang, TheNarrationSaysWhoWaitsForWhom) {
  if (!std::getenv("DISPLAY")) GTEST_SKIP() << "no display: run under `xvfb-run -a ctest`";
  TempDir dir;
  const std::string bin = DPSCOPE_BIN_DIR;
  const CommandResult run = run_command(bin + "/dpscope launch -n 2 --trace-dir " + dir.file("t") + " -- " + bin +
                                        "/dpscope train --model branch --steps 3 --timeout 2 --progress-every 0");
  ASSERT_EQ(run.exit_code, 1) << run.output;
  const CommandResult view = run_command(bin + "/dpscope-view " + dir.file("t/run.sqlite") + " --screenshot " +
                                         dir.file("hang.png") + " --frames 5");
  ASSERT_EQ(view.exit_code, 0) << view.output;
  const nlohmann::json line = screenshot_json(view.output);
  EXPECT_NE(line["narration"].get<std::string>().find("hang: rank 0 waits in allreduce #4 for rank 1, which never issued it"),
            std::string::npos)
      << line.dump();
}
