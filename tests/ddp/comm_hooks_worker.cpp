// comm_hooks_worker: one rank of test_comm_hooks, run under `dpscope launch`. Feeds deterministic
// per-rank buckets through the DDP communication hooks like the Reducer does (launch every
// bucket in order, then wait every bucket in order) and checks the results:
//   comm_hooks_worker simple          allreduce / fp16 / bf16 against the mean computed locally
//   comm_hooks_worker powersgd DIR    PowerSGD against PyTorch's (DIR/powersgd_rank<R>.f32,
//                                     written by tests/ddp/powersgd_oracle.py)
//   comm_hooks_worker trace           a fixed sequence for the trace test (see test_comm_hooks)
// Traces into $DPSCOPE_TRACE_DIR/rank<RANK>.sqlite when set. Prints one line per failure and
// exits 1 if any.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/world.h"
#include "engine/ddp/comm_hook.h"
#include "engine/ddp/powersgd.h"
#include "trace/recorder.h"
#include "trace/vocabulary.h"

using namespace dpscope;
using Shape = std::vector<int64_t>;
using Layout = std::vector<std::vector<Shape>>;

namespace {

int rank = 0;
int world = 1;
int failures = 0;

// ---- Keep in sync with tests/ddp/powersgd_oracle.py (LAYOUT, CONFIGS, value()).
const Layout kLayout = {
    {{8, 3, 3, 3}, {8}, {16, 10}, {2, 2}, {5}, {16, 10}},
    {{32, 20}, {4, 4, 2, 2}, {3, 50}, {32, 20}},
    {{7}, {1, 30}, {20, 1}},
};

struct Config {
  ddp::PowerSGDOptions options;
  int iterations;
};

std::vector<Config> configs() {
  auto make = [](int approx_rank, int start, double min_rate, bool error_feedback,
                 bool warm_start, uint64_t seed, int iterations) {
    Config config;
    config.options.matrix_approximation_rank = approx_rank;
    config.options.start_powersgd_iter = start;
    config.options.min_compression_rate = min_rate;
    config.options.use_error_feedback = error_feedback;
    config.options.warm_start = warm_start;
    config.options.random_seed = seed;
    config.iterations = iterations;
    return config;
  };
  return {make(1, 2, 2.0, true, true, 0, 5), make(2, 3, 2.0, true, false, 7, 5),
          make(4, 2, 1.0, false, true, 42, 4)};
}

// Element i of a rank's bucket: an integer hash mapped to [-1.001, 1.001], as float32.
float value(int config, int iteration, int bucket, int r, int64_t i) {
  const int64_t h = (i * i * 31 + i * 17 + r * 1009 + iteration * 7919 + bucket * 104729 +
                     int64_t{config} * 1299709) %
                    2003;
  return static_cast<float>(static_cast<double>(h - 1001) / 1000.0);
}
// ----

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t numel_of(const std::vector<Shape>& shapes) {
  int64_t n = 0;
  for (const Shape& shape : shapes) n += numel_of(shape);
  return n;
}

at::Tensor tensor_of(const std::vector<float>& values) {
  at::Tensor t = at::empty({static_cast<int64_t>(values.size())}, at::kFloat);
  std::copy(values.begin(), values.end(), t.data_ptr<float>());
  return t;
}

std::vector<float> values_of(const at::Tensor& tensor) {
  const at::Tensor t = tensor.to(at::kFloat).contiguous();
  return std::vector<float>(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
}

// The buckets of `layout` for one iteration, as the Reducer hands them to a hook: a flat buffer
// holding `values`, gradients viewing it, the last bucket marked, tagged with the iteration.
std::vector<ddp::GradBucket> make_buckets(const Layout& layout,
                                          const std::vector<std::vector<float>>& values,
                                          int32_t iteration) {
  std::vector<ddp::GradBucket> buckets(layout.size());
  int32_t param = 0;
  for (size_t b = 0; b < layout.size(); ++b) {
    ddp::GradBucket& bucket = buckets[b];
    bucket.index = static_cast<int32_t>(b);
    bucket.buffer = tensor_of(values[b]);
    int64_t offset = 0;
    for (const Shape& shape : layout[b]) {
      bucket.gradients.push_back(bucket.buffer.narrow(0, offset, numel_of(shape)).view(shape));
      bucket.params.push_back(param++);
      offset += numel_of(shape);
    }
    bucket.is_last = b + 1 == layout.size();
    bucket.iteration = iteration;
    bucket.tag.iteration = iteration;
    bucket.tag.bucket = bucket.index;
  }
  return buckets;
}

// Launches every bucket in order, then waits for every one in order, like the Reducer.
void reduce(ddp::CommHook& hook, comm::ProcessGroup& group,
            std::vector<ddp::GradBucket>& buckets) {
  std::vector<std::unique_ptr<ddp::PendingReduction>> pending;
  for (ddp::GradBucket& bucket : buckets) pending.push_back(hook.launch(group, bucket));
  for (auto& reduction : pending) reduction->wait();
}

// ---- simple: allreduce, fp16, bf16.

// Element i of rank r's bucket, chosen so that the expected result is exact whatever order
// Gloo sums the ranks in, except where noted:
//   i % 8 == 6: 60000 on every rank: fits float16 only when divided before the sum;
//   i % 4 == 0: multiples of world * 2^-6 with |k| <= 30: cast, division and sum exact;
//   i % 4 == 1: an arbitrary value on one rank, 0 on the others: catches where and in which
//               dtype the hook divides (float16(x) / 3 in float16 differs from x / 3);
//   otherwise:  arbitrary values on every rank: exact for 1 or 2 ranks (one rounding whatever
//               the order), within one rounding per rank for more.
float simple_value(int r, int iteration, int bucket, int64_t i) {
  if (i % 8 == 6) return 60000.0f;
  if (i % 4 == 0) {
    const int64_t k = ((i * 7 + r * 3 + iteration * 5 + bucket * 11) % 61) - 30;
    return static_cast<float>(world * k) / 64.0f;
  }
  const float arbitrary = value(3 + bucket, iteration, bucket, r, i) * 3.7f;
  if (i % 4 == 1) return r == (i / 4 + iteration) % world ? arbitrary : 0.0f;
  return arbitrary;
}

bool exact_for_any_order(int64_t i) { return i % 8 == 6 || i % 4 == 0 || i % 4 == 1; }

// The hook's result computed as PyTorch does: cast to `type`, divide by the world size in
// `type`, sum over ranks (fp16 in fp16, one rounding per addition as Gloo does; bf16 in float32
// as dpscope's Gloo backend does; fp32 in fp32), cast back to float32.
std::vector<float> expected_mean(c10::ScalarType type, const std::vector<at::Tensor>& inputs) {
  at::Tensor acc;
  for (const at::Tensor& input : inputs) {
    at::Tensor part = input.to(type).div_(world);
    if (!acc.defined()) {
      acc = type == c10::ScalarType::BFloat16 ? part.to(at::kFloat) : part;
    } else if (type == c10::ScalarType::Half) {
      acc = acc.to(at::kFloat).add_(part.to(at::kFloat)).to(type);
    } else {
      acc = acc.add_(part.to(acc.scalar_type()));
    }
  }
  return values_of(acc.to(type));
}

void run_simple(comm::ProcessGroup& group) {
  const Layout layout = {{{16, 10}, {8}}, {{1001}}, {{3, 4, 5}, {2}}};
  struct Case {
    trace::CommHookKind kind;
    c10::ScalarType type;
    float tolerance;  // relative, for odd elements with more than 2 ranks
  };
  const Case cases[] = {{trace::CommHookKind::AllReduce, c10::ScalarType::Float, 1e-6f},
                        {trace::CommHookKind::Fp16, c10::ScalarType::Half, 2e-3f},
                        {trace::CommHookKind::Bf16, c10::ScalarType::BFloat16, 1e-2f}};
  int32_t iteration = 0;
  for (const Case& c : cases) {
    const std::string name(trace::to_string(c.kind));
    std::unique_ptr<ddp::CommHook> hook = ddp::make_comm_hook(c.kind);
    if (!hook || hook->name() != name) {
      std::printf("rank %d: FAIL make_comm_hook(%s) gave the wrong hook\n", rank, name.c_str());
      ++failures;
      continue;
    }
    for (int it = 0; it < 3; ++it, ++iteration) {
      std::vector<std::vector<float>> mine(layout.size());
      for (size_t b = 0; b < layout.size(); ++b) {
        for (int64_t i = 0; i < numel_of(layout[b]); ++i) {
          mine[b].push_back(simple_value(rank, it, static_cast<int>(b), i));
        }
      }
      std::vector<ddp::GradBucket> buckets = make_buckets(layout, mine, iteration);
      reduce(*hook, group, buckets);
      for (size_t b = 0; b < layout.size(); ++b) {
        std::vector<at::Tensor> inputs;
        for (int r = 0; r < world; ++r) {
          std::vector<float> theirs;
          for (int64_t i = 0; i < numel_of(layout[b]); ++i) {
            theirs.push_back(simple_value(r, it, static_cast<int>(b), i));
          }
          inputs.push_back(tensor_of(theirs));
        }
        const std::vector<float> expected = expected_mean(c.type, inputs);
        const std::vector<float> got = values_of(buckets[b].buffer);
        if (buckets[b].buffer.scalar_type() != at::kFloat) {
          std::printf("rank %d: FAIL %s changed the bucket's dtype\n", rank, name.c_str());
          ++failures;
        }
        for (size_t i = 0; i < expected.size(); ++i) {
          const bool exact = exact_for_any_order(static_cast<int64_t>(i)) || world <= 2;
          const float allowed = exact ? 0.0f : c.tolerance * (1.0f + std::abs(expected[i]));
          if (!(std::abs(got[i] - expected[i]) <= allowed)) {
            std::printf("rank %d: FAIL %s iteration %d bucket %zu element %zu: got %.9g, "
                        "expected %.9g (%s)\n",
                        rank, name.c_str(), it, b, i, got[i], expected[i],
                        exact ? "exact" : "within tolerance");
            ++failures;
            break;
          }
        }
      }
    }
  }
}

// ---- powersgd: against PyTorch's powerSGD_hook.

void run_powersgd(comm::ProcessGroup& group, const std::string& oracle_dir) {
  const std::string path = oracle_dir + "/powersgd_rank" + std::to_string(rank) + ".f32";
  std::ifstream file(path, std::ios::binary);
  if (!file) {
    std::printf("rank %d: FAIL cannot open %s; run tests/ddp/powersgd_oracle.py under torchrun "
                "with the same number of ranks first\n",
                rank, path.c_str());
    ++failures;
    return;
  }
  std::vector<float> oracle;
  float x;
  while (file.read(reinterpret_cast<char*>(&x), sizeof x)) oracle.push_back(x);

  const std::vector<Config> all = configs();
  size_t expected_size = 0;
  for (const Config& config : all) {
    for (const auto& shapes : kLayout) expected_size += config.iterations * numel_of(shapes);
  }
  if (oracle.size() != expected_size) {
    std::printf("rank %d: FAIL %s holds %zu floats, expected %zu: LAYOUT or CONFIGS of "
                "powersgd_oracle.py and comm_hooks_worker.cpp differ\n",
                rank, path.c_str(), oracle.size(), expected_size);
    ++failures;
    return;
  }

  size_t offset = 0;
  for (size_t c = 0; c < all.size(); ++c) {
    const Config& config = all[c];
    std::unique_ptr<ddp::CommHook> hook = ddp::make_powersgd_hook(config.options);
    double max_vanilla = 0;
    double max_compressed = 0;
    for (int it = 0; it < config.iterations; ++it) {
      std::vector<std::vector<float>> mine(kLayout.size());
      for (size_t b = 0; b < kLayout.size(); ++b) {
        for (int64_t i = 0; i < numel_of(kLayout[b]); ++i) {
          mine[b].push_back(value(static_cast<int>(c), it, static_cast<int>(b), rank, i));
        }
      }
      std::vector<ddp::GradBucket> buckets = make_buckets(kLayout, mine, it);
      reduce(*hook, group, buckets);
      const bool compressed = it >= config.options.start_powersgd_iter;
      for (size_t b = 0; b < kLayout.size(); ++b) {
        const std::vector<float> got = values_of(buckets[b].buffer);
        double diff = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          const double d = std::abs(static_cast<double>(got[i]) - oracle[offset + i]);
          diff = std::isnan(d) ? INFINITY : std::max(diff, d);
        }
        offset += got.size();
        (compressed ? max_compressed : max_vanilla) =
            std::max(compressed ? max_compressed : max_vanilla, diff);
        if (diff > 1e-5) {
          std::printf("rank %d: FAIL powersgd config %zu iteration %d bucket %zu: max abs diff "
                      "%.3g to PyTorch's powerSGD_hook (allowed 1e-5)\n",
                      rank, c, it, b, diff);
          ++failures;
        }
      }
    }
    const auto* powersgd = dynamic_cast<const ddp::PowerSGDHook*>(hook.get());
    std::printf("rank %d: powersgd config %zu (rank %d, start %d, error feedback %d, warm start "
                "%d): max abs diff to PyTorch %.3g before start, %.3g compressed; hook "
                "iteration %d, compression rate %.3f\n",
                rank, c, config.options.matrix_approximation_rank,
                config.options.start_powersgd_iter, config.options.use_error_feedback,
                config.options.warm_start, max_vanilla, max_compressed,
                powersgd ? powersgd->iteration() : -1,
                powersgd ? powersgd->compression_rate() : 0.0);
    if (powersgd && powersgd->iteration() != config.iterations) {
      std::printf("rank %d: FAIL powersgd config %zu: hook counted %d iterations, expected %d\n",
                  rank, c, powersgd->iteration(), config.iterations);
      ++failures;
    }
  }
}

// ---- trace: the sequence test_comm_hooks.TraceHoldsHookCollectives checks. Buckets
// [(16,10), (8)] and [(32,20)]; iteration 0 allreduce, 1 fp16, 2 bf16, 3-5 PowerSGD
// (rank 1, start 2: 3 and 4 vanilla, 5 compressed).
void run_trace(comm::ProcessGroup& group) {
  const Layout layout = {{{16, 10}, {8}}, {{32, 20}}};
  std::vector<std::unique_ptr<ddp::CommHook>> hooks;
  hooks.push_back(ddp::make_comm_hook(trace::CommHookKind::AllReduce));
  hooks.push_back(ddp::make_comm_hook(trace::CommHookKind::Fp16));
  hooks.push_back(ddp::make_comm_hook(trace::CommHookKind::Bf16));
  std::unique_ptr<ddp::CommHook> powersgd = ddp::make_comm_hook(trace::CommHookKind::PowerSgd);
  for (int32_t it = 0; it < 6; ++it) {
    ddp::CommHook& hook = it < 3 ? *hooks[it] : *powersgd;
    std::vector<std::vector<float>> mine(layout.size());
    for (size_t b = 0; b < layout.size(); ++b) {
      for (int64_t i = 0; i < numel_of(layout[b]); ++i) {
        mine[b].push_back(value(0, it, static_cast<int>(b), rank, i));
      }
    }
    std::vector<ddp::GradBucket> buckets = make_buckets(layout, mine, it);
    reduce(hook, group, buckets);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode != "simple" && mode != "trace" && !(mode == "powersgd" && argc > 2)) {
    std::fprintf(stderr, "usage: comm_hooks_worker simple | trace | powersgd ORACLE_DIR\n");
    return 2;
  }
  try {
    const comm::LaunchEnv env = comm::read_launch_env();
    std::unique_ptr<trace::Recorder> recorder;
    if (const char* dir = std::getenv("DPSCOPE_TRACE_DIR")) {
      trace::RecorderOptions options;
      options.path = std::string(dir) + "/rank" + std::to_string(env.rank) + ".sqlite";
      options.rank = env.rank;
      options.local_rank = env.local_rank;
      recorder = std::make_unique<trace::Recorder>(options);
      recorder->set_meta(trace::meta_key::kBackend, "gloo");
      recorder->set_meta(trace::meta_key::kWorldSize, std::to_string(env.world_size));
    }
    comm::WorldOptions options;
    options.backend = comm::Backend::Gloo;
    options.timeout = std::chrono::seconds(60);
    options.recorder = recorder.get();
    {
      comm::World w = comm::init_world(options);
      rank = w.group->rank();
      world = w.group->size();
      if (mode == "simple") run_simple(*w.group);
      if (mode == "powersgd") run_powersgd(*w.group, argv[2]);
      if (mode == "trace") run_trace(*w.group);
    }
    if (recorder) recorder->close(failures ? "failed" : "complete");
  } catch (const std::exception& error) {
    std::printf("rank %d: FAIL %s\n", rank, error.what());
    return 1;
  }
  std::printf("rank %d: %s: %d failures\n", rank, mode.c_str(), failures);
  return failures ? 1 : 0;
}
