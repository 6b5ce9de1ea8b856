// When a run hangs: which collective each rank is stuck in, where the ranks' collectives first
// disagree, the rank that diverged, and the verdict PyTorch's flight-recorder analyzer gives.
// One definition for `dpscope stats` (its hang section), the viewer and the launcher's last line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trace/collective_state.h"
#include "trace/schema.h"

namespace dpscope::trace {
class Reader;
}

namespace dpscope::analysis {

// One rank's collective as the hang section shows it.
struct HangCollective {
  int32_t rank = 0;
  int16_t lane = 0;  // trace::LaneId where it was recorded (the viewer draws it there)
  int32_t grp = 0;
  int64_t seq = 0;
  trace::CollectiveOp op = trace::CollectiveOp::AllReduce;
  int64_t bytes = 0;
  uint8_t dtype = 0xff;  // trace::DType; 0xff when not recorded
  int32_t iteration = trace::kNone;
  int32_t bucket = trace::kNone;
  int32_t unit = trace::kNone;
  // The engine's pass tags of events.flags (kFlagPrefetch, kFlagBackward, kFlagBucketed): an
  // FSDP unit's forward and backward all-gathers are told apart by them.
  uint8_t pass_flags = 0;
  trace::CollectiveEndState state = trace::CollectiveEndState::Completed;
  int64_t issued_ns = 0;  // when the rank issued it, from the run's start
  int64_t end_ns = 0;     // its end (a pending one's: when its rank ended), from the run's start
};

// One rank of one process group.
struct HangRank {
  int32_t rank = 0;
  int64_t last_completed_seq = trace::kNone64;  // kNone64: none completed
  int64_t last_issued_seq = trace::kNone64;
  std::vector<HangCollective> pending;  // never completed, in sequence order
};

struct HangGroup {
  int32_t grp = 0;
  std::string name;  // "world", or the name in its communication lane's "(...)"
  std::vector<HangRank> ranks;  // the group's ranks, ascending (Note [Subgroup collectives])
};

// The first sequence number of a group where its ranks disagree.
struct HangDisagreement {
  int32_t grp = 0;
  int64_t seq = 0;
  // What differs first: "missing" (a rank never issued it), "kind", "size", "dtype", or the
  // engine's own tags "iteration", "bucket", "unit", "pass" (forward or backward, prefetch: a
  // silent desynchronisation the flight recorder cannot see), or "state".
  std::string field;
  // What PyTorch's flight-recorder analyzer says of this sequence number (Note [Flight-recorder
  // verdicts]); FULLY_MATCHED when only dpscope's tags differ.
  std::string verdict;
  std::vector<HangCollective> by_rank;  // the ranks that issued it, ascending
  std::vector<int32_t> missing_ranks;   // the group's ranks that never issued it
};

// Note [Flight-recorder verdicts]
// PyTorch's analyzer (torch/distributed/flight_recorder, `torchfrtrace`) walks each group's
// collectives by collective_seq_id, the lowest rank's entry against every other rank's entry of
// the same id (components/utils.py, check_current_entry_match and error_analysis; types.py,
// Op.match), and reports the first problem of each group:
//   - a rank of the group has no entry of that id: "Not all ranks joining collective", with the
//     missing ranks; dpscope names it NOT_ALL_RANKS_JOINING;
//   - else the first of COLLECTIVE_TYPE_MISMATCH (the kind), SIZE_OR_SYNTAX_MISMATCH (input or
//     output sizes), COLLECTIVE_DTYPE_MISMATCH, COLLECTIVE_STATE_MISMATCH (completed against
//     started or scheduled), checked in that order;
//   - FULLY_MATCHED when none applies.
// flight_recorder_verdict() applies the same rules to a trace, element counts standing for the
// sizes (a dpscope collective's tensors are flat), so that the analyzer run on the files
// `dpscope export --format flight-recorder` writes says what `dpscope stats` says (docs/hangs.md).

struct HangReport {
  std::vector<HangGroup> groups;  // every group with a collective, by id
  // The earliest (by issue time) first disagreement over the groups; none when every issued
  // collective agrees on every rank.
  std::optional<HangDisagreement> first_disagreement;
  // The flight-recorder analyzer's verdict on the run: its first problem, in the group and at the
  // sequence number where it finds it (Note [Flight-recorder verdicts]).
  std::string verdict = "FULLY_MATCHED";
  int32_t verdict_grp = trace::kNone;
  int64_t verdict_seq = trace::kNone64;
  std::vector<int32_t> missing_ranks;  // of the first disagreement
  int32_t culprit = trace::kNone;      // the rank that diverged; kNone when nothing tells
  std::string culprit_reason;          // how it was told, one clause
  std::string sentence;                // the report's one sentence
};

// The hang section of a trace: nullopt when every collective completed (no kFlagNotCompleted:
// Note [Collective end state]). Reads the collectives and the ranks; throws TraceError as the
// Reader does.
std::optional<HangReport> analyze_hang(trace::Reader& reader);

// The same from collectives already read (times from the run's start, any order) and the run's
// ranks; `group_names` by group id (missing: "group <id>"). Pure; what analyze_hang and the
// flight-recorder import share.
std::optional<HangReport> analyze_hang(std::vector<HangCollective> collectives,
                                       const std::vector<int32_t>& run_ranks,
                                       const std::vector<std::pair<int32_t, std::string>>& group_names);

// What the analyzer's Op.match says of `other` against `first` (Note [Flight-recorder verdicts]).
// Pure.
std::string flight_recorder_match(const HangCollective& first, const HangCollective& other,
                                  int32_t group_size);

// "allreduce #41 (iteration 3, bucket 2, 1.0 MiB float32)". Pure.
std::string describe_collective(const HangCollective& c);

}  // namespace dpscope::analysis
