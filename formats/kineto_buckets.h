// DDP's buckets read from PyTorch's own records: which of an imported trace's all-reduces are
// DDP's gradient buckets, numbered in launch order with their sizes (Note [DDP's buckets from
// PyTorch's records]), and the run's bucket plan that the import writes beside them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "formats/kineto_survey.h"
#include "trace/records.h"

namespace dpscope::formats {

// Note [DDP's buckets from PyTorch's records]
// PyTorch's DDP all-reduces each bucket once per step, in bucket order (its Reducer launches
// them strictly in index order), on its process group. So in a trace of DDP
// (`DistributedDataParallel.forward` present):
// - The group: the one with the most all-reduces issued inside ProfilerSteps.
// - A step's buckets: that group's all-reduces issued in the step before its optimizer step
//   began, numbered from 0 in the order they were issued (a kernel's launch; a gloo:* op's
//   begin). DDP's buffer broadcasts are broadcasts, not buckets; a metric all-reduced after the
//   optimizer step is none either.
// - Sizes: "In msg nelems" and dtype from `record_param_comms` or the NCCL kernel's args, else
//   the first "Input Dims" and "Input type" of `nccl:all_reduce`. PyTorch 1.13's list-form CPU
//   traces carry none: their buckets' sizes stay unknown (bytes and numel 0 in the buckets table,
//   null in `dpscope stats --json`).
// - The plan (the buckets table's generation 1: the rebuilt buckets DDP runs after its first
//   iteration) is the most common count of buckets a step, the larger on a tie (the profiler's
//   last step may lose its last all-reduces, never gain one), with the sizes of the first step of
//   that count. The run's plan is the lowest rank's; DDP builds the same plan on every rank.
// Checked against DDP's own logging data (`rebuilt_bucket_sizes`) in tests/formats/test_kineto_ddp.cpp.

// Marks each of DDP's bucket all-reduces in `survey.collectives` with its bucket and fills
// `survey.ddp_buckets`; does nothing for a trace that is not DDP's.
void assign_ddp_buckets(KinetoSurvey& survey);

// The run's plan from its ranks' (`ranks`: each rank and its survey, lowest rank first): the
// buckets table's rows, generation 1, without parameters. `warn` gets one line for each rank
// whose plan differs from the lowest rank's in count or sizes. Empty when no rank has buckets.
std::vector<trace::BucketInfo> ddp_bucket_plan(const std::vector<std::pair<int32_t, const KinetoSurvey*>>& ranks,
                                               const std::function<void(const std::string&)>& warn);

}  // namespace dpscope::formats
