// Deep links (viewer/deep_link.h): the browser viewer's ?trace=...&iter=...&step=... parsed and
// written back, percent-encoding, and the errors a mistyped link gets.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "viewer/deep_link.h"

using dpscope::analysis::Clock;
using dpscope::view::deep_link_query;
using dpscope::view::DeepLink;
using dpscope::view::parse_deep_link;
using dpscope::view::percent_decoded;
using dpscope::view::percent_encoded;

namespace {

std::string error_of(const std::string& query) {
  try {
    parse_deep_link(query);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(DeepLink, EveryFieldIsReadAndWrittenBackInOrder) {
  const DeepLink link = parse_deep_link(
      "?theme=projector&scale=2&clock=cluster&rank=1&step=4&iter=3&compare=b%20run.sqlite&trace=traces/a.sqlite");
  EXPECT_EQ(link.trace, "traces/a.sqlite");
  EXPECT_EQ(link.compare, "b run.sqlite");
  EXPECT_EQ(link.iteration, 3);
  EXPECT_EQ(link.step, 4);
  EXPECT_EQ(link.rank, 1);
  EXPECT_EQ(link.clock, Clock::Cluster);
  EXPECT_EQ(link.scale, 2.0f);
  EXPECT_EQ(link.theme, "projector");
  EXPECT_EQ(deep_link_query(link),
            "trace=traces/a.sqlite&compare=b%20run.sqlite&iter=3&step=4&rank=1&clock=cluster&scale=2&theme=projector");
  EXPECT_EQ(deep_link_query(parse_deep_link(deep_link_query(link))), deep_link_query(link));
}

TEST(DeepLink, AnEmptyLinkAsksForNothingAndOtherKeysAreLeftAlone) {
  const DeepLink link = parse_deep_link("utm_source=slides&&x");
  EXPECT_TRUE(link.trace.empty());
  EXPECT_FALSE(link.iteration || link.step || link.rank || link.clock || link.scale);
  EXPECT_EQ(deep_link_query(link), "");
  EXPECT_EQ(deep_link_query(parse_deep_link("scale=1.5&clock=measured")), "clock=measured&scale=1.5");
}

TEST(DeepLink, PercentEncodingRoundTrips) {
  const std::string text = "http://host:8000/a b/ü?x=1&y=%";
  EXPECT_EQ(percent_decoded(percent_encoded(text)), text);
  EXPECT_EQ(percent_encoded("a b&c"), "a%20b%26c");
  EXPECT_EQ(percent_decoded("a+b%2Fc"), "a b/c");
  EXPECT_THROW(percent_decoded("100%"), std::invalid_argument);
  EXPECT_THROW(percent_decoded("%g1"), std::invalid_argument);
}

TEST(DeepLink, AMistypedLinkSaysWhatToGive) {
  EXPECT_EQ(error_of("iter=three"), "the link's iter=three is not a whole number from 0; give one, as iter=0");
  EXPECT_EQ(error_of("rank=-1"), "the link's rank=-1 is not a whole number from 0; give one, as rank=0");
  EXPECT_EQ(error_of("iter=2x"), "the link's iter=2x is not a whole number from 0; give one, as iter=0");
  EXPECT_EQ(error_of("clock=wall"), "the link's clock=wall is not a clock; give clock=measured or clock=cluster");
  EXPECT_EQ(error_of("scale=5"), "the link's scale=5 is not a presenter size from 1 to 3; give scale=2, say");
  EXPECT_EQ(error_of("scale=abc"), "the link's scale=abc is not a presenter size from 1 to 3; give scale=2, say");
  EXPECT_EQ(error_of("step=2"), "the link gives step=2 without iter=; give the iteration too, as iter=3&step=2");
  EXPECT_NE(error_of("trace=%zz").find("'%zz' has a '%' without two hex digits"), std::string::npos);
}

}  // namespace
