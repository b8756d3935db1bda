// Point-to-point: blocking, non-blocking and combined operations in both send modes, per
// (source, tag) FIFO matching, size checks, and determinism of a ring that rounds.
#include <catch2/catch.hpp>
#include <thread>

#include "tests/ranks/runtime_test_support.hpp"

using namespace ringlab;
using namespace ringlab::testing;

namespace {

int right_of(const Communicator& comm) { return (comm.rank() + 1) % comm.size(); }
int left_of(const Communicator& comm) { return (comm.rank() + comm.size() - 1) % comm.size(); }

}  // namespace

TEST_CASE("a sendrecv ring passes every block around in both send modes", "[sim][p2p]") {
  const int P = GENERATE(1, 2, 3, 4, 8);
  const SendMode mode = GENERATE(SendMode::eager, SendMode::rendezvous);
  const size_t n = 7;
  // seen[rank][step]: the block the rank holds at that step, which came from rank - step.
  std::vector<std::vector<Buffer>> seen(static_cast<size_t>(P));
  const RunReport report = World(world_options(P, mode)).run([&](Communicator& comm) {
    Buffer block = exact_payload(comm.rank(), n);
    for (int step = 0; step < comm.size(); ++step) {
      comm.set_step(step);
      seen[static_cast<size_t>(comm.rank())].push_back(block);
      if (step + 1 < comm.size()) block = comm.sendrecv(right_of(comm), step, block, left_of(comm), step);
    }
  });
  INFO("P=" << P << " " << send_mode_name(mode) << "\n" << report.describe());
  REQUIRE(report.ok());
  for (int rank = 0; rank < P; ++rank) {
    for (int step = 0; step < P; ++step) {
      const int origin = ((rank - step) % P + P) % P;
      CHECK(same_bits(seen[static_cast<size_t>(rank)][static_cast<size_t>(step)], exact_payload(origin, n)));
    }
  }
  for (const RankCounters& counters : report.counters) {
    CHECK(counters.messages_sent == P - 1);
    CHECK(counters.messages_received == P - 1);
    CHECK(counters.bytes_sent == static_cast<int64_t>((P - 1) * n * sizeof(float)));
    CHECK(counters.bytes_received == counters.bytes_sent);
  }
}

TEST_CASE("isend and irecv complete through wait in both send modes", "[sim][p2p]") {
  const int P = GENERATE(1, 2, 3, 4, 8);
  const SendMode mode = GENERATE(SendMode::eager, SendMode::rendezvous);
  std::vector<Buffer> received(static_cast<size_t>(P));
  std::vector<Buffer> received_into(static_cast<size_t>(P), Buffer(3));
  const RunReport report = World(world_options(P, mode)).run([&](Communicator& comm) {
    const size_t me = static_cast<size_t>(comm.rank());
    Request first = comm.irecv(left_of(comm), 1);
    Request second = comm.irecv(left_of(comm), 2);
    Request out1 = comm.isend(right_of(comm), 1, exact_payload(comm.rank(), 4));
    Request out2 = comm.isend(right_of(comm), 2, exact_payload(comm.rank() + 100, 3));
    received_into[me].assign(3, 0.0f);
    second.wait_into(received_into[me]);  // waiting out of order is fine
    received[me] = first.wait();
    out1.wait();
    out2.wait();
  });
  INFO(report.describe());
  REQUIRE(report.ok());
  for (int rank = 0; rank < P; ++rank) {
    const int left = (rank + P - 1) % P;
    CHECK(same_bits(received[static_cast<size_t>(rank)], exact_payload(left, 4)));
    CHECK(same_bits(received_into[static_cast<size_t>(rank)], exact_payload(left + 100, 3)));
  }
}

TEST_CASE("eager sends complete before the receive is posted", "[sim][p2p]") {
  const int P = GENERATE(2, 3, 4, 8);
  std::vector<Buffer> received(static_cast<size_t>(P));
  const RunReport report = World(world_options(P, SendMode::eager)).run([&](Communicator& comm) {
    comm.send(right_of(comm), 0, exact_payload(comm.rank(), 2));  // every rank sends first
    received[static_cast<size_t>(comm.rank())] = comm.recv(left_of(comm), 0);
  });
  INFO(report.describe());
  REQUIRE(report.ok());
  for (int rank = 0; rank < P; ++rank) {
    CHECK(same_bits(received[static_cast<size_t>(rank)], exact_payload((rank + P - 1) % P, 2)));
  }
}

TEST_CASE("messages match per (source, tag) in FIFO order, and an irecv posted first gets the first", "[sim][p2p]") {
  std::vector<float> got;
  const RunReport report = World(world_options(2)).run([&](Communicator& comm) {
    if (comm.rank() == 0) {
      comm.send(1, 1, std::vector<float>{10});
      comm.send(1, 2, std::vector<float>{20});
      comm.send(1, 1, std::vector<float>{11});
      comm.send(1, 1, std::vector<float>{12});
      return;
    }
    Request early = comm.irecv(0, 1);  // posted first: must get 10
    const Buffer b = comm.recv(0, 2);  // 20, though it was sent after 10
    const Buffer c = comm.recv(0, 1);  // 11
    Request late = comm.irecv(0, 1);   // 12
    while (!late.test()) std::this_thread::yield();
    const Buffer d = late.wait();
    const Buffer a = early.wait();
    got = {a.at(0), b.at(0), c.at(0), d.at(0)};
  });
  INFO(report.describe());
  REQUIRE(report.ok());
  CHECK(got == std::vector<float>{10, 20, 11, 12});
}

TEST_CASE("recv_into with the wrong size is a fault naming both ranks and both sizes", "[sim][p2p]") {
  const RunReport report = World(world_options(2)).run([&](Communicator& comm) {
    if (comm.rank() == 0) {
      comm.send(1, 3, exact_payload(0, 16));
    } else {
      Buffer out(8);
      comm.recv_into(0, 3, out);
    }
  });
  REQUIRE(report.status == RunStatus::comm_fault);
  CHECK(report.fault->kind == "size mismatch");
  CHECK(report.fault->detected_by == 1);
  CHECK(report.fault->peer == 0);
  CHECK(report.fault->tag == 3);
  CHECK_THAT(report.fault->detail, Catch::Contains("rank 1 recv_into expects 8 floats but rank 0 sent 16"));
  CHECK(report.exit_status() == kExitCommFault);
  CHECK_THROWS_AS(report.throw_if_failed(), CommError);
}

TEST_CASE("bad peers and tags are usage errors naming the rank", "[sim][p2p]") {
  const int bad_peer = GENERATE(-1, 2, 5);
  const RunReport report = World(world_options(2)).run([&](Communicator& comm) {
    if (comm.rank() == 1) comm.send(bad_peer, 0, exact_payload(1, 1));
  });
  REQUIRE(report.status == RunStatus::error);
  CHECK(report.error->rank == 1);
  CHECK_THAT(report.error->message,
             Catch::Contains("peer " + std::to_string(bad_peer)) && Catch::Contains("peers are 0..1"));
  CHECK(report.exit_status() == kExitUsage);

  const RunReport negative_tag = World(world_options(2)).run([&](Communicator& comm) {
    if (comm.rank() == 0) comm.recv(1, -3);
  });
  REQUIRE(negative_tag.status == RunStatus::error);
  CHECK_THAT(negative_tag.error->message, Catch::Contains("tag -3"));
}

TEST_CASE("a ring whose sums round gives bitwise identical results run after run", "[sim][p2p][determinism]") {
  const int P = GENERATE(3, 4, 8);
  const SendMode mode = GENERATE(SendMode::eager, SendMode::rendezvous);
  const size_t n = 256;
  auto ring_sum = [&](int run) {
    std::vector<Buffer> sums(static_cast<size_t>(P));
    const RunReport report = World(world_options(P, mode)).run([&](Communicator& comm) {
      Buffer block(n), sum(n, 0.0f);
      for (size_t i = 0; i < n; ++i) block[i] = 0.1f * static_cast<float>(comm.rank() + 1) / static_cast<float>(i + 3);
      for (int step = 0; step < comm.size(); ++step) {
        for (size_t i = 0; i < n; ++i) sum[i] = sum[i] * 1.0001f + block[i];
        if ((comm.rank() + run) % 3 == 0) std::this_thread::yield();  // vary the interleaving
        if (step + 1 < comm.size()) {
          Request incoming = comm.irecv(left_of(comm), step);
          comm.send(right_of(comm), step, block);
          block = incoming.wait();
        }
      }
      sums[static_cast<size_t>(comm.rank())] = sum;
    });
    INFO(report.describe());
    REQUIRE(report.ok());
    return sums;
  };
  const std::vector<Buffer> first = ring_sum(0);
  for (int run = 1; run < 4; ++run) {
    const std::vector<Buffer> again = ring_sum(run);
    for (int rank = 0; rank < P; ++rank)
      CHECK(same_bits(again[static_cast<size_t>(rank)], first[static_cast<size_t>(rank)]));
  }
}

TEST_CASE("large payloads move through the queues intact and buffers can be recycled", "[sim][p2p]") {
  const size_t n = size_t{1} << 20;  // 4 MiB
  bool intact = true;
  const RunReport report = World(world_options(2)).run([&](Communicator& comm) {
    const Buffer data = exact_payload(comm.rank(), n);
    for (int round = 0; round < 4; ++round) {
      if (comm.rank() == 0) {
        comm.send(1, round, data);
      } else {
        Buffer got = comm.recv(0, round);
        intact = intact && same_bits(got, exact_payload(0, n));
        comm.recycle(std::move(got));
      }
    }
  });
  REQUIRE(report.ok());
  CHECK(intact);
  CHECK(report.counters[1].bytes_received == static_cast<int64_t>(4 * n * sizeof(float)));
}

TEST_CASE("64 ranks: a ring step, an all_to_all and a barrier", "[sim][p2p]") {
  const int P = 64;
  std::vector<Buffer> from_left(P), exchanged(P);
  const RunReport report = World(world_options(P)).run([&](Communicator& comm) {
    const auto me = static_cast<size_t>(comm.rank());
    from_left[me] = comm.sendrecv(right_of(comm), 0, exact_payload(comm.rank(), 2), left_of(comm), 0);
    exchanged[me] = comm.all_to_all(exact_payload(comm.rank(), static_cast<size_t>(P)));
    comm.barrier();
  });
  INFO(report.describe());
  REQUIRE(report.ok());
  for (int rank = 0; rank < P; ++rank) {
    CHECK(same_bits(from_left[static_cast<size_t>(rank)], exact_payload((rank + P - 1) % P, 2)));
    Buffer expected;
    for (int source = 0; source < P; ++source) expected.push_back(exact_value(source, static_cast<size_t>(rank)));
    CHECK(same_bits(exchanged[static_cast<size_t>(rank)], expected));
  }
}

TEST_CASE("a moved-from request is empty; the moved-to one completes", "[sim][p2p]") {
  bool moved_from_done = false, moved_from_empty = false;
  Buffer received;
  const RunReport report = World(world_options(2)).run([&](Communicator& comm) {
    if (comm.rank() == 0) {
      comm.send(1, 0, exact_payload(0, 3));
      return;
    }
    Request original = comm.irecv(0, 0);
    Request moved = std::move(original);
    moved_from_done = original.done();  // NOLINT(bugprone-use-after-move): the point of the test
    moved_from_empty = original.wait().empty();
    received = moved.wait();
  });
  INFO(report.describe());
  REQUIRE(report.ok());
  CHECK(moved_from_done);
  CHECK(moved_from_empty);
  CHECK(same_bits(received, exact_payload(0, 3)));
}
