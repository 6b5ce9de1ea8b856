// FSDP2's units, their states and their collectives from its record_function labels (Note
// [FSDP2's units from PyTorch's records], kineto_units.h).
#include "formats/kineto_units.h"

#include <algorithm>
#include <map>

namespace dpscope::formats {
namespace {

// Named apart from kineto_survey.cpp's starts_with: one unity batch (Note [Unity builds]).
bool is_prefix_of(std::string_view prefix, std::string_view s) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

bool is_op(const SurveyedCollective& c, trace::CollectiveOp op) { return c.op == static_cast<uint8_t>(op); }

// The record of `records` (one thread's, sorted by begin) open at `t` whose step `wants`; nullptr
// when none is.
template <typename Wants>
const FsdpRecord* open_at(const std::vector<const FsdpRecord*>& records, int64_t t, Wants wants) {
  auto after = std::upper_bound(records.begin(), records.end(), t,
                                [](int64_t at, const FsdpRecord* r) { return at < r->begin_ns; });
  // FSDP2's records nest a few deep (post_backward around post_backward_reduce): look back a few.
  for (int back = 0; back < 8 && after != records.begin(); ++back) {
    --after;
    if ((*after)->end_ns >= t && wants(**after)) return *after;
  }
  return nullptr;
}

bool frees(const FsdpRecord& r) { return r.step == "post_forward" || is_prefix_of("post_backward", r.step); }

}  // namespace

bool parse_fsdp_record(std::string_view name, std::string& step, std::string& module) {
  constexpr std::string_view kPrefix = "FSDP::";
  if (!is_prefix_of(kPrefix, name)) return false;
  name.remove_prefix(kPrefix.size());
  const size_t open = name.find(" (");
  if (open != std::string_view::npos && name.back() == ')') {
    step = std::string(name.substr(0, open));
    module = std::string(name.substr(open + 2, name.size() - open - 3));
  } else {
    step = std::string(name);
    module.clear();
  }
  return !step.empty();
}

void assign_fsdp_units(KinetoSurvey& survey, std::vector<FsdpRecord> records) {
  if (records.empty()) return;
  std::sort(records.begin(), records.end(), [](const FsdpRecord& a, const FsdpRecord& b) { return a.begin_ns < b.begin_ns; });
  // Units in the order of their first all-gather, then of their first record.
  std::map<std::string, int32_t> unit_of;
  for (const bool gathers_only : {true, false}) {
    for (const FsdpRecord& r : records) {
      if ((!gathers_only || r.step == "all_gather") && !unit_of.count(r.module)) {
        unit_of.emplace(r.module, static_cast<int32_t>(survey.fsdp_units.size()));
        survey.fsdp_units.push_back(r.module);
      }
    }
  }
  std::map<int32_t, std::vector<const FsdpRecord*>> by_thread;
  for (const FsdpRecord& r : records) by_thread[r.thread].push_back(&r);

  // Each unit's gatherings and reductions, from the collectives its records issued.
  struct Gathering {
    int64_t begin_ns, end_ns;
  };
  std::map<int32_t, std::vector<Gathering>> gatherings;
  std::map<const FsdpRecord*, bool> gathered;  // all_gather records that issued a collective
  for (auto& [grp, collectives] : survey.collectives) {
    for (SurveyedCollective& c : collectives) {
      const auto thread = by_thread.find(c.thread);
      if (thread == by_thread.end()) continue;
      const bool gather = is_op(c, trace::CollectiveOp::AllGather);
      const bool reduce = is_op(c, trace::CollectiveOp::ReduceScatter) || is_op(c, trace::CollectiveOp::AllReduce);
      if (!gather && !reduce) continue;
      const FsdpRecord* r = open_at(thread->second, c.issue_ns, [&](const FsdpRecord& record) {
        return gather ? record.step == "all_gather" : is_prefix_of("post_backward", record.step);
      });
      if (!r) continue;
      c.unit = unit_of.at(r->module);
      if (gather) {
        gatherings[c.unit].push_back({r->begin_ns, std::max(c.end_ns, r->end_ns)});
        gathered[r] = true;
      } else {
        survey.unit_states.push_back({c.unit, trace::UnitState::Reducing, c.begin_ns, c.end_ns});
      }
    }
  }
  for (const FsdpRecord& r : records) {
    if (r.step == "all_gather" && !gathered.count(&r)) gatherings[unit_of.at(r.module)].push_back({r.begin_ns, r.end_ns});
  }
  // Each unit's records that may free it (post_forward, post_backward*), by begin.
  std::map<int32_t, std::vector<const FsdpRecord*>> freeing;
  for (const FsdpRecord& r : records) {
    if (frees(r)) freeing[unit_of.at(r.module)].push_back(&r);
  }
  // Each gathering, and the unit full from its end to the last record that may free it before
  // the unit's next gathering.
  for (auto& [unit, list] : gatherings) {
    std::sort(list.begin(), list.end(), [](const Gathering& a, const Gathering& b) { return a.begin_ns < b.begin_ns; });
    const std::vector<const FsdpRecord*>& candidates = freeing[unit];
    for (size_t g = 0; g < list.size(); ++g) {
      survey.unit_states.push_back({unit, trace::UnitState::Gathering, list[g].begin_ns, list[g].end_ns});
      const int64_t next = g + 1 < list.size() ? list[g + 1].begin_ns : INT64_MAX;
      int64_t freed = INT64_MIN;
      auto r = std::lower_bound(candidates.begin(), candidates.end(), list[g].begin_ns,
                                [](const FsdpRecord* record, int64_t t) { return record->begin_ns < t; });
      for (; r != candidates.end() && (*r)->begin_ns < next; ++r) freed = std::max(freed, (*r)->end_ns);
      if (freed > list[g].end_ns) survey.unit_states.push_back({unit, trace::UnitState::Full, list[g].end_ns, freed});
    }
  }
  std::sort(survey.unit_states.begin(), survey.unit_states.end(),
            [](const SurveyedUnitState& a, const SurveyedUnitState& b) { return a.begin_ns < b.begin_ns; });
}

}  // namespace dpscope::formats
