// The words of a hang for the viewer's header and narration (hang_words.h): who waits for whom,
// and for how long. Pure; no ImGui.
#include <algorithm>
#include <cstdio>

#include "viewer/hang_words.h"

namespace dpscope::view {
namespace {

// The longest any rank's first pending collective was pending, and that collective.
const analysis::HangCollective* longest_pending(const analysis::HangReport& hang) {
  const analysis::HangCollective* longest = nullptr;
  for (const analysis::HangGroup& g : hang.groups) {
    for (const analysis::HangRank& r : g.ranks) {
      if (r.pending.empty()) continue;
      const analysis::HangCollective& c = r.pending.front();
      if (!longest || c.end_ns - c.issued_ns > longest->end_ns - longest->issued_ns) longest = &c;
    }
  }
  return longest;
}

}  // namespace

std::string hang_who_waits(const analysis::HangReport& hang) {
  if (hang.culprit == trace::kNone) return "";
  std::vector<int32_t> waiters;
  const analysis::HangCollective* where = nullptr;
  for (const analysis::HangGroup& g : hang.groups) {
    for (const analysis::HangRank& r : g.ranks) {
      if (r.rank == hang.culprit || r.pending.empty()) continue;
      if (std::find(waiters.begin(), waiters.end(), r.rank) == waiters.end()) waiters.push_back(r.rank);
      if (!where) where = &r.pending.front();
    }
  }
  std::sort(waiters.begin(), waiters.end());
  std::string who;
  for (size_t i = 0; i < waiters.size(); ++i) who += (i ? ", " : "") + std::to_string(waiters[i]);
  const bool missing = std::find(hang.missing_ranks.begin(), hang.missing_ranks.end(), hang.culprit) != hang.missing_ranks.end();
  const std::string culprit = "rank " + std::to_string(hang.culprit) + (missing ? ", which never issued it" : ", which diverged");
  if (!where) return "rank " + std::to_string(hang.culprit) + " diverged";
  return (waiters.size() == 1 ? "rank " : "ranks ") + who + (waiters.size() == 1 ? " waits in " : " wait in ") +
         std::string(trace::to_string(where->op)) + " #" + std::to_string(where->seq) + " for " + culprit;
}

std::string hang_header_piece(const std::optional<analysis::HangReport>& hang) {
  if (!hang) return "";
  std::string piece = "hang: " + hang_who_waits(*hang);
  // Under a tenth of a second nobody waited: a rank failed at once and the others were stopped.
  if (const analysis::HangCollective* c = longest_pending(*hang); c && c->end_ns - c->issued_ns >= 100'000'000) {
    char stuck[48];
    std::snprintf(stuck, sizeof(stuck), ", stuck %.1f s", double(c->end_ns - c->issued_ns) / 1e9);
    piece += stuck;
  }
  return piece;
}

std::string live_stuck_piece(const Model& model, int64_t now_ns) {
  const Span* oldest = nullptr;
  int oldest_rank = -1;
  for (size_t r = 0; r < model.ranks.size(); ++r) {
    int64_t last_finished = INT64_MIN;  // the latest end of a collective this rank recorded
    for (const Lane& lane : model.ranks[r].lanes) {
      for (const Span& s : lane.spans) {
        if (s.kind() == trace::EventKind::Collective) last_finished = std::max(last_finished, s.end_ns);
      }
    }
    for (const Lane& lane : model.ranks[r].lanes) {
      for (const Span& s : lane.spans) {
        if (s.kind() != trace::EventKind::Mark || model.name(s.name()).rfind("stuck: ", 0) != 0) continue;
        if (last_finished > s.end_ns) continue;  // something finished since: it moved on
        if (!oldest || s.begin_ns < oldest->begin_ns) {
          oldest = &s;
          oldest_rank = int(r);
        }
      }
    }
  }
  if (!oldest) return "";
  char text[160];
  std::snprintf(text, sizeof(text), "stuck: rank %d in %s for %.1f s", model.ranks[size_t(oldest_rank)].info.rank,
                model.name(oldest->name()).substr(7).c_str(), double(now_ns - oldest->begin_ns) / 1e9);
  return text;
}

}  // namespace dpscope::view
