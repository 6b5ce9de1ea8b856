// The hang section's renderings (hang_report.h): `dpscope stats --json`'s `hang` object and the
// text report's section.
#include "analysis/hang_report.h"

#include <cstdio>
#include <nlohmann/json.hpp>

namespace dpscope::analysis {
namespace {

using ordered_json = nlohmann::ordered_json;

ordered_json tag_json(int32_t value) { return value == trace::kNone ? ordered_json(nullptr) : ordered_json(value); }

ordered_json ms_json(int64_t ns) { return static_cast<double>(ns / 1000) / 1e3; }

ordered_json collective_json(const HangCollective& c) {
  return ordered_json{
      {"rank", c.rank},
      {"seq", c.seq},
      {"kind", std::string(trace::to_string(c.op))},
      {"bytes", c.bytes},
      {"dtype", c.dtype == 0xff ? ordered_json(nullptr)
                                : ordered_json(std::string(trace::to_string(static_cast<trace::DType>(c.dtype))))},
      {"iteration", tag_json(c.iteration)},
      {"bucket", tag_json(c.bucket)},
      {"unit", tag_json(c.unit)},
      {"backward", (c.pass_flags & trace::kFlagBackward) != 0},
      {"state", std::string(trace::to_string(c.state))},
      {"issued_ms", ms_json(c.issued_ns)},
      {"pending_ms", c.state == trace::CollectiveEndState::Completed ? ordered_json(nullptr)
                                                                     : ms_json(c.end_ns - c.issued_ns)}};
}

ordered_json seq_json(int64_t seq) { return seq == trace::kNone64 ? ordered_json(nullptr) : ordered_json(seq); }

std::string group_name(const HangReport& report, int32_t grp) {
  for (const HangGroup& g : report.groups) {
    if (g.grp == grp) return g.name;
  }
  return "group " + std::to_string(grp);
}

std::string seq_text(int64_t seq) { return seq == trace::kNone64 ? "none" : "#" + std::to_string(seq); }

}  // namespace

ordered_json hang_json(const std::optional<HangReport>& report) {
  if (!report) return nullptr;
  ordered_json out;
  out["verdict"] = report->verdict;
  out["verdict_group"] = report->verdict_grp == trace::kNone ? ordered_json(nullptr) : ordered_json(report->verdict_grp);
  out["verdict_seq"] = seq_json(report->verdict_seq);
  out["culprit"] = report->culprit == trace::kNone ? ordered_json(nullptr) : ordered_json(report->culprit);
  out["culprit_reason"] = report->culprit_reason;
  out["missing_ranks"] = report->missing_ranks;
  out["sentence"] = report->sentence;
  if (report->first_disagreement) {
    const HangDisagreement& d = *report->first_disagreement;
    ordered_json collectives = ordered_json::array();
    for (const HangCollective& c : d.by_rank) collectives.push_back(collective_json(c));
    out["first_disagreement"] = ordered_json{{"group", d.grp},
                                             {"group_name", group_name(*report, d.grp)},
                                             {"seq", d.seq},
                                             {"field", d.field},
                                             {"verdict", d.verdict},
                                             {"missing_ranks", d.missing_ranks},
                                             {"collectives", collectives}};
  } else {
    out["first_disagreement"] = nullptr;
  }
  ordered_json groups = ordered_json::array();
  for (const HangGroup& g : report->groups) {
    ordered_json ranks = ordered_json::array();
    for (const HangRank& r : g.ranks) {
      ordered_json pending = ordered_json::array();
      for (const HangCollective& c : r.pending) pending.push_back(collective_json(c));
      ranks.push_back(ordered_json{{"rank", r.rank},
                                   {"last_completed_seq", seq_json(r.last_completed_seq)},
                                   {"last_issued_seq", seq_json(r.last_issued_seq)},
                                   {"pending", pending}});
    }
    groups.push_back(ordered_json{{"group", g.grp}, {"name", g.name}, {"ranks", ranks}});
  }
  out["groups"] = groups;
  return out;
}

std::string hang_text(const std::optional<HangReport>& report) {
  if (!report) return "";
  std::string out = "hang: " + report->sentence + "\n";
  out += "  verdict         " + report->verdict;
  if (report->verdict_seq != trace::kNone64) {
    out += " at #" + std::to_string(report->verdict_seq) + " of group '" + group_name(*report, report->verdict_grp) + "'";
  }
  out += " (as PyTorch's flight-recorder analyzer names it)\n";
  if (report->culprit != trace::kNone) {
    out += "  culprit         rank " + std::to_string(report->culprit) + ": " + report->culprit_reason + "\n";
  }
  if (report->first_disagreement) {
    const HangDisagreement& d = *report->first_disagreement;
    out += "  first disagreement #" + std::to_string(d.seq) + " of group '" + group_name(*report, d.grp) +
           "' in its " + d.field + " (flight recorder: " + d.verdict + ")\n";
    for (const HangCollective& c : d.by_rank) {
      out += "    rank " + std::to_string(c.rank) + "  " + describe_collective(c) + ", " +
             std::string(trace::to_string(c.state)) + "\n";
    }
    for (const int32_t rank : d.missing_ranks) out += "    rank " + std::to_string(rank) + "  never issued it\n";
  }
  for (const HangGroup& g : report->groups) {
    out += "  group '" + g.name + "' (" + std::to_string(g.grp) + ")\n";
    for (const HangRank& r : g.ranks) {
      out += "    rank " + std::to_string(r.rank) + "  last completed " + seq_text(r.last_completed_seq) +
             ", last issued " + seq_text(r.last_issued_seq);
      out += r.pending.empty() ? ", nothing pending\n" : ", pending:\n";
      for (const HangCollective& c : r.pending) {
        char when[96];
        std::snprintf(when, sizeof(when), "issued at %.3f s, %s for %.3f s",
                      static_cast<double>(c.issued_ns) / 1e9, std::string(trace::to_string(c.state)).c_str(),
                      static_cast<double>(c.end_ns - c.issued_ns) / 1e9);
        out += "      " + describe_collective(c) + ", " + when + "\n";
      }
    }
  }
  return out;
}

}  // namespace dpscope::analysis
