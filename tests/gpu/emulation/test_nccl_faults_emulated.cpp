// gpu-nccl's error paths on the CPU, through the mock NCCL's faults (mock_nccl.cpp): a peer that
// never sends, an initialisation that never ends, an asynchronous error on the world or on the
// split communicator — each must end in exit status 3 with one line, every communicator aborted
// exactly once and never touched after (the mock counts), no crash, no hang. And the other side
// of the watchdog: a run slower than the timeout that keeps making progress is not aborted.
// `ringlab-gpu run` under an emulated mpirun (one thread per process, the MPI collectives
// emulated and checked to match) covers the multi-process bootstrap's error paths.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/ringlab-gpu/gpu_command.hpp"
#include "reference/error.hpp"
#include "tests/gpu/gpu_test_support.hpp"
#ifdef RINGLAB_WITH_NCCL
#include "executors/gpu/nccl_executor.hpp"
#endif

void ringlab_mock_set_device_count(int count);  // mock_cuda_runtime.cpp

#ifdef RINGLAB_WITH_NCCL
void ringlab_mock_nccl_set_fault(const std::string& fault);  // mock_nccl.cpp
void ringlab_mock_nccl_reset();
int ringlab_mock_nccl_aborts();
int ringlab_mock_nccl_live_comms();
std::vector<std::string> ringlab_mock_nccl_violations();

namespace ringlab {
namespace {

using gpu::Dtype;
using test::gpu_spec;

struct FaultRun {
  ExecutionResult result;
  double seconds = 0;
};

// One single-process gpu-nccl run of `spec` (fp32) with the mock's `fault` and a short timeout.
FaultRun run_with_fault(const PlanSpec& spec, const std::string& fault, double timeout) {
  ringlab_mock_nccl_reset();
  ringlab_mock_nccl_set_fault(fault);
  ringlab_mock_set_device_count(4);
  gpu::GpuRunOptions options;
  options.dtype = Dtype::fp32;
  options.timeout = timeout;
  gpu::NcclExecutor executor(options);
  PlanSpec sized = spec;
  sized.element_bytes = 4;
  const Plan plan = build_plan(sized);
  const AttentionInputs<float> inputs = make_inputs(spec.dims, 1, spec.backward).cast<float>();
  const auto begin = std::chrono::steady_clock::now();
  FaultRun run;
  run.result = executor.execute(plan, inputs, {});
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  return run;
}

// Exit 3, one line naming the rank and `what`; every communicator aborted or destroyed, none
// aborted twice or used after.
void expect_comm_fault(const FaultRun& run, const std::string& what) {
  REQUIRE(run.result.failure.has_value());
  const std::string& line = run.result.failure->description;
  INFO(line);
  CHECK(run.result.failure->exit_status == kExitCommFault);
  CHECK_THAT(line, Catch::StartsWith("communication fault: gpu-nccl rank "));
  CHECK_THAT(line, Catch::Contains(what));
  CHECK_THAT(line, Catch::EndsWith("communicators aborted"));
  CHECK(line.find('\n') == std::string::npos);
  CHECK(ringlab_mock_nccl_violations().empty());
  CHECK(ringlab_mock_nccl_aborts() >= 1);
  CHECK(ringlab_mock_nccl_live_comms() == 0);
  CHECK(run.seconds < 3.0);
}

}  // namespace

TEST_CASE("emulated gpu-nccl faults: a peer that never sends ends in no progress, exit 3", "[gpu][emulated][nccl]") {
  const FaultRun run = run_with_fault(gpu_spec("ring", "zigzag", 3, true, true), "silent:1", 0.3);
  expect_comm_fault(run, "no progress for 0.3 s while waiting for ");
  CHECK_THAT(run.result.failure->description, Catch::Contains("--timeout"));
}

TEST_CASE("emulated gpu-nccl faults: a communicator init that never ends is timed out", "[gpu][emulated][nccl]") {
  const FaultRun run = run_with_fault(gpu_spec("ring", "contiguous", 3, false, false), "init-hang", 0.2);
  expect_comm_fault(run, "no progress for 0.2 s while waiting for ncclCommInitRankConfig");
}

TEST_CASE("emulated gpu-nccl faults: an asynchronous error on the world communicator", "[gpu][emulated][nccl]") {
  const FaultRun run = run_with_fault(gpu_spec("ring", "zigzag", 3, true, true), "async-world", 5.0);
  expect_comm_fault(run, "remote process exited");
}

// Today's plans make a split only for a ring-family collective beside a Ulysses dimension, which
// no algorithm builds; the watch is then driven directly: two ranks join a world, split it, and
// wait for something else — the split's error, found by polling every live communicator, must end
// the wait.
TEST_CASE("emulated gpu-nccl faults: an asynchronous error on the split communicator", "[gpu][emulated][nccl]") {
  ringlab_mock_nccl_reset();
  ringlab_mock_nccl_set_fault("async-split");
  ncclUniqueId id;
  REQUIRE(ncclGetUniqueId(&id) == ncclSuccess);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        gpu::NcclWatch watch(r, 5.0);
        gpu::NcclComm& world = watch.init_world(2, id, r);
        watch.split(world, 0, r);
        watch.wait("a test wait", [] { return false; });
      } catch (const CommError& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& e : errors) {
    INFO(e);
    CHECK_THAT(e, Catch::Contains("asynchronous error while waiting for a test wait: remote process exited"));
    CHECK_THAT(e, Catch::EndsWith("communicators aborted"));
  }
  CHECK(ringlab_mock_nccl_violations().empty());
  CHECK(ringlab_mock_nccl_aborts() == 4);  // each rank's world and split, once each
  CHECK(ringlab_mock_nccl_live_comms() == 0);
}

TEST_CASE("emulated gpu-nccl faults: slow steady progress past the timeout is not aborted", "[gpu][emulated][nccl]") {
  // Every NCCL operation takes 400 ms: the run takes more than the 2 s timeout in all (about eight
  // operations follow one another), but never waits near 2 s without one completing (the margin
  // covers the emulated kernels between operations on a loaded machine and under the sanitizers).
  const FaultRun run = run_with_fault(gpu_spec("ring", "zigzag", 3, true, true), "slow:400", 2.0);
  INFO((run.result.failure ? run.result.failure->description : "completed"));
  CHECK_FALSE(run.result.failure.has_value());
  CHECK(run.seconds > 2.0);
  CHECK(ringlab_mock_nccl_violations().empty());
  CHECK(ringlab_mock_nccl_aborts() == 0);
  CHECK(ringlab_mock_nccl_live_comms() == 0);  // finalized and destroyed
}

// ---- ringlab-gpu under an emulated mpirun ---------------------------------------------------------

namespace {

// P "processes" as threads; each MultiProcess collective is an exchange of every rank's bytes,
// tagged with the collective's name: ranks that enter different collectives are recorded as a
// mismatch (under MPI, a hang).
class ThreadMpi {
 public:
  explicit ThreadMpi(int size) : size_(size), slots_(static_cast<size_t>(size)) {}

  gpu::MultiProcess process(int rank) {
    gpu::MultiProcess mp;
    mp.rank = rank, mp.size = size_, mp.local_rank = rank;
    mp.all_agree = [this, rank](bool ok) {
      const std::vector<std::string> all = exchange(rank, "all_agree", ok ? "1" : "0");
      return std::all_of(all.begin(), all.end(), [](const std::string& s) { return s == "1"; });
    };
    mp.broadcast = [this, rank](void* data, size_t bytes) {
      const std::string mine = rank == 0 ? std::string(static_cast<char*>(data), bytes) : std::string();
      const std::vector<std::string> all = exchange(rank, "broadcast", mine);
      all[0].copy(static_cast<char*>(data), bytes);
    };
    mp.gather = [this, rank](const std::string& mine) {
      std::vector<std::string> all = exchange(rank, "gather", mine);
      return rank == 0 ? all : std::vector<std::string>{};
    };
    return mp;
  }
  bool mismatched() const { return mismatched_; }

 private:
  std::vector<std::string> exchange(int rank, const std::string& tag, const std::string& mine) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !draining_; });
    slots_[static_cast<size_t>(rank)] = {tag, mine};
    if (++arrived_ == size_) draining_ = true, changed_.notify_all();
    changed_.wait(lock, [&] { return draining_; });
    std::vector<std::string> all;
    for (const auto& [t, bytes] : slots_) {
      mismatched_ = mismatched_ || t != tag;
      all.push_back(bytes);
    }
    if (--arrived_ == 0) draining_ = false, changed_.notify_all();
    return all;
  }

  int size_;
  std::vector<std::pair<std::string, std::string>> slots_;
  std::mutex mutex_;
  std::condition_variable changed_;
  int arrived_ = 0;
  bool draining_ = false;
  bool mismatched_ = false;
};

struct ProcessOutcome {
  int status = -1;
  std::string err;
};

// `ringlab-gpu run --executor nccl ...` on P threads as P processes, with the mock's `fault`.
std::vector<ProcessOutcome> run_processes(int P, const std::string& fault, std::vector<std::string> args,
                                          bool* mismatched) {
  ringlab_mock_nccl_reset();
  ringlab_mock_nccl_set_fault(fault);
  ringlab_mock_set_device_count(1);  // one GPU per process
  args.insert(args.begin(), {"ringlab-gpu", "run", "--executor", "nccl", "--dtype", "fp32", "--ranks",
                             std::to_string(P), "--seq", "96", "--heads", "4", "--kv-heads", "2", "--dim", "64"});
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  ThreadMpi mpi(P);
  std::vector<ProcessOutcome> outcomes(static_cast<size_t>(P));
  std::vector<std::thread> threads;
  for (int r = 0; r < P; ++r) {
    threads.emplace_back([&, r] {
      const gpu::MultiProcess mp = mpi.process(r);
      std::ostringstream out, err;
      outcomes[static_cast<size_t>(r)].status =
          gpu::gpu_main(static_cast<int>(argv.size()), argv.data(), out, err, &mp);
      outcomes[static_cast<size_t>(r)].err = err.str();
    });
  }
  for (std::thread& t : threads) t.join();
  *mismatched = mpi.mismatched();
  return outcomes;
}

void expect_one_line_exit_3(const std::vector<ProcessOutcome>& outcomes, const std::string& what) {
  for (size_t r = 0; r < outcomes.size(); ++r) {
    INFO("rank " << r << ": " << outcomes[r].err);
    CHECK(outcomes[r].status == kExitCommFault);
    CHECK(std::count(outcomes[r].err.begin(), outcomes[r].err.end(), '\n') == 1);
    CHECK_THAT(outcomes[r].err, Catch::StartsWith("ringlab-gpu (rank " + std::to_string(r) + "): "));
  }
  INFO(outcomes[0].err);
  CHECK_THAT(outcomes[0].err, Catch::Contains(what));
  CHECK(ringlab_mock_nccl_violations().empty());
  CHECK(ringlab_mock_nccl_live_comms() == 0);
}

}  // namespace

TEST_CASE("emulated mpirun: ringlab-gpu run --executor nccl verifies across processes", "[gpu][emulated][nccl][mpi]") {
  bool mismatched = true;
  const std::vector<ProcessOutcome> outcomes = run_processes(3, "", {"--causal", "--backward"}, &mismatched);
  CHECK_FALSE(mismatched);
  for (const ProcessOutcome& o : outcomes) {
    INFO(o.err);
    CHECK(o.status == 0);
  }
}

TEST_CASE("emulated mpirun: a peer that never sends: every process exits 3 with one line",
          "[gpu][emulated][nccl][mpi]") {
  bool mismatched = true;
  const std::vector<ProcessOutcome> outcomes =
      run_processes(3, "silent:2", {"--backward", "--timeout", "0.3"}, &mismatched);
  CHECK_FALSE(mismatched);
  expect_one_line_exit_3(outcomes, "communication fault: ");
}

TEST_CASE("emulated mpirun: rank 0 failing before the id's broadcast stops every rank in step",
          "[gpu][emulated][nccl][mpi]") {
  bool mismatched = true;
  const std::vector<ProcessOutcome> outcomes = run_processes(3, "unique-id", {"--timeout", "0.3"}, &mismatched);
  CHECK_FALSE(mismatched);  // the old order: rank 0 in the gather, the others in the broadcast
  expect_one_line_exit_3(outcomes, "ncclGetUniqueId");
  CHECK_THAT(outcomes[1].err, Catch::Contains("another rank failed before NCCL started"));
}

}  // namespace ringlab
#endif
