// The emulated link's numbers and model (core/link_model.h) and its queue
// (EmulatedLink): the ring model's time of every collective, the checks of --link-gbps,
// --link-latency-us and their environment variables with the one-line errors they give, and
// collectives queuing on one link (Note [Link emulation]).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include "core/link_model.h"
#include "engine/comm/link_emulation.h"

using namespace dpscope;
using namespace dpscope::comm;
using namespace dpscope::core;
using trace::CollectiveOp;

namespace {

// The message of what check_link throws for these values, or "" when it accepts them.
std::string link_error(std::optional<double> gbps, std::optional<double> latency_us) {
  try {
    check_link(gbps, latency_us, core::kLinkGbpsFlag, core::kLinkLatencyFlag);
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Sets or unsets the two variables for one test, and unsets them after.
class LinkEnv {
 public:
  LinkEnv(const char* gbps, const char* latency_us) {
    set(kLinkGbpsEnv, gbps);
    set(kLinkLatencyEnv, latency_us);
  }
  ~LinkEnv() {
    ::unsetenv(kLinkGbpsEnv);
    ::unsetenv(kLinkLatencyEnv);
  }

 private:
  static void set(const char* name, const char* value) {
    if (value) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
};

std::string env_error() {
  try {
    link_from_env();
  } catch (const std::invalid_argument& error) {
    return error.what();
  }
  return "";
}

constexpr int64_t kMiB = int64_t{1} << 20;

}  // namespace

// 8 Gb/s is one byte per ns, which makes the formulas easy to check by hand.
TEST(linkModel, RingFormulas) {
  const LinkSpec link{8, 10};  // 1 byte/ns, L = 10000 ns
  const int64_t s = 4 * kMiB;
  // all-reduce 2(n-1)(L + S/(nB)): n = 4 -> 6 (10000 + 1 MiB)
  EXPECT_EQ(link_model_ns(CollectiveOp::AllReduce, s, 4, link), 6 * (10000 + kMiB));
  // reduce-scatter (n-1)(L + S/(nB)), S its whole input
  EXPECT_EQ(link_model_ns(CollectiveOp::ReduceScatter, s, 4, link), 3 * (10000 + kMiB));
  // all-gather: the bytes are one rank's share, S/n
  EXPECT_EQ(link_model_ns(CollectiveOp::AllGather, kMiB, 4, link), 3 * (10000 + kMiB));
  // broadcast (n-1)L + S/B
  EXPECT_EQ(link_model_ns(CollectiveOp::Broadcast, s, 4, link), 3 * 10000 + s);
  // barrier ceil(log2 n) L
  EXPECT_EQ(link_model_ns(CollectiveOp::Barrier, 0, 4, link), 2 * 10000);
  EXPECT_EQ(link_model_ns(CollectiveOp::Barrier, 0, 5, link), 3 * 10000);
  // Two ranks: an all-reduce is S/B + 2L, each half S/(2B) + L.
  EXPECT_EQ(link_model_ns(CollectiveOp::AllReduce, s, 2, link), s + 20000);
  EXPECT_EQ(link_model_ns(CollectiveOp::ReduceScatter, s, 2, link), s / 2 + 10000);
}

TEST(linkModel, UnitsAreGigabitsAndMicroseconds) {
  // 4 Gb/s = 0.5e9 bytes/s: 1e9 bytes of broadcast on 2 ranks take 2 s plus one latency.
  EXPECT_EQ(link_model_ns(CollectiveOp::Broadcast, 1000000000, 2, LinkSpec{4, 50}),
            2000000000 + 50000);
}

TEST(linkModel, OneRankTakesNoTime) {
  for (CollectiveOp op : {CollectiveOp::AllReduce, CollectiveOp::ReduceScatter,
                          CollectiveOp::AllGather, CollectiveOp::Broadcast, CollectiveOp::Barrier}) {
    EXPECT_EQ(link_model_ns(op, 16 * kMiB, 1, LinkSpec{1, 100}), 0);
  }
}

TEST(linkModel, AcceptsBothOrNeither) {
  EXPECT_FALSE(check_link(std::nullopt, std::nullopt, core::kLinkGbpsFlag, core::kLinkLatencyFlag));
  const auto link = check_link(4.0, 50.0, core::kLinkGbpsFlag, core::kLinkLatencyFlag);
  ASSERT_TRUE(link);
  EXPECT_EQ(link->gbps, 4);
  EXPECT_EQ(link->latency_us, 50);
  EXPECT_EQ(link_error(kMinLinkGbps, 1e-3), "");
  EXPECT_EQ(link_error(kMaxLinkGbps, kMaxLinkLatencyUs), "");
}

TEST(linkModel, BadValuesNameTheFlagAndTheRange) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  for (double gbps : {0.0, -4.0, nan, inf, 1e5 * 1.01, 1e-4}) {
    const std::string message = link_error(gbps, 50.0);
    EXPECT_TRUE(contains(message, "--link-gbps ")) << gbps << ": " << message;
    EXPECT_TRUE(contains(message, "from 0.001 to 100000")) << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << "one line";
  }
  EXPECT_TRUE(contains(link_error(0.0, 50.0), "--link-gbps 0 is out of range"));
  EXPECT_TRUE(contains(link_error(nan, 50.0), "--link-gbps nan is out of range"));
  for (double latency : {0.0, -1.0, nan, inf, 1e7 + 1}) {
    const std::string message = link_error(4.0, latency);
    EXPECT_TRUE(contains(message, "--link-latency-us ")) << latency << ": " << message;
    EXPECT_TRUE(contains(message, "above 0 and at most 10000000")) << message;
  }
  EXPECT_TRUE(contains(link_error(4.0, std::nullopt), "--link-gbps needs --link-latency-us too"));
  EXPECT_TRUE(contains(link_error(std::nullopt, 50.0), "--link-latency-us needs --link-gbps too"));
  EXPECT_TRUE(contains(link_error(4.0, std::nullopt), "--link-gbps 4 --link-latency-us 50"))
      << "the error shows how to give both";
}

TEST(linkModel, EnvironmentVariables) {
  {
    LinkEnv env(nullptr, nullptr);
    EXPECT_FALSE(link_from_env());
  }
  {
    LinkEnv env("", "");
    EXPECT_FALSE(link_from_env()) << "empty is unset";
  }
  {
    LinkEnv env("2.5", "1e2");
    const auto link = link_from_env();
    ASSERT_TRUE(link);
    EXPECT_EQ(link->gbps, 2.5);
    EXPECT_EQ(link->latency_us, 100);
  }
  {
    LinkEnv env("0", "50");
    EXPECT_TRUE(contains(env_error(), "DPSCOPE_LINK_GBPS=0 is out of range")) << env_error();
  }
  {
    LinkEnv env("fast", "50");
    EXPECT_TRUE(contains(env_error(), "DPSCOPE_LINK_GBPS='fast' is not a number")) << env_error();
  }
  {
    LinkEnv env("4", "50us");
    EXPECT_TRUE(contains(env_error(), "DPSCOPE_LINK_LATENCY_US='50us' is not a number"))
        << env_error();
  }
  {
    LinkEnv env("4", nullptr);
    EXPECT_TRUE(contains(env_error(), "DPSCOPE_LINK_GBPS needs DPSCOPE_LINK_LATENCY_US too"))
        << env_error();
  }
}

TEST(linkModel, ValueTextIsShortAndExact) {
  EXPECT_EQ(link_value_text(4), "4");
  EXPECT_EQ(link_value_text(0.5), "0.5");
  EXPECT_EQ(link_value_text(50), "50");
  EXPECT_EQ(link_value_text(1e-3), "0.001");
  EXPECT_EQ(link_value_text(1e6), "1000000");
  EXPECT_EQ(link_value_text(1e-9), "1e-09");
  EXPECT_EQ(link_value_text(-4), "-4");
  for (double value : {0.1 + 0.2, 1.234567891234567e-6, 3.3e-7, 123456789.123}) {
    EXPECT_EQ(std::strtod(link_value_text(value).c_str(), nullptr), value) << value;
  }
}

// start_on_link = max(real begin, link free); end = max(real end, start_on_link + model).
TEST(linkModel, CollectivesQueueOnTheLink) {
  EmulatedLink link(LinkSpec{8, 1});  // 1 byte/ns, L = 1000 ns
  const int64_t model = link_model_ns(CollectiveOp::AllReduce, 1000000, 2, link.spec());
  EXPECT_EQ(model, 1000000 + 2000);
  // Alone on the link: from its real begin, for the model's time.
  auto a = link.admit(CollectiveOp::AllReduce, 1000000, 2, 5000, 6000);
  EXPECT_EQ(a.begin_ns, 5000);
  EXPECT_EQ(a.end_ns, 5000 + model);
  // Begun (for real) while the first was still on the link: waits for it.
  auto b = link.admit(CollectiveOp::AllReduce, 1000000, 2, 5500, 7000);
  EXPECT_EQ(b.begin_ns, a.end_ns);
  EXPECT_EQ(b.end_ns, a.end_ns + model);
  // A real collective slower than the model completes when it really did.
  auto c = link.admit(CollectiveOp::AllReduce, 1000000, 2, b.end_ns + 10, b.end_ns + 5 * model);
  EXPECT_EQ(c.begin_ns, b.end_ns + 10);
  EXPECT_EQ(c.end_ns, b.end_ns + 5 * model);
  EXPECT_EQ(link.free_at_ns(), c.end_ns);
  // Begun after the link went idle: not delayed by the earlier ones.
  auto d = link.admit(CollectiveOp::Barrier, 0, 2, c.end_ns + 100, c.end_ns + 200);
  EXPECT_EQ(d.begin_ns, c.end_ns + 100);
  EXPECT_EQ(d.end_ns, c.end_ns + 100 + 1000);
}
