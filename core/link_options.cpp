// The link options' declaration (link_options.h): one help text per use, and a command's preset
// values as the options' defaults.
#include "core/link_options.h"

#include <string>

namespace dpscope::core {
namespace {

struct LinkHelp {
  const char* gbps;
  const char* latency;
};

LinkHelp help_for(LinkUse use) {
  switch (use) {
    case LinkUse::Emulate:
      return {"Emulate a link of G gigabits per second: collectives complete when it would have "
              "carried them (with --link-latency-us; DPSCOPE_LINK_GBPS)",
              "The emulated link's latency per message, microseconds (with --link-gbps; "
              "DPSCOPE_LINK_LATENCY_US)"};
    case LinkUse::ClusterClock:
      return {"The cluster clock's link bandwidth in Gb/s (with --link-latency-us; default: the "
              "run's emulated link)",
              "The cluster clock's link latency in µs (with --link-gbps)"};
    case LinkUse::Whatif:
      return {"Cost collectives with the ring model of a link of G Gb/s (with --link-latency-us) "
              "instead of the model fitted to the trace",
              "The link's latency per message, µs (with --link-gbps)"};
    case LinkUse::Synthesize:
      return {"The emulated link's bandwidth in Gb/s that the collectives take (recorded in meta: "
              "the cluster clock replays on it)",
              "The emulated link's latency per message, µs"};
  }
  return {"", ""};
}

// A command's preset value is the option's default, which --help shows as CLI11 shows any.
void add_link_option(CLI::App& app, const char* name, std::optional<double>& value, const char* help) {
  CLI::Option* option = app.add_option(name, value, help);
  if (value) option->default_str(link_value_text(*value));
}

}  // namespace

void add_link_options(CLI::App& app, LinkFlags& flags, LinkUse use) {
  const LinkHelp help = help_for(use);
  add_link_option(app, kLinkGbpsFlag, flags.gbps, help.gbps);
  add_link_option(app, kLinkLatencyFlag, flags.latency_us, help.latency);
}

}  // namespace dpscope::core
