// FSDP2's units read from PyTorch's own records: each `fully_shard` parameter group named in the
// record_function labels FSDP2 writes ("FSDP::all_gather (layers.0)"), its states over time
// (gathering, full, reducing) and the collectives it issued (Note [FSDP2's units from PyTorch's
// records]), so that an imported FSDP2 trace fills the viewer's Units tab.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "formats/kineto_survey.h"

namespace dpscope::formats {

// Note [FSDP2's units from PyTorch's records]
// FSDP2 wraps each step of a parameter group in a record_function named `FSDP::<step>` followed
// by the group's module path in parentheses, none for the root module ("FSDP::pre_forward
// (layers.0)", "FSDP::all_gather (layers.0)", "FSDP::post_backward_reduce (layers.0)",
// "FSDP::all_gather"). From those, on each rank:
// - A unit per module path, numbered in the order of its first all-gather (forward order), the
//   root's name empty as in dpscope's own FSDP2 runs.
// - A collective belongs to the unit whose record was open on the issuing thread when it was
//   issued (a kernel's launch, a host op's begin): an all-gather inside `FSDP::all_gather`, a
//   reduce-scatter or all-reduce inside `FSDP::post_backward*`.
// - gathering: from the `FSDP::all_gather` record's begin to its all-gather's end (the record's
//   own end where no collective is found);
// - full: from a gathering's end to the end of the unit's last `FSDP::post_forward` or
//   `FSDP::post_backward*` record before its next gathering (reshard_after_forward=True frees in
//   post_forward and gathers again in backward; False keeps the unit full to post_backward);
// - reducing: its reduce-scatter's span.
// What the records cannot give stays unknown: the units' sizes (0 in the units table) and their
// parameters. FSDP1 names no module in its records (`FullyShardedDataParallel.forward`), so an
// FSDP1 trace has no units.

// One FSDP2 record of a thread, as the survey saw it.
struct FsdpRecord {
  int32_t thread = -1;  // the survey's thread index (SurveyedCollective::thread)
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
  std::string step;     // "all_gather", "post_forward", ...
  std::string module;   // the group's module path; "" for the root
};

// The step and module of an FSDP2 record name; false for a name that is none.
bool parse_fsdp_record(std::string_view name, std::string& step, std::string& module);

// The units of `survey` from its FSDP2 records: fills survey.fsdp_units and survey.unit_states,
// and each collective's `unit`. Does nothing without records.
void assign_fsdp_units(KinetoSurvey& survey, std::vector<FsdpRecord> records);

}  // namespace dpscope::formats
