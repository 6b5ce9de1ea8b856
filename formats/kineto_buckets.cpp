// Which of an imported trace's all-reduces are DDP's buckets, and the run's plan (Note [DDP's
// buckets from PyTorch's records], kineto_buckets.h).
#include "formats/kineto_buckets.h"

#include <algorithm>
#include <map>

namespace dpscope::formats {
namespace {

bool is_all_reduce(const SurveyedCollective& c) {
  return c.op == static_cast<uint8_t>(trace::CollectiveOp::AllReduce);
}

// The group with the most all-reduces issued inside a step; kNone when none has any.
int32_t ddp_group(const KinetoSurvey& survey) {
  int32_t best = trace::kNone;
  size_t most = 0;
  for (const auto& [grp, collectives] : survey.collectives) {
    const auto count = size_t(std::count_if(collectives.begin(), collectives.end(), [&](const SurveyedCollective& c) {
      return is_all_reduce(c) && survey.iteration_at(c.issue_ns) != trace::kNone;
    }));
    if (count > most) {
      most = count;
      best = grp;
    }
  }
  return best;
}

std::string describe(const std::vector<SurveyedBucket>& plan) {
  std::string text = std::to_string(plan.size()) + " buckets (";
  for (size_t b = 0; b < plan.size(); ++b) {
    text += (b ? ", " : "") + (plan[b].numel == kAbsent ? std::string("?") : std::to_string(plan[b].numel));
  }
  return text + " elements)";
}

bool same_plan(const std::vector<SurveyedBucket>& a, const std::vector<SurveyedBucket>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const SurveyedBucket& x, const SurveyedBucket& y) {
    return x.numel == y.numel && x.dtype == y.dtype;
  });
}

}  // namespace

void assign_ddp_buckets(KinetoSurvey& survey) {
  if (!survey.ddp) return;
  const int32_t grp = ddp_group(survey);
  if (grp == trace::kNone) return;
  std::vector<SurveyedCollective>& collectives = survey.collectives[static_cast<int16_t>(grp)];
  // Each step's bucket all-reduces, as indices into `collectives`, in the order they were issued.
  std::map<int32_t, std::vector<size_t>> by_step;
  for (size_t i = 0; i < collectives.size(); ++i) {
    const SurveyedCollective& c = collectives[i];
    const int32_t step = survey.iteration_at(c.issue_ns);
    if (!is_all_reduce(c) || step == trace::kNone || c.issue_ns >= survey.steps[size_t(step)].optimizer_ns) continue;
    by_step[step].push_back(i);
  }
  std::map<size_t, int> steps_of_count;
  for (auto& [step, indices] : by_step) {
    std::stable_sort(indices.begin(), indices.end(),
                     [&](size_t a, size_t b) { return collectives[a].issue_ns < collectives[b].issue_ns; });
    for (size_t b = 0; b < indices.size(); ++b) collectives[indices[b]].bucket = static_cast<int32_t>(b);
    ++steps_of_count[indices.size()];
  }
  if (steps_of_count.empty()) return;
  size_t count = 0;
  int most = 0;
  for (const auto& [buckets, steps] : steps_of_count) {
    if (steps >= most) {  // ascending counts: a tie keeps the larger
      most = steps;
      count = buckets;
    }
  }
  for (const auto& [step, indices] : by_step) {
    if (indices.size() != count) continue;
    for (const size_t i : indices) survey.ddp_buckets.push_back({collectives[i].numel, collectives[i].dtype});
    break;
  }
}

std::vector<trace::BucketInfo> ddp_bucket_plan(const std::vector<std::pair<int32_t, const KinetoSurvey*>>& ranks,
                                               const std::function<void(const std::string&)>& warn) {
  const KinetoSurvey* first = nullptr;
  int32_t first_rank = 0;
  for (const auto& [rank, survey] : ranks) {
    if (survey->ddp_buckets.empty()) continue;
    if (!first) {
      first = survey;
      first_rank = rank;
    } else if (!same_plan(first->ddp_buckets, survey->ddp_buckets)) {
      warn("import: rank " + std::to_string(rank) + "'s DDP steps all-reduce " + describe(survey->ddp_buckets) +
           ", rank " + std::to_string(first_rank) + "'s " + describe(first->ddp_buckets) +
           "; the buckets table keeps rank " + std::to_string(first_rank) + "'s");
    }
  }
  std::vector<trace::BucketInfo> plan;
  if (!first) return plan;
  for (size_t b = 0; b < first->ddp_buckets.size(); ++b) {
    const SurveyedBucket& bucket = first->ddp_buckets[b];
    trace::BucketInfo info;
    info.generation = 1;
    info.index = static_cast<int32_t>(b);
    const int64_t size = dtype_size(bucket.dtype);
    if (bucket.numel != kAbsent && bucket.numel > 0 && size > 0) {
      info.numel = bucket.numel;
      info.bytes = bucket.numel * size;
      info.dtype = static_cast<trace::DType>(bucket.dtype);
    }
    plan.push_back(std::move(info));
  }
  return plan;
}

}  // namespace dpscope::formats
