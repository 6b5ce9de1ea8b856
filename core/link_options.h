// The link's two command-line options, --link-gbps and --link-latency-us: declared and checked
// here once for every command that takes them (dpscope train, launch, stats, whatif, synth, demo)
// and for dpscope-view, so that their names, help and checks cannot drift apart.
#pragma once

#include <optional>

#include <CLI/CLI.hpp>

#include "core/link_model.h"

namespace dpscope::core {

// What a command does with the link, which its options' help says.
enum class LinkUse {
  Emulate,       // train, launch, demo: collectives complete when such a link would have carried them
  ClusterClock,  // stats, dpscope-view: the link the cluster clock replays the run on
  Whatif,        // whatif: the link the prediction costs collectives with
  Synthesize,    // synth: the link the synthetic collectives take, recorded as the run's
};

// The two options as given. A value set before add_link_options is the default, shown in the
// help and kept when the option is not given. Plain data: one per command.
struct LinkFlags {
  std::optional<double> gbps;
  std::optional<double> latency_us;

  // The link given, checked by check_link: nullopt when neither is given; throws
  // std::invalid_argument naming the flag and the accepted range otherwise.
  std::optional<LinkSpec> checked() const {
    return check_link(gbps, latency_us, kLinkGbpsFlag, kLinkLatencyFlag);
  }
};

// Declares --link-gbps and --link-latency-us on `app`, writing into `flags`, with `use`'s help.
void add_link_options(CLI::App& app, LinkFlags& flags, LinkUse use);

}  // namespace dpscope::core
