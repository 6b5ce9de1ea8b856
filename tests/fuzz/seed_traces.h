// Small valid traces for the trace fuzzers: fuzz_trace_sql mutates them in memory, and
// fuzz_make_seeds writes them into tests/fuzz/corpus/trace_bytes/ as the byte fuzzer's seeds.
// Every table and every event kind has a few rows; files are shrunk to 512-byte pages.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "formats/synth.h"
#include "tests/trace_event.h"
#include "trace/writer.h"

namespace dpscope::fuzz {

using namespace dpscope::trace;
using namespace dpscope::formats;

// The ids of the seeds' interned names (constants, not an enumeration: they are used as NameIds).
inline constexpr NameId kForward = 1, kBackward = 2, kOptimizerStep = 3, kIteration = 4,
                        kFinalize = 5, kLoss = 6, kStepMs = 7, kVerify = 8;

using dpscope::testing::trace_event;

// One rank's rows of a two-iteration DDP (or, with fsdp, FSDP) run. Rank r's times are shifted.
inline void write_rank_rows(Writer& w, int16_t rank, bool fsdp) {
  RankInfo info;
  info.rank = rank;
  info.host = "host";
  info.pid = 100 + rank;
  info.local_rank = rank;
  info.clock_offset_ns = rank * 7;
  info.start_ns = 0;
  info.end_ns = 100000;
  info.events = 30;
  info.status = rank == 1 ? "interrupted (SIGINT)" : "complete";
  w.put_rank(info);
  w.add_lane(LaneInfo{rank, 0, "main", LaneKind::Host});
  w.add_lane(LaneInfo{rank, 1, "gloo comm", LaneKind::Comm});
  w.add_lane(LaneInfo{rank, 2, "autograd", LaneKind::Host});
  if (fsdp) w.add_lane(LaneInfo{rank, 3, "unit 0", LaneKind::Unit});
  const int64_t shift = rank * 13;
  Event verify = trace_event(rank, 0, EventKind::Phase, 10 + shift, 90 + shift, kNone);
  verify.name = kVerify;
  w.add_event(verify);
  Event broadcast = trace_event(rank, 1, EventKind::Collective, 20 + shift, 60 + shift, kNone);
  broadcast.op = static_cast<uint8_t>(CollectiveOp::Broadcast);
  broadcast.grp = 0;
  broadcast.seq = 0;
  broadcast.bytes = 64;
  broadcast.dtype = static_cast<uint8_t>(DType::Float32);
  broadcast.enqueue_ns = 15 + shift;
  w.add_event(broadcast);
  for (int32_t it = 0; it < 2; ++it) {
    const int64_t t = 1000 + it * 10000 + shift;
    const std::pair<NameId, std::pair<int64_t, int64_t>> phases[] = {
        {kIteration, {t, t + 9000}},          {kForward, {t + 100, t + 2000}},
        {kBackward, {t + 2100, t + 6000}},    {kFinalize, {t + 5000, t + 6500}},
        {kOptimizerStep, {t + 6600, t + 8000}}};
    for (const auto& [name, span] : phases) {
      Event e = trace_event(rank, 0, EventKind::Phase, span.first, span.second, it);
      e.name = name;
      w.add_event(e);
    }
    if (!fsdp) {
      for (int32_t p = 3; p >= 0; --p) {
        Event hook = trace_event(rank, 2, EventKind::Hook, t + 2200 + (3 - p) * 300,
                                t + 2300 + (3 - p) * 300, it);
        hook.param = p;
        hook.bucket = p / 2;
        hook.value = 16 * (4 - p);
        w.add_event(hook);
      }
      for (int32_t b = 1; b >= 0; --b) {
        const int64_t at = t + 2900 + (1 - b) * 600;
        Event ready = trace_event(rank, 2, EventKind::BucketReady, at, at, it);
        ready.bucket = b;
        w.add_event(ready);
        Event launch = trace_event(rank, 2, EventKind::BucketLaunch, at + 10, at + 10, it);
        launch.bucket = b;
        launch.seq = 1 + it * 2 + (1 - b);
        w.add_event(launch);
        Event all_reduce = trace_event(rank, 1, EventKind::Collective, at + 20, at + 1500, it);
        all_reduce.op = static_cast<uint8_t>(CollectiveOp::AllReduce);
        all_reduce.grp = 0;
        all_reduce.seq = launch.seq;
        all_reduce.bytes = 32;
        all_reduce.dtype = static_cast<uint8_t>(DType::Float32);
        all_reduce.enqueue_ns = at + 10;
        all_reduce.bucket = b;
        w.add_event(all_reduce);
        Event done = trace_event(rank, 0, EventKind::BucketDone, at + 1600, at + 1600, it);
        done.bucket = b;
        w.add_event(done);
      }
    } else {
      Event gather = trace_event(rank, 1, EventKind::Collective, t + 150, t + 900, it);
      gather.op = static_cast<uint8_t>(CollectiveOp::AllGather);
      gather.grp = 0;
      gather.seq = 1 + it * 2;
      gather.bytes = 40;
      gather.dtype = static_cast<uint8_t>(DType::BFloat16);
      gather.unit = 0;
      gather.flags = kFlagPrefetch;
      w.add_event(gather);
      Event scatter = trace_event(rank, 1, EventKind::Collective, t + 4000, t + 5500, it);
      scatter.op = static_cast<uint8_t>(CollectiveOp::ReduceScatter);
      scatter.grp = 0;
      scatter.seq = 2 + it * 2;
      scatter.bytes = 80;
      scatter.dtype = static_cast<uint8_t>(DType::Float32);
      scatter.unit = 0;
      scatter.flags = kFlagBackward | kFlagBucketed;
      w.add_event(scatter);
      for (uint8_t state = 0; state < kUnitStateCount; ++state) {
        Event unit = trace_event(rank, 3, EventKind::UnitState, t + 150 + state * 2000,
                                t + 1000 + state * 2000, it);
        unit.unit = 0;
        unit.op = state;
        w.add_event(unit);
      }
    }
    Event wait = trace_event(rank, 0, EventKind::CollectiveWait, t + 6000, t + 6400, it);
    wait.op = static_cast<uint8_t>(fsdp ? CollectiveOp::ReduceScatter : CollectiveOp::AllReduce);
    wait.grp = 0;
    wait.seq = 2 + it * 2;
    w.add_event(wait);
    Event mark = trace_event(rank, 0, EventKind::Mark, t + 8500, t + 8500, it);
    mark.value = 7;
    w.add_event(mark);
    for (int c : {0, 1, 2, 8, 10}) {
      w.add_memory(MemorySample{rank, t + 100 * c, static_cast<MemoryCategory>(c), 1000 * (c + 1)});
    }
    w.add_memory(MemorySample{rank, t + 3000, MemoryCategory::Activations, 0});
    w.add_metric(rank, it, kLoss, 2.5 - it);
    w.add_metric(rank, it, kStepMs, 9.0 + it);
  }
}

// Run-wide rows: meta, names, params and the DDP bucket plans or the FSDP units.
inline void write_run_rows(Writer& w, bool fsdp, int world_size) {
  w.set_meta("strategy", fsdp ? "fsdp" : "ddp");
  w.set_meta("backend", "gloo");
  w.set_meta("world_size", std::to_string(world_size));
  w.set_meta("model", "mlp");
  w.set_meta("trace_level", "full");
  w.set_meta("config", "{\"steps\":2}");
  const char* names[] = {"forward", "backward", "optimizer_step", "iteration",
                         "finalize_backward", "loss", "step_ms", "verify_model"};
  for (NameId id = 1; id <= 8; ++id) w.add_name(id, names[id - 1]);
  for (int32_t p = 0; p < 4; ++p) {
    ParamInfo param;
    param.index = p;
    param.name = "fc" + std::to_string(p / 2) + (p % 2 ? ".bias" : ".weight");
    param.shape = p % 2 ? std::vector<int64_t>{2} : std::vector<int64_t>{2, 3};
    param.numel = p % 2 ? 2 : 6;
    if (fsdp) {
      param.unit = 0;
      param.unit_offset = p * 4;
    } else {
      param.bucket = p / 2;
      param.rebuilt_bucket = 1 - p / 2;
    }
    w.add_param(param);
  }
  if (fsdp) {
    w.add_unit(UnitInfo{0, "", kNone, 16, 16, 8});
    w.add_unit(UnitInfo{1, "fc1", 0, 8, 8, 4});
    w.add_unit_shard(UnitShard{0, 0, 0, 8, 8});
    w.add_unit_shard(UnitShard{0, 1, 8, 16, 8});
    return;
  }
  for (int32_t generation = 0; generation < 2; ++generation) {
    for (int32_t b = 0; b < 2; ++b) {
      BucketInfo bucket;
      bucket.generation = generation;
      bucket.index = b;
      bucket.bytes = 32;
      bucket.numel = 8;
      const int32_t first = generation == 0 ? 2 * b : 2 * (1 - b);
      bucket.params = {first, first + 1};
      bucket.offsets = {0, 6};
      w.add_bucket(bucket);
    }
  }
}

// Makes the file small: one self-contained file (no WAL) with 512-byte pages.
inline void shrink(const std::string& path) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    sqlite3_close(db);
    throw std::runtime_error("cannot open " + path);
  }
  const int rc = sqlite3_exec(
      db, "PRAGMA journal_mode = DELETE; PRAGMA page_size = 512; VACUUM;", nullptr, nullptr,
      nullptr);
  sqlite3_close(db);
  if (rc != SQLITE_OK) throw std::runtime_error("cannot shrink " + path);
}

// The seed traces, by file name: a two-rank DDP run file, one FSDP rank file, and a tiny synth.
inline std::vector<std::string> seed_trace_names() {
  return {"ddp_run.sqlite", "fsdp_rank1.sqlite", "synth.sqlite"};
}

inline void write_seed_trace(const std::string& name, const std::string& path) {
  if (name == "synth.sqlite") {
    SynthOptions options;
    options.events = 120;
    options.ranks = 2;
    options.out = path;
    options.layers = 2;
    options.hidden = 4;
    synthesize(options);
  } else {
    const bool fsdp = name == "fsdp_rank1.sqlite";
    Writer w(path);
    w.begin();
    write_run_rows(w, fsdp, 2);
    if (fsdp) {
      write_rank_rows(w, 1, true);
    } else {
      write_rank_rows(w, 0, false);
      write_rank_rows(w, 1, false);
    }
    w.commit();
    w.finish();
  }
  shrink(path);
}

inline std::string read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace dpscope::fuzz
