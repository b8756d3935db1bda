// The deadlock watchdog: each scenario must be reported by the event-driven check — the report
// says so (timed_out is false), rather than by the timeout (10 s here) — naming the right ranks;
// nothing hangs, including when a rank throws. No assertion here depends on how fast the machine
// is: elapsed times are only checked against lower bounds a sleep or a timeout implies, or
// against liveness bounds far above anything a loaded machine adds.
#include <catch2/catch.hpp>
#include <stdexcept>
#include <thread>

#include "tests/ranks/runtime_test_support.hpp"

using namespace ringlab;
using namespace ringlab::testing;

namespace {

// A liveness bound (seconds) for what only time can show: far above the milliseconds these runs
// take even on a loaded machine or under a sanitizer, far below the world timeout of the tests
// that use it (kSlowTimeout), so a run released only by that timeout still fails.
constexpr double kLiveness = 30.0;
constexpr double kSlowTimeout = 90.0;

const RankWaitReport& rank_report(const RunReport& report, int rank) {
  return report.deadlock->ranks.at(static_cast<size_t>(rank));
}

}  // namespace

TEST_CASE("two ranks that both receive first: deadlock with the cycle 0 -> 1 -> 0", "[sim][deadlock]") {
  const SendMode mode = GENERATE(SendMode::eager, SendMode::rendezvous);
  const TimedRun run = timed_run(world_options(2, mode), [](Communicator& comm) {
    comm.set_step(3);
    const Buffer got = comm.recv(1 - comm.rank(), 0);
    comm.send(1 - comm.rank(), 0, got);
  });
  INFO(run.report.describe());
  REQUIRE(run.report.status == RunStatus::deadlock);
  CHECK_FALSE(run.report.deadlock->timed_out);  // found by the event-driven check
  for (int rank = 0; rank < 2; ++rank) {
    const RankWaitReport& waits = rank_report(run.report, rank);
    CHECK(waits.state == RankState::blocked);
    CHECK(waits.call == "recv");
    CHECK(waits.peer == 1 - rank);
    CHECK(waits.tag == 0);
    CHECK(waits.step == 3);
    CHECK(waits.communicator == "world");
  }
  CHECK(run.report.deadlock->cycle == std::vector<int>{0, 1, 0});
  CHECK_THAT(run.report.describe(), Catch::Contains("cycle of waits: rank 0 waits for rank 1 waits for rank 0"));
  CHECK(run.report.exit_status() == kExitCommFault);
  CHECK_THROWS_AS(run.report.throw_if_failed(), CommError);
}

TEST_CASE("a ring with one missing send: the rank after it waits for it forever", "[sim][deadlock]") {
  const int P = GENERATE(3, 4, 8);
  const int forgetful = 1;
  const TimedRun run = timed_run(world_options(P), [&](Communicator& comm) {
    comm.set_step(0, "kv rotation");
    const int right = (comm.rank() + 1) % comm.size(), left = (comm.rank() + comm.size() - 1) % comm.size();
    if (comm.rank() != forgetful) comm.send(right, 0, exact_payload(comm.rank(), 4));
    comm.recv(left, 0);
  });
  INFO(run.report.describe());
  REQUIRE(run.report.status == RunStatus::deadlock);
  CHECK_FALSE(run.report.deadlock->timed_out);  // found by the event-driven check
  const RankWaitReport& victim = rank_report(run.report, forgetful + 1);
  CHECK(victim.state == RankState::blocked);
  CHECK(victim.call == "recv");
  CHECK(victim.peer == forgetful);
  CHECK(victim.label == "kv rotation");
  for (int rank = 0; rank < P; ++rank) {
    if (rank != forgetful + 1) CHECK(rank_report(run.report, rank).state == RankState::finished);
  }
  CHECK(run.report.deadlock->cycle.empty());
  CHECK_THAT(run.report.describe(),
             Catch::Contains("rank 2 [step 0 \"kv rotation\"]: blocked in recv from rank 1, tag 0"));
}

TEST_CASE("a mismatched tag: the receiver waits, and the report shows the message it ignored", "[sim][deadlock]") {
  const TimedRun run = timed_run(world_options(2), [](Communicator& comm) {
    comm.set_step(5);
    if (comm.rank() == 0) {
      comm.send(1, 1, exact_payload(0, 4));
    } else {
      comm.recv(0, 2);
    }
  });
  INFO(run.report.describe());
  REQUIRE(run.report.status == RunStatus::deadlock);
  CHECK_FALSE(run.report.deadlock->timed_out);  // found by the event-driven check
  const RankWaitReport& receiver = rank_report(run.report, 1);
  CHECK(receiver.peer == 0);
  CHECK(receiver.tag == 2);
  CHECK(receiver.step == 5);
  REQUIRE(receiver.queued.size() == 1);
  CHECK(receiver.queued[0] == "from rank 0 tag 1 (4 floats)");
  CHECK(rank_report(run.report, 0).state == RankState::finished);
  CHECK_THAT(run.report.describe(), Catch::Contains("a tag or peer mismatch?"));
}

TEST_CASE("a barrier one rank never reaches: the others name it as not arrived", "[sim][deadlock]") {
  const int P = GENERATE(2, 3, 4, 8);
  const int absent = P - 1;
  const TimedRun run = timed_run(world_options(P), [&](Communicator& comm) {
    comm.set_step(2);
    if (comm.rank() != absent) comm.barrier();
  });
  INFO(run.report.describe());
  REQUIRE(run.report.status == RunStatus::deadlock);
  CHECK_FALSE(run.report.deadlock->timed_out);  // found by the event-driven check
  for (int rank = 0; rank < P; ++rank) {
    const RankWaitReport& waits = rank_report(run.report, rank);
    if (rank == absent) {
      CHECK(waits.state == RankState::finished);
      continue;
    }
    CHECK(waits.state == RankState::blocked);
    CHECK(waits.call == "barrier");
    CHECK(waits.collective_index == 0);
    CHECK(waits.not_arrived == std::vector<int>{absent});
  }
  CHECK_THAT(run.report.describe(), Catch::Contains("blocked in barrier #0 (world), waiting for rank " +
                                                    std::to_string(absent) + " to enter it"));
}

TEST_CASE("rendezvous sends: both ranks sending first deadlock, as ungrouped ncclSend does", "[sim][deadlock]") {
  auto both_send_first = [](Communicator& comm) {
    comm.send(1 - comm.rank(), 0, exact_payload(comm.rank(), 8));
    comm.recv(1 - comm.rank(), 0);
  };
  const TimedRun rendezvous = timed_run(world_options(2, SendMode::rendezvous), both_send_first);
  INFO(rendezvous.report.describe());
  REQUIRE(rendezvous.report.status == RunStatus::deadlock);
  CHECK_FALSE(rendezvous.report.deadlock->timed_out);  // found by the event-driven check
  CHECK(rank_report(rendezvous.report, 0).call == "send (rendezvous)");
  CHECK(rank_report(rendezvous.report, 0).sending);
  CHECK_THAT(
      rendezvous.report.describe(),
      Catch::Contains(
          "rank 0 [step 0]: blocked in send (rendezvous) to rank 1, tag 0 (world): waits for rank 1 to receive it"));
  CHECK(rank_report(rendezvous.report, 0).peer == 1);
  CHECK(rank_report(rendezvous.report, 1).peer == 0);
  CHECK(rendezvous.report.deadlock->cycle == std::vector<int>{0, 1, 0});
  // The same code is fine with eager sends.
  CHECK(World(world_options(2, SendMode::eager)).run(both_send_first).ok());
}

TEST_CASE("rendezvous sends complete once the receiver has posted an irecv", "[sim][deadlock]") {
  const int P = GENERATE(2, 3, 8);
  std::vector<Buffer> received(static_cast<size_t>(P));
  const TimedRun run = timed_run(world_options(P, SendMode::rendezvous), [&](Communicator& comm) {
    Request incoming = comm.irecv((comm.rank() + comm.size() - 1) % comm.size(), 0);
    comm.send((comm.rank() + 1) % comm.size(), 0, exact_payload(comm.rank(), 3));  // blocking
    received[static_cast<size_t>(comm.rank())] = incoming.wait();
  });
  INFO(run.report.describe());
  REQUIRE(run.report.ok());
  for (int rank = 0; rank < P; ++rank) {
    CHECK(same_bits(received[static_cast<size_t>(rank)], exact_payload((rank + P - 1) % P, 3)));
  }
}

TEST_CASE("a collective waiting on a rank blocked elsewhere forms a cycle across both", "[sim][deadlock]") {
  const TimedRun run = timed_run(world_options(3), [](Communicator& comm) {
    if (comm.rank() == 1) comm.recv(0, 9);  // rank 0 never sends: it is in the barrier
    comm.barrier();
  });
  INFO(run.report.describe());
  REQUIRE(run.report.status == RunStatus::deadlock);
  CHECK_FALSE(run.report.deadlock->timed_out);  // found by the event-driven check
  CHECK(rank_report(run.report, 0).not_arrived == std::vector<int>{1});
  CHECK(rank_report(run.report, 1).call == "recv");
  CHECK(run.report.deadlock->cycle == std::vector<int>{0, 1, 0});
}

TEST_CASE("a deadlock inside a sub-communicator names the group and world ranks", "[sim][deadlock]") {
  const TimedRun run = timed_run(world_options(4), [](Communicator& world) {
    Communicator odd_even = world.split(world.rank() % 2, world.rank());  // {0,2} and {1,3}
    if (world.rank() == 3) return;                                        // never reaches the group barrier
    odd_even.barrier();
  });
  INFO(run.report.describe());
  REQUIRE(run.report.status == RunStatus::deadlock);
  CHECK_FALSE(run.report.deadlock->timed_out);  // found by the event-driven check
  const RankWaitReport& waits = rank_report(run.report, 1);
  CHECK(waits.communicator == "group {1,3}");
  CHECK(waits.not_arrived == std::vector<int>{3});
  // The other group finished its barrier.
  CHECK(rank_report(run.report, 0).state == RankState::finished);
  CHECK(rank_report(run.report, 2).state == RankState::finished);
}

TEST_CASE("the timeout fallback catches a rank polling test() forever", "[sim][deadlock]") {
  const TimedRun run = timed_run(world_options(2, SendMode::eager, 0.3), [](Communicator& comm) {
    comm.set_step(4);
    if (comm.rank() == 1) return;
    Request never = comm.irecv(1, 0);
    while (!never.test()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  });
  INFO(run.report.describe());
  REQUIRE(run.report.status == RunStatus::deadlock);
  CHECK(run.report.deadlock->timed_out);
  CHECK(run.seconds >= 0.3);  // a lower bound the timeout implies: no report before 0.3 s without progress
  CHECK(run.report.deadlock->detected_after_seconds >= 0.3);
  CHECK(run.seconds < kLiveness);  // the fallback fires (a hang detector, not a speed claim)
  const RankWaitReport& poller = rank_report(run.report, 0);
  CHECK(poller.state == RankState::polling);
  CHECK(poller.call == "test (irecv)");
  CHECK(poller.peer == 1);
  CHECK(poller.step == 4);
  CHECK_THAT(run.report.describe(), Catch::Contains("no progress for 0.300 s (--timeout)"));
}

TEST_CASE("a compute scope longer than the timeout is work, not a deadlock", "[sim][deadlock]") {
  // The timeout leaves half a second for the moments outside the compute scope (rank 0's thread
  // starting, and sending once the scope ends): a loaded machine may not run a thread for tens of
  // milliseconds, and that must not read as a deadlock here.
  const TimedRun run = timed_run(world_options(2, SendMode::eager, 0.5), [](Communicator& comm) {
    if (comm.rank() == 0) {
      comm.compute("slow kernel", 0, {}, [] { std::this_thread::sleep_for(std::chrono::milliseconds(2000)); });
      comm.send(1, 0, exact_payload(0, 1));
    } else {
      comm.recv(0, 0);  // blocked for 2 s, four times the timeout
    }
  });
  INFO(run.report.describe());
  CHECK(run.report.ok());
  CHECK(run.seconds >= 2.0);  // a lower bound the sleep implies
}

TEST_CASE("a rank that throws releases the others and is reported once", "[sim][deadlock]") {
  const int P = GENERATE(2, 3, 4, 8);
  // Only the time can tell "released by the throw" from "released by the timeout": the timeout is
  // set far beyond the liveness bound, so a release by the timeout fails the bound.
  const TimedRun run = timed_run(world_options(P, SendMode::eager, kSlowTimeout), [&](Communicator& comm) {
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      throw std::runtime_error("boom in the kernel");
    }
    if (comm.rank() == 0) comm.recv(1, 0);  // waits for the rank that throws
    comm.barrier();
  });
  INFO(run.report.describe());
  REQUIRE(run.report.status == RunStatus::error);
  CHECK(run.seconds < kLiveness);
  CHECK(run.report.error->rank == 1);
  CHECK(run.report.error->message == "boom in the kernel");
  CHECK(run.report.describe() == "rank 1 failed: boom in the kernel");
  CHECK(run.report.exit_status() == 70);
  CHECK_THROWS_WITH(run.report.throw_if_failed(), "boom in the kernel");
}

TEST_CASE("ranks that catch WorldAborted and carry on still cannot communicate", "[sim][deadlock]") {
  std::vector<int> aborted_calls(2, 0);
  const TimedRun run = timed_run(world_options(2), [&](Communicator& comm) {
    if (comm.rank() == 0) throw UsageError("bad input on rank 0");
    for (int attempt = 0; attempt < 3; ++attempt) {
      try {
        comm.recv(0, attempt);
      } catch (const WorldAborted&) {
        ++aborted_calls[1];
      }
    }
  });
  REQUIRE(run.report.status == RunStatus::error);
  CHECK(run.report.exit_status() == kExitUsage);
  CHECK(aborted_calls[1] == 3);
  CHECK_THROWS_AS(run.report.throw_if_failed(), UsageError);
}

TEST_CASE("two ranks in different collectives are a collective mismatch naming both", "[sim][deadlock]") {
  const RunReport report = World(world_options(2)).run([](Communicator& comm) {
    if (comm.rank() == 0) {
      comm.barrier();
    } else {
      comm.all_gather(exact_payload(1, 2));
    }
  });
  REQUIRE(report.status == RunStatus::comm_fault);
  CHECK(report.fault->kind == "collective mismatch");
  CHECK_THAT(report.fault->detail, Catch::Contains("rank 0") && Catch::Contains("rank 1") &&
                                       Catch::Contains("barrier") && Catch::Contains("all_gather"));
}

TEST_CASE("all_gather with different sizes on two ranks is a size mismatch naming both", "[sim][deadlock]") {
  const RunReport report = World(world_options(3)).run([](Communicator& comm) {
    comm.all_gather(exact_payload(comm.rank(), comm.rank() == 2 ? 5 : 4));
  });
  REQUIRE(report.status == RunStatus::comm_fault);
  CHECK(report.fault->kind == "size mismatch");
  CHECK_THAT(report.fault->detail, Catch::Contains("rank 2 sent 5") || Catch::Contains("rank 2 expects 5"));
}

TEST_CASE("find_wait_cycle finds the first cycle, rotated to its smallest rank", "[sim][deadlock]") {
  CHECK(find_wait_cycle({{1}, {2}, {1}}) == std::vector<int>{1, 2, 1});
  CHECK(find_wait_cycle({{}, {}, {}}).empty());
  CHECK(find_wait_cycle({{1}, {2}, {}}).empty());
  CHECK(find_wait_cycle({{0}}) == std::vector<int>{0, 0});
  CHECK(find_wait_cycle({{3}, {0}, {1}, {2}}) == std::vector<int>{0, 3, 2, 1, 0});
}

TEST_CASE("a deadlock report lists identical unreceived messages once, with their count", "[runtime][deadlock]") {
  DeadlockReport report;
  RankWaitReport rank;
  rank.rank = 0;
  rank.state = RankState::finished;
  for (int i = 0; i < 6; ++i) rank.queued.push_back("from rank 7 tag 0 (256 floats)");
  rank.queued.push_back("from rank 7 tag 1 (256 floats)");
  rank.queued.push_back("from rank 7 tag 1 (256 floats)");
  report.ranks.push_back(rank);
  const std::string text = report.describe();
  INFO(text);
  CHECK(text.find("from rank 7 tag 0 (256 floats) x6; from rank 7 tag 1 (256 floats) x2") != std::string::npos);
  CHECK(text.find("tag 0 (256 floats); from rank 7 tag 0") == std::string::npos);
}
