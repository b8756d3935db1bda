// Sub-communicators: split (MPI_Comm_split semantics) into the Ulysses and ring groups of a
// hybrid schedule, group() from a list of world ranks, and isolation of their messages.
#include <catch2/catch.hpp>

#include "tests/ranks/runtime_test_support.hpp"

using namespace ringlab;
using namespace ringlab::testing;

TEST_CASE("split makes Ulysses groups of consecutive ranks and ring groups across them", "[sim][groups]") {
  const int P = GENERATE(1, 2, 3, 4, 8);
  const int U = P % 2 == 0 ? 2 : 1;  // Ulysses degree; ring degree P / U
  struct Seen {
    int ulysses_rank = -1, ulysses_size = -1, ring_rank = -1, ring_size = -1;
    std::vector<int> ulysses_members, ring_members;
    Buffer ulysses_gather, ring_gather;
    std::string ulysses_name;
  };
  std::vector<Seen> seen(static_cast<size_t>(P));
  const RunReport report = World(world_options(P)).run([&](Communicator& world) {
    Seen& mine = seen[static_cast<size_t>(world.rank())];
    Communicator ulysses = world.split(world.rank() / U, world.rank());
    Communicator ring = world.split(world.rank() % U, -world.rank());  // key reverses the order
    mine.ulysses_rank = ulysses.rank();
    mine.ulysses_size = ulysses.size();
    mine.ring_rank = ring.rank();
    mine.ring_size = ring.size();
    mine.ulysses_members = ulysses.members();
    mine.ring_members = ring.members();
    mine.ulysses_name = ulysses.name();
    mine.ulysses_gather = ulysses.all_gather(exact_payload(world.rank(), 2));
    mine.ring_gather = ring.all_gather(exact_payload(world.rank(), 2));
  });
  INFO(report.describe());
  REQUIRE(report.ok());
  for (int rank = 0; rank < P; ++rank) {
    const Seen& mine = seen[static_cast<size_t>(rank)];
    CHECK(mine.ulysses_size == U);
    CHECK(mine.ulysses_rank == rank % U);
    CHECK(mine.ring_size == P / U);
    std::vector<int> ulysses_members, ring_members;
    for (int member = rank / U * U; member < rank / U * U + U; ++member) ulysses_members.push_back(member);
    for (int member = P - U + rank % U; member >= 0; member -= U) ring_members.push_back(member);  // by key -rank
    CHECK(mine.ulysses_members == ulysses_members);
    CHECK(mine.ring_members == ring_members);
    CHECK(mine.ring_rank ==
          static_cast<int>(std::find(ring_members.begin(), ring_members.end(), rank) - ring_members.begin()));
    Buffer ulysses_expected, ring_expected;
    for (int member : ulysses_members) {
      const auto part = exact_payload(member, 2);
      ulysses_expected.insert(ulysses_expected.end(), part.begin(), part.end());
    }
    for (int member : ring_members) {
      const auto part = exact_payload(member, 2);
      ring_expected.insert(ring_expected.end(), part.begin(), part.end());
    }
    CHECK(same_bits(mine.ulysses_gather, ulysses_expected));
    CHECK(same_bits(mine.ring_gather, ring_expected));
    std::string name = "group {";
    for (size_t i = 0; i < ulysses_members.size(); ++i) name += (i ? "," : "") + std::to_string(ulysses_members[i]);
    CHECK(mine.ulysses_name == name + "}");  // U <= 2: no runs to shorten
  }
}

TEST_CASE("group() of listed world ranks: only they call it, ranks follow the list", "[sim][groups]") {
  const int P = GENERATE(2, 3, 4, 8);
  std::vector<int> evens;
  for (int rank = P - 1; rank >= 0; --rank) {
    if (rank % 2 == 0) evens.push_back(rank);  // listed in descending order
  }
  std::vector<Buffer> gathered(static_cast<size_t>(P));
  std::vector<int> group_rank(static_cast<size_t>(P), -1);
  const RunReport report = World(world_options(P)).run([&](Communicator& world) {
    if (world.rank() % 2 != 0) return;
    Communicator group = world.group(evens);
    group_rank[static_cast<size_t>(world.rank())] = group.rank();
    gathered[static_cast<size_t>(world.rank())] = group.all_gather(exact_payload(world.rank(), 1));
  });
  INFO(report.describe());
  REQUIRE(report.ok());
  Buffer expected;
  for (int member : evens) expected.push_back(exact_value(member, 0));
  for (size_t i = 0; i < evens.size(); ++i) {
    const auto rank = static_cast<size_t>(evens[i]);
    CHECK(group_rank[rank] == static_cast<int>(i));
    CHECK(same_bits(gathered[rank], expected));
  }
}

TEST_CASE("messages of different communicators never match each other", "[sim][groups]") {
  std::vector<float> got(4, -1);
  const RunReport report = World(world_options(4)).run([&](Communicator& world) {
    Communicator pair = world.split(world.rank() / 2, world.rank());  // {0,1} and {2,3}
    if (world.rank() == 0) {
      world.send(1, 5, std::vector<float>{1});  // world, tag 5
      pair.send(1, 5, std::vector<float>{2});   // pair, tag 5, to world rank 1 as well
    } else if (world.rank() == 1) {
      got[0] = pair.recv(0, 5).at(0);
      got[1] = world.recv(0, 5).at(0);
    } else if (world.rank() == 3) {
      got[2] = pair.sendrecv(0, 0, std::vector<float>{3}, 0, 0).at(0);  // pair rank 0 = world rank 2
    } else {
      got[3] = pair.sendrecv(1, 0, std::vector<float>{4}, 1, 0).at(0);
    }
  });
  INFO(report.describe());
  REQUIRE(report.ok());
  CHECK(got == std::vector<float>{2, 1, 4, 3});
}

TEST_CASE("group() arguments are checked", "[sim][groups]") {
  const std::vector<int> bad =
      GENERATE(std::vector<int>{}, std::vector<int>{0, 0}, std::vector<int>{0, 7}, std::vector<int>{1, 2});
  const RunReport report = World(world_options(3)).run([&](Communicator& world) {
    if (world.rank() == 0) world.group(bad);
  });
  REQUIRE(report.status == RunStatus::error);
  CHECK(report.exit_status() == kExitUsage);
  CHECK_THAT(report.error->message, Catch::StartsWith("rank 0: group"));
}

TEST_CASE("trace events of a sub-communicator name its group", "[sim][groups][trace]") {
  WorldOptions options = world_options(4);
  options.trace = true;
  const RunReport report = World(options).run([](Communicator& world) {
    Communicator pair = world.split(world.rank() / 2, world.rank());
    pair.barrier();
    world.barrier();
  });
  REQUIRE(report.ok());
  std::vector<std::string> barrier_groups;
  for (const TraceEvent& event : report.trace) {
    if (event.rank == 3 && event.name == "barrier") barrier_groups.push_back(event.group);
  }
  CHECK(barrier_groups == std::vector<std::string>{"group {2,3}", ""});
}
