// The emulated link: its two numbers (bandwidth, latency), their checks, and the ring model of how
// long each collective takes on such a link (docs/communication.md, "Emulating a cluster's link").
// Header-only and without LibTorch, so that the CLI checks --link-gbps and --link-latency-us
// before any rank starts, in every build; the engine times collectives with it
// (link_emulation.h).
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "trace/schema.h"

namespace dpscope::core {

// One network link, as every rank's NIC sees it.
struct LinkSpec {
  double gbps = 0;        // bandwidth B in gigabits per second: 4 means 4e9 bit/s, 0.5e9 bytes/s
  double latency_us = 0;  // latency L of one message (one step of an algorithm), microseconds
};

// The accepted ranges: bandwidth in [kMinLinkGbps, kMaxLinkGbps] (1 Mb/s to 100 Tb/s), latency in
// (0, kMaxLinkLatencyUs] (up to 10 s). Outside them a value is a typo, not a network.
inline constexpr double kMinLinkGbps = 1e-3;
inline constexpr double kMaxLinkGbps = 1e5;
inline constexpr double kMaxLinkLatencyUs = 1e7;

// The two command-line options that give a link (declared once, in link_options.h).
inline constexpr const char* kLinkGbpsFlag = "--link-gbps";
inline constexpr const char* kLinkLatencyFlag = "--link-latency-us";

// What `dpscope launch --link-gbps G --link-latency-us L` sets for every rank; comm::init_world
// reads them when its caller gives no link itself (`dpscope train`'s flags take precedence).
inline constexpr const char* kLinkGbpsEnv = "DPSCOPE_LINK_GBPS";
inline constexpr const char* kLinkLatencyEnv = "DPSCOPE_LINK_LATENCY_US";

// The shortest decimal text that reads back as `value` ("4", "0.5", "50", "1e-09", "nan"):
// what the launcher exports and what the trace's meta table holds. Plain digits from 1e-6 to
// 1e15, an exponent beyond.
inline std::string link_value_text(double value) {
  char text[40];
  const double magnitude = std::fabs(value);
  const bool plain = !std::isfinite(value) || magnitude == 0 ||
                     (magnitude >= 1e-6 && magnitude < 1e15);
  for (int digits = 0; digits <= 17; ++digits) {
    std::snprintf(text, sizeof(text), plain ? "%.*f" : "%.*g", plain ? digits : digits + 1,
                  value);
    if (!std::isfinite(value) || std::strtod(text, nullptr) == value) return text;
  }
  std::snprintf(text, sizeof(text), "%.17g", value);  // exact, if not the shortest
  return text;
}

// "--link-gbps 4" for a flag, "DPSCOPE_LINK_GBPS=4" for an environment variable.
inline std::string link_setting_text(std::string_view name, std::string_view value) {
  return std::string(name) + (name.substr(0, 1) == "-" ? " " : "=") + std::string(value);
}

// Checks a link given as a pair of which either half may be missing. `gbps_name` and
// `latency_name` are what the user set ("--link-gbps", "DPSCOPE_LINK_GBPS"): the one-line error
// names them and the accepted range. Returns nullopt when neither is given (no emulation), the
// link when both are in range; throws std::invalid_argument otherwise (0, negative, NaN, inf,
// beyond the ranges above, only one of the two).
inline std::optional<LinkSpec> check_link(std::optional<double> gbps,
                                          std::optional<double> latency_us,
                                          std::string_view gbps_name,
                                          std::string_view latency_name) {
  if (!gbps && !latency_us) return std::nullopt;
  const std::string both = "give both to emulate a link (e.g. " +
                           link_setting_text(gbps_name, "4") + " " +
                           link_setting_text(latency_name, "50") + "), or neither";
  if (!latency_us) {
    throw std::invalid_argument(std::string(gbps_name) + " needs " + std::string(latency_name) +
                                " too: " + both);
  }
  if (!gbps) {
    throw std::invalid_argument(std::string(latency_name) + " needs " + std::string(gbps_name) +
                                " too: " + both);
  }
  // Written so that NaN fails every comparison.
  if (!(*gbps >= kMinLinkGbps && *gbps <= kMaxLinkGbps)) {
    throw std::invalid_argument(link_setting_text(gbps_name, link_value_text(*gbps)) +
                                " is out of range: the link's bandwidth is in gigabits per "
                                "second, from 0.001 to 100000 (4 is a 4 Gb/s link)");
  }
  if (!(*latency_us > 0 && *latency_us <= kMaxLinkLatencyUs)) {
    throw std::invalid_argument(link_setting_text(latency_name, link_value_text(*latency_us)) +
                                " is out of range: the link's latency is in microseconds, above "
                                "0 and at most 10000000 (50 is typical of Ethernet)");
  }
  return LinkSpec{*gbps, *latency_us};
}

// The number in an environment variable's text (the whole text, e.g. "4" or "2.5e1"). Throws
// std::invalid_argument naming the variable when it is not one.
inline double parse_link_value(std::string_view name, const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  const bool whole = !text.empty() && !std::isspace(static_cast<unsigned char>(text[0])) &&
                     end == text.c_str() + text.size();
  if (!whole) {
    throw std::invalid_argument(std::string(name) + "='" + text +
                                "' is not a number: set it to the link's " +
                                (name == kLinkGbpsEnv ? "bandwidth in Gb/s (e.g. 4)"
                                                      : "latency in microseconds (e.g. 50)") +
                                ", or unset it");
  }
  return value;
}

// The link DPSCOPE_LINK_GBPS and DPSCOPE_LINK_LATENCY_US describe: nullopt when neither is set
// (an empty value counts as unset). Throws std::invalid_argument naming the variable otherwise,
// as check_link does.
inline std::optional<LinkSpec> link_from_env() {
  auto read = [](const char* name) -> std::optional<double> {
    const char* text = std::getenv(name);
    if (!text || !*text) return std::nullopt;
    return parse_link_value(name, text);
  };
  const std::optional<double> gbps = read(kLinkGbpsEnv);
  const std::optional<double> latency_us = read(kLinkLatencyEnv);
  return check_link(gbps, latency_us, kLinkGbpsEnv, kLinkLatencyEnv);
}

// The time the ring model gives for one collective on `link` among `ranks` ranks, in ns (0 for
// one rank). `bytes` is what ProcessGroup counts for it (Work::bytes()): the tensor of a
// broadcast or all-reduce, one rank's share for all-gather (its input), all ranks' chunks for
// reduce-scatter (its input). With n ranks, S the whole flat tensor, B the bandwidth in bytes per
// second and L the latency (docs/communication.md gives the sources):
//   all-reduce      2(n-1) (L + S/(nB))   ring: reduce-scatter then all-gather
//   reduce-scatter   (n-1) (L + S/(nB))   ring: n-1 steps of one chunk
//   all-gather       (n-1) (L + S/(nB))   ring: n-1 steps of one chunk
//   broadcast      (n-1) L + S/B          pipelined chain (NCCL's ring broadcast)
//   barrier        ceil(log2 n) L         dissemination (MPICH's)
inline int64_t link_model_ns(trace::CollectiveOp op, int64_t bytes, int ranks,
                             const LinkSpec& link) {
  if (ranks <= 1) return 0;
  const double n = ranks;
  const double latency_ns = link.latency_us * 1e3;
  const double ns_per_byte = 8.0 / link.gbps;  // 8 bits at gbps bits per ns
  const double s = static_cast<double>(std::max<int64_t>(bytes, 0));
  double ns = 0;
  switch (op) {
    case trace::CollectiveOp::AllReduce:
      ns = 2 * (n - 1) * (latency_ns + s / n * ns_per_byte);
      break;
    case trace::CollectiveOp::ReduceScatter:
      ns = (n - 1) * (latency_ns + s / n * ns_per_byte);
      break;
    case trace::CollectiveOp::AllGather:  // s is one rank's share: S/n
      ns = (n - 1) * (latency_ns + s * ns_per_byte);
      break;
    case trace::CollectiveOp::Broadcast:
      ns = (n - 1) * latency_ns + s * ns_per_byte;
      break;
    case trace::CollectiveOp::Barrier:
      ns = std::ceil(std::log2(n)) * latency_ns;
      break;
    case trace::CollectiveOp::AllToAll:  // s is one rank's input; it keeps 1/n of it
      ns = (n - 1) * (latency_ns + s / n * ns_per_byte);
      break;
    case trace::CollectiveOp::SendRecv:  // one transfer to one peer
      ns = latency_ns + s * ns_per_byte;
      break;
  }
  // In range by check_link's bounds up to petabytes; capped (NaN too, from an unchecked link) so
  // that the conversion is always defined.
  if (!(ns < 1e17)) ns = 1e17;
  return static_cast<int64_t>(std::llround(ns));
}

}  // namespace dpscope::core
