// gpu-streams replayed as one CUDA graph (GpuRunOptions::graph, `ringlab-gpu run --graph`), with the
// CUDA runtime mocked and the kernels emulated. The mock keeps the captured work and runs it at
// each graph launch, and enforces the capture's rules (mock_cuda_runtime.cpp): so a graph run
// that verifies, launch after launch, holds all of the walk's work and starts from a clean state
// each time, and a stream the capture missed, a stream not joined back or a blocking call inside
// the capture fails here as it would (or worse, silently would not) on a device.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gpu/device.hpp"
#include "reference/error.hpp"
#include "tests/gpu/emulation/emulated_counts.hpp"
#include "tests/gpu/gpu_test_support.hpp"

int64_t ringlab_mock_event_records(bool timing);  // mock_cuda_runtime.cpp

namespace ringlab {
namespace {

using gpu::Dtype;

double max_difference(const Tensor<float>& a, const Tensor<float>& b) {
  REQUIRE(a.size() == b.size());
  double most = 0;
  for (int64_t i = 0; i < a.size(); ++i) most = std::max(most, std::abs(double(a[i]) - double(b[i])));
  return most;
}

void expect_same_outputs(const ExecutionResult& a, const ExecutionResult& b) {
  REQUIRE(a.outputs.out.size() == b.outputs.out.size());
  CHECK(a.outputs.out == b.outputs.out);
  CHECK(a.outputs.lse == b.outputs.lse);
  // The gradients' fp32 atomics may add in another order: equal to rounding (a gradient left over
  // from the launch before would double them).
  CHECK(max_difference(a.outputs.dq, b.outputs.dq) < 1e-6);
  CHECK(max_difference(a.outputs.dk, b.outputs.dk) < 1e-6);
  CHECK(max_difference(a.outputs.dv, b.outputs.dv) < 1e-6);
}

struct Case {
  const char* algo;
  const char* layout;
  int64_t P;
  Dtype dtype;
  bool backward;
};

}  // namespace

// The ring, Ulysses and all-gather at P = 3 and 4, forward+backward in fp32, and the tensor-core forward's
// fused init and finalize (bf16; its backward is slow to emulate and adds nothing a graph could
// break that fp32's does not): the graph's launches give the plain run's outputs and counts, again
// and again (each launch resets what the walk resets); after the capture, a run is one graph
// launch and its two timing events, with no other event recorded and every kernel of the walk
// launched by the device's replay (a plain run's count).
TEST_CASE("emulated gpu-streams as one CUDA graph: captured once, each launch the plain run's outputs",
          "[gpu][emulated][streams][graph]") {
  for (const Case& c :
       {Case{"ring", "zigzag", 3, Dtype::fp32, true}, Case{"ring", "contiguous", 4, Dtype::bf16, false},
        Case{"ulysses", "zigzag", 4, Dtype::fp32, true}, Case{"allgather", "zigzag", 3, Dtype::fp32, true}}) {
    const PlanSpec spec = test::gpu_spec(c.algo, c.layout, c.P, true, c.backward);
    const Plan plan = build_plan(spec);
    INFO(plan.spec().describe() << " [" << gpu::dtype_name(c.dtype) << "]");
    const AttentionInputs<float> inputs = make_inputs(spec.dims, 1, c.backward);
    gpu::GpuRunOptions options;
    options.dtype = c.dtype;

    gpu::StreamsRun plain_run(plan, inputs, options);
    int64_t launches = gpu::emulated_kernel_launches;
    const ExecutionResult plain = plain_run.run(true);
    const int64_t walk_launches = gpu::emulated_kernel_launches - launches;
    REQUIRE(walk_launches > 0);
    CHECK(plain_run.host_enqueue_ms() > 0);

    options.graph = true;
    gpu::StreamsRun graph_run(plan, inputs, options);
    (void)ringlab_mock_graph_launches();
    launches = gpu::emulated_kernel_launches;
    const ExecutionResult first = graph_run.run(true);  // a plain untimed walk, the capture, a launch
    CHECK(gpu::emulated_kernel_launches - launches == 2 * walk_launches);
    CHECK(ringlab_mock_graph_launches() == 1);
    CHECK(first.trace.empty());
    CHECK(first.time.seconds > 0);
    expect_same_outputs(first, plain);

    (void)ringlab_mock_event_records(true), (void)ringlab_mock_event_records(false);
    launches = gpu::emulated_kernel_launches;
    const ExecutionResult again = graph_run.run(true);
    CHECK(gpu::emulated_kernel_launches - launches == walk_launches);
    CHECK(ringlab_mock_graph_launches() == 1);
    CHECK(ringlab_mock_event_records(true) == 2);   // the launch's start and end
    CHECK(ringlab_mock_event_records(false) == 0);  // the host records nothing per op
    CHECK(graph_run.host_enqueue_ms() > 0);         // the launch (which the mock runs there and then)
    expect_same_outputs(again, plain);
    REQUIRE(again.ranks.size() == plain.ranks.size());
    for (size_t r = 0; r < plain.ranks.size(); ++r) {
      INFO("rank " << r);
      const RankCounters &g = again.ranks[r].counters, &p = plain.ranks[r].counters;
      CHECK(p.flops > 0);
      CHECK(g.flops == p.flops);
      CHECK(g.bytes_sent == p.bytes_sent);
      CHECK(g.messages_sent == p.messages_sent);
      CHECK(g.collectives == p.collectives);
      CHECK(g.compute_seconds == 0);  // no op is timed inside a graph
    }
    // Back to plain runs on the same buffers: the graph leaves nothing behind.
    graph_run.set_graph(false);
    expect_same_outputs(graph_run.run(true), plain);
  }
}

TEST_CASE("emulated gpu-streams as one CUDA graph: no trace, and the label says what was timed",
          "[gpu][emulated][streams][graph]") {
  const PlanSpec spec = test::gpu_spec("ring", "zigzag", 2, true, false);
  const Plan plan = build_plan(spec);
  gpu::GpuRunOptions options;
  options.dtype = Dtype::fp32;
  options.graph = true;
  gpu::StreamsRun run(plan, make_inputs(spec.dims, 1, false), options);
  CHECK_THROWS_AS(run.run(true, true), UsageError);
  const ExecutionResult result = run.run(true);
  CHECK_THAT(result.executor, Catch::Contains("one CUDA graph, captured after an untimed plain run, timed after 1 "
                                              "warm-up launch"));
  options.warmup = 0;
  CHECK_THAT(gpu::streams_label(plan, options), Catch::Contains("its first launch timed"));
}

// The capture's rules as the mock keeps them, each with the mistake that breaks it: the positive
// case and its negative controls use the same streams and buffers.
TEST_CASE("emulated CUDA graph capture: a stream outside it, a stream not joined back, a blocking call",
          "[gpu][emulated][graph]") {
  gpu::Stream origin, side, outside;
  gpu::DeviceBuffer a(64), b(64);
  std::vector<unsigned char> host(64, 7);
  a.upload(host.data(), host.size());
  auto copy_on = [&](cudaStream_t stream) {
    RINGLAB_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), 64, cudaMemcpyDeviceToDevice, stream));
  };
  auto byte_of_b = [&] {
    unsigned char first = 0;
    b.download(&first, 1);
    return first;
  };
  RINGLAB_CUDA_CHECK(cudaMemset(b.get(), 0, 64));

  // Forked to `side` and joined back: the copy runs at the launch, not at the capture.
  gpu::Event fork, join;
  gpu::Graph graph = gpu::Graph::capture(origin.get(), [&] {
    fork.record(origin.get());
    fork.wait_on(side.get());
    copy_on(side.get());
    join.record(side.get());
    join.wait_on(origin.get());
  });
  CHECK(byte_of_b() == 0);
  graph.launch(origin.get());
  CHECK(byte_of_b() == 7);

  // Work on a stream that never joined.
  CHECK_THROWS_WITH(gpu::Graph::capture(origin.get(), [&] { copy_on(outside.get()); }),
                    Catch::Contains("cudaErrorStreamCaptureIsolation"));
  // Joined, but not joined back: its work would hang off the graph.
  CHECK_THROWS_WITH(gpu::Graph::capture(origin.get(),
                                        [&] {
                                          fork.record(origin.get());
                                          fork.wait_on(side.get());
                                          copy_on(side.get());
                                        }),
                    Catch::Contains("cudaErrorStreamCaptureUnjoined"));
  // Joined back before its last work.
  CHECK_THROWS_WITH(gpu::Graph::capture(origin.get(),
                                        [&] {
                                          fork.record(origin.get());
                                          fork.wait_on(side.get());
                                          join.record(side.get());
                                          copy_on(side.get());
                                          join.wait_on(origin.get());
                                        }),
                    Catch::Contains("cudaErrorStreamCaptureUnjoined"));
  // A blocking copy inside the capture.
  CHECK_THROWS_WITH(gpu::Graph::capture(origin.get(), [&] { a.upload(host.data(), host.size()); }),
                    Catch::Contains("cudaErrorStreamCaptureUnsupported"));
  // A capturing stream waiting on an event recorded before the capture.
  gpu::Event before;
  before.record(side.get());
  CHECK_THROWS_WITH(gpu::Graph::capture(origin.get(), [&] { before.wait_on(origin.get()); }),
                    Catch::Contains("cudaErrorStreamCaptureIsolation"));
  // After every failure the runtime is out of capture: plain work runs at once again.
  RINGLAB_CUDA_CHECK(cudaMemset(b.get(), 0, 64));
  copy_on(origin.get());
  CHECK(byte_of_b() == 7);
}

TEST_CASE("emulated ringlab-gpu run --graph: verifies, and refuses a trace or gpu-nccl in one line",
          "[gpu][emulated][cli][graph]") {
  const std::vector<std::string> small = {"run",    "--ranks", "3",    "--seq",      "96",        "--layout",
                                          "zigzag", "--heads", "3",    "--kv-heads", "1",         "--dim",
                                          "64",     "--dtype", "fp32", "--causal",   "--backward"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> args = small;
    args.insert(args.end(), more.begin(), more.end());
    return test::run_gpu_cli(args);
  };
  const test::CliOutcome graph = with({"--graph"});
  INFO(graph.out << graph.err);
  CHECK(graph.status == 0);
  CHECK_THAT(graph.out, Catch::Contains("PASS"));
  CHECK_THAT(graph.out, Catch::Contains("one CUDA graph"));

  const test::CliOutcome traced = with({"--graph", "--trace", "never-written.json"});
  CHECK(traced.status == 2);
  CHECK(traced.err ==
        "ringlab-gpu: error: --graph times the whole run, not its ops: no trace; drop --graph or "
        "--trace\n");
  const test::CliOutcome nccl = with({"--graph", "--executor", "nccl"});
  CHECK(nccl.status == 2);
  CHECK(nccl.err == "ringlab-gpu: error: --graph captures gpu-streams' run; drop it, or use --executor streams\n");
}

}  // namespace ringlab
