// Tutorial 01: collectives, before any DDP. The launcher's ranks call the engine's process group
// directly: broadcast, all-reduce, reduce-scatter and all-gather on numbers to check by hand; an
// all-reduce done as a reduce-scatter then an all-gather; the bytes each rank sends by the ring
// model; and latency against bandwidth, alpha and beta fitted to a sweep of all-reduce sizes.
#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "analysis/whatif.h"
#include "core/link_model.h"
#include "engine/comm/link_emulation.h"
#include "engine/comm/process_group.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;
using tutorials::bytes_text;
using Op = trace::CollectiveOp;

namespace {

constexpr const char* kProgram = "tutorial-01-collectives";

struct Settings {
  int64_t chunk = 2;          // part 1: each rank holds ranks x chunk numbers
  int64_t tensor_kib = 1024;  // parts 2 and 3: the tensor all-reduced two ways
  int64_t max_kib = 4096;     // part 4: the largest all-reduce of the sweep
};

// One collective of part 1 on this rank: what went in and what came out.
struct Exchange {
  std::string name;
  std::string result;  // what every rank ends up with
  at::Tensor before;
  at::Tensor after;
};

// Issues `collective` inside a phase named `phase` on the main lane, so that the viewer labels
// it, and waits for it.
void traced(tutorials::TracedRun& run, int32_t iteration, std::string_view phase,
            const std::function<comm::WorkHandle()>& collective) {
  trace::ScopedPhase scope(&run.recorder(), 0, phase, iteration);
  collective()->wait();
}

// Part 1, iteration 0 of the primer run: rank r holds r*10 + i, so every result can be worked
// out by hand.
std::vector<Exchange> four_collectives(tutorials::TracedRun& run, int64_t chunk) {
  comm::ProcessGroup& group = *run.group();
  const int n = group.size();
  const comm::CollectiveTag tag{0};
  const at::TensorOptions floats = at::TensorOptions().dtype(at::kFloat).device(run.session().device());
  const at::Tensor mine = at::arange(n * chunk, floats) + 10.0 * group.rank();
  const at::Tensor my_first_chunk = mine.slice(0, 0, chunk).contiguous();
  const std::string whole = bytes_text(mine.nbytes()), part = bytes_text(my_first_chunk.nbytes());
  at::Tensor broadcast = mine.clone(), sum = mine.clone();
  at::Tensor my_chunk_of_sum = at::empty({chunk}, floats), gathered = at::empty({n * chunk}, floats);

  trace::ScopedPhase iteration(&run.recorder(), 0, trace::kPhaseIteration, 0);
  traced(run, 0, "broadcast " + whole, [&] { return group.broadcast(broadcast, 0, tag); });
  traced(run, 0, "all-reduce " + whole, [&] { return group.all_reduce(sum, comm::ReduceOp::Sum, tag); });
  traced(run, 0, "reduce-scatter " + whole + " -> " + part,
         [&] { return group.reduce_scatter(my_chunk_of_sum, mine, comm::ReduceOp::Sum, tag); });
  traced(run, 0, "all-gather " + part + " -> " + whole,
         [&] { return group.all_gather(gathered, my_first_chunk, tag); });
  return {{"broadcast from rank 0", "every rank gets rank 0's numbers", mine, broadcast},
          {"all-reduce (sum)", "every rank gets the sum, element by element", mine, sum},
          {"reduce-scatter (sum)", "rank r keeps chunk r of the sum", mine, my_chunk_of_sum},
          {"all-gather of each rank's first chunk", "every rank gets all of them, in rank order",
           my_first_chunk, gathered}};
}

// Part 2: the same random tensor through one all-reduce and through a reduce-scatter then an
// all-gather of the reduced chunks, each collective in a phase inside the phase `phase`, tagged
// with `iteration`. Returns the floats of this rank whose bits differ between the two results,
// and the largest difference.
std::pair<int64_t, double> all_reduce_two_ways(tutorials::TracedRun& run, const at::Tensor& tensor,
                                               std::string_view phase, int32_t iteration) {
  comm::ProcessGroup& group = *run.group();
  const comm::CollectiveTag tag{iteration};
  const std::string whole = bytes_text(tensor.nbytes());
  const std::string part = bytes_text(tensor.nbytes() / group.size());
  at::Tensor one_call = tensor.clone();
  at::Tensor chunk = at::empty({tensor.numel() / group.size()}, tensor.options());
  at::Tensor two_calls = at::empty_like(tensor);

  trace::ScopedPhase outer(&run.recorder(), 0, phase, iteration);
  traced(run, iteration, "all-reduce " + whole, [&] { return group.all_reduce(one_call, comm::ReduceOp::Sum, tag); });
  traced(run, iteration, "reduce-scatter " + whole + " -> " + part,
         [&] { return group.reduce_scatter(chunk, tensor, comm::ReduceOp::Sum, tag); });
  traced(run, iteration, "all-gather " + part + " -> " + whole, [&] { return group.all_gather(two_calls, chunk, tag); });
  const int64_t differing = at::ne(one_call.view(at::kInt), two_calls.view(at::kInt)).sum().item<int64_t>();
  return {differing, (one_call - two_calls).abs().max().item<double>()};
}

// Every rank's `values` in rank order, through the session's untraced gathers (one number at a
// time: they are few), so that rank 0 can print them.
std::vector<std::vector<double>> gather_rows(tutorials::Session& session, const at::Tensor& values) {
  std::vector<std::vector<double>> rows(static_cast<size_t>(session.world_size()));
  const at::Tensor flat = values.to(at::kDouble).contiguous();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    const std::vector<double> every_rank = session.gather(flat[i].item<double>());
    for (size_t r = 0; r < rows.size(); ++r) rows[r].push_back(every_rank[r]);
  }
  return rows;
}

std::string row_text(const std::vector<double>& row) {
  std::string text = "[";
  for (const double value : row) {
    char cell[24];
    std::snprintf(cell, sizeof(cell), "%s%3g", text.size() > 1 ? " " : "", value);
    text += cell;
  }
  return text + "]";
}

// The collectives of `op` that rank 0 ran in `iteration`, in issue order.
std::vector<analysis::CollectiveStats> collectives_of(const analysis::RunStats& stats, int32_t iteration, Op op) {
  std::vector<analysis::CollectiveStats> found;
  for (const analysis::CollectiveStats& c : tutorials::rank_stats(stats, 0).collectives) {
    if (c.iteration == iteration && c.op == op) found.push_back(c);
  }
  return found;
}

double ms(const analysis::CollectiveStats& c) { return double(c.end_ns - c.begin_ns) / 1e6; }

void print_part_1(tutorials::Session& session, const std::vector<Exchange>& exchanges, int64_t chunk,
                  const analysis::RunStats* stats) {
  session.say("\n1. Four collectives. Rank r holds %lld numbers, r*10 + i (float32); each collective\n"
              "   starts from them again. Bytes as the trace counts them (what a rank hands it).\n",
              static_cast<long long>(session.world_size() * chunk));
  const Op ops[] = {Op::Broadcast, Op::AllReduce, Op::ReduceScatter, Op::AllGather};
  for (size_t e = 0; e < exchanges.size(); ++e) {
    const auto before = gather_rows(session, exchanges[e].before);
    const auto after = gather_rows(session, exchanges[e].after);
    if (!session.leader()) continue;
    std::printf("\n  %s, %s: %s\n", exchanges[e].name.c_str(),
                bytes_text(collectives_of(*stats, 0, ops[e]).at(0).bytes).c_str(), exchanges[e].result.c_str());
    for (size_t r = 0; r < before.size(); ++r) {
      std::printf("    rank %zu   %s  ->  %s\n", r, row_text(before[r]).c_str(), row_text(after[r]).c_str());
    }
  }
}

void print_parts_2_and_3(tutorials::Session& session, const at::Tensor& tensor,
                         const std::pair<int64_t, double>& difference, const analysis::RunStats* stats) {
  const std::vector<double> differing = session.gather(double(difference.first));
  const std::vector<double> largest = session.gather(difference.second);
  if (!session.leader()) return;
  const int n = session.world_size();
  const int64_t s = tensor.nbytes();
  const analysis::CollectiveStats all_reduce_event = collectives_of(*stats, 1, Op::AllReduce).at(0);
  const analysis::CollectiveStats scatter_event = collectives_of(*stats, 1, Op::ReduceScatter).at(0);
  const analysis::CollectiveStats gather_event = collectives_of(*stats, 1, Op::AllGather).at(0);
  const std::shared_ptr<comm::EmulatedLink>& link = session.world().link;
  std::printf("\n2. All-reduce = reduce-scatter + all-gather, on %lld random floats per rank (S = %s),\n"
              "   iteration 1 of the primer run (rank 0; bytes and ms from the trace):\n",
              static_cast<long long>(tensor.numel()), bytes_text(s).c_str());
  std::printf("  %-28s %10s %8s %13s\n", "", "bytes", "ms", link ? "link model ms" : "");
  bool slower_than_link = false;
  const auto row = [&](const char* name, const std::vector<const analysis::CollectiveStats*>& events) {
    int64_t bytes = 0, model_ns = 0;
    double total_ms = 0;
    for (const analysis::CollectiveStats* c : events) {
      bytes += c->bytes;
      total_ms += ms(*c);
      if (link) model_ns += core::link_model_ns(c->op, c->bytes, n, link->spec());
    }
    std::printf("  %-28s %10s %8.2f", name, events.size() == 1 ? bytes_text(bytes).c_str() : "", total_ms);
    if (link) std::printf(" %13.2f", double(model_ns) / 1e6);
    std::printf("\n");
    slower_than_link |= link && total_ms > 1.1 * double(model_ns) / 1e6;
  };
  row("all-reduce", {&all_reduce_event});
  row("reduce-scatter", {&scatter_event});
  row("all-gather", {&gather_event});
  row("reduce-scatter + all-gather", {&scatter_event, &gather_event});
  if (slower_than_link) {
    std::printf("  (a row above the link's model: this machine took longer than the link would, and a\n"
                "  collective on the emulated link never ends before the real one)\n");
  }
  const auto worst = std::max_element(differing.begin(), differing.end());
  if (*worst == 0) {
    std::printf("  identical: yes, all %lld floats bit for bit on every rank\n",
                static_cast<long long>(tensor.numel()));
  } else {
    const size_t rank = size_t(worst - differing.begin());
    std::printf("  identical: no, %.0f of %lld floats differ on rank %zu, by at most %.3g: the two paths\n"
                "  add the ranks' numbers in different orders, and float addition is not associative\n",
                *worst, static_cast<long long>(tensor.numel()), rank, largest[rank]);
  }

  std::printf("\n3. Bytes on the wire: what each rank sends, by the ring model (core/link_model.h),\n"
              "   for S = %s on %d ranks:\n", bytes_text(s).c_str(), n);
  const int64_t all_reduce = tutorials::ring_bytes_sent(Op::AllReduce, s, n);
  const int64_t scatter = tutorials::ring_bytes_sent(Op::ReduceScatter, s, n);
  const int64_t gather = tutorials::ring_bytes_sent(Op::AllGather, s / n, n);
  std::printf("  ring all-reduce       2(n-1)/n x S  %10lld B\n", static_cast<long long>(all_reduce));
  std::printf("  ring reduce-scatter    (n-1)/n x S  %10lld B\n", static_cast<long long>(scatter));
  std::printf("  ring all-gather        (n-1)/n x S  %10lld B\n", static_cast<long long>(gather));
  std::printf("  reduce-scatter + all-gather         %10lld B: the ring all-reduce is exactly these two\n",
              static_cast<long long>(scatter + gather));
  std::printf("  The same all-reduce on more ranks, bytes each rank sends:\n   ");
  const int more_ranks[] = {2, 3, 4, 8, 16, 64, 1024};
  for (const int ranks : more_ranks) std::printf(" %5d ranks", ranks);
  std::printf("\n   ");
  for (const int ranks : more_ranks) std::printf(" %11s", bytes_text(tutorials::ring_bytes_sent(Op::AllReduce, s, ranks)).c_str());
  std::printf("\n  Each of 2(n-1) steps sends a chunk of S/n: more ranks, more steps, smaller chunks. A rank\n"
              "  never sends more than 2 x S, however many ranks share the work; what grows with n is\n"
              "  the number of steps, each paying the link's latency once.\n");
}

// Part 4: `rounds` rounds of all-reduces, one of each size per round, in the sweep run (round
// r is its iteration r); returns its file. Sizes alternate within a round so that a moment of
// noise on the machine touches one all-reduce of a size, not a run of them.
std::string sweep(tutorials::Session& session, const std::vector<int64_t>& sizes, int64_t rounds) {
  tutorials::TracedRun run(session, "sweep");
  run.recorder().set_meta(trace::meta_key::kStrategy, trace::to_string(trace::Strategy::Collectives));
  comm::ProcessGroup& group = *run.group();
  // Zeros: their sum stays zero however often it is all-reduced.
  std::vector<at::Tensor> tensors;
  for (const int64_t bytes : sizes) {
    tensors.push_back(at::zeros({bytes / 4}, at::TensorOptions().dtype(at::kFloat).device(session.device())));
  }
  session.barrier();
  for (int32_t round = 0; round < rounds; ++round) {
    trace::ScopedPhase iteration(&run.recorder(), 0, trace::kPhaseIteration, round);
    for (at::Tensor& tensor : tensors) {
      traced(run, round, "all-reduce " + bytes_text(tensor.nbytes()),
             [&] { return group.all_reduce(tensor, comm::ReduceOp::Sum, comm::CollectiveTag{round}); });
    }
  }
  return run.finish();
}

void print_part_4(tutorials::Session& session, const std::string& path, int64_t rounds) {
  const analysis::RunStats stats = tutorials::read_stats(path);
  std::map<int64_t, std::vector<int64_t>> durations;  // by bytes
  for (const analysis::CollectiveStats& c : tutorials::rank_stats(stats, 0).collectives) {
    if (c.op == Op::AllReduce) durations[c.bytes].push_back(c.end_ns - c.begin_ns);
  }
  // The fastest of each size: a busy machine only ever adds time to a collective, and the
  // emulated link never ends one early, so the fastest is the closest to what the link costs.
  std::vector<std::pair<int64_t, int64_t>> fastest;  // (bytes, ns)
  for (const auto& [bytes, ns] : durations) fastest.emplace_back(bytes, *std::min_element(ns.begin(), ns.end()));
  const analysis::AllReduceModel fit =
      analysis::fit_collective_model(fastest, analysis::replay_origin(path, stats, 0), "all-reduces");
  std::printf("\n4. Latency and bandwidth: all-reduces of %s to %s, %lld of each, timed by the trace\n"
              "   (rank 0, the fastest of each size), and the line t = alpha + bytes x beta through them\n"
              "   (least squares over the sizes, analysis/whatif.h's fit):\n",
              bytes_text(fastest.front().first).c_str(), bytes_text(fastest.back().first).c_str(),
              static_cast<long long>(rounds));
  std::printf("  %10s %12s %12s %15s\n", "size", "fastest us", "fit us", "latency share");
  for (const auto& [bytes, ns] : fastest) {
    const double predicted = fit.intercept_ns + double(bytes) * fit.ns_per_byte;
    std::printf("  %10s %12.1f %12.1f %14.0f%%\n", bytes_text(bytes).c_str(), double(ns) / 1e3, predicted / 1e3,
                predicted > 0 ? 100 * fit.intercept_ns / predicted : 0.0);
  }
  const int n = session.world_size();
  const double bus_factor = double(tutorials::ring_bytes_sent(Op::AllReduce, 1 << 30, n)) / double(1 << 30);
  std::printf("  latency (alpha)      %8.1f us\n", fit.latency_us());
  if (fit.ns_per_byte <= 0) {
    std::printf("  the times do not grow with the bytes here: no bandwidth to fit\n");
  } else {
    std::printf("  bandwidth (1/beta)   %8.2f Gb/s  (x 2(n-1)/n = %.2f Gb/s per link: the bus bandwidth)\n",
                fit.gbps(), fit.gbps() * bus_factor);
    std::printf("  alpha = bytes x beta at %s: below it an all-reduce costs mostly its latency\n",
                bytes_text(std::llround(fit.intercept_ns / fit.ns_per_byte)).c_str());
  }
  const std::shared_ptr<comm::EmulatedLink>& link = session.world().link;
  if (!link) {
    std::printf("  (no emulated link: this is Gloo over loopback, memory copies between processes;\n"
                "  `dpscope launch --link-gbps 2 --link-latency-us 500` gives the ranks a slow cluster's link)\n");
    return;
  }
  // The ring model's all-reduce, costed as the emulated link costs it.
  const int64_t model_alpha = core::link_model_ns(Op::AllReduce, 0, n, link->spec());
  const double model_beta = double(core::link_model_ns(Op::AllReduce, 1 << 30, n, link->spec()) - model_alpha) /
                            double(1 << 30);
  std::printf("  the link's ring model: alpha = 2(n-1) x %s us = %.1f us, 1/beta = n/(2(n-1)) x %s Gb/s =\n"
              "  %.2f Gb/s, equal at %s\n",
              core::link_value_text(link->spec().latency_us).c_str(), double(model_alpha) / 1e3,
              core::link_value_text(link->spec().gbps).c_str(), 8.0 / model_beta,
              bytes_text(std::llround(double(model_alpha) / model_beta)).c_str());
}

void run(tutorials::Session& session, const Settings& settings) {
  const int n = session.world_size();
  if (n < 2) {
    throw std::invalid_argument("a collective needs at least 2 ranks: run it under `dpscope launch -n 2 -- " +
                                std::string(kProgram) + "` (or -n 3, -n 4)");
  }
  session.say("== %s: collectives on %d ranks, through the engine's process group ==\n", kProgram, n);

  session.seed_per_rank(session.options().seed);
  // Rounded down to whole chunks, one per rank.
  const int64_t floats = settings.tensor_kib * 1024 / 4 / n * n;
  const at::Tensor random = at::randn({floats}).to(session.device());

  tutorials::TracedRun primer(session, "primer");
  // No DDP or FSDP here: the viewer's header and `dpscope stats` name what the run does instead.
  primer.recorder().set_meta(trace::meta_key::kStrategy, trace::to_string(trace::Strategy::Collectives));
  session.barrier();
  // A group's first messages take milliseconds on loopback here, its first large one of each
  // kind tens of them, far more than the next ones: paid before anything is shown or compared.
  all_reduce_two_ways(primer, random, "warm-up", trace::kNone);
  const std::vector<Exchange> exchanges = four_collectives(primer, settings.chunk);
  const std::pair<int64_t, double> difference = all_reduce_two_ways(primer, random, trace::kPhaseIteration, 1);
  const std::string primer_file = primer.finish();
  const std::optional<analysis::RunStats> stats =
      session.leader() ? std::optional(tutorials::read_stats(primer_file)) : std::nullopt;
  print_part_1(session, exchanges, settings.chunk, stats ? &*stats : nullptr);
  print_parts_2_and_3(session, random, difference, stats ? &*stats : nullptr);

  std::vector<int64_t> sizes;
  for (int64_t bytes = 4; bytes <= settings.max_kib * 1024; bytes *= 4) sizes.push_back(bytes);
  const std::string sweep_file = sweep(session, sizes, session.options().steps);
  if (!session.leader()) return;
  print_part_4(session, sweep_file, session.options().steps);
  std::printf("\ntraces:\n  %s\n  %s\n", primer_file.c_str(), sweep_file.c_str());
  std::printf("look: dpscope-view %s   (iteration 0: the four collectives; 1: all-reduce vs the two)\n",
              primer_file.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 15;
  Settings settings;
  CLI::App app{"Tutorial 01: collectives: broadcast, all-reduce, reduce-scatter, all-gather; ring bytes; "
               "latency vs bandwidth"};
  tutorials::add_common_options(app, options);
  app.get_option("--steps")->description("Part 4: all-reduces of each size (rounds of the sweep)");
  app.add_option("--chunk", settings.chunk, "Part 1: numbers per chunk (each rank holds ranks x chunk)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  app.add_option("--tensor-kib", settings.tensor_kib, "Parts 2 and 3: the random tensor's size, KiB")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-kib", settings.max_kib, "Part 4: the sweep's largest all-reduce, KiB (from 4 B, x4 each)")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, settings);
  });
}
