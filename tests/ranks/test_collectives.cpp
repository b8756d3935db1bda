// Every collective against its definition, P in {1, 2, 3, 4, 8}, exactly representable payloads,
// compared bit for bit.
#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

#include "tests/ranks/runtime_test_support.hpp"

using namespace ringlab;
using namespace ringlab::testing;

namespace {

// Every rank's result of `collective` (called with its communicator) on a world of P ranks; the run
// must end cleanly.
template <typename Collective>
std::vector<Buffer> outputs_of(int P, SendMode mode, Collective collective) {
  std::vector<Buffer> outputs(static_cast<size_t>(P));
  const RunReport report = World(world_options(P, mode)).run([&](Communicator& comm) {
    outputs[static_cast<size_t>(comm.rank())] = collective(comm);
  });
  INFO("P=" << P << " " << send_mode_name(mode) << "\n" << report.describe());
  REQUIRE(report.ok());
  return outputs;
}

// What a rank-ordered sum of every rank's exact_payload elements [first, first + n) must be: rank 0's,
// then + rank 1's, ... in that order.
std::vector<float> rank_ordered_sum(int P, size_t first, size_t n) {
  std::vector<float> sum(n, 0.0f);
  for (int source = 0; source < P; ++source)
    for (size_t k = 0; k < n; ++k) sum[k] += exact_value(source, first + k);
  return sum;
}

}  // namespace

TEST_CASE("all_gather concatenates every rank's input in rank order", "[sim][collectives]") {
  const int P = GENERATE(1, 2, 3, 4, 8);
  const SendMode mode = GENERATE(SendMode::eager, SendMode::rendezvous);
  const size_t n = 5;
  const std::vector<Buffer> outputs =
      outputs_of(P, mode, [&](Communicator& comm) { return comm.all_gather(exact_payload(comm.rank(), n)); });
  std::vector<float> expected;
  for (int rank = 0; rank < P; ++rank) {
    const std::vector<float> part = exact_payload(rank, n);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  for (int rank = 0; rank < P; ++rank) CHECK(same_bits(outputs[static_cast<size_t>(rank)], expected));
}

TEST_CASE("all_to_all sends chunk j to rank j and lays chunks out by source rank", "[sim][collectives]") {
  const int P = GENERATE(1, 2, 3, 4, 8);
  const size_t c = 3;  // floats per chunk
  // input: (P, c); element (j, k) = exact_value(rank, j c + k)
  const std::vector<Buffer> outputs = outputs_of(P, SendMode::eager, [&](Communicator& comm) {
    return comm.all_to_all(exact_payload(comm.rank(), c * static_cast<size_t>(P)));
  });
  for (int me = 0; me < P; ++me) {
    std::vector<float> expected;  // chunk i = rank i's chunk `me`
    for (int source = 0; source < P; ++source) {
      for (size_t k = 0; k < c; ++k) expected.push_back(exact_value(source, static_cast<size_t>(me) * c + k));
    }
    CHECK(same_bits(outputs[static_cast<size_t>(me)], expected));
  }
}

TEST_CASE("reduce_scatter gives rank r the rank-ordered sum of everyone's chunk r", "[sim][collectives]") {
  const int P = GENERATE(1, 2, 3, 4, 8);
  const size_t c = 4;
  const std::vector<Buffer> outputs = outputs_of(P, SendMode::eager, [&](Communicator& comm) {
    return comm.reduce_scatter(exact_payload(comm.rank(), c * static_cast<size_t>(P)));
  });
  for (int me = 0; me < P; ++me)
    CHECK(same_bits(outputs[static_cast<size_t>(me)], rank_ordered_sum(P, static_cast<size_t>(me) * c, c)));
}

TEST_CASE("all_reduce gives every rank the rank-ordered sum", "[sim][collectives]") {
  const int P = GENERATE(1, 2, 3, 4, 8);
  const size_t n = 6;
  const std::vector<Buffer> outputs = outputs_of(
      P, SendMode::eager, [&](Communicator& comm) { return comm.all_reduce(exact_payload(comm.rank(), n)); });
  const std::vector<float> expected = rank_ordered_sum(P, 0, n);
  for (int rank = 0; rank < P; ++rank) CHECK(same_bits(outputs[static_cast<size_t>(rank)], expected));
}

TEST_CASE("barrier releases no rank before every rank has entered it", "[sim][collectives]") {
  const int P = GENERATE(1, 2, 3, 4, 8);
  std::atomic<int> entered{0};
  std::vector<int> seen_after(static_cast<size_t>(P), -1);
  const RunReport report = World(world_options(P)).run([&](Communicator& comm) {
    if (comm.rank() == P - 1) std::this_thread::sleep_for(std::chrono::milliseconds(30));  // the last one is late
    entered.fetch_add(1);
    comm.barrier();
    seen_after[static_cast<size_t>(comm.rank())] = entered.load();
    comm.barrier();  // a second barrier on the same communicator reuses nothing of the first
  });
  INFO(report.describe());
  REQUIRE(report.ok());
  for (int rank = 0; rank < P; ++rank) CHECK(seen_after[static_cast<size_t>(rank)] == P);
  for (const RankCounters& counters : report.counters) CHECK(counters.collectives == 2);
}

TEST_CASE("reduce_scatter adds in rank order whatever the arrival order: bitwise stable",
          "[sim][collectives][determinism]") {
  // Values whose float sum depends on the order of additions: only a fixed order is reproducible.
  const int P = GENERATE(3, 4, 8);
  const size_t c = 64;
  auto input_of = [&](int rank) {
    std::vector<float> values(c * static_cast<size_t>(P));
    for (size_t i = 0; i < values.size(); ++i)
      values[i] =
          1.0f / static_cast<float>(3 + rank * 7 + static_cast<int>(i % 11)) + 1e4f * static_cast<float>(rank % 2);
    return values;
  };
  std::vector<float> expected_rank0(c, 0.0f);  // sum for rank 0's chunk, in rank order
  for (int source = 0; source < P; ++source) {
    const std::vector<float> input = input_of(source);
    for (size_t k = 0; k < c; ++k) expected_rank0[k] = source == 0 ? input[k] : expected_rank0[k] + input[k];
  }
  for (int run = 0; run < 5; ++run) {
    std::vector<Buffer> outputs(static_cast<size_t>(P));
    const RunReport report = World(world_options(P)).run([&](Communicator& comm) {
      // Stagger the ranks differently on each run so that arrival orders differ.
      std::this_thread::sleep_for(std::chrono::microseconds(((comm.rank() * 7 + run * 3) % P) * 300));
      outputs[static_cast<size_t>(comm.rank())] = comm.reduce_scatter(input_of(comm.rank()));
    });
    REQUIRE(report.ok());
    CHECK(same_bits(outputs[0], expected_rank0));
  }
}

TEST_CASE("collectives with the wrong sizes are argument errors naming the rank", "[sim][collectives]") {
  const RunReport report = World(world_options(3)).run([&](Communicator& comm) {
    comm.all_to_all(exact_payload(comm.rank(), 4));  // 4 floats do not split into 3 chunks
  });
  REQUIRE(report.status == RunStatus::error);
  CHECK(report.exit_status() == kExitUsage);
  CHECK_THAT(report.error->message, Catch::Contains("does not split into 3 equal chunks"));
  CHECK_THROWS_AS(report.throw_if_failed(), UsageError);
}
