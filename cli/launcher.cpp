// The launcher (see launcher.h): fork/exec of the ranks with torchrun's environment, a poll loop
// that forwards their output line by line with a rank prefix and reaps them, the stop protocol
// (SIGTERM, grace period, SIGKILL), and the merge of their trace files.
#include "cli/launcher.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "analysis/hang.h"
#include "cli/cluster_step.h"
#include "cli/commands.h"
#include "core/link_model.h"
#include "trace/error.h"
#include "trace/merge.h"
#include "trace/reader.h"
#include "trace/vocabulary.h"

namespace dpscope::cli {
namespace {

using Clock = std::chrono::steady_clock;

int g_signal_pipe[2] = {-1, -1};

void on_signal(int signal_number) {
  unsigned char byte = static_cast<unsigned char>(signal_number);
  ssize_t ignored = ::write(g_signal_pipe[1], &byte, 1);
  (void)ignored;
}

// One output stream of one rank, forwarded line by line with "[rank] " in front.
struct Stream {
  int fd = -1;
  int rank = 0;
  std::ostream* sink = nullptr;
  std::string pending;

  void forward(const char* data, size_t size) {
    pending.append(data, size);
    size_t start = 0, newline;
    while ((newline = pending.find('\n', start)) != std::string::npos) {
      *sink << '[' << rank << "] ";
      sink->write(pending.data() + start, static_cast<std::streamsize>(newline - start + 1));
      start = newline + 1;
    }
    pending.erase(0, start);
    sink->flush();
  }
  void finish() {
    if (!pending.empty()) forward("\n", 1);
    ::close(fd);
    fd = -1;
  }
};

struct Rank {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

std::string describe_end(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int signal_number = WTERMSIG(status);
    const char* name = ::sigabbrev_np(signal_number);
    return std::string("was killed by signal ") + std::to_string(signal_number) +
           (name ? std::string(" (SIG") + name + ")" : "");
  }
  return "ended with wait status " + std::to_string(status);
}

// Note [Reserved port]
// A port found free and then closed can be taken by anyone before rank 0's store binds it:
// under load an outgoing connection's ephemeral port took it, and rank 0 failed with "Address
// already in use". The launcher keeps its probe socket bound (SO_REUSEADDR, never listening)
// until the ranks have ended: the kernel gives no bound port to outgoing connections, and
// rank 0's store, which also sets SO_REUSEADDR, may still bind and listen on it.
class ReservedPort {
 public:
  ReservedPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int on = 1;
    sockaddr_in address = {};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t length = sizeof(address);
    if (fd_ < 0 || ::setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 ||
        ::bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      if (fd_ >= 0) ::close(fd_);
      throw CliFailure("cannot find a free port for the rendezvous; pass --master-port");
    }
    port_ = ntohs(address.sin_port);
  }
  ~ReservedPort() { ::close(fd_); }
  ReservedPort(const ReservedPort&) = delete;
  ReservedPort& operator=(const ReservedPort&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

std::string default_trace_dir() {
  char stamp[32];
  std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof(stamp), "%Y%m%d-%H%M%S", std::localtime(&now));
  return std::string("traces/run-") + stamp;
}

void validate(const LaunchOptions& o) {
  if (o.command.empty()) throw CliFailure("launch: no program given (dpscope launch -n 4 -- PROGRAM ARGS...)");
  if (o.nproc < 1) throw CliFailure("launch: -n must be at least 1");
  if (o.nnodes < 1) throw CliFailure("launch: --nnodes must be at least 1");
  if (o.node_rank < 0 || o.node_rank >= o.nnodes) {
    throw CliFailure("launch: --node-rank " + std::to_string(o.node_rank) +
                     " is outside 0.." + std::to_string(o.nnodes - 1));
  }
  if (int64_t{o.nnodes} * o.nproc > INT32_MAX) {
    throw CliFailure("launch: --nnodes " + std::to_string(o.nnodes) + " times -n " +
                     std::to_string(o.nproc) + " ranks is more ranks than a run can have");
  }
  if (o.master_port < 0 || o.master_port > 65535) {
    throw CliFailure("launch: --master-port must be a TCP port, 1..65535 (0: a free port)");
  }
  if (o.stop_grace_seconds < 0) throw CliFailure("launch: --stop-grace must be 0 or more seconds");
  try {
    o.link.checked();
  } catch (const std::invalid_argument& error) {
    throw CliFailure(std::string("launch: ") + error.what());
  }
  if (o.nnodes > 1 && o.master_port == 0) {
    throw CliFailure("launch: with --nnodes > 1 every node needs the same --master-addr and "
                     "--master-port (the address of node 0)");
  }
}

pid_t start_rank(const LaunchOptions& o, int local_rank, int port, const std::string& trace_dir,
                 int out_fd, int err_fd) {
  const pid_t parent = ::getpid();
  // Until the child has dropped the launcher's handlers, a SIGTERM from stop_all() would run
  // the launcher's handler in the child and read, to the launcher, as its own interruption:
  // keep the signals blocked across fork until the child has reset them.
  sigset_t stop_signals, previous;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &stop_signals, &previous);
  const pid_t pid = ::fork();
  if (pid != 0) {
    if (pid > 0) ::setpgid(pid, pid);
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    return pid;
  }
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGXFSZ, SIG_DFL);  // the rank's program chooses for itself
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  // Each rank leads its own process group, so stopping a rank also stops what it started; the
  // launcher passes Ctrl-C on to every group. A rank never outlives its launcher.
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(1);
  const int rank = o.node_rank * o.nproc + local_rank;
  ::setenv("RANK", std::to_string(rank).c_str(), 1);
  ::setenv("LOCAL_RANK", std::to_string(local_rank).c_str(), 1);
  ::setenv("WORLD_SIZE", std::to_string(o.nnodes * o.nproc).c_str(), 1);
  ::setenv("LOCAL_WORLD_SIZE", std::to_string(o.nproc).c_str(), 1);
  ::setenv("GROUP_RANK", std::to_string(o.node_rank).c_str(), 1);
  ::setenv("MASTER_ADDR", o.master_addr.c_str(), 1);
  ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  ::setenv("DPSCOPE_TRACE_DIR", trace_dir.c_str(), 1);
  // No torchrun agent hosts a store here: rank 0 does (comm::StoreHost::Rank0), whatever a shell
  // started inside torchrun passed on.
  ::unsetenv("TORCHELASTIC_USE_AGENT_STORE");
  if (o.link.gbps && o.link.latency_us) {
    ::setenv(core::kLinkGbpsEnv, core::link_value_text(*o.link.gbps).c_str(), 1);
    ::setenv(core::kLinkLatencyEnv, core::link_value_text(*o.link.latency_us).c_str(), 1);
  }
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  std::vector<char*> argv;
  for (const auto& arg : o.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "dpscope launch: cannot start %s: %s\n", argv[0], std::strerror(errno));
  ::_exit(127);
}

// A run on an emulated link: its step on the cluster clock (docs/cluster-clock.md), beside the
// measured step_ms each rank printed. A run that cannot be replayed says why in one line; the
// launch still succeeds. Runs without a link print nothing.
void print_launch_cluster_step(const std::string& run_file) {
  const ClusterStepReport report = cluster_step_report(run_file);
  for (const std::string& note : report.notes) std::cerr << "dpscope launch: " << note << "\n";
  if (report.line) std::cerr << "dpscope launch: " << *report.line << "\n";
}

// A run that hung (a collective some rank never completed) ends with one line naming the
// culprit, the hang section's sentence (docs/hangs.md). Never fails the launch.
void print_launch_hang(const std::string& run_file) {
  try {
    trace::Reader reader(run_file);
    const std::optional<analysis::HangReport> hang = analysis::analyze_hang(reader);
    if (!hang) return;
    std::cerr << "dpscope launch: hang: " << hang->sentence;
    if (hang->culprit != trace::kNone) std::cerr << "; culprit: rank " << hang->culprit;
    std::cerr << " (dpscope stats " << run_file << " has the whole hang section)\n";
  } catch (const trace::TraceError& failure) {
    std::cerr << "dpscope launch: " << failure.what() << "\n";
  }
}

// Merges the rank files this node's ranks left in trace_dir, if any. Never fails the launch.
// Only this node's: on a shared filesystem the other nodes' files are theirs to merge. A rank
// that ended without closing its trace (killed) gets how it ended written into its file first.
void merge_rank_files(const LaunchOptions& o, const std::string& trace_dir,
                      const std::vector<Rank>& ranks) {
  std::vector<std::string> files;
  for (const Rank& r : ranks) {
    const std::string file = trace_dir + "/rank" + std::to_string(r.rank) + ".sqlite";
    // What a rank stopped while creating its file left (Note [Trace file creation]).
    std::error_code ignored;
    for (const char* suffix : {".partial", ".partial-wal", ".partial-shm", ".partial-journal"}) {
      std::filesystem::remove(file + suffix, ignored);
    }
    if (!std::filesystem::exists(file)) continue;
    files.push_back(file);
    if (r.running || (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0)) continue;
    try {
      trace::mark_unfinished_rank(file, "process " + describe_end(r.status));
    } catch (const trace::TraceError& failure) {
      std::cerr << "dpscope launch: " << failure.what() << "\n";
    }
  }
  if (files.empty()) return;
  const std::string out = trace_dir + (o.nnodes == 1 ? std::string("/run.sqlite")
                                                     : "/run-node" + std::to_string(o.node_rank) +
                                                           ".sqlite");
  try {
    auto result = trace::merge_traces(files, out);
    std::cerr << "dpscope launch: merged " << result.ranks << " rank files (" << result.events
              << " events) into " << out << "\n";
  } catch (const trace::TraceError& failure) {
    std::cerr << "dpscope launch: could not merge the rank files in " << trace_dir << ": "
              << failure.what() << "\n";
    return;
  }
  if (o.nnodes == 1) {  // one node's file holds every rank
    print_launch_cluster_step(out);
    print_launch_hang(out);
  }
}

// The directory the ranks write their traces into (--trace-dir or a new one), created.
std::string create_trace_dir(const LaunchOptions& o) {
  const std::string trace_dir = o.trace_dir.empty() ? default_trace_dir() : o.trace_dir;
  std::error_code error;
  std::filesystem::create_directories(trace_dir, error);
  if (error) throw CliFailure("launch: cannot create the trace directory " + trace_dir + ": " + error.message());
  return trace_dir;
}

// From here until release_stop_signals(), SIGINT and SIGTERM do not end the launcher: on_signal
// writes them into g_signal_pipe for RankSupervisor to pass on to the ranks.
void catch_stop_signals() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) throw CliFailure("launch: pipe failed");
  struct sigaction action = {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  // Past a file-size limit (ulimit -f) the merge then fails with a message instead of the
  // launcher being killed mid-merge.
  ::signal(SIGXFSZ, SIG_IGN);
}

void release_stop_signals() {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
}

// This node's ranks, in local-rank order, and the read ends of their stdout and stderr.
struct NodeRanks {
  std::vector<Rank> ranks;
  std::vector<Stream> streams;
};

NodeRanks start_ranks(const LaunchOptions& o, int port, const std::string& trace_dir) {
  NodeRanks node;
  node.ranks.resize(static_cast<size_t>(o.nproc));
  for (int local = 0; local < o.nproc; ++local) {
    int out_pipe[2], err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
      throw CliFailure("launch: cannot create pipes for rank output (too many open files?)");
    }
    Rank& r = node.ranks[static_cast<size_t>(local)];
    r.rank = o.node_rank * o.nproc + local;
    r.pid = start_rank(o, local, port, trace_dir, out_pipe[1], err_pipe[1]);
    r.running = r.pid > 0;
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    node.streams.push_back(Stream{out_pipe[0], r.rank, &std::cout, {}});
    node.streams.push_back(Stream{err_pipe[0], r.rank, &std::cerr, {}});
  }
  return node;
}

// How the ranks ended, for the launcher's report.
struct Outcome {
  std::string first_failure;  // the first rank that failed, and how; empty when none did
  int interrupted_by = 0;     // the first SIGINT/SIGTERM the launcher got; 0 when none
};

// Waits until this node's ranks have ended, forwarding their output; passes the launcher's
// SIGINT/SIGTERM on to them, and stops them all when one fails (SIGTERM, then SIGKILL after
// --stop-grace). Runs on the launcher's only thread.
class RankSupervisor {
 public:
  RankSupervisor(const LaunchOptions& o, NodeRanks& node) : o_(o), node_(node) {}
  Outcome run();

 private:
  void forward_output();
  void pass_on_signals();
  void reap_ranks();
  void kill_after_grace();
  bool output_outlived_ranks();
  void abandon_output();
  void stop_all(int signal_number);
  bool any_running() const;
  bool any_output_open() const;

  const LaunchOptions& o_;
  NodeRanks& node_;
  Outcome outcome_;
  bool stopping_ = false;
  Clock::time_point kill_at_ = Clock::time_point::max();
  Clock::time_point all_exited_at_ = Clock::time_point::max();
};

Outcome RankSupervisor::run() {
  for (;;) {
    forward_output();
    pass_on_signals();
    reap_ranks();
    if (any_running()) {
      kill_after_grace();
    } else if (!any_output_open()) {
      return outcome_;
    } else if (output_outlived_ranks()) {
      abandon_output();
      return outcome_;
    }
  }
}

// Waits up to 100 ms for output or a signal, then forwards the output that came.
void RankSupervisor::forward_output() {
  std::vector<pollfd> fds;
  std::vector<Stream*> owners;
  for (Stream& s : node_.streams) {
    if (s.fd >= 0) {
      fds.push_back(pollfd{s.fd, POLLIN, 0});
      owners.push_back(&s);
    }
  }
  fds.push_back(pollfd{g_signal_pipe[0], POLLIN, 0});
  ::poll(fds.data(), fds.size(), 100);
  for (size_t i = 0; i < owners.size(); ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    char buffer[65536];
    const ssize_t n = ::read(owners[i]->fd, buffer, sizeof(buffer));
    if (n > 0) {
      owners[i]->forward(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      owners[i]->finish();
    }
  }
}

void RankSupervisor::pass_on_signals() {
  unsigned char signal_byte;
  while (::read(g_signal_pipe[0], &signal_byte, 1) == 1) {
    if (!outcome_.interrupted_by) outcome_.interrupted_by = signal_byte;
    stop_all(signal_byte);  // the ranks flush their traces on SIGINT/SIGTERM
  }
}

// Records how each ended rank ended; the first failure (unless interrupted) stops the others.
void RankSupervisor::reap_ranks() {
  int status;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    for (Rank& r : node_.ranks) {
      if (r.pid != pid) continue;
      r.running = false;
      r.status = status;
      const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
      if (failed && outcome_.first_failure.empty() && !outcome_.interrupted_by) {
        outcome_.first_failure = "rank " + std::to_string(r.rank) + " (pid " +
                                 std::to_string(pid) + ") " + describe_end(status);
        std::cerr << "dpscope launch: " << outcome_.first_failure << "; stopping the other ranks\n";
        stop_all(SIGTERM);
      }
    }
  }
}

void RankSupervisor::kill_after_grace() {
  if (Clock::now() < kill_at_) return;
  std::cerr << "dpscope launch: ranks still running " << o_.stop_grace_seconds
            << " s after being asked to stop; killing them\n";
  stop_all(SIGKILL);
  kill_at_ = Clock::time_point::max();
}

// Every rank is gone but something it started still holds its output open: true once that has
// lasted 2 s, so the launcher stops waiting.
bool RankSupervisor::output_outlived_ranks() {
  if (all_exited_at_ == Clock::time_point::max()) all_exited_at_ = Clock::now();
  return Clock::now() - all_exited_at_ > std::chrono::seconds(2);
}

void RankSupervisor::abandon_output() {
  if (stopping_) stop_all(SIGKILL);
  for (Stream& s : node_.streams) {
    if (s.fd >= 0) s.finish();
  }
}

// Sends signal_number to every rank's process group; the first stop starts the grace period.
void RankSupervisor::stop_all(int signal_number) {
  for (const Rank& r : node_.ranks) {
    if (r.pid > 0) ::kill(-r.pid, signal_number);
  }
  if (!stopping_) kill_at_ = Clock::now() + std::chrono::seconds(o_.stop_grace_seconds);
  stopping_ = true;
}

bool RankSupervisor::any_running() const {
  return std::any_of(node_.ranks.begin(), node_.ranks.end(),
                     [](const Rank& r) { return r.running; });
}

bool RankSupervisor::any_output_open() const {
  return std::any_of(node_.streams.begin(), node_.streams.end(),
                     [](const Stream& s) { return s.fd >= 0; });
}

// Prints how the run ended when it did not succeed; returns the launcher's exit status.
int report_end(const Outcome& outcome) {
  if (outcome.interrupted_by) {
    std::cerr << "dpscope launch: interrupted (signal " << outcome.interrupted_by
              << "); every rank stopped\n";
    return 128 + outcome.interrupted_by;
  }
  if (!outcome.first_failure.empty()) {
    std::cerr << "dpscope launch: failed: " << outcome.first_failure << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

void validate_launch_options(const LaunchOptions& options) { validate(options); }

int run_launch(const LaunchOptions& o) {
  validate(o);
  std::optional<ReservedPort> reserved;  // held until the ranks end; See Note [Reserved port]
  if (!o.master_port) reserved.emplace();
  const int port = o.master_port ? o.master_port : reserved->port();
  const std::string trace_dir = create_trace_dir(o);
  catch_stop_signals();
  NodeRanks node = start_ranks(o, port, trace_dir);
  const Outcome outcome = RankSupervisor(o, node).run();
  release_stop_signals();
  merge_rank_files(o, trace_dir, node.ranks);
  return report_end(outcome);
}

}  // namespace dpscope::cli
