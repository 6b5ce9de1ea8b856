// core/link_options.h: the two link options every command declares through one group, their
// defaults, and the one check (check_link's words) behind `checked()`.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "core/link_options.h"

namespace dpscope::core {
namespace {

// Parses `args` with `flags` declared for `use`; rethrows CLI11's errors.
void parse(LinkFlags& flags, LinkUse use, std::vector<std::string> args) {
  CLI::App app{"test"};
  add_link_options(app, flags, use);
  args.insert(args.begin(), "test");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
}

TEST(LinkOptions, BothGivenMakeTheLinkAndNeitherMakesNone) {
  LinkFlags flags;
  parse(flags, LinkUse::ClusterClock, {});
  EXPECT_FALSE(flags.checked());
  parse(flags, LinkUse::ClusterClock, {"--link-gbps", "4", "--link-latency-us", "50"});
  const std::optional<LinkSpec> link = flags.checked();
  ASSERT_TRUE(link);
  EXPECT_EQ(link->gbps, 4);
  EXPECT_EQ(link->latency_us, 50);
}

TEST(LinkOptions, CheckedNamesTheOptionAndTheRange) {
  LinkFlags flags;
  parse(flags, LinkUse::Emulate, {"--link-gbps", "0", "--link-latency-us", "50"});
  try {
    flags.checked();
    FAIL() << "--link-gbps 0 was accepted";
  } catch (const std::invalid_argument& error) {
    EXPECT_NE(std::string(error.what()).find("--link-gbps 0 is out of range"), std::string::npos)
        << error.what();
  }
  LinkFlags half;
  parse(half, LinkUse::Whatif, {"--link-gbps", "4"});
  EXPECT_THROW(half.checked(), std::invalid_argument);
}

TEST(LinkOptions, APresetIsTheDefaultAndTheHelpShowsIt) {
  LinkFlags flags{100, 25};
  CLI::App app{"test"};
  add_link_options(app, flags, LinkUse::Emulate);
  const std::string help = app.help();
  EXPECT_NE(help.find("--link-gbps"), std::string::npos) << help;
  EXPECT_NE(help.find("--link-gbps FLOAT=100"), std::string::npos) << help;
  EXPECT_NE(help.find("--link-latency-us FLOAT=25"), std::string::npos) << help;
  std::vector<std::string> args{"test", "--link-gbps", "10"};
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  app.parse(static_cast<int>(argv.size()), argv.data());
  EXPECT_EQ(*flags.gbps, 10);
  EXPECT_EQ(*flags.latency_us, 25);
}

TEST(LinkOptions, EachUseSaysWhatTheLinkIsFor) {
  for (LinkUse use : {LinkUse::Emulate, LinkUse::ClusterClock, LinkUse::Whatif, LinkUse::Synthesize}) {
    LinkFlags flags;
    CLI::App app{"test"};
    add_link_options(app, flags, use);
    const std::string help = app.help();
    EXPECT_NE(help.find(kLinkGbpsFlag), std::string::npos) << help;
    EXPECT_NE(help.find(kLinkLatencyFlag), std::string::npos) << help;
  }
  LinkFlags clock;
  CLI::App app{"test"};
  add_link_options(app, clock, LinkUse::ClusterClock);
  EXPECT_NE(app.help().find("cluster clock"), std::string::npos) << app.help();
}

}  // namespace
}  // namespace dpscope::core
