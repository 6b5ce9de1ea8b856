// ProcessGroup's backend-independent half: argument checks, sequence numbers, the check mode,
// the heartbeat that lets a timeout name the ranks not heard from, and the tracing of every
// collective and every wait (see process_group.h).
#include "engine/comm/process_group.h"

#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>

#include "engine/comm/dtype.h"
#include "engine/comm/link_emulation.h"
#include "engine/comm/store_util.h"
#include "engine/fault/fault_injection.h"
#include "trace/collective_state.h"

namespace dpscope::comm {

std::string_view to_string(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Average: return "average";
    case ReduceOp::Max: return "max";
  }
  return "unknown";
}

std::string CallSite::str() const {
  const std::string path = file ? file : "";
  size_t best = std::string::npos;
  for (const char* top : {"/engine/", "/tests/", "/tutorials/", "/cli/", "/bench/"}) {
    const size_t at = path.rfind(top);
    if (at != std::string::npos && (best == std::string::npos || at > best)) best = at;
  }
  return (best == std::string::npos ? path : path.substr(best + 1)) + ":" + std::to_string(line);
}

bool check_collectives_from_env() {
  const char* value = std::getenv("DPSCOPE_CHECK_COLLECTIVES");
  return value && std::string(value) == "1";
}

namespace {

std::string collective_name(trace::CollectiveOp op, int64_t seq) {
  return std::string(trace::to_string(op)) + " #" + std::to_string(seq);
}

}  // namespace

// ---- Work ----------------------------------------------------------------------------------

Work::Work(ProcessGroup& group, trace::CollectiveOp op, int64_t seq, int64_t bytes,
           trace::DType dtype, CollectiveTag tag)
    : group_(group), op_(op), seq_(seq), bytes_(bytes), dtype_(dtype), tag_(tag),
      enqueue_(trace::stamp_for(group.recorder(), trace::TraceLevel::Summary)) {}

void Work::started(int64_t begin_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  started_ns_ = begin_ns;
}

void Work::complete_skipped() {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = true;
  recorded_ = true;
}

void Work::record_locked(int64_t begin_ns, int64_t end_ns, uint8_t flags, trace::LaneId lane) {
  recorded_ = true;
  trace::Recorder* recorder = group_.recorder();
  if (!recorder) return;
  trace::Event e;
  e.kind = trace::EventKind::Collective;
  e.lane = lane >= 0 ? lane : group_.comm_lane();
  e.op = static_cast<uint8_t>(op_);
  e.grp = group_.options().group_id;
  e.seq = seq_;
  e.bytes = bytes_;
  e.dtype = static_cast<uint8_t>(dtype_);
  e.enqueue_ns = enqueue_.wall_ns;
  e.cpu_begin_ns = enqueue_.cpu_ns;  // the issuing thread's; see Note [Thread CPU time]
  e.begin_ns = begin_ns;
  e.end_ns = end_ns;
  e.iteration = tag_.iteration;
  e.bucket = tag_.bucket;
  e.unit = tag_.unit;
  e.flags = flags;
  recorder->record(trace::TraceLevel::Summary, e);
}

void Work::record_unfinished(int64_t end_ns) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (done_ || recorded_) return;
  const trace::CollectiveEndState state =
      started_ns_ > 0 ? trace::CollectiveEndState::Started : trace::CollectiveEndState::Issued;
  const int64_t begin_ns = started_ns_ > 0 ? started_ns_ : enqueue_.wall_ns;
  record_locked(begin_ns, std::max(begin_ns, end_ns),
                static_cast<uint8_t>(tag_.flags | trace::collective_state_flags(state)), -1);
}

void Work::finish(int64_t begin_ns, int64_t end_ns, std::exception_ptr error,
                  uint8_t extra_flags, trace::LaneId lane) {
  const int64_t real_duration_ns = end_ns - begin_ns;
  int64_t release_ns = 0;
  // See Note [Link emulation]: a successful collective completes when the link would have
  // carried it, and is traced so.
  if (EmulatedLink* link = group_.options().link.get(); link && !error) {
    const EmulatedLink::Occupancy on_link =
        link->admit(op_, bytes_, group_.size(), begin_ns, end_ns);
    begin_ns = on_link.begin_ns;
    end_ns = on_link.end_ns;
    release_ns = end_ns;
  }
  group_.pending_->untrack(this);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!recorded_) {
      // See Note [Collective end state]: a failure is a collective that never completed.
      const trace::CollectiveEndState state = !error           ? trace::CollectiveEndState::Completed
                                              : started_ns_ > 0 ? trace::CollectiveEndState::Started
                                                                : trace::CollectiveEndState::Issued;
      record_locked(begin_ns, end_ns,
                    static_cast<uint8_t>(tag_.flags | extra_flags |
                                         trace::collective_state_flags(state)),
                    lane);
    }
    done_ = true;
    error_ = std::move(error);
    duration_ns_ = end_ns - begin_ns;
    real_duration_ns_ = real_duration_ns;
    release_ns_ = release_ns;
  }
  done_cv_.notify_all();
}

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_locked();
}

bool Work::completed_locked() const {
  return done_ && (release_ns_ == 0 || trace::now_ns() >= release_ns_);  // Note [Link emulation]
}

bool Work::on_emulated_link() const { return group_.options().link != nullptr; }

std::exception_ptr Work::error() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return error_;
}

int64_t Work::duration_ns() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_locked() ? duration_ns_ : 0;
}

int64_t Work::real_duration_ns() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return completed_locked() ? real_duration_ns_ : 0;
}

void Work::wait(trace::LaneId lane) {
  const trace::Stamp begin = trace::stamp_for(group_.recorder(), trace::TraceLevel::Summary);
  const auto deadline = std::chrono::steady_clock::now() + group_.options().timeout;
  if (!is_completed()) group_.run_on_waiting_thread(*this);  // See Note [Run on wait]
  std::unique_lock<std::mutex> lock(mutex_);
  bool finished = done_cv_.wait_until(lock, deadline, [&] { return done_; });
  // A collective that failed only after the whole timeout (Gloo's own timeout, which starts
  // when the collective does) is reported as the timeout, naming the ranks not heard from.
  if (finished && error_ && trace::now_ns() - enqueue_.wall_ns >= timeout_ns()) finished = false;
  const int64_t release_ns = finished ? release_ns_ : 0;
  lock.unlock();
  // See Note [Link emulation]: asleep until the emulated end, the CPU free for compute.
  if (release_ns > trace::now_ns()) {
    std::this_thread::sleep_until(std::chrono::steady_clock::time_point(
        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
            std::chrono::nanoseconds(release_ns))));
  }
  if (trace::Recorder* recorder = group_.recorder()) {
    trace::Event e;
    e.kind = trace::EventKind::CollectiveWait;
    e.lane = lane;
    e.op = static_cast<uint8_t>(op_);
    e.grp = group_.options().group_id;
    e.seq = seq_;
    const trace::Stamp end = trace::stamp_for(recorder, trace::TraceLevel::Summary);
    e.begin_ns = begin.wall_ns;
    e.end_ns = end.wall_ns;
    e.cpu_begin_ns = begin.cpu_ns;
    e.cpu_end_ns = end.cpu_ns;
    e.iteration = tag_.iteration;
    e.bucket = tag_.bucket;
    e.unit = tag_.unit;
    recorder->record(trace::TraceLevel::Summary, e);
  }
  if (!finished) {
    const auto seconds =
        std::chrono::duration_cast<std::chrono::duration<double>>(group_.options().timeout);
    std::ostringstream message;
    message << collective_name(op_, seq_) << " on group '" << group_.options().name
            << "' timed out after " << seconds.count() << " s on rank " << group_.rank() << "; "
            << group_.ranks_not_heard_from(seq_)
            << ". A rank that crashed or issued different collectives blocks the others: "
               "check their output, run with DPSCOPE_CHECK_COLLECTIVES=1 to compare the "
               "collectives, or raise the timeout";
    throw CommError(message.str());
  }
  std::lock_guard<std::mutex> relock(mutex_);
  if (error_) std::rethrow_exception(error_);
}

// Note [A stuck collective]
// A collective's event is recorded when it finishes, or when its rank ends (Note [Pending
// collectives]): while a run hangs, its trace holds neither. So the group's heartbeat thread, twice
// a second, records for each collective pending longer than kStuckAfter a mark named "stuck: <op>
// #<seq>" on the group's communication lane, from the collective's issue to that moment, at trace
// level summary, and flushes it: `dpscope-view --live` counts from its begin how long the
// collective has been stuck (docs/hangs.md). Not the waiting thread: it may be inside the
// collective itself (Note [Run on wait]). Healthy collectives finish far sooner than a second, so
// such marks are rare; one per collective at most.
bool Work::record_if_stuck(int64_t now_ns) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_ || recorded_ || stuck_recorded_ ||
        now_ns - enqueue_.wall_ns < std::chrono::duration_cast<std::chrono::nanoseconds>(kStuckAfter).count()) {
      return false;
    }
    stuck_recorded_ = true;
  }
  trace::Recorder* recorder = group_.recorder();
  if (!recorder || !recorder->enabled(trace::TraceLevel::Summary)) return false;
  trace::Event e;
  e.kind = trace::EventKind::Mark;
  e.lane = group_.comm_lane();
  e.name = recorder->name("stuck: " + std::string(trace::to_string(op_)) + " #" + std::to_string(seq_));
  e.op = static_cast<uint8_t>(op_);
  e.grp = group_.options().group_id;
  e.seq = seq_;
  e.begin_ns = enqueue_.wall_ns;
  e.end_ns = now_ns;
  e.iteration = tag_.iteration;
  recorder->record(trace::TraceLevel::Summary, e);
  return true;
}

int64_t Work::timeout_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(group_.options().timeout).count();
}

// ---- ProcessGroup --------------------------------------------------------------------------

ProcessGroup::ProcessGroup(std::shared_ptr<c10d::Store> store, int rank, int size,
                           ProcessGroupOptions options, std::string_view lane_name,
                           trace::LaneKind lane_kind, c10::Device device)
    : store_(std::move(store)), rank_(rank), size_(size), options_(std::move(options)),
      device_(device) {
  if (size_ < 1 || rank_ < 0 || rank_ >= size_) {
    throw CommError("process group '" + options_.name + "': rank " + std::to_string(rank_) +
                    " is outside 0.." + std::to_string(size_ - 1));
  }
  if (options_.recorder) {
    comm_lane_ = options_.recorder->add_lane(
        std::string(lane_name) + " (" + options_.name + ")", lane_kind);
  }
  pending_ = std::make_unique<PendingCollectives>();
  heartbeat_ = std::thread([this] { heartbeat_loop(); });
}

ProcessGroup::~ProcessGroup() { stop_heartbeat(); }

void ProcessGroup::run_on_waiting_thread(const Work&) {}

at::Tensor ProcessGroup::host_to_device(const at::Tensor& host) {
  return host.to(device_).contiguous();
}

at::Tensor ProcessGroup::device_to_host(const at::Tensor& on_device) {
  return on_device.to(at::Device(at::kCPU));
}

void ProcessGroup::check_device(const at::Tensor& tensor, trace::CollectiveOp op,
                                CallSite site) const {
  if (takes(tensor.device())) return;
  throw CommError(std::string(trace::to_string(op)) + " on rank " + std::to_string(rank_) +
                  " issued at " + site.str() + ": a tensor on " + tensor.device().str() +
                  ", but the " + backend_name() + " group '" + options_.name + "' runs on " +
                  device_.str() + "; make it on the group's device (data from the model's "
                  "parameters is there already; values read back on the host go through "
                  "comm::HostValues)");
}

// Note [Check mode and a rank that left]
// The check mode compares each collective through the store before it is issued, so a rank that
// issues one the others never will waits in that comparison. Were the others merely slow, the
// timeout would be right; but a rank whose group is destroyed — it finished, or an error unwound
// it (DDP's "Expected to have finished reduction", a failed collective) — will never issue it.
// Such a rank posts "left/<rank>" with how many collectives it issued, and the comparison waits in
// slices of 100 ms, failing at once when a rank it waits for has left.
void ProcessGroup::announce_leaving() {
  if (!options_.check_collectives) return;
  try {
    store_->set(key("left/" + std::to_string(rank_)), to_bytes(std::to_string(next_seq())));
  } catch (const std::exception&) {
    // The store's host is gone; the comparisons will say so.
  }
}

void ProcessGroup::stop_heartbeat() {
  {
    std::lock_guard<std::mutex> lock(heartbeat_mutex_);
    heartbeat_stop_ = true;
  }
  heartbeat_cv_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
}

std::string ProcessGroup::key(std::string_view what) const {
  return "dpscope/pg" + std::to_string(options_.group_id) + "/" + std::string(what);
}

// Publishes how many collectives this rank has issued, at most twice a second and only when it
// changed: off the hot path, yet fresh enough for a timeout of seconds to name the laggards.
void ProcessGroup::heartbeat_loop() {
  int64_t published = -1;
  std::unique_lock<std::mutex> lock(heartbeat_mutex_);
  // Publishes once more after the stop, so a rank that leaves still says how far it got.
  for (bool last = false; !last;) {
    last = heartbeat_stop_;
    const int64_t issued = issued_.load(std::memory_order_relaxed);
    if (issued != published) {
      lock.unlock();
      try {
        store_->set(key("issued/" + std::to_string(rank_)), to_bytes(std::to_string(issued)));
        published = issued;
      } catch (const std::exception&) {
        // The store's host is gone; the collectives themselves will report it.
      }
      lock.lock();
    }
    if (!last) {
      heartbeat_cv_.wait_for(lock, std::chrono::milliseconds(500),
                             [&] { return heartbeat_stop_; });
      lock.unlock();
      // See Note [A stuck collective].
      if (pending_ && pending_->record_stuck(trace::now_ns()) && options_.recorder) options_.recorder->flush();
      lock.lock();
    }
  }
}

std::string ProcessGroup::ranks_not_heard_from(int64_t seq) {
  std::ostringstream out;
  int missing = 0;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    int64_t issued = 0;
    try {
      const std::string k = key("issued/" + std::to_string(r));
      if (store_->check({k})) issued = std::stoll(from_bytes(store_->get(k)));
    } catch (const std::exception&) {
      out << (missing++ ? ", " : "") << "rank " << r << " (store unreachable)";
      continue;
    }
    if (issued <= seq) {
      out << (missing++ ? ", " : "") << "rank " << r;
      if (issued == 0) {
        out << " (issued no collective)";
      } else {
        out << " (last issued #" << issued - 1 << ")";
      }
    }
  }
  if (missing == 0) return "every rank issued it, so one of them is stuck inside it";
  return "ranks not heard from: " + out.str();
}

WorkHandle ProcessGroup::broadcast(at::Tensor tensor, int root, CollectiveTag tag, CallSite site) {
  if (root < 0 || root >= size_) {
    throw CommError("broadcast on rank " + std::to_string(rank_) + ": root " +
                    std::to_string(root) + " is outside 0.." + std::to_string(size_ - 1));
  }
  return issue(trace::CollectiveOp::Broadcast, ReduceOp::Sum, root, tensor, tensor, tag,
               ScatterInput::Keep, site);
}

WorkHandle ProcessGroup::all_reduce(at::Tensor tensor, ReduceOp op, CollectiveTag tag,
                                    CallSite site) {
  return issue(trace::CollectiveOp::AllReduce, op, 0, tensor, tensor, tag, ScatterInput::Keep,
               site);
}

WorkHandle ProcessGroup::all_gather(at::Tensor output, at::Tensor input, CollectiveTag tag,
                                    CallSite site) {
  if (output.defined() && input.defined() && output.numel() != input.numel() * size_) {
    throw CommError("all_gather on rank " + std::to_string(rank_) + ": output has " +
                    std::to_string(output.numel()) + " elements, expected " +
                    std::to_string(size_) + " x " + std::to_string(input.numel()));
  }
  return issue(trace::CollectiveOp::AllGather, ReduceOp::Sum, 0, input, output, tag,
               ScatterInput::Keep, site);
}

WorkHandle ProcessGroup::reduce_scatter(at::Tensor output, at::Tensor input, ReduceOp op,
                                        CollectiveTag tag, ScatterInput input_use,
                                        CallSite site) {
  if (output.defined() && input.defined() && input.numel() != output.numel() * size_) {
    throw CommError("reduce_scatter on rank " + std::to_string(rank_) + ": input has " +
                    std::to_string(input.numel()) + " elements, expected " +
                    std::to_string(size_) + " x " + std::to_string(output.numel()));
  }
  return issue(trace::CollectiveOp::ReduceScatter, op, 0, input, output, tag, input_use, site);
}

WorkHandle ProcessGroup::barrier(CollectiveTag tag, CallSite site) {
  return issue(trace::CollectiveOp::Barrier, ReduceOp::Sum, 0, at::Tensor(), at::Tensor(), tag,
               ScatterInput::Keep, site);
}

WorkHandle ProcessGroup::issue(trace::CollectiveOp op, ReduceOp reduce, int root,
                               at::Tensor input, at::Tensor output, CollectiveTag tag,
                               ScatterInput input_use, CallSite site) {
  const std::string what = std::string(trace::to_string(op)) + " on rank " + std::to_string(rank_);
  int64_t bytes = 0;
  trace::DType dtype = trace::DType::UInt8;
  if (op != trace::CollectiveOp::Barrier) {
    for (const at::Tensor* t : {&input, &output}) {
      if (!t->defined()) throw CommError(what + ": a tensor is undefined");
      if (!t->is_contiguous()) {
        throw CommError(what + ": tensors must be contiguous (call .contiguous() first)");
      }
    }
    if (input.scalar_type() != output.scalar_type() || input.device() != output.device()) {
      throw CommError(what + " issued at " + site.str() + ": input and output differ in dtype or device");
    }
    check_device(input, op, site);
  }
  // See Note [Fault points]: a rank that took another branch, or a metric of another size.
  switch (fault::before_issue(trace::to_string(op))) {
    case fault::IssueFault::None: break;
    case fault::IssueFault::Skip: {
      auto skipped = std::make_shared<Work>(*this, op, trace::kNone64, 0, trace::DType::UInt8, tag);
      skipped->complete_skipped();
      return skipped;
    }
    case fault::IssueFault::Resize: resize_for_fault(op, input, output); break;
  }
  if (op != trace::CollectiveOp::Barrier) {
    dtype = to_trace_dtype(input.scalar_type());
    bytes = static_cast<int64_t>(input.numel()) * static_cast<int64_t>(input.element_size());
  }
  auto request = std::make_shared<Request>();
  request->op = op;
  request->reduce = reduce;
  request->root = root;
  request->input = std::move(input);
  request->output = std::move(output);
  request->input_use = input_use;
  request->site = site;
  // Sequence numbers and queue order are assigned together (Note [Collective order]).
  std::lock_guard<std::mutex> lock(issue_mutex_);
  request->work = std::make_shared<Work>(*this, op, next_seq_++, bytes, dtype, tag);
  if (options_.check_collectives) {
    try {
      check_collective(*request->work);
    } catch (const CommError&) {
      // Issued and refused: the trace keeps it (Note [Collective end state]).
      request->work->record_unfinished(trace::now_ns());
      throw;
    }
  }
  issued_.store(next_seq_, std::memory_order_relaxed);
  WorkHandle work = request->work;
  if (pending_) pending_->track(work);
  enqueue(std::move(request));
  fault::reached(trace::to_string(op));  // See Note [Fault points]
  return work;
}

void ProcessGroup::resize_for_fault(trace::CollectiveOp op, at::Tensor& input,
                                    at::Tensor& output) const {
  if (!input.defined()) return;
  const bool gathers = op == trace::CollectiveOp::AllGather;
  const bool scatters = op == trace::CollectiveOp::ReduceScatter;
  const at::Tensor& per_rank = scatters ? output : input;
  const int64_t half = std::max<int64_t>(1, per_rank.numel() / 2);
  const int64_t whole = half * size_;
  if (input.data_ptr() == output.data_ptr() && !gathers && !scatters) {
    input = output = input.view({-1}).narrow(0, 0, half);
    return;
  }
  input = input.view({-1}).narrow(0, 0, scatters ? whole : half);
  output = output.view({-1}).narrow(0, 0, gathers ? whole : half);
}

// Every rank posts "op bytes dtype" of collective `seq` under its own key, waits for every other
// rank's, and compares. A rank that never posts within the timeout is named, too. The store
// lives in rank 0's process: when it is gone, the error says so instead of "Broken pipe".
void ProcessGroup::check_collective(const Work& work) {
  try {
    compare_through_store(work);
  } catch (const CommError&) {
    throw;
  } catch (const std::exception& error) {
    const c10::Error* torch_error = dynamic_cast<const c10::Error*>(&error);
    throw CommError(collective_name(work.op(), work.seq()) + " on rank " + std::to_string(rank_) +
                    ": the store that DPSCOPE_CHECK_COLLECTIVES compares through is unreachable (" +
                    (torch_error ? torch_error->what_without_backtrace() : error.what()) +
                    "); it is served by rank 0's process, which probably ended (see its output)");
  }
}

void ProcessGroup::compare_through_store(const Work& work) {
  const int64_t seq = work.seq();
  const std::string mine = std::string(trace::to_string(work.op())) + " of " +
                           std::to_string(work.bytes()) + " bytes " +
                           std::string(trace::to_string(work.dtype()));
  auto slot = [&](int r, int64_t s) {
    return key("check/" + std::to_string(s) + "/" + std::to_string(r));
  };
  store_->set(slot(rank_, seq), to_bytes(mine));
  std::vector<std::string> keys;
  for (int r = 0; r < size_; ++r) keys.push_back(slot(r, seq));
  // See Note [Check mode and a rank that left]: wait in slices, stopping when an absent rank left.
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  for (;;) {
    std::string absent, left;
    for (int r = 0; r < size_; ++r) {
      if (store_->check({slot(r, seq)})) continue;
      absent += (absent.empty() ? "" : ", ") + std::to_string(r);
      const std::string gone = key("left/" + std::to_string(r));
      if (store_->check({gone})) {
        left += (left.empty() ? "rank " : ", rank ") + std::to_string(r) + " (after issuing " +
                from_bytes(store_->get(gone)) + " collectives)";
      }
    }
    if (absent.empty()) break;
    if (!left.empty()) {
      throw CommError("collective #" + std::to_string(seq) + " (" + mine + ") on rank " + std::to_string(rank_) +
                      ": " + left + " left the group without issuing it (DPSCOPE_CHECK_COLLECTIVES); see "
                      "that rank's error, and make every rank issue the same collectives");
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw CommError("collective #" + std::to_string(seq) + " (" + mine + ") on rank " +
                      std::to_string(rank_) + ": ranks " + absent + " never issued it (" +
                      "DPSCOPE_CHECK_COLLECTIVES); they stopped, crashed or issue fewer collectives");
    }
    try {
      store_->wait(keys, std::chrono::milliseconds(100));
    } catch (const std::exception&) {
      // Not all there yet (a broken store fails the next check, which says so): look again.
    }
  }
  std::map<std::string, std::vector<int>> by_signature;
  for (int r = 0; r < size_; ++r) by_signature[from_bytes(store_->get(slot(r, seq)))].push_back(r);
  if (by_signature.size() > 1) {
    std::ostringstream message;
    message << "collective #" << seq << " differs across ranks (DPSCOPE_CHECK_COLLECTIVES):";
    for (const auto& [signature, ranks] : by_signature) {
      message << (ranks.size() > 1 ? " ranks " : " rank ");
      for (size_t i = 0; i < ranks.size(); ++i) message << (i ? "," : "") << ranks[i];
      message << " issued " << signature << ";";
    }
    message << " every rank must issue the same collectives in the same order";
    throw CommError(message.str());
  }
  // Every rank has posted `seq`, so all have finished reading `seq - 1`.
  if (seq > 0) store_->deleteKey(slot(rank_, seq - 1));
}

}  // namespace dpscope::comm
