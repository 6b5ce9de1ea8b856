// Tests of trace/synth: the synthetic DDP trace opens with Reader, has about the requested
// number of events, and is what a real DDP run records (collective order, hooks, bucket plans,
// time order, memory accounting), deterministically per seed; bad input gets a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <tuple>

#include "analysis/cluster_clock.h"
#include "core/link_model.h"
#include "formats/synth.h"
#include "tests/test_util.h"
#include "trace/error.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::formats {
namespace {

using namespace dpscope::trace;

using testing::TempDir;

constexpr int64_t kEvents = 20000;
constexpr int kRanks = 4;

SynthOptions options_for(const std::string& path, uint64_t seed = 7) {
  SynthOptions options;
  options.events = kEvents;
  options.ranks = kRanks;
  options.out = path;
  options.seed = seed;
  return options;
}

// One synthetic trace shared by the read-only tests of this suite.
class synthTrace : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    result_ = synthesize(options_for(dir_->file("run.db")));
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string path() { return dir_->file("run.db"); }

  static TempDir* dir_;
  static SynthResult result_;
};
TempDir* synthTrace::dir_ = nullptr;
SynthResult synthTrace::result_;

TEST_F(synthTrace, OpensWithReaderWithTheRunMetadata) {
  Reader reader(path());
  EXPECT_EQ(reader.schema_version(), kSchemaVersion);
  EXPECT_EQ(reader.meta_value("strategy"), "ddp");
  EXPECT_EQ(reader.meta_value("backend"), "gloo");
  EXPECT_EQ(reader.meta_value("world_size"), std::to_string(kRanks));
  EXPECT_EQ(reader.meta_value("model"), "synthetic mlp");
  EXPECT_NE(reader.meta_value("command_line").find("dpscope synth"), std::string::npos);

  const auto lanes = reader.lanes();
  ASSERT_EQ(lanes.size(), size_t{2} * kRanks);
  for (int r = 0; r < kRanks; ++r) {
    const LaneInfo& main = lanes[static_cast<size_t>(2 * r)];
    const LaneInfo& comm = lanes[static_cast<size_t>(2 * r + 1)];
    EXPECT_EQ(main.rank, r);
    EXPECT_EQ(main.name, "main");
    EXPECT_EQ(main.kind, LaneKind::Host);
    EXPECT_EQ(comm.name, "gloo comm");
    EXPECT_EQ(comm.kind, LaneKind::Comm);
  }
  const auto names = reader.names();
  for (const std::string_view name :
       {trace::kPhaseForward, trace::kPhaseBackward, trace::kPhaseOptimizerStep, trace::kPhaseIteration,
        std::string_view("verify_model"), std::string_view("broadcast_state"), trace::kMetricLoss,
        trace::kMetricStepMs}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
}

TEST_F(synthTrace, EventCountIsCloseToTheRequestedOne) {
  Reader reader(path());
  const int64_t count = reader.event_count();
  EXPECT_EQ(count, result_.events);
  // synth ends on a whole iteration: 19,896 of 20,000 events on 4 ranks (-0.52 %), and the same
  // for seeds 1, 7, 42 and 123 (19,996 on 1 rank, 19,840 on 8); 1.5 % is three times that.
  EXPECT_NEAR(static_cast<double>(count), static_cast<double>(kEvents), 0.015 * kEvents);
  EXPECT_EQ(static_cast<int64_t>(reader.memory().size()), result_.memory_samples);
  EXPECT_EQ(static_cast<int64_t>(reader.metrics().size()), result_.metrics);
  EXPECT_GT(result_.iterations, 2);
}

TEST_F(synthTrace, EveryRankIsPresentAndComplete) {
  Reader reader(path());
  const auto ranks = reader.ranks();
  ASSERT_EQ(ranks.size(), size_t{kRanks});
  int64_t events = 0;
  for (int r = 0; r < kRanks; ++r) {
    const RankInfo& rank = ranks[static_cast<size_t>(r)];
    EXPECT_EQ(rank.rank, r);
    EXPECT_EQ(rank.status, "complete");
    EXPECT_EQ(rank.dropped_events, 0);
    EXPECT_LT(rank.start_ns, rank.end_ns);
    EXPECT_GT(rank.events, 0);
    events += rank.events;
    // Every rank ran every iteration and reported its metrics.
    std::set<int32_t> iterations;
    for (const Event& e : reader.events_of_kind(EventKind::Phase, r)) {
      iterations.insert(e.iteration);
    }
    EXPECT_EQ(iterations.size(), size_t(result_.iterations) + 1);  // and construction: kNone
    EXPECT_EQ(reader.metrics(r).size(), size_t(2) * size_t(result_.iterations));
  }
  EXPECT_EQ(events, reader.event_count());
}

TEST_F(synthTrace, EveryRankRunsTheSameCollectivesInTheSameOrder) {
  Reader reader(path());
  struct Key {
    int64_t seq, bytes;
    uint8_t op;
    int32_t iteration, bucket;
    bool operator==(const Key& o) const {
      return seq == o.seq && bytes == o.bytes && op == o.op && iteration == o.iteration &&
             bucket == o.bucket;
    }
  };
  std::vector<std::vector<Key>> sequences(kRanks);
  std::vector<std::vector<int64_t>> ends(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    for (const Event& e : reader.events_of_kind(EventKind::Collective, r)) {
      EXPECT_EQ(e.lane, 1);
      EXPECT_EQ(e.grp, 0);
      sequences[static_cast<size_t>(r)].push_back(Key{e.seq, e.bytes, e.op, e.iteration, e.bucket});
      ends[static_cast<size_t>(r)].push_back(e.end_ns);
    }
    const auto& keys = sequences[static_cast<size_t>(r)];
    for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(keys[i].seq, int64_t(i)) << "rank " << r;
  }
  ASSERT_FALSE(sequences[0].empty());
  for (int r = 1; r < kRanks; ++r) {
    EXPECT_TRUE(sequences[static_cast<size_t>(r)] == sequences[0]) << "rank " << r;
    // A collective completes on every rank at about the same moment.
    for (size_t i = 0; i < ends[0].size(); ++i) {
      EXPECT_NEAR(double(ends[static_cast<size_t>(r)][i]), double(ends[0][i]), 5'000.0);
    }
  }
  // Construction broadcasts (verify_model, broadcast_state) come first, with iteration NULL.
  EXPECT_EQ(sequences[0][0].op, static_cast<uint8_t>(CollectiveOp::Broadcast));
  EXPECT_EQ(sequences[0][0].iteration, kNone);
  EXPECT_EQ(sequences[0][1].op, static_cast<uint8_t>(CollectiveOp::Broadcast));
  EXPECT_EQ(sequences[0][1].iteration, kNone);
}

TEST_F(synthTrace, EachBucketLaunchesItsAllReduceAndWaitsForIt) {
  Reader reader(path());
  const auto buckets = reader.buckets();
  for (int r = 0; r < kRanks; ++r) {
    std::map<int64_t, Event> collectives, waits;
    for (const Event& e : reader.events_of_kind(EventKind::Collective, r)) collectives[e.seq] = e;
    for (const Event& e : reader.events_of_kind(EventKind::CollectiveWait, r)) waits[e.seq] = e;
    EXPECT_EQ(waits.size(), collectives.size());
    std::map<std::pair<int32_t, int32_t>, int64_t> ready;
    for (const Event& e : reader.events_of_kind(EventKind::BucketReady, r)) {
      ready[{e.iteration, e.bucket}] = e.begin_ns;
    }
    const auto launches = reader.events_of_kind(EventKind::BucketLaunch, r);
    const auto done = reader.events_of_kind(EventKind::BucketDone, r);
    ASSERT_EQ(launches.size(), ready.size());
    ASSERT_EQ(done.size(), ready.size());
    for (const Event& launch : launches) {
      const Event& c = collectives.at(launch.seq);
      EXPECT_EQ(c.op, static_cast<uint8_t>(CollectiveOp::AllReduce));
      EXPECT_EQ(c.dtype, static_cast<uint8_t>(DType::Float32));
      EXPECT_EQ(c.iteration, launch.iteration);
      EXPECT_EQ(c.bucket, launch.bucket);
      EXPECT_EQ(c.enqueue_ns, launch.begin_ns);
      EXPECT_GE(launch.begin_ns, ready.at({launch.iteration, launch.bucket}));
      const int generation = launch.iteration == 0 ? 0 : 1;
      for (const BucketInfo& b : buckets) {
        if (b.generation == generation && b.index == launch.bucket) {
          EXPECT_EQ(c.bytes, b.bytes);
        }
      }
      const Event& wait = waits.at(launch.seq);
      EXPECT_EQ(wait.lane, 0);
      EXPECT_GE(wait.end_ns, c.end_ns);
    }
  }
}

TEST_F(synthTrace, EveryParameterFiresOneHookPerIterationInReverseOrder) {
  Reader reader(path());
  const auto params = reader.params();
  const auto buckets = reader.buckets();
  ASSERT_FALSE(params.empty());
  for (int r = 0; r < kRanks; ++r) {
    std::map<int32_t, std::vector<Event>> hooks;  // by iteration, in time order
    for (const Event& e : reader.events_of_kind(EventKind::Hook, r)) {
      hooks[e.iteration].push_back(e);
    }
    ASSERT_EQ(hooks.size(), size_t(result_.iterations));
    for (const auto& [iteration, list] : hooks) {
      ASSERT_EQ(list.size(), params.size()) << "rank " << r << " iteration " << iteration;
      std::map<int32_t, int64_t> fill;  // by bucket
      for (size_t i = 0; i < list.size(); ++i) {
        const Event& hook = list[i];
        EXPECT_EQ(hook.param, static_cast<int32_t>(params.size() - 1 - i));
        const ParamInfo& p = params[static_cast<size_t>(hook.param)];
        EXPECT_EQ(hook.bucket, iteration == 0 ? p.bucket : p.rebuilt_bucket);
        fill[hook.bucket] += p.numel * 4;
        EXPECT_EQ(hook.value, fill[hook.bucket]);
      }
      // Every bucket is full at the end of backward.
      const int generation = iteration == 0 ? 0 : 1;
      for (const BucketInfo& b : buckets) {
        if (b.generation == generation) {
          EXPECT_EQ(fill[b.index], b.bytes);
        }
      }
    }
  }
}

TEST_F(synthTrace, BucketsOfBothGenerationsCoverEveryParameterOnce) {
  Reader reader(path());
  const auto params = reader.params();
  const auto buckets = reader.buckets();
  EXPECT_EQ(result_.params, static_cast<int32_t>(params.size()));
  for (int generation : {0, 1}) {
    std::vector<int> seen(params.size(), 0);
    int count = 0;
    for (const BucketInfo& b : buckets) {
      if (b.generation != generation) continue;
      EXPECT_EQ(b.index, count++);
      int64_t numel = 0;
      ASSERT_EQ(b.params.size(), b.offsets.size());
      for (size_t i = 0; i < b.params.size(); ++i) {
        const ParamInfo& p = params.at(static_cast<size_t>(b.params[i]));
        ++seen[static_cast<size_t>(p.index)];
        EXPECT_EQ(b.offsets[i], numel);
        numel += p.numel;
        EXPECT_EQ(generation == 0 ? p.bucket : p.rebuilt_bucket, b.index);
      }
      EXPECT_EQ(b.numel, numel);
      EXPECT_EQ(b.bytes, numel * 4);
    }
    EXPECT_EQ(count, generation == 0 ? result_.buckets_initial : result_.buckets_rebuilt);
    // Iteration 0 in one bucket, as DDP by default (the engine's Note [The first iteration's
    // buckets]); the rebuilt plan by size.
    if (generation == 0) {
      EXPECT_EQ(count, 1);
    } else {
      EXPECT_GT(count, 1);
    }
    for (size_t p = 0; p < params.size(); ++p) {
      EXPECT_EQ(seen[p], 1) << "generation " << generation << " param " << p;
    }
  }
  // Both plans put the last parameters, whose gradients come first, in bucket 0.
  EXPECT_EQ(params.back().bucket, 0);
  EXPECT_EQ(params.back().rebuilt_bucket, 0);
  EXPECT_EQ(params.front().name, "fc0.weight");
  EXPECT_EQ(params.front().shape.size(), size_t{2});
}

TEST_F(synthTrace, TimesAreOrdered) {
  Reader reader(path());
  std::map<std::pair<int16_t, LaneId>, int64_t> comm_free;
  std::map<std::pair<int16_t, int32_t>, std::pair<int64_t, int64_t>> backward;
  const auto names = reader.names();
  std::vector<int64_t> first_iteration_begin(kRanks, INT64_MAX), construction_end(kRanks, 0);
  reader.for_each_event([&](const Event& e) {
    EXPECT_GE(e.end_ns, e.begin_ns);
    if (e.kind == EventKind::Collective) {
      EXPECT_GE(e.begin_ns, e.enqueue_ns);
      // The comm lane runs one collective at a time (events come ordered by begin).
      auto& free = comm_free[{e.rank, e.lane}];
      EXPECT_GE(e.begin_ns, free);
      free = e.end_ns;
    }
    if (e.kind == EventKind::Phase && names.at(static_cast<size_t>(e.name)) == trace::kPhaseBackward) {
      backward[{e.rank, e.iteration}] = {e.begin_ns, e.end_ns};
    }
    const auto r = static_cast<size_t>(e.rank);
    if (e.iteration == kNone) construction_end[r] = std::max(construction_end[r], e.end_ns);
    if (e.iteration == 0) first_iteration_begin[r] = std::min(first_iteration_begin[r], e.begin_ns);
    return true;
  });
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_LE(construction_end[static_cast<size_t>(r)],
              first_iteration_begin[static_cast<size_t>(r)]);
    for (const Event& hook : reader.events_of_kind(EventKind::Hook, r)) {
      const auto [begin, end] = backward.at({hook.rank, hook.iteration});
      EXPECT_GE(hook.begin_ns, begin);
      EXPECT_LE(hook.end_ns, end);
    }
  }
}

// Note [Synthetic CPU time]: the main lane's thread computes at full speed, so its CPU clock
// runs with the wall clock but for the waits; the cluster clock replays the trace on the link
// the collectives were sized by.
TEST_F(synthTrace, RecordsThreadCpuTimesAndTheLinkForTheClusterClock) {
  Reader reader(path());
  EXPECT_EQ(reader.meta_value(std::string(trace::meta_key::kLinkGbps)), "4");
  EXPECT_EQ(reader.meta_value(std::string(trace::meta_key::kLinkLatencyUs)), "50");
  EXPECT_EQ(reader.meta_value(std::string(trace::meta_key::kIntraOpThreads)), "1");
  int64_t phases = 0, waits = 0, collectives = 0, hooks = 0;
  std::map<int16_t, int64_t> waited;  // wall time spent in waits so far, by rank
  reader.for_each_event([&](const Event& e) {
    switch (e.kind) {
      case EventKind::Phase:
        ++phases;
        EXPECT_NE(e.cpu_begin_ns, kNone64);
        EXPECT_LE(e.cpu_begin_ns, e.cpu_end_ns);
        EXPECT_LE(e.cpu_end_ns - e.cpu_begin_ns, e.end_ns - e.begin_ns);
        break;
      case EventKind::CollectiveWait:
        ++waits;
        EXPECT_EQ(e.cpu_begin_ns, e.cpu_end_ns) << "the thread computes nothing while it waits";
        break;
      case EventKind::Collective:
        ++collectives;
        EXPECT_NE(e.cpu_begin_ns, kNone64);
        EXPECT_EQ(e.cpu_end_ns, kNone64);
        break;
      case EventKind::Hook:
        ++hooks;
        EXPECT_EQ(e.cpu_begin_ns, kNone64);
        EXPECT_NE(e.cpu_end_ns, kNone64);
        break;
      default:
        EXPECT_EQ(e.cpu_begin_ns, kNone64);
        break;
    }
    return true;
  });
  EXPECT_GT(phases, 0);
  EXPECT_GT(waits, 0);
  EXPECT_GT(hooks, 0);
  EXPECT_GT(collectives, 0);
  // The iteration phases compute for their wall time less their waits.
  const auto names = reader.names();
  for (const Event& it : reader.events_of_kind(EventKind::Phase, 0)) {
    if (names.at(static_cast<size_t>(it.name)) != trace::kPhaseIteration) continue;
    int64_t in_waits = 0;
    for (const Event& w : reader.events_of_kind(EventKind::CollectiveWait, 0)) {
      if (w.begin_ns >= it.begin_ns && w.end_ns <= it.end_ns) in_waits += w.end_ns - w.begin_ns;
    }
    EXPECT_EQ(it.cpu_end_ns - it.cpu_begin_ns, it.end_ns - it.begin_ns - in_waits);
  }

  const analysis::ClusterClockRun run = analysis::cluster_clock(reader, path(), std::nullopt);
  EXPECT_TRUE(run.link_from_trace);
  EXPECT_EQ(run.link.gbps, 4);
  EXPECT_EQ(run.link.latency_us, 50);
  EXPECT_TRUE(run.warnings.empty());
  EXPECT_EQ(run.timeline.unmatched_waits, 0);
  ASSERT_EQ(run.iterations.size(), size_t{kRanks});
  EXPECT_EQ(run.iterations.at(0).size(), size_t(result_.iterations));
  // Each all-reduce lasts the link model's time on the cluster clock.
  for (const auto& [key, span] : run.timeline.collectives) {
    const analysis::IssuedCollective& c = run.programs.at(0).collectives.at(key);
    EXPECT_EQ(span.end_ns - span.begin_ns, core::link_model_ns(c.op, c.bytes, kRanks, run.link));
  }
  ASSERT_TRUE(run.steady_step_ms(0).has_value());
  EXPECT_GT(*run.steady_step_ms(0), 0);
}

TEST(synth, RefusesALinkOutOfRange) {
  TempDir dir;
  SynthOptions options = options_for(dir.file("run.db"));
  options.link_gbps = 0;
  try {
    synthesize(options);
    FAIL() << "a 0 Gb/s link was accepted";
  } catch (const TraceError& error) {
    EXPECT_NE(std::string(error.what()).find("--link-gbps 0 is out of range"), std::string::npos)
        << error.what();
  }
}

TEST_F(synthTrace, AllocatorTotalIsTheSumOfTheCategories) {
  Reader reader(path());
  std::map<std::pair<int32_t, MemoryCategory>, int64_t> held;
  int64_t totals = 0;
  int64_t peak_activations = 0;
  for (const MemorySample& m : reader.memory()) {
    if (m.category != MemoryCategory::AllocatorTotal) {
      held[{m.rank, m.category}] = m.bytes;
      if (m.category == MemoryCategory::Activations) {
        peak_activations = std::max(peak_activations, m.bytes);
      }
      continue;
    }
    int64_t sum = 0;
    for (const auto& [key, bytes] : held) {
      if (key.first == m.rank) sum += bytes;
    }
    EXPECT_EQ(m.bytes, sum);
    ++totals;
  }
  EXPECT_GT(totals, 0);
  EXPECT_GT(peak_activations, 0);
  // Loss falls over the run.
  const auto metrics = reader.metrics(0);
  std::vector<double> loss;
  for (const Metric& m : metrics) {
    if (m.name == trace::kMetricLoss) loss.push_back(m.value);
  }
  ASSERT_GT(loss.size(), size_t{2});
  EXPECT_LT(loss.back(), loss.front());
}

// Everything a reader sees, but the creation time.
struct Contents {
  std::vector<Event> events;
  std::vector<MemorySample> memory;
  std::vector<Metric> metrics;
};

Contents contents(const std::string& path) {
  Reader reader(path);
  Contents c;
  reader.for_each_event([&](const Event& e) {
    c.events.push_back(e);
    return true;
  });
  c.memory = reader.memory();
  c.metrics = reader.metrics();
  return c;
}

auto fields(const Event& e) {
  return std::make_tuple(e.begin_ns, e.end_ns, e.enqueue_ns, e.bytes, e.value, e.seq, e.name,
                         e.iteration, e.param, e.bucket, e.unit, e.lane, e.rank, e.kind, e.op,
                         e.dtype, e.flags, e.grp);
}

bool same_events(const std::vector<Event>& a, const std::vector<Event>& b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(),
                    [](const Event& x, const Event& y) { return fields(x) == fields(y); });
}

TEST(synth, IsDeterministicForASeed) {
  TempDir dir;
  synthesize(options_for(dir.file("a.db"), 3));
  synthesize(options_for(dir.file("b.db"), 3));
  synthesize(options_for(dir.file("c.db"), 4));
  const Contents a = contents(dir.file("a.db")), b = contents(dir.file("b.db")),
                 c = contents(dir.file("c.db"));
  EXPECT_TRUE(same_events(a.events, b.events));
  ASSERT_EQ(a.memory.size(), b.memory.size());
  for (size_t i = 0; i < a.memory.size(); ++i) {
    EXPECT_EQ(a.memory[i].ts_ns, b.memory[i].ts_ns);
    EXPECT_EQ(a.memory[i].bytes, b.memory[i].bytes);
  }
  ASSERT_EQ(a.metrics.size(), b.metrics.size());
  for (size_t i = 0; i < a.metrics.size(); ++i) EXPECT_EQ(a.metrics[i].value, b.metrics[i].value);
  EXPECT_FALSE(same_events(a.events, c.events));
}

TEST(synth, ReportsProgressUpToOne) {
  TempDir dir;
  std::vector<double> reported;
  synthesize(options_for(dir.file("p.db")), [&](double f) { reported.push_back(f); });
  ASSERT_GT(reported.size(), size_t{10});
  EXPECT_TRUE(std::is_sorted(reported.begin(), reported.end()));
  EXPECT_GT(reported.front(), 0.0);
  EXPECT_EQ(reported.back(), 1.0);
}

TEST(synth, ReplacesAnExistingFile) {
  TempDir dir;
  SynthOptions options = options_for(dir.file("r.db"));
  synthesize(options);
  options.ranks = 2;
  synthesize(options);
  Reader reader(options.out);
  EXPECT_EQ(reader.ranks().size(), size_t{2});
}

TEST(synth, AtLeastOneIterationForTinyCounts) {
  TempDir dir;
  SynthOptions options = options_for(dir.file("tiny.db"));
  options.events = 1;
  options.ranks = 1;
  const SynthResult result = synthesize(options);
  EXPECT_EQ(result.iterations, 1);
  Reader reader(options.out);
  EXPECT_EQ(reader.event_count(), result.events);
}

// The error names the option to change.
void expect_error(const SynthOptions& options, const std::string& needle) {
  try {
    synthesize(options);
    ADD_FAILURE() << "no error; expected one mentioning " << needle;
  } catch (const TraceError& error) {
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
  }
}

TEST(synth, RejectsBadInput) {
  TempDir dir;
  SynthOptions options = options_for(dir.file("bad.db"));
  options.events = 0;
  expect_error(options, "--events");
  options.events = -5;
  expect_error(options, "--events");
  options.events = 100;
  options.ranks = 0;
  expect_error(options, "--ranks");
  options.ranks = 1025;
  expect_error(options, "--ranks");
  options.ranks = 2;
  options.out = dir.file("no/such/dir/run.db");
  expect_error(options, "--out");
  options.out = dir.path().string();
  expect_error(options, "--out");
  options.out = "";
  expect_error(options, "--out");
}

TEST(synth, RejectsAnUnwritableFile) {
  // /proc takes no new files, not even from root.
  expect_error(options_for("/proc/dpscope-synth-test.db"), "--out");
}

TEST(synthCommand, PrintsOneSummaryLine) {
  if (!std::filesystem::exists(testing::dpscope_bin())) {
    GTEST_SKIP() << testing::dpscope_bin() << " is not built";
  }
  TempDir dir;
  const std::string out = dir.file("cli.db");
  const auto result = testing::run_command(
      testing::dpscope_bin() + " synth --events 5000 --ranks 2 --out " + out + " --seed 9");
  ASSERT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("events, 2 ranks, "), std::string::npos) << result.output;
  EXPECT_NE(result.output.find(out), std::string::npos) << result.output;
  EXPECT_EQ(std::count(result.output.begin(), result.output.end(), '\n'), 1) << result.output;
  EXPECT_EQ(Reader(out).ranks().size(), size_t{2});

  const auto bad =
      testing::run_command(testing::dpscope_bin() + " synth --events 0 --ranks 2 --out " + out);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("--events"), std::string::npos) << bad.output;
}

}  // namespace
}  // namespace dpscope::formats
