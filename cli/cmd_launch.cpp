// dpscope launch [-n NPROC] [--nnodes N --node-rank K --master-addr A --master-port P]
// [--link-gbps G --link-latency-us L] -- PROGRAM ARGS...: starts the ranks of this node with
// torchrun's environment (see launcher.h).
#include "cli/commands.h"
#include "cli/launcher.h"
#include "core/link_options.h"

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
  core::add_link_options(*command, options->link, core::LinkUse::Emulate);
  command->add_option("PROGRAM", options->command, "-- PROGRAM ARGS...: what each rank runs")
      ->required();
  command->callback([options, mode] {
    if (mode == CommandMode::Validate) {
      validate_launch_options(*options);
      return;
    }
    const int status = run_launch(*options);
    if (status != 0) std::exit(status);
  });
}

}  // namespace dpscope::cli
