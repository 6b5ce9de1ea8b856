// dpscope launch [-n NPROC] [--nnodes N --node-rank K --master-addr A --master-port P]
// [--link-gbps G --link-latency-us L] -- PROGRAM ARGS...: starts the ranks of this node with
// torchrun's environment (see launcher.h).
#include "cli/commands.h"
#include "cli/launcher.h"

namespace dpscope::cli {

void add_launch_command(CLI::App& app, CommandMode mode) {
  auto* command = app.add_subcommand(
      "launch", "Start NPROC ranks of PROGRAM on this host with torchrun's environment");
  auto options = std::make_shared<LaunchOptions>();
  command->add_option("-n,--nproc-per-node", options->nproc, "Ranks on this host")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->add_option("--nnodes", options->nnodes, "Hosts in the run")->check(CLI::PositiveNumber);
  command->add_option("--node-rank", options->node_rank, "This host's index, 0..nnodes-1");
  command->add_option("--master-addr", options->master_addr, "Address of node 0's store")
      ->capture_default_str();
  command->add_option("--master-port", options->master_port,
                      "Port of node 0's store (default: a free port, single host)");
  command->add_option("--trace-dir", options->trace_dir,
                      "Where the ranks write their traces (DPSCOPE_TRACE_DIR); the rank files "
                      "are merged into run.sqlite there (default traces/run-<time>)");
  command->add_option("--stop-grace", options->stop_grace_seconds,
                      "Seconds between SIGTERM and SIGKILL when stopping ranks")
      ->capture_default_str();
  auto link_gbps = std::make_shared<double>(0);
  auto link_latency_us = std::make_shared<double>(0);
  CLI::Option* link_gbps_option = command->add_option(
      "--link-gbps", *link_gbps,
      "Emulate a link of G gigabits per second for every rank (DPSCOPE_LINK_GBPS; with "
      "--link-latency-us)");
  CLI::Option* link_latency_option = command->add_option(
      "--link-latency-us", *link_latency_us,
      "The emulated link's latency per message, microseconds (DPSCOPE_LINK_LATENCY_US)");
  command->add_option("PROGRAM", options->command, "-- PROGRAM ARGS...: what each rank runs")
      ->required();
  command->callback([options, mode, link_gbps, link_latency_us, link_gbps_option,
                     link_latency_option] {
    if (link_gbps_option->count()) options->link_gbps = *link_gbps;
    if (link_latency_option->count()) options->link_latency_us = *link_latency_us;
    if (mode == CommandMode::Validate) {
      validate_launch_options(*options);
      return;
    }
    const int status = run_launch(*options);
    if (status != 0) std::exit(status);
  });
}

}  // namespace dpscope::cli
