// The compiled part of the `ringlab` Python package (ringlab._core, re-exported by `import ringlab`):
// the oracle, plans, the simulator and the checker of outputs computed elsewhere, on NumPy arrays -
// for students who write their ring attention in NumPy or PyTorch.
//
//   import ringlab
//   out, lse = ringlab.attention(q, k, v, causal=True)              # exact, float64
//   dq, dk, dv = ringlab.attention_backward(q, k, v, dout, causal=True)
//   plan = ringlab.plan(seq=64, ranks=4, layout="zigzag", causal=True)
//   print(plan)                      # the step x rank grid; plan.ops(rank), plan.check()
//   result = ringlab.run(q, k, v, ranks=4, layout="zigzag", causal=True)  # the simulator
//   report = ringlab.verify(q, k, v, out=my_out, lse=my_lse, ranks=4, causal=True)
//   print(report)                    # wrong rows, their ranks and steps, the likely cause
//
// Shapes follow ringlab run's .npy files: q, out, dout, dq (B, S, H, D); k, v, dk, dv
// (B, S, HKV, D); lse (B, H, S). Arrays may be float32 or float64 (anything NumPy can cast).
// Bad input raises ValueError with the message `ringlab` prints.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>

#include "executors/sim/sim_executor.hpp"
#include "exercises/verify.hpp"
#include "reference/error.hpp"
#include "reference/exact_attention.hpp"
#include "sim/plan/check.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/print.hpp"

namespace py = pybind11;

namespace ringlab::python {

namespace {

using Array = py::array_t<double, py::array::c_style | py::array::forcecast>;

Tensor<double> to_tensor(const py::object& object, const char* name) {
  if (object.is_none()) return {};
  const Array array = Array::ensure(object);
  if (!array) throw UsageError(std::string(name) + " is not a numeric array");
  Shape shape(array.shape(), array.shape() + array.ndim());
  std::vector<double> values(array.data(), array.data() + array.size());
  return Tensor<double>(std::move(shape), std::move(values));
}

template <class T>
py::array_t<T> to_array(const Tensor<T>& tensor) {
  py::array_t<T> array(std::vector<py::ssize_t>(tensor.shape().begin(), tensor.shape().end()));
  std::copy(tensor.span().begin(), tensor.span().end(), array.mutable_data());
  return array;
}

// The mask of the keyword arguments causal, window (0 = none) and docs (packed document lengths).
Mask mask_of(bool causal, int64_t window, const std::vector<int64_t>& docs) {
  if (window < 0) validate_window(window);
  return Mask(causal, window, docs);
}

PlanSpec spec_of(const AttentionDims& dims, int64_t ranks, const std::string& algo, const std::string& layout,
                 bool causal, bool backward, int64_t ulysses, int64_t window, const std::vector<int64_t>& docs) {
  const Algorithm algorithm = parse_algorithm(algo);
  return {.algo = algorithm,
          .layout = parse_layout(layout),
          .ranks = ranks,
          .ulysses = algorithm == Algorithm::ulysses ? ranks : ulysses,
          .dims = dims,
          .causal = causal,
          .window = window,
          .documents = docs,
          .backward = backward};
}

// A plan, for printing and inspecting from Python.
struct PyPlan {
  Plan plan;
  std::string text() const {
    std::ostringstream out;
    print_plan(out, plan);
    return out.str();
  }
  // One line per operation of `rank`: "step 0: compute block 2 (full, 256 pairs)", "step 0: exchange kv".
  std::vector<std::string> ops(int64_t rank) const {
    if (rank < 0 || rank >= plan.ranks())
      throw UsageError("rank " + std::to_string(rank) + " is not in 0.." + std::to_string(plan.ranks() - 1));
    std::vector<std::string> lines;
    for (const Op& op : expand(plan, rank)) {
      std::string line = "phase " + std::to_string(op.phase) + " step " + std::to_string(op.step) + ": ";
      if (const auto* c = std::get_if<ComputeOp>(&op.body)) {
        line += std::string(c->pass == Pass::forward ? "forward" : "backward") + " compute, queries of block " +
                std::to_string(c->q_block) + " x keys of block " + std::to_string(c->kv_block) + " (" +
                std::to_string(c->pairs) + " visible pairs" + (c->kernels.empty() ? ", skipped" : "") + ")";
      } else if (const auto* x = std::get_if<ExchangeOp>(&op.body)) {
        line += std::string(x->payload == Payload::kv ? "K/V" : "dK/dV") + " exchange: send to rank " +
                std::to_string(x->send_to) + ", receive from rank " + std::to_string(x->recv_from);
      } else {
        line += "collective or bookkeeping";
      }
      lines.push_back(line);
    }
    return lines;
  }
  std::vector<std::string> check() const {
    std::vector<std::string> findings;
    for (const PlanFinding& f : check_plan(plan).findings) findings.push_back(f.describe());
    return findings;
  }
  std::vector<int64_t> positions(int64_t rank) const { return plan.layout().positions(rank); }
};

// Runs `body`, turning ringlab's UsageError into Python's ValueError.
template <class F>
auto guarded(F&& body) {
  try {
    return body();
  } catch (const UsageError& e) {
    throw py::value_error(e.what());
  }
}

}  // namespace

}  // namespace ringlab::python

using namespace ringlab;          // NOLINT(google-build-using-namespace): the module's body only
using namespace ringlab::python;  // NOLINT(google-build-using-namespace)

PYBIND11_MODULE(_core, m) {  // ringlab._core; ringlab/__init__.py re-exports it
  m.doc() =
      "ringlab: exact attention, sequence-parallel plans, a simulator of P ranks, and a checker that says "
      "where outputs computed elsewhere go wrong";

  m.def(
      "attention",
      [](const py::object& q, const py::object& k, const py::object& v, bool causal, int64_t window,
         const std::vector<int64_t>& docs) {
        return guarded([&] {
          const Tensor<double> tq = to_tensor(q, "q"), tk = to_tensor(k, "k"), tv = to_tensor(v, "v");
          const AttentionDims dims = dims_of(tq.shape(), tk.shape(), tv.shape());
          if (!docs.empty()) (void)parse_documents(documents_string(docs, docs.size()), dims.seq, 0);
          const AttentionOutput<double> r = exact_attention(tq, tk, tv, mask_of(causal, window, docs));
          return py::make_tuple(to_array(r.out), to_array(r.lse));
        });
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("causal") = false, py::arg("window") = 0,
      py::arg("docs") = std::vector<int64_t>{},
      "Exact attention in float64: (out (B, S, H, D), lse (B, H, S)). Causal compares global positions; window W: "
      "the W keys up to the query (causal) or within W-1 either side; docs: packed document lengths summing to S.");

  m.def(
      "attention_backward",
      [](const py::object& q, const py::object& k, const py::object& v, const py::object& dout, bool causal,
         int64_t window, const std::vector<int64_t>& docs) {
        return guarded([&] {
          const Tensor<double> tq = to_tensor(q, "q"), tk = to_tensor(k, "k"), tv = to_tensor(v, "v"),
                               td = to_tensor(dout, "dout");
          const AttentionDims dims = dims_of(tq.shape(), tk.shape(), tv.shape(), &td.shape());
          if (!docs.empty()) (void)parse_documents(documents_string(docs, docs.size()), dims.seq, 0);
          const AttentionGrads<double> g = exact_attention_backward(tq, tk, tv, td, mask_of(causal, window, docs));
          return py::make_tuple(to_array(g.dq), to_array(g.dk), to_array(g.dv));
        });
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("dout"), py::arg("causal") = false, py::arg("window") = 0,
      py::arg("docs") = std::vector<int64_t>{},
      "Exact gradients in float64: (dq, dk, dv) for the upstream gradient dout (B, S, H, D).");

  py::class_<PyPlan>(m, "Plan", "A schedule compiled into data: each rank's ordered operations.")
      .def("__str__", &PyPlan::text)
      .def("text", &PyPlan::text, "the step x rank grid, as `ringlab plan` prints it")
      .def(
          "ops", [](const PyPlan& p, int64_t rank) { return guarded([&] { return p.ops(rank); }); }, py::arg("rank"),
          "one line per operation of this rank")
      .def("check", &PyPlan::check, "the plan checker's findings (empty: well formed)")
      .def("positions", &PyPlan::positions, py::arg("rank"), "the global token positions this rank holds")
      .def_property_readonly("ranks", [](const PyPlan& p) { return p.plan.ranks(); });

  m.def(
      "plan",
      [](int64_t seq, int64_t ranks, int64_t heads, int64_t kv_heads, int64_t dim, int64_t batch,
         const std::string& algo, const std::string& layout, bool causal, bool backward, int64_t ulysses,
         int64_t window, const std::vector<int64_t>& docs) {
        return guarded([&] {
          const AttentionDims dims{batch, seq, heads, kv_heads > 0 ? kv_heads : heads, dim};
          dims.validate();
          return PyPlan{build_plan(spec_of(dims, ranks, algo, layout, causal, backward, ulysses, window, docs))};
        });
      },
      py::arg("seq"), py::arg("ranks"), py::arg("heads") = 4, py::arg("kv_heads") = 0, py::arg("dim") = 64,
      py::arg("batch") = 1, py::arg("algo") = "ring", py::arg("layout") = "contiguous", py::arg("causal") = false,
      py::arg("backward") = false, py::arg("ulysses") = 1, py::arg("window") = 0,
      py::arg("docs") = std::vector<int64_t>{},
      "Build a plan (algo: ring, allgather, ulysses, hybrid; layout: contiguous, zigzag, striped, balanced; "
      "window and docs as for attention).");

  m.def(
      "run",
      [](const py::object& q, const py::object& k, const py::object& v, const py::object& dout, int64_t ranks,
         const std::string& algo, const std::string& layout, bool causal, int64_t ulysses, int64_t window,
         const std::vector<int64_t>& docs) {
        return guarded([&] {
          AttentionInputs<double> in{to_tensor(q, "q"), to_tensor(k, "k"), to_tensor(v, "v"), to_tensor(dout, "dout")};
          const bool backward = !in.dout.empty();
          const AttentionDims dims =
              dims_of(in.q.shape(), in.k.shape(), in.v.shape(), backward ? &in.dout.shape() : nullptr);
          const Plan plan = build_plan(spec_of(dims, ranks, algo, layout, causal, backward, ulysses, window, docs));
          SimExecutor executor;
          executor.check_sizes(dims);
          ExecutionResult result;
          {
            py::gil_scoped_release release;
            result = executor.execute(plan, in.cast<float>(), {});
          }
          if (!result.ok()) throw UsageError("the simulated run failed: " + result.failure->description);
          py::dict outputs;
          outputs["out"] = to_array(result.outputs.out);
          outputs["lse"] = to_array(result.outputs.lse);
          if (backward) {
            outputs["dq"] = to_array(result.outputs.dq);
            outputs["dk"] = to_array(result.outputs.dk);
            outputs["dv"] = to_array(result.outputs.dv);
          }
          return outputs;
        });
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("dout") = py::none(), py::arg("ranks") = 4,
      py::arg("algo") = "ring", py::arg("layout") = "contiguous", py::arg("causal") = false, py::arg("ulysses") = 1,
      py::arg("window") = 0, py::arg("docs") = std::vector<int64_t>{},
      "Run the plan on the simulator (P ranks as threads, float32): a dict of out, lse (and dq, dk, dv "
      "when dout is given), in global token order.");

  py::class_<exercises::VerifyReport>(m, "VerifyReport", "What verify found.")
      .def_property_readonly("ok", &exercises::VerifyReport::ok)
      .def("__bool__", &exercises::VerifyReport::ok)
      .def("__str__", &exercises::VerifyReport::text)
      .def_property_readonly("text", &exercises::VerifyReport::text)
      .def_readonly("cause", &exercises::VerifyReport::cause)
      .def_readonly("wrong_rows", &exercises::VerifyReport::wrong_rows)
      .def_readonly("wrong_ranks", &exercises::VerifyReport::wrong_ranks)
      .def_property_readonly("rows", [](const exercises::VerifyReport& r) {
        py::list rows;
        for (const exercises::WrongRow& w : r.rows) {
          py::dict row;
          row["tensor"] = w.tensor, row["batch"] = w.batch, row["head"] = w.head, row["position"] = w.position;
          row["rank"] = w.rank, row["local_row"] = w.local_row, row["error"] = w.error;
          row["blocks_seen"] = w.blocks_seen, row["blocks_missed"] = w.blocks_missed;
          row["steps_missed"] = w.steps_missed;
          rows.append(row);
        }
        return rows;
      });

  m.def(
      "verify",
      [](const py::object& q, const py::object& k, const py::object& v, const py::object& out, const py::object& lse,
         const py::object& dq, const py::object& dk, const py::object& dv, const py::object& dout, int64_t ranks,
         const std::string& layout, bool causal) {
        return guarded([&] {
          const AttentionInputs<double> in{to_tensor(q, "q"), to_tensor(k, "k"), to_tensor(v, "v"),
                                           to_tensor(dout, "dout")};
          const exercises::StudentOutputs given{to_tensor(out, "out"), to_tensor(lse, "lse"), to_tensor(dq, "dq"),
                                                to_tensor(dk, "dk"), to_tensor(dv, "dv")};
          exercises::VerifyOptions options;
          options.layout = parse_layout(layout);
          options.ranks = ranks;
          options.causal = causal;
          if (ranks < 1) throw UsageError("ranks = " + std::to_string(ranks) + " must be >= 1");
          return exercises::verify_outputs(in, given, options);
        });
      },
      py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out") = py::none(), py::arg("lse") = py::none(),
      py::arg("dq") = py::none(), py::arg("dk") = py::none(), py::arg("dv") = py::none(), py::arg("dout") = py::none(),
      py::arg("ranks") = 1, py::arg("layout") = "contiguous", py::arg("causal") = false,
      "Check outputs computed elsewhere against exact attention: a VerifyReport naming the wrong rows, the rank "
      "and step that own them under the layout, and the likely cause. print(report) shows it all.");
}
