// NcclRulesCommunicator (comm_nccl_rules.h) on pairs of ranks: each of NCCL's rules that MPI
// forgives is an error naming both sides, and MEGART_NCCL_RULES=1 puts it on a ProcessGrid's axes.
#include "megart/comm_nccl_rules.h"

#include "expect_error.h"
#include "mpi_test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>

namespace {

constexpr int kTagA = 11, kTagB = 12;

// This rank's pair ({0, 1}, {2, 3}) as a synchronous MPI communicator under NCCL's rules; `raw`
// keeps the MPI one (to drain what a failed check left in flight).
struct RulesPair {
  megart::MpiCommunicator *raw = nullptr;
  std::unique_ptr<megart::NcclRulesCommunicator> rules;
  int peer() const { return 1 - rules->rank(); }
  // The peer's next message on MPI tag `channel` (its header, then n floats), past the rules: what
  // a failed check left unreceived.
  std::vector<float> drain(int channel, int64_t n) const {
    std::vector<float> header(4), data(static_cast<size_t>(n));
    auto h = raw->irecv(header.data(), 4, peer(), channel);
    auto d = raw->irecv(data.data(), n, peer(), channel);
    raw->wait(*h);
    raw->wait(*d);
    return data;
  }
};

RulesPair rules_pair(megart::NcclRules rules = megart::NcclRules::OneChannel) {
  auto w = mpi_test::world();
  std::unique_ptr<megart::MpiCommunicator> pair = w->split(w->rank() / 2, w->rank(), "pp");
  pair->set_synchronous_sends(true);
  RulesPair p;
  p.raw = pair.get();
  p.rules = std::make_unique<megart::NcclRulesCommunicator>(std::move(pair), "pp", rules);
  return p;
}

} // namespace

TEST(NcclRules, CollectivesInAnotherOrderAreNamedOnEveryRank) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  RulesPair p = rules_pair();
  std::vector<float> data(8, 1.0f), gathered(16);
  const std::string message = error_of([&] {
    if (p.rules->rank() == 0)
      p.rules->all_reduce_sum(data.data(), 8);
    else
      p.rules->all_gather(gathered.data(), data.data(), 8);
  });
  EXPECT_THAT(message, ::testing::HasSubstr("NCCL's rules (MEGART_NCCL_RULES): pp rank " +
                                            std::to_string(p.rules->rank()) + "'s collective #0 is " +
                                            (p.rules->rank() == 0 ? "all_reduce_sum" : "all_gather") +
                                            " of 8 elements, rank " + std::to_string(p.peer()) + "'s #0 is " +
                                            (p.rules->rank() == 0 ? "all_gather" : "all_reduce_sum")));
  EXPECT_THAT(message, ::testing::HasSubstr("the same collectives in the same order"));
  // The same call with another count is another call too; the same call passes.
  expect_error([&] { p.rules->all_reduce_sum(data.data(), p.rules->rank() == 0 ? 8 : 4); },
               {"collective #1 is all_reduce_sum of " + std::string(p.rules->rank() == 0 ? "8" : "4")});
  p.rules->all_reduce_sum(data.data(), 8);
  EXPECT_EQ(data[0], 2.0f);
}

TEST(NcclRules, OnOneChannelAReceiveMustBeThePeersNextSendWhateverItsTag) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  RulesPair p = rules_pair();
  std::vector<float> a(3, 1.0f), b(5, 2.0f);
  if (p.rules->rank() == 0) { // tag A, then tag B
    auto first = p.rules->isend(a.data(), 3, 1, kTagA);
    auto second = p.rules->isend(b.data(), 5, 1, kTagB);
    p.rules->wait(*first);
    p.rules->wait(*second);
  } else { // takes tag B first: MPI would match it by tag, NCCL would not
    std::vector<float> got(5);
    auto wrong = p.rules->irecv(got.data(), 5, 0, kTagB);
    expect_error([&] { p.rules->wait(*wrong); },
                 {"pp rank 1's receive #0 from rank 0 was posted for tag 12, 5 floats, but that rank's send #0 "
                  "to it is tag 11, 3 floats",
                  "on a channel between two ranks the i-th send must be the i-th receive"});
    EXPECT_EQ(p.drain(megart::p2p_tag::kNcclRulesChannel, 5), b); // so that rank 0's sends complete
  }
}

// A channel per tag (megart's NCCL communicator's): tags may be taken in another order, but on
// one tag the messages are taken in the order they were sent.
TEST(NcclRules, WithAChannelPerTagEachTagKeepsItsOrder) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  RulesPair p = rules_pair(megart::NcclRules::ChannelPerTag);
  std::vector<float> a(3, 1.0f), b(5, 2.0f), a2(4, 3.0f);
  if (p.rules->rank() == 0) { // tag A, tag B, tag A again (another size)
    std::vector<std::unique_ptr<megart::Request>> sends;
    sends.push_back(p.rules->isend(a.data(), 3, 1, kTagA));
    sends.push_back(p.rules->isend(b.data(), 5, 1, kTagB));
    sends.push_back(p.rules->isend(a2.data(), 4, 1, kTagA));
    for (auto &s : sends)
      p.rules->wait(*s);
  } else {
    std::vector<float> got_b(5), got_a(3);
    auto rb = p.rules->irecv(got_b.data(), 5, 0, kTagB); // B before A: another channel, fine
    p.rules->wait(*rb);
    EXPECT_EQ(got_b, b);
    std::vector<float> wrong(4);
    auto second_first = p.rules->irecv(wrong.data(), 4, 0, kTagA); // A's second message first: not fine
    expect_error([&] { p.rules->wait(*second_first); },
                 {"receive #0 from rank 0 was posted for tag 11, 4 floats, but that rank's send #0 to it is tag "
                  "11, 3 floats"});
    EXPECT_EQ(p.drain(kTagA, 4), a2);
  }
}

TEST(NcclRules, ASendCompletesOnlyOnceItsReceiveIsPosted) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  RulesPair p = rules_pair();
  auto order = mpi_test::group_of(2); // tells rank 1 when to post its receive
  float one = 1.0f, got = 0.0f;
  if (p.rules->rank() == 0) {
    auto send = p.rules->isend(&one, 1, 1, kTagA);
    for (int i = 0; i < 100; ++i) // MPI would have sent one float eagerly by now
      EXPECT_FALSE(send->test()) << "poll " << i;
    EXPECT_EQ(p.rules->in_flight(), 1);
    order->barrier(); // now rank 1 posts
    p.rules->wait(*send);
    EXPECT_EQ(p.rules->in_flight(), 0);
  } else {
    order->barrier();
    auto recv = p.rules->irecv(&got, 1, 0, kTagA);
    p.rules->wait(*recv);
    EXPECT_EQ(got, 1.0f);
  }
}

TEST(NcclRules, NoCollectiveWhileATransferOfTheCommunicatorIsInFlight) {
  if (mpi_test::world_size() % 2 != 0)
    GTEST_SKIP() << "needs an even number of ranks";
  RulesPair p = rules_pair();
  float out = 1.0f, in = 0.0f, sum = 1.0f;
  auto recv = p.rules->irecv(&in, 1, p.peer(), kTagA);
  auto send = p.rules->isend(&out, 1, p.peer(), kTagA);
  expect_error([&] { p.rules->all_reduce_sum(&sum, 1); },
               {"calls all_reduce_sum of 1 elements (its collective #0) with 2 point-to-point transfers of the same "
                "communicator in flight"});
  p.rules->wait(*recv);
  p.rules->wait(*send);
  p.rules->all_reduce_sum(&sum, 1); // its #1 on both ranks
  EXPECT_EQ(sum, 2.0f);
}

TEST(NcclRules, TheVariablePutsTheRulesOnEveryAxisOfAGrid) {
  auto w = mpi_test::world();
  const megart::GridShape shape{1, w->size(), 1}; // every rank in dp
  ::setenv("MEGART_NCCL_RULES", "1", 1);
  auto grid = megart::ProcessGrid::on(*w, shape);
  ::unsetenv("MEGART_NCCL_RULES");
  std::vector<float> data(4, 1.0f);
  if (w->size() > 1)
    expect_error([&] { grid->dp().all_reduce_sum(data.data(), grid->dp().rank() == 0 ? 4 : 2); },
                 {"NCCL's rules (MEGART_NCCL_RULES): dp rank"});
  auto plain = megart::ProcessGrid::on(*w, shape); // unset: MPI as it is
  plain->dp().all_reduce_sum(data.data(), 4);
  EXPECT_EQ(data[0], static_cast<float>(w->size()));
  ::setenv("MEGART_NCCL_RULES", "yes", 1);
  expect_error([&] { megart::ProcessGrid::on(*w, shape); }, {"MEGART_NCCL_RULES is 'yes'; set it to 1"});
  ::unsetenv("MEGART_NCCL_RULES");
}
