// DistributedSampler and EpochBatches against torch.utils.data.DistributedSampler and
// DataLoader(batch_size=B, drop_last=False) with set_epoch(e) per epoch, plus argument checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/data/distributed_sampler.h"
#include "tests/data/oracle.h"

using dpscope::data::DistributedSampler;
using dpscope::data::EpochBatches;
using dpscope::testing::ask_oracle;

namespace {

struct Case {
  int64_t n;
  int replicas;
  int rank;
  uint64_t seed;
  int64_t epoch;
  bool shuffle;
  bool drop_last;
  std::string describe() const {
    return "n=" + std::to_string(n) + " replicas=" + std::to_string(replicas) +
           " rank=" + std::to_string(rank) + " seed=" + std::to_string(seed) +
           " epoch=" + std::to_string(epoch) + " shuffle=" + std::to_string(shuffle) +
           " drop_last=" + std::to_string(drop_last);
  }
};

}  // namespace

TEST(DistributedSampler, MatchesPyTorchOverManyCases) {
  SKIP_WITHOUT_ORACLE();
  std::vector<Case> cases;
  // Sizes below, at and above the number of replicas; padding longer than the list itself.
  for (int64_t n : {0, 1, 2, 3, 5, 7, 10, 17, 64, 1797}) {
    for (int replicas : {1, 2, 3, 4, 5, 8}) {
      std::set<int> ranks = {0, replicas / 2, replicas - 1};
      for (int rank : ranks) {
        for (auto [seed, epoch] : {std::pair<uint64_t, int64_t>{0, 0}, {42, 3}, {7, 1}}) {
          for (bool shuffle : {true, false}) {
            for (bool drop_last : {false, true}) {
              if (!shuffle && epoch != 0) continue;  // the epoch changes nothing without shuffle
              cases.push_back({n, replicas, rank, seed, epoch, shuffle, drop_last});
            }
          }
        }
      }
    }
  }
  std::vector<std::string> queries;
  for (const Case& c : cases) {
    queries.push_back("sampler " + std::to_string(c.n) + " " + std::to_string(c.replicas) + " " +
                      std::to_string(c.rank) + " " + std::to_string(c.seed) + " " +
                      std::to_string(c.epoch) + " " + std::to_string(int(c.shuffle)) + " " +
                      std::to_string(int(c.drop_last)));
  }
  auto answers = ask_oracle(queries);
  ASSERT_EQ(answers.size(), cases.size());
  int mismatches = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    DistributedSampler sampler(c.n, c.replicas, c.rank, c.shuffle, c.seed, c.drop_last);
    sampler.set_epoch(c.epoch);
    auto expected = answers[i]["indices"].get<std::vector<int64_t>>();
    auto got = sampler.indices();
    EXPECT_EQ(sampler.num_samples(), answers[i]["num_samples"].get<int64_t>()) << c.describe();
    EXPECT_EQ(sampler.total_size(), answers[i]["total_size"].get<int64_t>()) << c.describe();
    EXPECT_EQ(static_cast<int64_t>(got.size()), sampler.num_samples()) << c.describe();
    if (got != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "indices differ from PyTorch's for " << c.describe();
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " cases";
}

TEST(DistributedSampler, PaddingRepeatsTheListFromItsStart) {
  // 2 samples over 5 replicas without shuffle: [0, 1, 0, 1, 0], rank r takes element r.
  std::vector<int64_t> taken;
  for (int rank = 0; rank < 5; ++rank) {
    DistributedSampler sampler(2, 5, rank, /*shuffle=*/false);
    EXPECT_EQ(sampler.num_samples(), 1);
    EXPECT_EQ(sampler.total_size(), 5);
    auto idx = sampler.indices();
    ASSERT_EQ(idx.size(), 1u);
    taken.push_back(idx[0]);
  }
  EXPECT_EQ(taken, (std::vector<int64_t>{0, 1, 0, 1, 0}));
  // 10 over 4: padded by 2 from the start, rank 1 takes 1, 5, 9.
  DistributedSampler s(10, 4, 1, false);
  EXPECT_EQ(s.indices(), (std::vector<int64_t>{1, 5, 9}));
  // With drop_last the tail goes: 10 over 4 -> 8, rank 3 takes 3, 7.
  DistributedSampler d(10, 4, 3, false, 0, true);
  EXPECT_EQ(d.indices(), (std::vector<int64_t>{3, 7}));
  // drop_last with fewer samples than replicas leaves nothing.
  DistributedSampler none(3, 4, 0, true, 0, true);
  EXPECT_EQ(none.num_samples(), 0);
  EXPECT_TRUE(none.indices().empty());
}

TEST(DistributedSampler, ShuffledRanksPartitionOnePermutation) {
  for (int64_t epoch : {0, 1, 2}) {
    std::vector<int64_t> all;
    for (int rank = 0; rank < 4; ++rank) {
      DistributedSampler s(100, 4, rank, true, 3);
      s.set_epoch(epoch);
      auto idx = s.indices();
      all.insert(all.end(), idx.begin(), idx.end());
    }
    std::sort(all.begin(), all.end());
    for (int64_t i = 0; i < 100; ++i) ASSERT_EQ(all[i], i) << "epoch " << epoch;
  }
  DistributedSampler a(100, 4, 0, true, 3), b(100, 4, 0, true, 3);
  b.set_epoch(1);
  EXPECT_NE(a.indices(), b.indices()) << "a new epoch must reshuffle";
}

TEST(DistributedSampler, RejectsBadArguments) {
  EXPECT_THROW(DistributedSampler(10, 4, 4), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, 4, -1), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(10, 0, 0), std::invalid_argument);
  EXPECT_THROW(DistributedSampler(-1, 2, 0), std::invalid_argument);
  try {
    DistributedSampler(10, 3, 5);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("rank 5"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[0, 2]"), std::string::npos) << e.what();
  }
}

TEST(EpochBatches, MatchesDataLoaderAcrossEpochs) {
  SKIP_WITHOUT_ORACLE();
  struct Run {
    int64_t n;
    int replicas, rank;
    uint64_t seed;
    int64_t batch, steps;
  };
  const std::vector<Run> runs = {
      {10, 3, 1, 7, 2, 8},     {10, 1, 0, 0, 3, 11},  {1797, 4, 2, 0, 32, 40},
      {5, 8, 7, 1, 1, 6},      {7, 2, 0, 123, 4, 9},  {64, 2, 1, 5, 32, 5},
      {3, 2, 1, 9, 5, 4},
  };
  std::vector<std::string> queries;
  for (const Run& r : runs) {
    queries.push_back("batches " + std::to_string(r.n) + " " + std::to_string(r.replicas) + " " +
                      std::to_string(r.rank) + " " + std::to_string(r.seed) + " " +
                      std::to_string(r.batch) + " " + std::to_string(r.steps));
  }
  auto answers = ask_oracle(queries);
  ASSERT_EQ(answers.size(), runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    const Run& r = runs[i];
    EpochBatches batches(DistributedSampler(r.n, r.replicas, r.rank, true, r.seed), r.batch);
    auto expected = answers[i]["batches"].get<std::vector<std::vector<int64_t>>>();
    auto epochs = answers[i]["epochs"].get<std::vector<int64_t>>();
    ASSERT_EQ(static_cast<int64_t>(expected.size()), r.steps);
    for (int64_t step = 0; step < r.steps; ++step) {
      EXPECT_EQ(batches.next(), expected[step]) << "run " << i << " step " << step;
      EXPECT_EQ(batches.epoch(), epochs[step]) << "run " << i << " step " << step;
    }
  }
}

TEST(EpochBatches, BatchesPerEpochAndLastSmallerBatch) {
  EpochBatches b(DistributedSampler(10, 1, 0, false), 4);
  EXPECT_EQ(b.batches_per_epoch(), 3);
  EXPECT_EQ(b.next(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(b.next(), (std::vector<int64_t>{4, 5, 6, 7}));
  EXPECT_EQ(b.next(), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(b.epoch(), 0);
  EXPECT_EQ(b.next(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(b.epoch(), 1);
}

TEST(EpochBatches, RejectsBadArguments) {
  EXPECT_THROW(EpochBatches(DistributedSampler(10, 2, 0), 0), std::invalid_argument);
  EXPECT_THROW(EpochBatches(DistributedSampler(0, 2, 0), 4), std::invalid_argument);
  EXPECT_THROW(EpochBatches(DistributedSampler(3, 4, 1, true, 0, true), 4), std::invalid_argument);
}
