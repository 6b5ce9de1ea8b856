// Link emulation (Note [Link emulation]) on a test backend in this process and on Gloo across
// processes: a collective completes no earlier than the ring model says and about when it says,
// queues behind the previous one on the link, is waited for asleep, is traced with its emulated
// span, moves the same bytes to the same results as without the link; `dpscope train`'s flags
// win over the launcher's and reach the trace's meta table.
#include <gtest/gtest.h>
#include <time.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <ATen/ATen.h>

#include <chrono>
#include <map>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "engine/comm/link_emulation.h"
#include "engine/comm/process_group.h"
#include "tests/test_util.h"
#include "trace/reader.h"

using namespace dpscope;
using namespace dpscope::comm;
using namespace dpscope::core;
using dpscope::testing::dpscope_bin;
using dpscope::testing::run_command;
using dpscope::testing::TempDir;
using trace::CollectiveOp;

namespace {

constexpr int64_t kMs = 1000000;

// Finishes every collective as it is issued, as if it had run for `real_ns` from then (a real
// end in the future stands for a collective slower than the link), or fails it.
class InstantGroup : public ProcessGroup {
 public:
  InstantGroup(ProcessGroupOptions options, int size, int64_t real_ns = 0)
      : ProcessGroup(std::make_shared<c10d::HashStore>(), 0, size, std::move(options),
                     "test comm", trace::LaneKind::Comm),
        real_ns_(real_ns) {}
  ~InstantGroup() override { stop_heartbeat(); }
  std::string backend_name() const override { return "instant"; }
  void fail_next() { fail_next_ = true; }

 protected:
  void enqueue(std::shared_ptr<Request> request) override {
    const int64_t now = trace::now_ns();
    std::exception_ptr error;
    if (fail_next_) error = std::make_exception_ptr(CommError("injected failure"));
    fail_next_ = false;
    request->work->finish(now, now + real_ns_, error);
  }

 private:
  const int64_t real_ns_;
  bool fail_next_ = false;
};

ProcessGroupOptions on_link(LinkSpec spec) {
  ProcessGroupOptions options;
  options.link = std::make_shared<EmulatedLink>(spec);
  return options;
}

int64_t thread_cpu_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// A 2-rank all-reduce of 4 floats on a 1 Gb/s link of 100 ms latency: 2 (100 ms + 8 bytes) ~ 200 ms.
const LinkSpec kSlowLink{1, 100000};

// How late a released waiter may wake on a busy 2-core machine: half a model time, so a hold one
// model too long (held from the wrong start, or twice) still fails. Measured: under 1 ms
// idle, up to 3.3 ms beside two busy loops (8 tries); the 40 ms it replaces was 1.6x the 25 ms model.
constexpr int64_t kWakeupSlackNs = 100 * kMs;
int64_t slow_all_reduce_ns() {
  return link_model_ns(CollectiveOp::AllReduce, 16, 2, kSlowLink);
}

}  // namespace

TEST(linkEmulation, CompletionIsHeldForTheModelsTime) {
  InstantGroup group(on_link(kSlowLink), 2, 1000);
  const int64_t model = slow_all_reduce_ns();
  const int64_t begin = trace::now_ns();
  WorkHandle work = group.all_reduce(at::ones({4}), ReduceOp::Sum);
  EXPECT_FALSE(work->is_completed()) << "done for real, but still on the link";
  EXPECT_EQ(work->duration_ns(), 0) << "0 until completed";
  work->wait();
  const int64_t waited = trace::now_ns() - begin;
  EXPECT_GE(waited, model);
  EXPECT_LE(waited, model + kWakeupSlackNs);
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(work->duration_ns(), model) << "the emulated span";
  EXPECT_EQ(work->real_duration_ns(), 1000) << "the backend's own";
  EXPECT_TRUE(work->on_emulated_link());
}

TEST(linkEmulation, NeverCompletesBeforeTheRealCollective) {
  const int64_t real = 150 * kMs;
  InstantGroup group(on_link(LinkSpec{1, 10}), 2, real);
  const int64_t begin = trace::now_ns();
  WorkHandle work = group.all_reduce(at::ones({4}), ReduceOp::Sum);
  work->wait();
  EXPECT_GE(trace::now_ns() - begin, real);
  EXPECT_EQ(work->duration_ns(), real);
  EXPECT_EQ(work->real_duration_ns(), real);
}

TEST(linkEmulation, QueuedCollectivesTakeTheLinkOneAfterTheOther) {
  InstantGroup group(on_link(kSlowLink), 2);
  const int64_t model = slow_all_reduce_ns();
  const int64_t begin = trace::now_ns();
  std::vector<WorkHandle> works;
  for (int i = 0; i < 3; ++i) works.push_back(group.all_reduce(at::ones({4}), ReduceOp::Sum));
  works[0]->wait();
  const int64_t first = trace::now_ns() - begin;
  EXPECT_GE(first, model);
  EXPECT_LT(first, 2 * model);
  EXPECT_FALSE(works[1]->is_completed()) << "the second is still on the link";
  works[2]->wait();
  const int64_t last = trace::now_ns() - begin;
  EXPECT_GE(last, 3 * model);
  EXPECT_LE(last, 3 * model + kWakeupSlackNs);
  EXPECT_TRUE(works[1]->is_completed()) << "Works complete in issue order";
}

TEST(linkEmulation, GroupsSharingALinkQueueOnIt) {
  ProcessGroupOptions options = on_link(kSlowLink);
  InstantGroup a(options, 2);
  options.group_id = 1;
  InstantGroup b(options, 2);
  const int64_t begin = trace::now_ns();
  WorkHandle first = a.all_reduce(at::ones({4}), ReduceOp::Sum);
  WorkHandle second = b.all_reduce(at::ones({4}), ReduceOp::Sum);
  second->wait();
  EXPECT_GE(trace::now_ns() - begin, 2 * slow_all_reduce_ns()) << "one NIC for both groups";
  EXPECT_TRUE(first->is_completed());
}

TEST(linkEmulation, TheWaitingThreadSleeps) {
  InstantGroup group(on_link(LinkSpec{1, 100000}), 2);  // 2 x 100 ms
  WorkHandle work = group.all_reduce(at::ones({4}), ReduceOp::Sum);
  const int64_t cpu = thread_cpu_ns();
  const int64_t wall = trace::now_ns();
  work->wait();
  const int64_t held_wall = trace::now_ns() - wall;
  const int64_t held_cpu = thread_cpu_ns() - cpu;
  EXPECT_GE(held_wall, 150 * kMs);
  EXPECT_LT(held_cpu, held_wall / 10) << "held " << held_wall << " ns, on the CPU " << held_cpu;
}

TEST(linkEmulation, AFailedCollectiveIsNotHeld) {
  InstantGroup group(on_link(LinkSpec{1, 1000000}), 2);  // 2 s: a hold would show
  group.fail_next();
  const int64_t begin = trace::now_ns();
  WorkHandle work = group.all_reduce(at::ones({4}), ReduceOp::Sum);
  EXPECT_TRUE(work->is_completed());
  EXPECT_THROW(work->wait(), CommError);
  EXPECT_LT(trace::now_ns() - begin, 500 * kMs);
}

TEST(linkEmulation, OneRankIsNeverHeld) {
  InstantGroup group(on_link(LinkSpec{1, 1000000}), 1);
  WorkHandle work = group.all_reduce(at::ones({4}), ReduceOp::Sum);
  EXPECT_TRUE(work->is_completed());
  EXPECT_EQ(work->duration_ns(), 0);
}

TEST(linkEmulation, TheTraceShowsTheLinksTimes) {
  TempDir dir;
  const std::string path = dir.file("rank0.sqlite");
  const int64_t model = slow_all_reduce_ns();
  {
    trace::RecorderOptions recorder_options;
    recorder_options.path = path;
    trace::Recorder recorder(recorder_options);
    ProcessGroupOptions options = on_link(kSlowLink);
    options.recorder = &recorder;
    InstantGroup group(options, 2);
    WorkHandle a = group.all_reduce(at::ones({4}), ReduceOp::Sum);
    WorkHandle b = group.all_reduce(at::ones({4}), ReduceOp::Sum);
    b->wait();
    a->wait();
  }
  trace::Reader reader(path);
  const auto collectives = reader.events_of_kind(trace::EventKind::Collective);
  ASSERT_EQ(collectives.size(), 2u);
  for (const trace::Event& e : collectives) {
    EXPECT_EQ(e.end_ns - e.begin_ns, model) << "the span is the link's time";
    EXPECT_GE(e.begin_ns, e.enqueue_ns);
  }
  EXPECT_EQ(collectives[1].begin_ns, collectives[0].end_ns) << "queued behind the first";
  const auto waits = reader.events_of_kind(trace::EventKind::CollectiveWait);
  ASSERT_EQ(waits.size(), 2u);
  EXPECT_GE(waits[0].end_ns, collectives[1].end_ns) << "b's wait ends at b's emulated end";
}

// ---- Gloo across processes (link_worker) ---------------------------------------------------

namespace {

// Links slow enough that the model's time dominates the real collective's on a busy 2-core
// machine. 2 ranks on 0.5 Gb/s, 100 us: a 1 MiB all-reduce takes 17 ms, a 16 MiB one 269 ms
// (Gloo over loopback: a fifth of that). 4 ranks on 0.25 Gb/s: a 16 MiB reduce-scatter takes
// 403 ms; the real one (Note [Gloo reduce-scatter]) takes 20 to 80 ms there.
constexpr const char* kLatencyUs = "100";

struct Measured {
  int rank;
  std::string op;
  int64_t bytes;
  int64_t seq;
  int64_t measured_ns;
  int64_t model_ns;
};
// Held at least the model's time, less 1 % for the moments between the worker's clock reading at
// the issue and the link's (measured over four runs of both tests: 1.0013 to 1.0099 times the
// model at the least, never below it). No upper bound: how long the real collective takes beyond it
// depends on the machine (Gloo's 2-rank reduce-scatter of 16 MiB took 307 ms against the
// model's 134 under AddressSanitizer in CI); the hold's exact length is checked above on the
// scripted backend, speed in bench/.
void expect_held_for_model(int64_t measured, int64_t model, const std::string& what) {
  EXPECT_GE(measured, static_cast<int64_t>(0.99 * model)) << what;
}

void run_gloo(int world, const std::string& gbps) {
  TempDir dir;
  const std::string traces = dir.file("traces");
  const auto result = run_command(dpscope_bin() + " launch -n " + std::to_string(world) +
                                  " --link-gbps " + gbps + " --link-latency-us " + kLatencyUs +
                                  " --trace-dir " + traces + " -- " +
                                  std::string(DPSCOPE_BIN_DIR) + "/link_worker");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string& out = result.output;

  // Identical results: every rank compared 20 collectives.
  const std::regex identical(R"(\[(\d+)\] identical )");
  EXPECT_EQ(std::distance(std::sregex_iterator(out.begin(), out.end(), identical),
                          std::sregex_iterator()),
            20 * world)
      << out;

  trace::Reader reader(traces + "/run.sqlite");
  EXPECT_EQ(reader.meta_value("link_gbps"), gbps);
  EXPECT_EQ(reader.meta_value("link_latency_us"), kLatencyUs);
  std::map<std::pair<int, int64_t>, trace::Event> collectives;  // (rank, seq) of the world group
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Collective)) {
    if (e.grp == 0) collectives[{e.rank, e.seq}] = e;
  }

  // One collective at a time: issue to wait()'s return, and the trace's span.
  const std::regex timing(R"(\[(\d+)\] timing (\w+) (\d+) (\d+) (\d+) (\d+))");
  int timings = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), timing), end; it != end; ++it, ++timings) {
    const Measured m{std::stoi((*it)[1]), (*it)[2], std::stoll((*it)[3]), std::stoll((*it)[4]),
                     std::stoll((*it)[5]), std::stoll((*it)[6])};
    const std::string what = "rank " + std::to_string(m.rank) + " " + m.op + " of " +
                             std::to_string(m.bytes >> 20) + " MiB: measured " +
                             std::to_string(m.measured_ns / 1e6) + " ms, model " +
                             std::to_string(m.model_ns / 1e6) + " ms";
    EXPECT_GT(m.model_ns, 0) << what;
    expect_held_for_model(m.measured_ns, m.model_ns, what);
    const auto e = collectives.find({m.rank, m.seq});
    ASSERT_NE(e, collectives.end()) << what;
    EXPECT_GE(e->second.end_ns - e->second.begin_ns, m.model_ns) << what;
  }
  EXPECT_EQ(timings, 9 * world) << out;

  // Three all-reduces queue on the link.
  const std::regex queue(R"(\[(\d+)\] queue (\d+) (\d+) (\d+))");
  int queues = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), queue), end; it != end; ++it, ++queues) {
    const int rank = std::stoi((*it)[1]);
    const int64_t first = std::stoll((*it)[2]);
    const int64_t measured = std::stoll((*it)[3]);
    const int64_t model = std::stoll((*it)[4]);
    expect_held_for_model(measured, 3 * model, "rank " + std::to_string(rank) + ": 3 queued");
    for (int64_t seq = first + 1; seq < first + 3; ++seq) {
      const auto e = collectives.find({rank, seq});
      const auto before = collectives.find({rank, seq - 1});
      ASSERT_NE(e, collectives.end());
      ASSERT_NE(before, collectives.end());
      EXPECT_GE(e->second.begin_ns, before->second.end_ns) << "one after the other on the link";
    }
  }
  EXPECT_EQ(queues, world) << out;

  // The waiting thread sleeps while held (unless it ran the collective itself).
  const std::regex held(R"(\[(\d+)\] held (\d+) (\d+) (\d+))");
  int helds = 0;
  for (std::sregex_iterator it(out.begin(), out.end(), held), end; it != end; ++it, ++helds) {
    const int rank = std::stoi((*it)[1]);
    const int64_t cpu = std::stoll((*it)[3]);
    const int64_t wall = std::stoll((*it)[4]);
    const auto e = collectives.find({rank, std::stoll((*it)[2])});
    ASSERT_NE(e, collectives.end());
    if (e->second.flags & trace::kFlagRanOnWaiter) continue;  // its CPU time is Gloo's work
    EXPECT_GT(wall, 50 * kMs);
    EXPECT_LT(cpu, wall / 10) << "rank " << rank << ": " << cpu << " ns on the CPU while held "
                              << wall << " ns";
  }
  EXPECT_EQ(helds, world) << out;
}

}  // namespace

TEST(linkEmulationGloo, TwoRanks) { run_gloo(2, "0.5"); }
TEST(linkEmulationGloo, FourRanks) { run_gloo(4, "0.25"); }

// dpscope train's flags win over the launcher's environment; the trace says which link it ran on.
TEST(linkEmulationTrain, TrainFlagsWinAndReachTheTrace) {
  TempDir dir;
  const std::string traces = dir.file("traces");
  const auto result = run_command(
      dpscope_bin() + " launch -n 2 --link-gbps 1 --link-latency-us 100 --trace-dir " + traces +
      " -- " + dpscope_bin() +
      " train --model mlp --hidden 32 --layers 1 --steps 3 --progress-every 0 --threads 1"
      " --trace-level summary --link-gbps 2.5 --link-latency-us 10");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("on an emulated 2.5 Gb/s, 10 us link"), std::string::npos)
      << result.output;
  trace::Reader reader(traces + "/run.sqlite");
  EXPECT_EQ(reader.meta_value("link_gbps"), "2.5");
  EXPECT_EQ(reader.meta_value("link_latency_us"), "10");
  const LinkSpec link{2.5, 10};
  int checked = 0;
  for (const trace::Event& e : reader.events_of_kind(trace::EventKind::Collective)) {
    const int64_t model =
        link_model_ns(static_cast<CollectiveOp>(e.op), e.bytes, 2, link);
    EXPECT_GE(e.end_ns - e.begin_ns, model) << "collective #" << e.seq << " on rank " << e.rank;
    ++checked;
  }
  EXPECT_GT(checked, 6);
}

TEST(linkEmulationTrain, WithoutALinkTheTraceSaysNothing) {
  TempDir dir;
  const std::string trace_path = dir.file("one.sqlite");
  const auto result = run_command("env -u DPSCOPE_LINK_GBPS -u DPSCOPE_LINK_LATENCY_US " +
                                  dpscope_bin() +
                                  " train --model mlp --hidden 16 --layers 1 --steps 1 "
                                  "--progress-every 0 --trace-level summary --trace " +
                                  trace_path);
  ASSERT_EQ(result.exit_code, 0) << result.output;
  trace::Reader reader(trace_path);
  EXPECT_EQ(reader.meta().count("link_gbps"), 0u);
  EXPECT_EQ(reader.meta().count("link_latency_us"), 0u);
}

TEST(linkEmulationTrain, ABadEnvironmentVariableIsNamed) {
  TempDir dir;
  const auto result = run_command("DPSCOPE_LINK_GBPS=fast DPSCOPE_LINK_LATENCY_US=50 " +
                                  dpscope_bin() + " train --model mlp --steps 1 --trace " +
                                  dir.file("bad.sqlite"));
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("dpscope: rank 0: DPSCOPE_LINK_GBPS='fast' is not a number"),
            std::string::npos)
      << result.output;
}
