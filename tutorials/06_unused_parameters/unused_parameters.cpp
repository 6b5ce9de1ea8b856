// Tutorial 06: find_unused_parameters. A model with a second head that some batches skip: first
// what DDP does without the option when a step leaves a parameter without a gradient (an error,
// not a hang, when every rank skips it), then training with it, read back from the trace.
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/zeros.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <cstdio>
#include <map>
#include <set>

#include "engine/ddp/distributed_data_parallel.h"
#include "engine/models/models.h"
#include "trace/vocabulary.h"
#include "tutorials/common/report.h"
#include "tutorials/common/tutorial.h"

using namespace dpscope;

namespace {

constexpr const char* kProgram = "tutorial-06-unused-parameters";
constexpr int64_t kFeatures = 64;
constexpr int64_t kClasses = 10;

// fc0 + ReLU, then head_a; head_b is added only when the batch's first input value is positive
// (the same model as `dpscope train --model branch`). Which ranks use head_b changes from step to
// step with the data, as in mixture-of-experts layers or models with optional branches.
class TwoHeads final : public models::Model {
 public:
  explicit TwoHeads(int64_t hidden)
      : fc0_(register_module("fc0", torch::nn::Linear(kFeatures, hidden))),
        head_a_(register_module("head_a", torch::nn::Linear(hidden, kClasses))),
        head_b_(register_module("head_b", torch::nn::Linear(hidden, kClasses))) {}
  at::Tensor forward(const at::Tensor& x) override {
    const at::Tensor h = at::relu(fc0_(x));
    at::Tensor out = head_a_(h);
    if (uses_head_b(x)) out = out + head_b_(h);
    return out;
  }
  static bool uses_head_b(const at::Tensor& x) { return x.reshape({-1})[0].item<float>() > 0; }

 private:
  torch::nn::Linear fc0_, head_a_, head_b_;
};

// Without find_unused_parameters DDP waits for a gradient of every parameter before the bucket
// holding it can be reduced. Here every rank skips head_b in the same step, so the bucket is
// never sent and every rank reports it alike. Had only some ranks skipped it, the others would
// have sent the bucket and waited in vain for them, failing when they stop with this error.
void show_the_error(tutorials::Session& session, std::shared_ptr<TwoHeads> model) {
  session.say("1. Without find_unused_parameters, a step in which no rank uses head_b:\n");
  ddp::DdpOptions options;  // untraced: this part only shows the error message
  ddp::DistributedDataParallel ddp(model, session.world().group, options);
  at::Tensor x = at::randn({8, kFeatures}).to(session.device());
  x[0][0].fill_(-1.0);  // a negative first value: head_b is skipped
  const at::Tensor y = at::zeros({8}, at::kLong).to(session.device());
  model->loss(ddp.forward([&] { return model->forward(x); }), y).backward();
  try {
    ddp.reducer().check_reduction_finished();
    session.say("   (no error: did head_b run?)\n");
  } catch (const ddp::DdpError& error) {
    const std::string message = error.what();
    // The message is long; its first sentence and the parameters it names are the point.
    const size_t first_sentence = message.find(". ");
    const size_t names = message.find("Parameters which did not receive grad");
    session.say("   DdpError: %s.\n   ... %s\n", message.substr(0, first_sentence).c_str(),
                names == std::string::npos ? "" : message.substr(names).c_str());
  }
  for (at::Tensor& p : model->parameters()) p.mutable_grad() = at::Tensor();
}

std::string train(tutorials::Session& session, std::shared_ptr<TwoHeads> model) {
  const tutorials::CommonOptions& options = session.options();
  tutorials::TracedRun run(session);
  run.describe(trace::Strategy::Ddp, "two-heads", *model, "{\"find_unused_parameters\":true}");
  session.say("\n2. With find_unused_parameters, %lld steps; each rank says whether it used head_b:\n",
              static_cast<long long>(options.steps));
  {
    ddp::DdpOptions ddp_options;
    // After each forward DDP walks the autograd graph from the outputs; parameters it does not
    // reach are marked ready at once, so their bucket can go out. A used-parameter map is
    // all-reduced after the last bucket, so a parameter no rank used keeps its .grad untouched.
    ddp_options.find_unused_parameters = true;
    ddp_options.recorder = &run.recorder();
    ddp::DistributedDataParallel ddp(model, run.group(), ddp_options);

    tutorials::ShardedBatches batches(
        data::make_synthetic_classification(2048, kFeatures, kClasses, options.seed), session, 16,
        options.seed);
    torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.05));
    for (int32_t iteration = 0; iteration < options.steps; ++iteration) {
      const data::Dataset batch = batches.next();
      tutorials::Step step(run, iteration);
      tutorials::zero_grad(optimizer);
      const at::Tensor loss = step.forward(
          [&] { return model->loss(ddp.forward([&] { return model->forward(batch.x); }), batch.y); });
      step.backward(loss);
      session.say_each("iteration %d: head_b %s\n", iteration,
                       TwoHeads::uses_head_b(batch.x) ? "used" : "skipped");
      step.optimizer_step(optimizer);
    }
  }
  return run.finish();
}

void report(const std::string& path, int world_size) {
  trace::Reader reader(path);
  const analysis::RunStats stats = analysis::compute_stats(reader);
  std::set<int32_t> head_b;
  for (const trace::ParamInfo& p : stats.params) {
    if (p.name.rfind("head_b.", 0) == 0) head_b.insert(p.index);
  }
  // Rank and iteration -> head_b's gradients seen by a hook (a skipped parameter fires none).
  std::map<std::pair<int, int32_t>, int> head_b_hooks;
  for (const trace::Event& hook : reader.events_of_kind(trace::EventKind::Hook)) {
    if (head_b.count(hook.param)) ++head_b_hooks[{hook.rank, hook.iteration}];
  }
  const size_t buckets = tutorials::bucket_plan(stats, 0).size();
  std::printf("\n3. From the trace (%zu parameter tensors in %zu bucket(s); no rebuilt plan: %s):\n",
              stats.params.size(), buckets,
              tutorials::bucket_plan(stats, 1).empty() ? "with find_unused_parameters DDP never rebuilds"
                                                       : "rebuilt?");
  std::printf("   %-10s", "iteration");
  for (int r = 0; r < world_size; ++r) std::printf(" rank %d: hooks, head_b ", r);
  std::printf(" all-reduces (bytes)        head_b's gradient\n");
  for (int32_t it = 0; it < stats.iterations; ++it) {
    std::printf("   %-10d", it);
    int users = 0;
    for (int r = 0; r < world_size; ++r) {
      const bool used = head_b_hooks[{r, it}] > 0;
      users += used;
      std::printf(" %6lld, %-14s", static_cast<long long>(tutorials::rank_stats(stats, r).iterations.at(it).hooks),
                  used ? "used" : "skipped");
    }
    const analysis::RankStats& rank0 = tutorials::rank_stats(stats, 0);
    std::string sizes;
    for (const analysis::CollectiveStats& c : rank0.collectives) {
      if (c.iteration == it && c.op == trace::CollectiveOp::AllReduce) {
        sizes += (sizes.empty() ? "" : " + ") + tutorials::bytes_text(c.bytes);
      }
    }
    std::printf(" %lld (%s)  %s\n",
                static_cast<long long>(tutorials::collectives_in(rank0, it, trace::CollectiveOp::AllReduce)),
                sizes.c_str(),
                users == world_size ? "averaged over all ranks"
                : users == 0        ? "untouched: no rank used it"
                                    : "users' sum / world size (skippers count as 0)");
  }
  std::printf("   Every iteration has one all-reduce per bucket plus one of the used-parameter map "
              "(int32\n   per parameter). A skipped parameter fires no hook: DDP marks it ready "
              "itself.\n");
  std::printf("\ntrace: %s\nopen it: dpscope-view %s\n", path.c_str(), path.c_str());
}

void run(tutorials::Session& session, int64_t hidden) {
  session.say("== %s: fc0 -> head_a (+ head_b on some batches), %d rank(s) ==\n\n", kProgram,
              session.world_size());
  session.seed_per_rank(session.options().seed);
  auto model = std::make_shared<TwoHeads>(hidden);
  model->to(session.device());
  show_the_error(session, model);
  const std::string path = train(session, model);
  if (session.leader()) report(path, session.world_size());
}

}  // namespace

int main(int argc, char** argv) {
  tutorials::CommonOptions options;
  options.steps = 8;
  int64_t hidden = 32;
  CLI::App app{"Tutorial 06: find_unused_parameters with a head that some batches skip"};
  tutorials::add_common_options(app, options);
  app.add_option("--hidden", hidden, "Width of fc0")->check(CLI::PositiveNumber)->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  return tutorials::guarded_main(kProgram, [&] {
    tutorials::Session session(kProgram, options, argc, argv);
    run(session, hidden);
  });
}
