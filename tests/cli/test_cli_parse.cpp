// The command line in parse-only mode (make_app(CommandMode::Validate), what tests/fuzz/fuzz_cli
// runs): every subcommand's arguments are checked as `dpscope` checks them, and nothing runs: no
// file is written, no process started. Also the launcher's and the training's option checks
// that the fuzzing added (regressions, tests/fuzz/README.md "Findings").
#include <gtest/gtest.h>

#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/app.h"
#include "cli/launcher.h"
#include "engine/train/train_config.h"
#include "tests/test_util.h"
#include "trace/error.h"
#include "trace/vocabulary.h"

namespace dpscope::cli {
namespace {

using testing::TempDir;

// Parses `args` (after "dpscope") in Validate mode; rethrows what the parse throws.
void parse(const std::vector<std::string>& args) {
  std::vector<std::string> all{"dpscope"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : all) argv.push_back(arg.data());
  const auto app = make_app(CommandMode::Validate);
  app->parse(static_cast<int>(argv.size()), argv.data());
}

// The message of what parsing `args` throws, or "" when it succeeds.
template <typename Error>
std::string error_of(const std::vector<std::string>& args) {
  try {
    parse(args);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(CliParse, ValidCommandsRunNothing) {
  TempDir dir;
  const std::string marker = dir.file("marker");
  const std::string trace = dir.file("run.sqlite");
  parse({"launch", "-n", "2", "--trace-dir", dir.file("traces"), "--", "touch", marker});
  parse({"synth", "--events", "100", "--ranks", "2", "--out", trace});
  parse({"merge", trace, dir.file("rank0.sqlite"), dir.file("rank1.sqlite")});
  parse({"export", "--chrome", dir.file("out.json"), dir.file("rank0.sqlite")});
  parse({"export", "--format", "chrome", dir.file("out.json"), dir.file("rank0.sqlite")});
  parse({"export", "--format", "flight-recorder", dir.file("fr"), dir.file("rank0.sqlite")});
  parse({"stats", "--json", dir.file("missing.sqlite")});
  parse({"view", dir.file("missing.sqlite"), "--frames", "3"});
  parse({"demo", "--out", dir.file("demo"), "--ranks", "2", "--steps", "3", "--no-view"});
  // The language model picks its text unless --data is given.
  parse({"train", "--model", "gpt", "--steps", "5"});
  parse({"train", "--model", "mlp", "--steps", "5", "--trace", dir.file("train.sqlite"),
         "--save-final", dir.file("final.pt")});
  parse({"train", "--strategy", "fsdp", "--sharding", "grad_op", "--wrap-min-params", "100",
         "--reduce-bucket-mb", "0"});
  parse({"train", "--memory-accounting", "ownership"});
  parse({"train", "--memory-accounting", "tracking", "--strategy", "fsdp2"});
  EXPECT_TRUE(std::filesystem::is_empty(dir.path())) << "parse-only mode wrote files";
}

TEST(CliParse, SyntaxErrorsAreParseErrors) {
  EXPECT_NE(error_of<CLI::ParseError>({}), "");
  EXPECT_NE(error_of<CLI::ParseError>({"launch", "-n", "0", "--", "true"}), "");
  EXPECT_NE(error_of<CLI::ParseError>({"synth", "--events", "x", "--ranks", "1", "--out", "o"}), "");
  EXPECT_NE(error_of<CLI::ParseError>({"demo", "--ranks", "65"}), "");
  EXPECT_NE(error_of<CLI::ParseError>({"train", "--trace-level", "verbose"}), "");
  // A refused accounting names both that are (CLI11's IsMember lists them).
  const std::string accounting = error_of<CLI::ParseError>({"train", "--memory-accounting", "by-owner"});
  EXPECT_NE(accounting.find("tracking"), std::string::npos) << accounting;
  EXPECT_NE(accounting.find("ownership"), std::string::npos) << accounting;
  EXPECT_NE(error_of<CLI::ParseError>({"train", "--no-such-flag"}), "");
}

// `export`: --chrome OUT TRACE, or --format chrome|flight-recorder OUT TRACE, each refused
// otherwise with the form.
TEST(CliParse, ExportNamesItsFormsWhenRefused) {
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"export", "trace.sqlite"},
           {"export", "--chrome", "out.json", "a", "b"},
           {"export", "--format", "flight-recorder", "trace.sqlite"},
           {"export", "--chrome", "out.json", "--format", "chrome", "out.json", "trace.sqlite"}}) {
    EXPECT_NE(error_of<CliFailure>(bad).find("--format chrome|flight-recorder OUT TRACE"), std::string::npos)
        << bad.back();
  }
  EXPECT_NE(error_of<CLI::ParseError>({"export", "--format", "perfetto", "o", "t"}), "");
}

TEST(CliParse, CommandChecksRunInValidateMode) {
  EXPECT_NE(error_of<CliFailure>({"launch", "--nnodes", "2", "--node-rank", "2", "--master-port",
                                  "29500", "--", "true"})
                .find("--node-rank 2 is outside 0..1"),
            std::string::npos);
  EXPECT_NE(error_of<trace::TraceError>({"synth", "--events", "0", "--ranks", "1", "--out", "o"})
                .find("--events must be between 1"),
            std::string::npos);
  EXPECT_NE(error_of<trace::TraceError>({"merge", "a.sqlite", "a.sqlite"}).find("is also an input"),
            std::string::npos);
  EXPECT_NE(error_of<std::invalid_argument>({"train", "--lr", "0"}).find("--lr must be positive"),
            std::string::npos);
  EXPECT_NE(error_of<std::invalid_argument>({"train", "--strategy", "fsdp", "--static-graph"})
                .find("--static-graph is a DDP option"),
            std::string::npos);
}

// --device and --backend (engine/train/train_config.cpp): the device's backend by default, nccl
// only on GPUs, and in a build without CUDA (as this one and the parse test are) one line on how
// to get one.
TEST(CliParse, TrainChecksDeviceAndBackendTogether) {
  EXPECT_NE(error_of<std::invalid_argument>({"train", "--device", "cuda"})
                .find("this build has no CUDA (its LibTorch is CPU-only); build against a CUDA "
                      "LibTorch (docs/gpu.md), or use --device cpu"),
            std::string::npos);
  EXPECT_NE(error_of<std::invalid_argument>({"train", "--backend", "nccl"})
                .find("--backend nccl runs on GPUs: add --device cuda"),
            std::string::npos);
  EXPECT_NE(error_of<std::invalid_argument>({"train", "--device", "gpu"})
                .find("--device must be cpu or cuda, not 'gpu'"),
            std::string::npos);
}

// The model's sizes and data (engine/models/model_config.h), checked before anything runs: each
// message names the flag.
TEST(CliParse, TrainChecksTheModelsSizesAndData) {
  parse({"train", "--model", "gpt", "--data", "text", "--layers", "2", "--hidden", "96", "--heads",
         "3", "--seq", "32"});
  parse({"train", "--model", "transformer", "--seq", "12"});
  const auto message = [](const std::vector<std::string>& args) {
    return error_of<std::invalid_argument>(args);
  };
  EXPECT_NE(message({"train", "--model", "gpt", "--data", "text", "--hidden", "130"})
                .find("--hidden 130 is not a multiple of --heads 4"),
            std::string::npos);
  EXPECT_NE(message({"train", "--model", "gpt", "--data", "text", "--heads", "0"})
                .find("--heads must be at least 1"),
            std::string::npos);
  EXPECT_NE(message({"train", "--model", "gpt", "--data", "text", "--layers", "0"})
                .find("--layers must be at least 1 for --model gpt"),
            std::string::npos);
  EXPECT_NE(message({"train", "--model", "gpt", "--data", "text", "--seq", "9223372036854775807"})
                .find("--seq must be at most"),
            std::string::npos);
  EXPECT_NE(message({"train", "--model", "mlp", "--heads", "2"}).find("--heads sets the attention"),
            std::string::npos);
  EXPECT_NE(message({"train", "--model", "cnn", "--seq", "2"}).find("drop it for --model cnn"),
            std::string::npos);
  EXPECT_NE(message({"train", "--model", "gpt", "--data", "digits"}).find("train it on --data text"),
            std::string::npos);
  // DDP's bucket flags are refused with FSDP (which would ignore them), as every other DDP flag.
  for (const std::string flag : {"--bucket-cap-mb", "--first-bucket-mb"}) {
    EXPECT_NE(message({"train", "--strategy", "fsdp", flag, "3"}).find(flag + " is a DDP option"),
              std::string::npos)
        << flag;
  }
  EXPECT_NE(message({"train", "--strategy", "fsdp", "--initial-buckets", "by-size"})
                .find("--initial-buckets is a DDP option"),
            std::string::npos);
  // A model that cannot fit is refused at once, with what it would need, not built for minutes.
  const std::string huge = message({"train", "--model", "mlp", "--layers", "100000000"});
  EXPECT_NE(huge.find("GiB (parameters, gradients, buckets, momentum)"), std::string::npos) << huge;
  EXPECT_NE(huge.find("choose smaller --layers or --hidden"), std::string::npos) << huge;
  EXPECT_NE(message({"train", "--model", "mlp", "--hidden", "1000000"}).find("GiB"), std::string::npos);
  EXPECT_NE(message({"train", "--model", "mlp", "--data", "text"}).find("use --model gpt"),
            std::string::npos);
  EXPECT_NE(message({"train", "--model", "mlp", "--hidden", "0"}).find("--hidden must be at least 1"),
            std::string::npos);
  EXPECT_NE(error_of<CLI::ParseError>({"train", "--model", "gpt2"}), "");
}

// Regression: --nnodes times -n overflowed int in WORLD_SIZE and RANK (undefined behaviour);
// --master-port and --stop-grace took any int.
TEST(CliParse, LaunchRejectsOutOfRangeNumbers) {
  EXPECT_NE(error_of<CliFailure>({"launch", "--nnodes", "2147483647", "--node-rank", "0",
                                  "--master-port", "29500", "-n", "2", "--", "true"})
                .find("more ranks than a run can have"),
            std::string::npos);
  EXPECT_NE(error_of<CliFailure>({"launch", "--master-port", "70000", "--", "true"})
                .find("--master-port must be a TCP port"),
            std::string::npos);
  EXPECT_NE(error_of<CliFailure>({"launch", "--master-port", "-1", "--", "true"})
                .find("--master-port must be a TCP port"),
            std::string::npos);
  EXPECT_NE(error_of<CliFailure>({"launch", "--stop-grace", "-5", "--", "true"})
                .find("--stop-grace must be 0 or more"),
            std::string::npos);
  LaunchOptions ok;
  ok.command = {"true"};
  ok.nnodes = 1024;
  ok.nproc = 1024;
  ok.node_rank = 1023;
  ok.master_port = 65535;
  EXPECT_NO_THROW(validate_launch_options(ok));
}

// Regression: bucket sizes of inf, NaN or 1e300 MiB passed the checks and were converted to
// int64_t bytes (undefined behaviour) when the DDP and FSDP wrappers were built.
TEST(CliParse, TrainRejectsBucketSizesThatDoNotFit) {
  for (const char* flag : {"--bucket-cap-mb", "--first-bucket-mb"}) {
    for (const char* value : {"inf", "1e300", "2e6"}) {
      EXPECT_NE(error_of<std::invalid_argument>({"train", flag, value}).find("at most 1048576"),
                std::string::npos)
          << flag << " " << value;
    }
    EXPECT_NE(error_of<std::invalid_argument>({"train", flag, "nan"}).find("must be positive"),
              std::string::npos);
  }
  for (const char* value : {"inf", "nan", "1e300"}) {
    EXPECT_NE(error_of<std::invalid_argument>(
                  {"train", "--strategy", "fsdp", "--reduce-bucket-mb", value})
                  .find("--reduce-bucket-mb must be"),
              std::string::npos)
        << value;
  }
  train::TrainConfig config;
  config.bucket_cap_mb = 1 << 20;
  EXPECT_NO_THROW(train::validate_train_config(config));
}

// --link-gbps and --link-latency-us (core/link_model.h): both or neither, each in its
// range, checked in parse-only mode by `dpscope train` and by `dpscope launch` alike.
TEST(CliParse, LinkFlagsAreCheckedBeforeAnythingRuns) {
  parse({"train", "--link-gbps", "4", "--link-latency-us", "50"});
  parse({"launch", "--link-gbps", "0.5", "--link-latency-us", "1e3", "--", "true"});
  const std::pair<const char*, const char*> bad_gbps[] = {
      {"0", "0"}, {"-4", "-4"}, {"nan", "nan"}, {"inf", "inf"}, {"1e6", "1000000"}};
  for (const auto& [value, shown] : bad_gbps) {
    const std::string train = error_of<std::invalid_argument>(
        {"train", "--link-gbps", value, "--link-latency-us", "50"});
    EXPECT_NE(train.find("--link-gbps " + std::string(shown) + " is out of range"),
              std::string::npos)
        << value << ": " << train;
    EXPECT_NE(train.find("from 0.001 to 100000"), std::string::npos) << train;
    const std::string launch = error_of<CliFailure>(
        {"launch", "--link-gbps", value, "--link-latency-us", "50", "--", "true"});
    EXPECT_NE(launch.find("launch: --link-gbps " + std::string(shown) + " is out of range"),
              std::string::npos)
        << value << ": " << launch;
  }
  for (const char* value : {"0", "-1", "nan", "2e7"}) {
    EXPECT_NE(error_of<std::invalid_argument>({"train", "--link-gbps", "4", "--link-latency-us",
                                               value})
                  .find("above 0 and at most 10000000"),
              std::string::npos)
        << value;
  }
  EXPECT_NE(error_of<std::invalid_argument>({"train", "--link-gbps", "4"})
                .find("--link-gbps needs --link-latency-us too"),
            std::string::npos);
  EXPECT_NE(error_of<CliFailure>({"launch", "--link-latency-us", "50", "--", "true"})
                .find("--link-latency-us needs --link-gbps too"),
            std::string::npos);
  train::TrainConfig config;
  config.link_gbps = 1e5;
  config.link_latency_us = 1e7;
  EXPECT_NO_THROW(train::validate_train_config(config));
}

// One link option group (core/link_options.h): every command that takes a link declares the same
// two options and refuses a bad value in the same words, naming the option and the range.
TEST(CliParse, EveryCommandTakesTheLinkThroughOneOptionGroup) {
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> commands = {
      {{"train"}, {}},
      {{"launch"}, {"--", "true"}},
      {{"stats", "--clock", "cluster"}, {"run.sqlite"}},
      {{"whatif", "--clock", "cluster"}, {"run.sqlite"}},
      {{"synth", "--events", "100", "--ranks", "2", "--out", "synth.sqlite"}, {}},
      {{"demo"}, {}},
  };
  for (const auto& [before, after] : commands) {
    std::vector<std::string> args = before;
    for (const char* flag : {"--link-gbps", "0", "--link-latency-us", "50"}) args.push_back(flag);
    args.insert(args.end(), after.begin(), after.end());
    const std::string error = error_of<std::exception>(args);
    EXPECT_NE(error.find("--link-gbps 0 is out of range: the link's bandwidth is in gigabits per "
                         "second, from 0.001 to 100000"),
              std::string::npos)
        << before[0] << ": " << error;
  }
  // The demo's own link (100 Gb/s, 25 µs) is the default its help shows; one half may be given.
  EXPECT_EQ(error_of<std::exception>({"demo", "--link-gbps", "10"}), "");
}

// The run's settings (meta `config`) are written by nlohmann-json under trace::config_key's
// names: any text round-trips, a quote or a backslash in it included, and every field is there.
TEST(CliParse, TrainConfigJsonEscapesTextAndNamesEveryField) {
  namespace config_key = trace::config_key;
  train::TrainConfig config;
  config.model.name = "mlp \"quoted\" \\ path";
  config.straggler = train::StragglerSpec{1, 2.5};
  const nlohmann::json json = nlohmann::json::parse(train::config_json(config));
  EXPECT_EQ(json.at(config_key::kModel), config.model.name);
  EXPECT_EQ(json.at(config_key::kStrategy), "ddp");
  EXPECT_EQ(json.at(config_key::kInitialBuckets), "pytorch");
  EXPECT_EQ(json.at(config_key::kFindUnusedParameters), false);
  EXPECT_EQ(json.at(config_key::kStraggler).at(config_key::kStragglerRank), 1);
  EXPECT_EQ(json.at(config_key::kStraggler).at(config_key::kStragglerMs), 2.5);
  for (const char* key : {config_key::kHidden, config_key::kLayers, config_key::kHeads,
                          config_key::kSequence, config_key::kData, config_key::kSteps,
                          config_key::kBatchSize, config_key::kLr, config_key::kMomentum,
                          config_key::kSeed, config_key::kGradAccum, config_key::kBucketCapMb,
                          config_key::kFirstBucketMb, config_key::kGradientAsBucketView,
                          config_key::kStaticGraph, config_key::kBroadcastBuffers,
                          config_key::kCommHook, config_key::kSharding, config_key::kWrapMinParams,
                          config_key::kMixedPrecision, config_key::kReduceFp32,
                          config_key::kCpuOffload, config_key::kBackwardPrefetch,
                          config_key::kForwardPrefetch, config_key::kLimitAllGathers,
                          config_key::kLimitReduceScatters, config_key::kReduceBucketMb,
                          config_key::kReshardAfterForward, config_key::kExplicitPrefetch,
                          config_key::kShardGroupSize}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
  config.straggler.reset();
  EXPECT_TRUE(nlohmann::json::parse(train::config_json(config)).at(config_key::kStraggler).is_null());
}

}  // namespace
}  // namespace dpscope::cli
