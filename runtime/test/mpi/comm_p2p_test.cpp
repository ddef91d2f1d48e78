// Point-to-point messages and communication timeouts of MpiCommunicator, on pairs of ranks.
#include "megart/error.h"

#include "expect_error.h"
#include "mpi_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>

using ::testing::HasSubstr;

namespace {

constexpr int kTagA = 11, kTagB = 12;

std::vector<float> filled(int64_t n, float value) { return std::vector<float>(n, value); }

// The pair of this rank ({0, 1}, {2, 3}) as an axis named `axis`.
std::unique_ptr<megart::MpiCommunicator> pair_named(const std::string &axis) {
  auto w = mpi_test::world();
  return w->split(w->rank() / 2, w->rank(), axis);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

} // namespace

TEST(MpiP2p, MessagesArriveInOrderPerTag) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  auto pair = pair_named("pp");
  const int peer = 1 - pair->rank();
  // Rank 0 interleaves two tags; rank 1 takes tag B first: each tag's messages keep their order.
  if (pair->rank() == 0) {
    std::vector<std::vector<float>> data = {filled(3, 1), filled(5, 10), filled(3, 2),
                                            filled(5, 20), filled(3, 3)};
    const int tags[] = {kTagA, kTagB, kTagA, kTagB, kTagA};
    std::vector<std::unique_ptr<megart::Request>> sends;
    for (size_t i = 0; i < data.size(); ++i)
      sends.push_back(pair->isend(data[i].data(), static_cast<int64_t>(data[i].size()), peer, tags[i]));
    for (auto &s : sends) {
      pair->wait(*s);
      EXPECT_TRUE(s->test()); // complete stays complete
    }
  } else {
    std::vector<float> b1(5), b2(5), a1(3), a2(3), a3(3);
    auto rb1 = pair->irecv(b1.data(), 5, peer, kTagB), rb2 = pair->irecv(b2.data(), 5, peer, kTagB);
    pair->wait(*rb2); // out of posting order is fine
    pair->wait(*rb1);
    for (auto *a : {&a1, &a2, &a3}) {
      auto r = pair->irecv(a->data(), 3, peer, kTagA);
      pair->wait(*r);
    }
    EXPECT_EQ(b1, filled(5, 10));
    EXPECT_EQ(b2, filled(5, 20));
    EXPECT_EQ(a1, filled(3, 1));
    EXPECT_EQ(a2, filled(3, 2));
    EXPECT_EQ(a3, filled(3, 3));
  }
  // Both ways at once: sends do not block, so posting them first cannot deadlock.
  std::vector<float> mine = filled(1000, static_cast<float>(pair->rank() + 1)), theirs(1000);
  auto s = pair->isend(mine.data(), 1000, peer, kTagA);
  auto r = pair->irecv(theirs.data(), 1000, peer, kTagA);
  pair->wait(*r);
  pair->wait(*s);
  EXPECT_EQ(theirs, filled(1000, static_cast<float>(peer + 1)));
}

TEST(MpiP2p, ErrorsNameThePeerTagAndSize) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  auto pair = pair_named("pp");
  float x[5] = {};
  expect_error([&] { pair->isend(x, 1, 2, kTagA); }, // a peer outside the axis
               {"isend over the pp axis with peer 2: the axis has ranks 0..1"});
  expect_error([&] { pair->irecv(x, 1, 0, 40000); }, {"tags must be in 0..32767"}); // beyond MPI's tags
  // The two sides disagree on the size: the receiver says so instead of reading garbage.
  if (pair->rank() == 0) {
    auto s = pair->isend(x, 3, 1, kTagA);
    pair->wait(*s);
  } else {
    auto r = pair->irecv(x, 5, 0, kTagA);
    try {
      pair->wait(*r);
      FAIL() << "a short message";
    } catch (const megart::Error &e) {
      EXPECT_THAT(e.what(), HasSubstr("recv from pp rank 0 got 3 elements, expected 5"));
    }
  }
  pair->barrier();
}

TEST(MpiP2p, ARecvThatNeverGetsItsMessageTimesOut) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  auto pair = pair_named("pp");
  if (pair->rank() == 1) { // rank 0 never sends
    pair->set_timeout(0.5);
    megart::comm_activity() = {3, "pipeline schedule", 7, "RecvGrad", 0, 1};
    float x[4];
    auto r = pair->irecv(x, 4, 0, kTagA);
    const auto start = std::chrono::steady_clock::now();
    try {
      pair->wait(*r);
      ADD_FAILURE() << "the receive completed";
    } catch (const megart::Error &e) {
      EXPECT_EQ(std::string(e.what()),
                "rank " + std::to_string(mpi_test::world_rank()) +
                    " (pp rank 1) timed out after 0.5 s in recv from pp rank 0 during iteration "
                    "3, schedule step 7 (RecvGrad chunk 0 microbatch 1): the other rank may have "
                    "died or hung, or the two ranks' schedules do not match; raise "
                    "--distributed-timeout-minutes if it is only slow");
    }
    const double waited = seconds_since(start);
    EXPECT_GE(waited, 0.5);
    EXPECT_LT(waited, 10.0); // a hang guard (20x the timeout), not a speed check
    megart::comm_activity() = {};
    // The abandoned receive is cancelled: a later message with that tag goes to a new receive.
  }
  pair->barrier();
  if (pair->rank() == 0) {
    float y[4] = {1, 2, 3, 4};
    auto s = pair->isend(y, 4, 1, kTagA);
    pair->wait(*s);
  } else {
    float y[4] = {};
    auto r = pair->irecv(y, 4, 0, kTagA);
    pair->wait(*r);
    EXPECT_EQ(y[3], 4.0f);
  }
}

TEST(MpiP2p, ACollectiveThatOneRankSkipsTimesOut) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  auto w = mpi_test::world();
  auto pair = pair_named("tp");
  float x = 1;
  if (pair->rank() == 1) {
    pair->set_timeout(0.3);
    try {
      pair->all_reduce_sum(&x, 1);
      ADD_FAILURE() << "the all-reduce completed without rank 0";
    } catch (const megart::Error &e) {
      EXPECT_EQ(std::string(e.what()),
                "rank " + std::to_string(mpi_test::world_rank()) +
                    " (tp rank 1) timed out after 0.3 s in all_reduce_sum(float) over the tp "
                    "axis: another rank of the axis may have died or hung, or the ranks did not "
                    "make the same collective calls; raise --distributed-timeout-minutes if it "
                    "is only slow");
    }
  }
  w->barrier(); // rank 1 has given up
  // Rank 0 joins late: the abandoned all-reduce completes and the pair stays usable.
  if (pair->rank() == 0) {
    pair->all_reduce_sum(&x, 1);
    EXPECT_EQ(x, 2.0f);
  }
  w->barrier();
  float y = 1;
  pair->set_timeout(30);
  pair->all_reduce_sum(&y, 1);
  EXPECT_EQ(y, 2.0f);
}

TEST(MpiP2p, SplitCommunicatorsInheritTheTimeout) {
  auto w = mpi_test::world();
  w->set_timeout(42);
  auto sub = w->split(0, w->rank(), "pp");
  EXPECT_EQ(sub->timeout(), 42);
  w->set_timeout(megart::kDefaultCommTimeoutSeconds);
  EXPECT_THROW(sub->set_timeout(0), megart::Error);
}
