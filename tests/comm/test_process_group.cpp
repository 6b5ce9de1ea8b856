// The backend-independent half of the communication layer, with threads as ranks on one shared
// store and a test backend: sequence numbers and tracing of every collective and wait, argument
// checks, the check mode naming the ranks that differ, timeouts naming the ranks not heard from,
// torchrun's environment and the rendezvous.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <ATen/ATen.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <future>
#include <stdexcept>
#include <thread>

#include "engine/comm/gloo_backend.h"
#include "engine/comm/host_values.h"
#include "engine/comm/process_group.h"
#include "engine/comm/rendezvous.h"
#include "engine/comm/store_util.h"
#include "tests/test_util.h"
#include "trace/reader.h"

using namespace dpscope;
using namespace dpscope::comm;
using dpscope::testing::TempDir;

namespace {

// Finishes every request at once (Immediate) or never (Never): the base class's logic alone.
class TestGroup : public ProcessGroup {
 public:
  enum class Mode { Immediate, Never };
  TestGroup(std::shared_ptr<c10d::Store> store, int rank, int size, ProcessGroupOptions options,
            Mode mode)
      : ProcessGroup(std::move(store), rank, size, std::move(options), "test comm",
                     trace::LaneKind::Comm),
        mode_(mode) {}
  ~TestGroup() override {
    stop_heartbeat();
    for (auto& request : held_) request->work->finish(0, 0, nullptr);
  }
  std::string backend_name() const override { return "test"; }

 protected:
  void enqueue(std::shared_ptr<Request> request) override {
    if (mode_ == Mode::Never) {
      held_.push_back(std::move(request));
      return;
    }
    const int64_t t = trace::now_ns();
    request->work->finish(t, t + 1000, nullptr);
  }

 private:
  Mode mode_;
  std::deque<std::shared_ptr<Request>> held_;
};

ProcessGroupOptions options_with(std::chrono::milliseconds timeout, bool check) {
  ProcessGroupOptions options;
  options.timeout = timeout;
  options.check_collectives = check;
  return options;
}

// Runs body(rank) on `size` threads and returns each rank's error message ("" if none).
std::vector<std::string> run_ranks(int size, const std::function<void(int)>& body) {
  std::vector<std::string> errors(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (const std::exception& error) {
        errors[static_cast<size_t>(r)] = error.what();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return errors;
}

// Keeps the other ranks alive until rank 0's wait has timed out, instead of sleeping past the
// timeout (a sleep of 2.5 s against a 2 s timeout let a busy machine end them first). A wait that
// never times out fails the test after a minute rather than hanging it.
class TimeoutSignal {
 public:
  void wait_signalling(Work& work) {
    try {
      work.wait();
    } catch (...) {
      fired_.set_value();
      throw;
    }
    fired_.set_value();
  }
  void outlive() {
    if (fired_future_.wait_for(std::chrono::minutes(1)) != std::future_status::ready) {
      throw std::runtime_error("rank 0's wait neither timed out nor finished within a minute");
    }
  }

 private:
  std::promise<void> fired_;
  std::shared_future<void> fired_future_ = fired_.get_future().share();
};

}  // namespace

TEST(processGroup, NumbersTracesAndWaitsEveryCollective) {
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  {
    trace::RecorderOptions recorder_options;
    recorder_options.path = path;
    trace::Recorder recorder(recorder_options);
    ProcessGroupOptions options;
    options.recorder = &recorder;
    options.group_id = 3;
    TestGroup group(std::make_shared<c10d::HashStore>(), 0, 1, options,
                    TestGroup::Mode::Immediate);
    auto a = group.all_reduce(at::ones({4}), ReduceOp::Sum, CollectiveTag{2, 5, trace::kNone, 0});
    auto b = group.broadcast(at::ones({3}, at::kDouble), 0);
    auto c = group.all_gather(at::empty({8}), at::ones({8}));
    auto d = group.reduce_scatter(at::empty({2}), at::ones({2}, at::kFloat), ReduceOp::Max);
    auto e = group.barrier();
    EXPECT_EQ(a->seq(), 0);
    EXPECT_EQ(e->seq(), 4);
    for (auto& work : {a, b, c, d, e}) {
      EXPECT_TRUE(work->is_completed());
      work->wait(0);
    }
  }
  trace::Reader reader(path);
  auto collectives = reader.events_of_kind(trace::EventKind::Collective);
  ASSERT_EQ(collectives.size(), 5u);
  EXPECT_EQ(collectives[0].op, static_cast<uint8_t>(trace::CollectiveOp::AllReduce));
  EXPECT_EQ(collectives[0].bytes, 16);
  EXPECT_EQ(collectives[0].iteration, 2);
  EXPECT_EQ(collectives[0].bucket, 5);
  EXPECT_EQ(collectives[0].grp, 3);
  EXPECT_EQ(collectives[0].dtype, static_cast<uint8_t>(trace::DType::Float32));
  EXPECT_EQ(collectives[1].dtype, static_cast<uint8_t>(trace::DType::Float64));
  EXPECT_EQ(collectives[1].bytes, 24);
  EXPECT_EQ(collectives[3].op, static_cast<uint8_t>(trace::CollectiveOp::ReduceScatter));
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(collectives[static_cast<size_t>(i)].seq, i);
    EXPECT_GE(collectives[static_cast<size_t>(i)].begin_ns,
              collectives[static_cast<size_t>(i)].enqueue_ns);
    EXPECT_EQ(collectives[static_cast<size_t>(i)].lane, 1) << "on the group's comm lane";
  }
  EXPECT_EQ(reader.lanes()[1].name, "test comm (world)");
  EXPECT_EQ(reader.events_of_kind(trace::EventKind::CollectiveWait).size(), 5u);
}

TEST(processGroup, DurationIsTheSpanTheBackendRecorded) {
  TestGroup immediate(std::make_shared<c10d::HashStore>(), 0, 1, ProcessGroupOptions{},
                      TestGroup::Mode::Immediate);
  auto done = immediate.all_reduce(at::ones({4}), ReduceOp::Sum);
  done->wait();
  EXPECT_EQ(done->duration_ns(), 1000) << "the test backend finishes with a 1000 ns span";

  TestGroup never(std::make_shared<c10d::HashStore>(), 0, 1, ProcessGroupOptions{},
                  TestGroup::Mode::Never);
  auto pending = never.broadcast(at::ones({3}), 0);
  EXPECT_FALSE(pending->is_completed());
  EXPECT_EQ(pending->duration_ns(), 0) << "0 until the collective is done";
}

TEST(processGroup, GlooConnectionsOfAnotherBackendAreRefusedNamingIt) {
  TestGroup group(std::make_shared<c10d::HashStore>(), 0, 1, ProcessGroupOptions{},
                  TestGroup::Mode::Immediate);
  try {
    gloo_context_of(group);
    FAIL() << "a test group has no Gloo connections";
  } catch (const CommError& error) {
    EXPECT_NE(std::string(error.what()).find("runs on test, not gloo"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("make_gloo_group"), std::string::npos);
  }
}

// Note [Who frees a collective's tensors]: once wait() returns, the caller holds the only
// references to a collective's tensors, whichever thread ran it, so the last free is the
// caller's. A real Gloo group (one rank: ranks as threads of one process would not share a
// group's store prefix); each wait starts only after the communication thread has finished the
// collective (not Note [Run on wait]'s path). Under ThreadSanitizer (scripts/test-sanitizers)
// the views, whose bases LibTorch releases where TSan cannot see, and HostValues' input, dropped
// by its caller before the wait, also prove the frees race-free.
TEST(processGroup, GlooLeavesACollectivesTensorsToTheThreadThatWaits) {
  ProcessGroupOptions options;
  options.timeout = std::chrono::seconds(20);
  const std::shared_ptr<ProcessGroup> group =
      make_gloo_group(std::make_shared<c10d::HashStore>(), 0, 1, options);
  const auto after_the_comm_thread = [](const Work& work) {
    while (!work.is_completed()) std::this_thread::yield();
  };
  for (int64_t i = 0; i < 100; ++i) {
    const at::Tensor base = at::full({2, 3}, i, at::kLong);
    at::Tensor input = base.reshape({-1});
    at::Tensor output = at::empty({6}, at::kLong);
    WorkHandle work = group->all_gather(output, input);
    after_the_comm_thread(*work);
    work->wait();
    EXPECT_EQ(input.use_count(), 1) << "all_gather " << i;
    EXPECT_EQ(output.use_count(), 1) << "all_gather " << i;
    EXPECT_EQ(output[5].item<int64_t>(), i);

    HostValues counts = [&] {
      const at::Tensor nnz = at::full({1}, i, at::kLong);
      return HostValues::all_gather(*group, nnz);
    }();
    after_the_comm_thread(*counts.work());
    EXPECT_EQ(counts.wait()[0].item<int64_t>(), i);
  }
}

// Note [Run on wait] is a race between a communication thread and the waiter, so each side is
// forced here instead of counted over many races: a collective waited for only once a
// communication thread has finished it is traced without kFlagRanOnWaiter; with no
// communication thread (gloo_threads 0) nothing runs until it is waited for, and then on the
// waiting thread, flagged. A negative thread count is refused naming the option.
TEST(processGroup, GlooFlagsTheCollectivesItsWaiterRan) {
  TempDir dir;
  for (const int threads : {2, 0}) {
    SCOPED_TRACE(std::to_string(threads) + " communication threads");
    const std::string path = dir.file("threads" + std::to_string(threads) + ".sqlite");
    {
      trace::RecorderOptions recorder_options;
      recorder_options.path = path;
      trace::Recorder recorder(recorder_options);
      ProcessGroupOptions options;
      options.timeout = std::chrono::seconds(20);
      options.recorder = &recorder;
      options.gloo_threads = threads;
      const std::shared_ptr<ProcessGroup> group = make_gloo_group(std::make_shared<c10d::HashStore>(), 0, 1, options);
      for (int i = 0; i < 10; ++i) {
        WorkHandle work = group->all_reduce(at::full({4}, double(i)), ReduceOp::Sum);
        if (threads > 0) {
          while (!work->is_completed()) std::this_thread::yield();
        } else {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          EXPECT_FALSE(work->is_completed()) << "all_reduce " << i << " ran before anyone waited for it";
        }
        work->wait();
      }
    }
    trace::Reader reader(path);
    const std::vector<trace::Event> collectives = reader.events_of_kind(trace::EventKind::Collective);
    ASSERT_EQ(collectives.size(), 10u);
    for (const trace::Event& e : collectives) {
      EXPECT_EQ((e.flags & trace::kFlagRanOnWaiter) != 0, threads == 0) << "seq " << e.seq;
    }
  }
  ProcessGroupOptions negative;
  negative.gloo_threads = -1;
  try {
    make_gloo_group(std::make_shared<c10d::HashStore>(), 0, 1, negative);
    FAIL() << "a negative thread count was taken";
  } catch (const CommError& error) {
    EXPECT_NE(std::string(error.what()).find("give 0 or more (ProcessGroupOptions::gloo_threads)"), std::string::npos)
        << error.what();
  }
}

TEST(processGroup, RejectsBadArgumentsNamingTheRank) {
  TestGroup group(std::make_shared<c10d::HashStore>(), 1, 4, {}, TestGroup::Mode::Immediate);
  auto expect_error = [](const std::function<void()>& call, const std::string& phrase) {
    try {
      call();
      FAIL() << "expected a CommError with: " << phrase;
    } catch (const CommError& error) {
      EXPECT_NE(std::string(error.what()).find(phrase), std::string::npos) << error.what();
    }
  };
  expect_error([&] { group.all_gather(at::empty({7}), at::ones({2})); },
               "all_gather on rank 1: output has 7 elements, expected 4 x 2");
  expect_error([&] { group.reduce_scatter(at::empty({2}), at::ones({7}), ReduceOp::Sum); },
               "reduce_scatter on rank 1: input has 7 elements, expected 4 x 2");
  expect_error([&] { group.broadcast(at::ones({2}), 4); }, "root 4 is outside 0..3");
  expect_error([&] { group.all_reduce(at::ones({4, 4}).t(), ReduceOp::Sum); }, "contiguous");
  expect_error([&] { group.all_gather(at::empty({8}, at::kDouble), at::ones({2})); },
               "differ in dtype");
}

TEST(processGroup, CheckModeNamesTheRanksThatDiffer) {
  auto store = std::make_shared<c10d::HashStore>();
  auto errors = run_ranks(3, [&](int rank) {
    TestGroup group(store, rank, 3, options_with(std::chrono::seconds(10), true),
                    TestGroup::Mode::Immediate);
    group.all_reduce(at::ones({4}), ReduceOp::Sum)->wait();
    // Rank 1 reduces a tensor of another size: its collective #1 differs.
    group.all_reduce(at::ones({rank == 1 ? 2 : 4}), ReduceOp::Sum)->wait();
  });
  for (int rank = 0; rank < 3; ++rank) {
    const std::string& message = errors[static_cast<size_t>(rank)];
    EXPECT_NE(message.find("collective #1 differs across ranks"), std::string::npos) << message;
    EXPECT_NE(message.find("ranks 0,2 issued allreduce of 16 bytes float32"), std::string::npos)
        << message;
    EXPECT_NE(message.find("rank 1 issued allreduce of 8 bytes float32"), std::string::npos)
        << message;
  }
}

TEST(processGroup, CheckModeNamesARankThatNeverIssues) {
  auto store = std::make_shared<c10d::HashStore>();
  auto errors = run_ranks(3, [&](int rank) {
    TestGroup group(store, rank, 3, options_with(std::chrono::milliseconds(1500), true),
                    TestGroup::Mode::Immediate);
    group.barrier()->wait();
    if (rank != 2) group.broadcast(at::ones({4}), 0)->wait();
  });
  EXPECT_EQ(errors[2], "");
  for (int rank : {0, 1}) {
    EXPECT_NE(errors[static_cast<size_t>(rank)].find("ranks 2 never issued it"),
              std::string::npos)
        << errors[static_cast<size_t>(rank)];
  }
}

TEST(processGroup, TimeoutNamesTheCollectiveAndTheRanksNotHeardFrom) {
  auto store = std::make_shared<c10d::HashStore>();
  TimeoutSignal timeout;
  auto errors = run_ranks(3, [&](int rank) {
    TestGroup group(store, rank, 3, options_with(std::chrono::milliseconds(2000), false),
                    rank == 0 ? TestGroup::Mode::Never : TestGroup::Mode::Immediate);
    // Rank 0's all-reduce #0 never finishes; rank 2 stops after it, rank 1 issues #1 too.
    auto work = group.all_reduce(at::ones({4}), ReduceOp::Sum);
    if (rank == 0) timeout.wait_signalling(*work);
    work->wait();
    if (rank == 2) return;
    group.all_reduce(at::ones({4}), ReduceOp::Sum);
    timeout.outlive();
  });
  EXPECT_EQ(errors[1], "");
  const std::string& message = errors[0];
  EXPECT_NE(message.find("allreduce #0 on group 'world' timed out after 2 s on rank 0"),
            std::string::npos)
      << message;
  // Rank 0's first all-reduce never finishes; ranks 1 and 2 issued #0 and are heard from.
  EXPECT_NE(message.find("one of them is stuck"), std::string::npos) << message;
}

TEST(processGroup, TimeoutNamesALaggingRank) {
  auto store = std::make_shared<c10d::HashStore>();
  TimeoutSignal timeout;
  auto errors = run_ranks(2, [&](int rank) {
    TestGroup group(store, rank, 2, options_with(std::chrono::milliseconds(2000), false),
                    TestGroup::Mode::Never);
    if (rank == 1) {
      timeout.outlive();
      return;
    }
    timeout.wait_signalling(*group.all_reduce(at::ones({4}), ReduceOp::Sum));
  });
  EXPECT_EQ(errors[1], "");
  EXPECT_NE(errors[0].find("ranks not heard from: rank 1 (issued no collective)"),
            std::string::npos)
      << errors[0];
}

class LaunchEnvTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kNames) unsetenv(name);
  }
  void TearDown() override {
    for (const char* name : kNames) unsetenv(name);
  }
  void set_all() {
    setenv("RANK", "2", 1);
    setenv("LOCAL_RANK", "0", 1);
    setenv("WORLD_SIZE", "4", 1);
    setenv("LOCAL_WORLD_SIZE", "2", 1);
    setenv("MASTER_ADDR", "10.1.2.3", 1);
    setenv("MASTER_PORT", "29500", 1);
  }
  static constexpr const char* kNames[] = {"RANK", "LOCAL_RANK", "WORLD_SIZE",
                                           "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
};

TEST_F(LaunchEnvTest, WithoutRankIsASingleRank) {
  LaunchEnv env = read_launch_env();
  EXPECT_FALSE(env.launched);
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.rank, 0);
}

TEST_F(LaunchEnvTest, ReadsTorchrunsVariables) {
  set_all();
  LaunchEnv env = read_launch_env();
  EXPECT_TRUE(env.launched);
  EXPECT_EQ(env.rank, 2);
  EXPECT_EQ(env.local_rank, 0);
  EXPECT_EQ(env.world_size, 4);
  EXPECT_EQ(env.local_world_size, 2);
  EXPECT_EQ(env.master_addr, "10.1.2.3");
  EXPECT_EQ(env.master_port, 29500);
}

TEST_F(LaunchEnvTest, NamesAMissingOrBadVariable) {
  set_all();
  unsetenv("MASTER_PORT");
  try {
    read_launch_env();
    FAIL();
  } catch (const CommError& error) {
    EXPECT_NE(std::string(error.what()).find("MASTER_PORT is not"), std::string::npos);
    EXPECT_NE(std::string(error.what()).find("dpscope launch"), std::string::npos);
  }
  set_all();
  setenv("RANK", "4", 1);
  try {
    read_launch_env();
    FAIL();
  } catch (const CommError& error) {
    EXPECT_NE(std::string(error.what()).find("RANK=4 is not a number in 0..3"), std::string::npos)
        << error.what();
  }
}

TEST(rendezvous, AllRanksMeetAndShareOneClock) {
  const auto port = std::stoi(
      dpscope::testing::run_command("python3 -c 'import socket; s=socket.socket(); "
                                    "s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'")
          .output);
  std::vector<ClockOffset> offsets(3, ClockOffset{-1, -1});
  std::vector<std::shared_ptr<c10d::Store>> stores(3);  // rank 0's hosts the others' data
  auto errors = run_ranks(3, [&](int rank) {
    LaunchEnv env;
    env.rank = rank;
    env.world_size = 3;
    env.master_port = port;
    env.launched = true;
    auto store = rendezvous(env, std::chrono::seconds(20));
    offsets[static_cast<size_t>(rank)] = measure_clock_offset(*store, env);
    stores[static_cast<size_t>(rank)] = store;
  });
  for (const auto& error : errors) EXPECT_EQ(error, "");
  for (const ClockOffset& clock : offsets) {
    EXPECT_EQ(clock.offset_ns, 0) << "one host, one clock";
    EXPECT_EQ(clock.uncertainty_ns, 0) << "one host, one clock: exact";
  }
}

// A rank that announced another host measures its offset through the store: the true offset
// (0: it is the same clock) lies within the uncertainty it states.
TEST(rendezvous, AnotherHostsOffsetIsMeasuredWithinItsUncertainty) {
  const auto port = std::stoi(
      dpscope::testing::run_command("python3 -c 'import socket; s=socket.socket(); "
                                    "s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'")
          .output);
  std::vector<ClockOffset> offsets(2);
  std::vector<std::shared_ptr<c10d::Store>> stores(2);  // rank 0's hosts the other's data
  std::atomic<int> announced{0};
  auto errors = run_ranks(2, [&](int rank) {
    LaunchEnv env;
    env.rank = rank;
    env.world_size = 2;
    env.master_port = port;
    env.launched = true;
    auto store = rendezvous(env, std::chrono::seconds(20));
    if (rank == 1) store->set("dpscope/rendezvous/1", to_bytes("another-host"));
    ++announced;
    while (announced.load() < 2) std::this_thread::yield();
    offsets[static_cast<size_t>(rank)] = measure_clock_offset(*store, env);
    stores[static_cast<size_t>(rank)] = store;
  });
  for (const auto& error : errors) EXPECT_EQ(error, "");
  EXPECT_EQ(offsets[0].uncertainty_ns, 0);
  EXPECT_GT(offsets[1].uncertainty_ns, 0) << "a round trip through the store takes time";
  EXPECT_LT(offsets[1].uncertainty_ns, int64_t{1'000'000'000});
  EXPECT_LE(std::abs(offsets[1].offset_ns), offsets[1].uncertainty_ns);
}

TEST(rendezvous, NamesTheRanksThatNeverArrived) {
  const auto port = std::stoi(
      dpscope::testing::run_command("python3 -c 'import socket; s=socket.socket(); "
                                    "s.bind((\"127.0.0.1\", 0)); print(s.getsockname()[1])'")
          .output);
  auto errors = run_ranks(2, [&](int rank) {
    LaunchEnv env;
    env.rank = rank;
    env.world_size = 4;
    env.master_port = port;
    env.launched = true;
    rendezvous(env, std::chrono::seconds(5));
  });
  // Rank 0 hosts the store, so it always knows who arrived; rank 1 fails too, one way or another.
  EXPECT_NE(errors[0].find("rank 0: rendezvous at 127.0.0.1:" + std::to_string(port) +
                           " timed out; ranks 2, 3 never arrived"),
            std::string::npos)
      << errors[0];
  EXPECT_FALSE(errors[1].empty());
}
