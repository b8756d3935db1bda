// Randomized schedules: many random plans (algorithm, layout, block, P up to 16, S, heads,
// causal, skip, pass) are checked by the plan checker and run on the simulator, and every one
// verifies; random broken student-style ring loops (a missing send, a wrong peer, a wrong tag)
// each end in a deadlock or mismatch report — none hangs. The counts are printed.
#include <catch2/catch.hpp>
#include <chrono>
#include <iostream>
#include <random>

#include "executors/sim/sim_executor.hpp"
#include "reference/inputs.hpp"
#include "sim/plan/check.hpp"
#include "sim/ranks/world.hpp"

using namespace ringlab;

namespace {

// A random valid spec: P and U first, then sizes that divide as the layout and Ulysses need.
PlanSpec random_spec(std::mt19937_64& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  PlanSpec spec;
  spec.algo = static_cast<Algorithm>(pick(0, 3));
  spec.layout = static_cast<LayoutKind>(pick(0, 2));
  spec.ranks = pick(1, 16);
  std::vector<int64_t> divisors;
  for (int64_t u = 1; u <= spec.ranks; ++u)
    if (spec.ranks % u == 0) divisors.push_back(u);
  spec.ulysses = spec.algo == Algorithm::hybrid ? divisors[pick(0, static_cast<int64_t>(divisors.size()) - 1)] : 1;
  const int64_t U = spec.algo == Algorithm::ulysses ? spec.ranks : spec.ulysses;
  spec.block = pick(0, 1) ? 0 : pick(1, 3);
  const int64_t round = 2 * spec.ranks * (spec.block ? spec.block : 1);
  spec.dims.seq = round * pick(1, 48 / spec.ranks + 1);
  if (spec.block == 0 && spec.layout == LayoutKind::zigzag && spec.dims.seq % (2 * spec.ranks) != 0) spec.dims.seq *= 2;
  spec.dims.kv_heads = U * pick(1, 2);
  spec.dims.heads = spec.dims.kv_heads * pick(1, 2);
  spec.dims.batch = pick(1, 2);
  spec.dims.dim = 8 * pick(1, 2);
  spec.causal = pick(0, 1);
  spec.skip = pick(0, 3) > 0;
  spec.backward = pick(0, 1);
  return spec;
}

}  // namespace

TEST_CASE("random plans pass the checker and verify on the simulator", "[sim][random]") {
  std::mt19937_64 rng(20261122);
  int executed = 0, per_algorithm[4] = {0, 0, 0, 0};
  for (int trial = 0; trial < 150; ++trial) {
    const PlanSpec spec = random_spec(rng);
    const Plan plan = build_plan(spec);
    INFO("trial " << trial << ": " << plan.spec().describe());
    const PlanCheck check = check_plan(plan);
    INFO((check.findings.empty() ? std::string() : check.findings.front().describe()));
    REQUIRE(check.ok());
    const AttentionInputs<float> x = make_inputs(spec.dims, static_cast<uint64_t>(trial), spec.backward);
    SimExecutor one_thread({}, 1);
    const ExecutionResult sim = one_thread.execute(plan, x, {});
    REQUIRE(sim.ok());
    const Verification verification = verify(
        sim.outputs,
        compute_reference(x.cast<double>(), spec.causal ? MaskKind::causal : MaskKind::none, spec.backward), "sim");
    CHECK(verification.ok());
    ++executed;
    ++per_algorithm[static_cast<int>(spec.algo)];
  }
  std::cout << "random schedules: " << executed << " plans checked and verified (ring " << per_algorithm[0]
            << ", allgather " << per_algorithm[1] << ", ulysses " << per_algorithm[2] << ", hybrid " << per_algorithm[3]
            << ")\n";
  CHECK(executed == 150);
}

TEST_CASE("random broken student loops end in a report, never a hang", "[sim][random]") {
  std::mt19937_64 rng(7);
  enum Mistake { missing_send, wrong_peer, wrong_tag };
  const char* names[] = {"missing send", "wrong peer", "wrong tag"};
  int reported[3] = {0, 0, 0};
  double slowest = 0;
  for (int trial = 0; trial < 60; ++trial) {
    const int P = std::uniform_int_distribution<int>(2, 8)(rng);
    const Mistake mistake = static_cast<Mistake>(trial % 3);
    const int culprit = std::uniform_int_distribution<int>(0, P - 1)(rng);
    const int bad_step = std::uniform_int_distribution<int>(0, P - 2)(rng);
    WorldOptions options;
    options.ranks = P;
    options.timeout_seconds = 5;
    options.send_mode = trial % 2 ? SendMode::rendezvous : SendMode::eager;
    const auto start = std::chrono::steady_clock::now();
    // A ring loop as a student writes it: send my block right, receive from the left, P-1 times.
    const RunReport report = World(options).run([&](Communicator& comm) {
      Buffer block(64, static_cast<float>(comm.rank()));
      for (int step = 0; step < P - 1; ++step) {
        comm.set_step(step);
        const int right = (comm.rank() + 1) % P, left = (comm.rank() + P - 1) % P;
        const bool mine = comm.rank() == culprit && step == bad_step;
        Request sent;
        if (!(mine && mistake == missing_send)) {
          const int to = mine && mistake == wrong_peer ? (right + 1) % P : right;
          sent = comm.isend(to, mine && mistake == wrong_tag ? step + 100 : step, block);
        }
        block = comm.recv(left, step);
        sent.wait();
      }
    });
    slowest = std::max(slowest, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    INFO("trial " << trial << ": " << names[mistake] << " by rank " << culprit << " at step " << bad_step << ", P=" << P
                  << "\n"
                  << report.describe());
    // Every mistake must be reported (a wrong peer at P = 2 is the rank itself).
    REQUIRE_FALSE(report.ok());
    CHECK((report.status == RunStatus::deadlock || report.status == RunStatus::comm_fault));
    // Event-driven detection, never the timeout: the report says which found it.
    if (report.status == RunStatus::deadlock) CHECK_FALSE(report.deadlock->timed_out);
    ++reported[mistake];
  }
  std::cout << "broken loops: " << reported[0] << " missing sends, " << reported[1] << " wrong peers, " << reported[2]
            << " wrong tags reported; slowest report after " << slowest << " s\n";
}
