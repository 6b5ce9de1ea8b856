// What a recording process leaves behind when it does not end normally: killed with SIGKILL
// (every committed transaction readable), interrupted with SIGINT (flushed and finished),
// an escaping exception and exit() (flushed by the flush guards).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "tests/test_util.h"
#include "trace/reader.h"

using namespace dpscope::trace;
using dpscope::testing::TempDir;

namespace {

const std::string kChild = std::string(DPSCOPE_BIN_DIR) + "/crash_child";

// A running crash_child whose stdout we read line by line.
struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;

  Child(const std::string& mode, const std::string& path) {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      ::execl(kChild.c_str(), kChild.c_str(), mode.c_str(), path.c_str(), nullptr);
      ::_exit(127);
    }
    ::close(fds[1]);
    out = ::fdopen(fds[0], "r");
  }
  ~Child() {
    if (out) std::fclose(out);
  }
  // Reads "committed N" lines until N >= at_least; returns the last N (0 on EOF).
  int64_t wait_committed(int64_t at_least) {
    char line[128];
    long long committed = 0;
    while (committed < at_least && std::fgets(line, sizeof(line), out)) {
      std::sscanf(line, "committed %lld", &committed);
    }
    return committed;
  }
  int wait_status() {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return status;
  }
};

// The numbered events' values must be exactly 0..count-1: nothing lost in the middle.
int64_t check_contiguous(Reader& reader) {
  int64_t expected = 0;
  reader.for_each_event([&](const Event& e) {
    EXPECT_EQ(e.value, expected) << "event values must be a contiguous prefix";
    ++expected;
    return e.value == expected - 1;
  });
  return expected;
}

}  // namespace

TEST(RecorderCrash, SigkillLeavesEveryCommittedEventReadable) {
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  Child child("stream", path);
  const int64_t committed = child.wait_committed(20000);
  ASSERT_GE(committed, 20000);
  ::kill(child.pid, SIGKILL);
  const int status = child.wait_status();
  ASSERT_TRUE(WIFSIGNALED(status));
  ASSERT_EQ(WTERMSIG(status), SIGKILL);

  Reader reader(path);
  const int64_t events = check_contiguous(reader);
  EXPECT_GE(events, committed);
  ASSERT_EQ(reader.ranks().size(), 1u);
  EXPECT_EQ(reader.ranks()[0].status, "running") << "a killed writer cannot finish its row";
}

TEST(RecorderCrash, SigintFlushesAndFinishesTheFile) {
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  Child child("stream", path);
  const int64_t committed = child.wait_committed(10000);
  ASSERT_GE(committed, 10000);
  ::kill(child.pid, SIGINT);
  const int status = child.wait_status();
  ASSERT_TRUE(WIFSIGNALED(status)) << "the signal is re-raised after the flush";
  EXPECT_EQ(WTERMSIG(status), SIGINT);

  EXPECT_FALSE(std::filesystem::exists(path + "-wal")) << "a finished file has no WAL left";
  Reader reader(path);
  const int64_t events = check_contiguous(reader);
  EXPECT_GE(events, committed);
  auto ranks = reader.ranks();
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_EQ(ranks[0].status, "interrupted (SIGINT)");
  EXPECT_EQ(ranks[0].events, events);
}

TEST(RecorderCrash, SigtermFlushesToo) {
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  Child child("stream", path);
  ASSERT_GE(child.wait_committed(3000), 3000);
  ::kill(child.pid, SIGTERM);
  const int status = child.wait_status();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  Reader reader(path);
  EXPECT_GE(check_contiguous(reader), 3000);
  EXPECT_EQ(reader.ranks()[0].status, "terminated (SIGTERM)");
}

TEST(RecorderCrash, EscapingExceptionFlushes) {
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  Child child("throw", path);
  const int status = child.wait_status();
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGABRT);
  Reader reader(path);
  EXPECT_EQ(check_contiguous(reader), 1234);
  EXPECT_EQ(reader.ranks()[0].status, "terminated: boom");
}

TEST(RecorderCrash, ExitFlushes) {
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  Child child("exit", path);
  const int status = child.wait_status();
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3);
  Reader reader(path);
  EXPECT_EQ(check_contiguous(reader), 777);
  EXPECT_EQ(reader.ranks()[0].status, "complete (exit)");
}
