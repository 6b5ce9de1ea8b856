// The Gloo device's process-wide side effect (engine/comm/gloo_device.h): once a rank has made a
// Gloo device, a write to a connection whose peer is gone fails with EPIPE instead of SIGPIPE
// killing the rank silently, unless the program chose its own SIGPIPE disposition. Each case
// runs in a fresh process (a death test re-executed from the start), whose dispositions are its own.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "engine/comm/gloo_device.h"

namespace {

// Writes with writev, as Gloo's TCP pairs do, to a connected socket whose peer end is closed.
// Returns the errno of the failed write (0 if it succeeded).
int write_to_a_closed_peer() {
  int ends[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM, 0, ends) != 0) return -1;
  ::close(ends[1]);
  char byte = 1;
  iovec iov{&byte, 1};
  const ssize_t written = ::writev(ends[0], &iov, 1);
  const int error = written < 0 ? errno : 0;
  ::close(ends[0]);
  return error;
}

void handler(int) {}

class GlooDevice : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

}  // namespace

TEST_F(GlooDevice, WithoutItSigpipeKillsAProcessThatWritesToAClosedPeer) {
  EXPECT_EXIT(
      {
        ::signal(SIGPIPE, SIG_DFL);
        write_to_a_closed_peer();
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGPIPE), "");
}

TEST_F(GlooDevice, AfterMakingOneAWriteToAClosedPeerFailsWithEpipe) {
  EXPECT_EXIT(
      {
        ::signal(SIGPIPE, SIG_DFL);
        dpscope::comm::make_gloo_device(0, 1);
        std::_Exit(write_to_a_closed_peer() == EPIPE ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(GlooDevice, AProgramsOwnSigpipeHandlerIsKept) {
  EXPECT_EXIT(
      {
        ::signal(SIGPIPE, handler);
        dpscope::comm::make_gloo_device(0, 1);
        struct sigaction now {};
        ::sigaction(SIGPIPE, nullptr, &now);
        std::_Exit(now.sa_handler == handler ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}
