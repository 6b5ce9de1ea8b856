// Ranks on one clock for imported profiler traces: each rank's offset from the ends of the
// blocking collectives it shares with the reference rank. Kineto records no clock offsets, and
// each rank's profiler starts at its own zero, so without this skew and stragglers across hosts
// measure clock error, not waiting (docs/kineto.md, "Ranks on one clock"). Pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/kineto_survey.h"
#include "trace/vocabulary.h"

namespace dpscope::formats {

// Note [Aligning on collective ends]
// A blocking collective (all-reduce, all-gather, reduce-scatter, broadcast, barrier, all-to-all;
// not send/recv) ends on every rank at nearly the same moment: no rank can finish before the last
// one has joined, and the ring's last step reaches all of them together. So the shift that lines
// up a rank's collective ends with the reference rank's (the lowest rank present) is its clock
// offset:
//  - collectives are matched by group and sequence number (Note [Collective sequence numbers]:
//    Kineto's Seq where recorded, else the order within the group); a pair whose ops differ is
//    left out;
//  - offset = the median over the matched pairs of (reference's end − rank's end), robust to the
//    few that end late on one rank (a kernel delayed behind another on its stream);
//  - uncertainty = half the interquartile range of those differences, at least 1 µs;
//  - check: after the shift no matched collective may end on a rank before the last rank began
//    it (beyond the ranks' uncertainties). Where that fails the shift would invent causality the
//    run did not have, so every offset stays 0 and the reason is said (stderr and meta
//    `clock_alignment_note`).
// dpscope's own runs need none of this: their ranks measure their offsets at rendezvous.

// One rank's collectives, as its file's survey found them, and its file's base time.
struct RankCollectives {
  int32_t rank = 0;
  int64_t base_ns = 0;  // added to the survey's times to make them the file's absolute times
  const std::map<int16_t, std::vector<SurveyedCollective>>* collectives = nullptr;
};

struct RankOffset {
  int32_t rank = 0;
  int64_t offset_ns = 0;       // added to every time of the rank
  int64_t uncertainty_ns = 0;  // how far offset_ns may be off
  int64_t matched = 0;         // collectives matched with the reference rank
};

struct Alignment {
  trace::ClockAlignment method = trace::ClockAlignment::None;
  std::vector<RankOffset> ranks;  // in the order given
  std::string note;  // why the offsets were kept at 0, when asked for and refused; else ""
};

// Whether at least two of `ranks` share a matched blocking collective: the import's default is
// collective-ends then, none otherwise.
bool can_align_collective_ends(const std::vector<RankCollectives>& ranks);

// The ranks' offsets by `method` (See Note [Aligning on collective ends]); None gives offset 0
// to every rank. CollectiveEnds with nothing to match, or a shift that fails the check, gives
// method None and offset 0 with the reason in `note`.
Alignment align_ranks(const std::vector<RankCollectives>& ranks, trace::ClockAlignment method);

}  // namespace dpscope::formats
