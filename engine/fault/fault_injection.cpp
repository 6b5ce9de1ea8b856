// Fault injection (see fault_injection.h and Note [Fault points]): parses DPSCOPE_FAULT once
// at start-up and strikes when the armed rank reaches the named point for the Nth time.
#include "engine/fault/fault_injection.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace dpscope::fault {
namespace {

constexpr std::array<std::string_view, 8> kPoints = {
    "construction", "backward",       "optimizer_step", "broadcast",
    "allreduce",    "allgather",      "reduce_scatter", "barrier"};

// The points where a collective is issued: the only ones Skip and Resize act at.
constexpr std::array<std::string_view, 5> kCollectivePoints = {
    "broadcast", "allreduce", "allgather", "reduce_scatter", "barrier"};

constexpr std::string_view kForm =
    "expected <point>[#<occurrence>]@<rank>[:kill|:interrupt|:skip|:resize], e.g. allgather#3@1";

bool acts_on_collective(FaultAction action) {
  return action == FaultAction::Skip || action == FaultAction::Resize;
}

std::string_view action_words(FaultAction action) {
  switch (action) {
    case FaultAction::Kill: return "killing this rank (SIGKILL)";
    case FaultAction::Interrupt: return "sending SIGINT to the launcher";
    case FaultAction::Skip: return "not issuing it (it takes no sequence number)";
    case FaultAction::Resize: return "issuing it with half its elements";
  }
  return "";
}

std::string point_list() {
  std::string list;
  for (std::string_view point : kPoints) {
    if (!list.empty()) list += ", ";
    list += point;
  }
  return list;
}

int64_t parse_positive(std::string_view text, std::string_view what, std::string_view spec) {
  int64_t value = -1;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) {
    throw std::invalid_argument("DPSCOPE_FAULT='" + std::string(spec) + "': " +
                                std::string(what) + " '" + std::string(text) +
                                "' is not a non-negative integer; " + std::string(kForm));
  }
  return value;
}

// The armed fault of this process. A static slot, never freed: fault points may run on other
// threads during exit.
struct Armed {
  FaultSpec spec;
  std::atomic<int64_t> count{0};
};
Armed g_slot;
std::atomic<Armed*> g_armed{nullptr};

void announce(const FaultSpec& spec) {
  std::fprintf(stderr, "dpscope: DPSCOPE_FAULT: rank %d at %s #%lld: %s\n", spec.rank,
               spec.point.c_str(), static_cast<long long>(spec.occurrence),
               std::string(action_words(spec.action)).c_str());
  std::fflush(stderr);
}

void strike(const FaultSpec& spec) {
  announce(spec);
  if (spec.action == FaultAction::Kill) {
    ::raise(SIGKILL);
  } else {
    ::kill(::getppid(), SIGINT);
  }
}

}  // namespace

FaultSpec parse_fault_spec(std::string_view text) {
  FaultSpec spec;
  std::string_view rest = text;
  if (const size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    const std::string_view action = rest.substr(colon + 1);
    if (action == "kill") {
      spec.action = FaultAction::Kill;
    } else if (action == "interrupt") {
      spec.action = FaultAction::Interrupt;
    } else if (action == "skip") {
      spec.action = FaultAction::Skip;
    } else if (action == "resize") {
      spec.action = FaultAction::Resize;
    } else {
      throw std::invalid_argument("DPSCOPE_FAULT='" + std::string(text) + "': unknown action '" +
                                  std::string(action) + "' (kill, interrupt, skip or resize)");
    }
    rest = rest.substr(0, colon);
  }
  const size_t at = rest.rfind('@');
  if (at == std::string_view::npos) {
    throw std::invalid_argument("DPSCOPE_FAULT='" + std::string(text) + "': no rank; " +
                                std::string(kForm));
  }
  spec.rank = static_cast<int>(parse_positive(rest.substr(at + 1), "rank", text));
  rest = rest.substr(0, at);
  if (const size_t hash = rest.find('#'); hash != std::string_view::npos) {
    spec.occurrence = parse_positive(rest.substr(hash + 1), "occurrence", text);
    if (spec.occurrence == 0) {
      throw std::invalid_argument("DPSCOPE_FAULT='" + std::string(text) +
                                  "': occurrences count from 1");
    }
    rest = rest.substr(0, hash);
  }
  if (std::find(kPoints.begin(), kPoints.end(), rest) == kPoints.end()) {
    throw std::invalid_argument("DPSCOPE_FAULT='" + std::string(text) + "': unknown point '" +
                                std::string(rest) + "'; the points are " + point_list());
  }
  if (spec.action == FaultAction::Resize && rest == "barrier") {
    throw std::invalid_argument("DPSCOPE_FAULT='" + std::string(text) +
                                "': a barrier has no elements to resize; skip it instead (:skip)");
  }
  if (acts_on_collective(spec.action) &&
      std::find(kCollectivePoints.begin(), kCollectivePoints.end(), rest) ==
          kCollectivePoints.end()) {
    throw std::invalid_argument("DPSCOPE_FAULT='" + std::string(text) + "': '" +
                                std::string(rest) + "' is not a collective, so nothing there can "
                                "be skipped or resized; name broadcast, allreduce, allgather, "
                                "reduce_scatter or barrier");
  }
  spec.point = std::string(rest);
  return spec;
}

std::optional<FaultSpec> arm_from_environment(int rank) {
  g_armed.store(nullptr);
  const char* value = std::getenv("DPSCOPE_FAULT");
  if (!value || !*value) return std::nullopt;
  FaultSpec spec = parse_fault_spec(value);
  if (spec.rank != rank) return std::nullopt;
  g_slot.spec = spec;
  g_slot.count.store(0);
  g_armed.store(&g_slot);
  return spec;
}

void reached(std::string_view point) {
  Armed* armed = g_armed.load(std::memory_order_acquire);
  if (!armed || acts_on_collective(armed->spec.action) || armed->spec.point != point) return;
  if (armed->count.fetch_add(1) + 1 == armed->spec.occurrence) strike(armed->spec);
}

IssueFault before_issue(std::string_view point) {
  Armed* armed = g_armed.load(std::memory_order_acquire);
  if (!armed || !acts_on_collective(armed->spec.action) || armed->spec.point != point) {
    return IssueFault::None;
  }
  if (armed->count.fetch_add(1) + 1 != armed->spec.occurrence) return IssueFault::None;
  announce(armed->spec);
  return armed->spec.action == FaultAction::Skip ? IssueFault::Skip : IssueFault::Resize;
}

}  // namespace dpscope::fault
