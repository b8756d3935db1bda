// Lab 07's hidden tests: the student's block attention kernel, run by the CPU warp emulator
// (gpu/emulation) on small problems and compared with exact float64 attention
// (reference/exact_attention.hpp) within the float32 tolerances of reference/compare.hpp; and,
// where a GPU is present, the same file compiled by nvcc with device_runner.cu and run on the
// device against the same oracle.
//
// The emulator proves the kernel's logic — indexing, masking by position, GQA, the online softmax,
// empty rows — and that every thread reaches every barrier; it runs warps in a shuffled order and
// reports some shared-memory races (gpu/README.md), but knows nothing of speed or of the memory
// model, which only the device criterion sees.
// Sections: [problems] [emulated runs] [checks] [device] [criteria]
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

#include "exercises/labs/07-block-kernel/lab.hpp"
#include "exercises/labs/common/harness.hpp"
#include "reference/exact_attention.hpp"
#include "reference/inputs.hpp"

namespace ringlab::lab07 {

namespace {

using lab::CriterionResult;

// ---- [problems] --------------------------------------------------------------------------------

// One block: its shape, its mask and the global positions of its rows.
struct Case {
  std::string what;  // "rank 1's queries x rank 2's keys (zig-zag, S = 128, P = 4)"
  int B = 1, H = 2, HKV = 2, D = 64;
  bool causal = false;
  std::vector<int64_t> q_pos, k_pos;
  uint64_t seed = 700;
  double q_scale = 1;  // > 1: scores in the hundreds
};

std::vector<int64_t> range(int64_t first, int64_t count) {
  std::vector<int64_t> positions(static_cast<size_t>(count));
  std::iota(positions.begin(), positions.end(), first);
  return positions;
}

// Inputs (float), their exact attention (float64) and the kernel's position arrays.
struct Data {
  Tensor<float> q, k, v;  // (B, Sq, H, D), (B, Sk, HKV, D), (B, Sk, HKV, D)
  AttentionOutput<double> exact;
  std::vector<int32_t> q_pos, k_pos;
};

Data make_data(const Case& c) {
  const int64_t Sq = static_cast<int64_t>(c.q_pos.size()), Sk = static_cast<int64_t>(c.k_pos.size());
  Data data{Tensor<float>({c.B, Sq, c.H, c.D}),
            Tensor<float>({c.B, Sk, c.HKV, c.D}),
            Tensor<float>({c.B, Sk, c.HKV, c.D}),
            {},
            {},
            {}};
  for (int64_t i = 0; i < data.q.size(); ++i)
    data.q[i] = static_cast<float>(input_value(c.seed, TensorId::q, static_cast<uint64_t>(i)) * c.q_scale);
  for (int64_t i = 0; i < data.k.size(); ++i) {
    data.k[i] = input_value(c.seed, TensorId::k, static_cast<uint64_t>(i));
    data.v[i] = input_value(c.seed, TensorId::v, static_cast<uint64_t>(i));
  }
  data.exact = exact_attention(data.q.cast<double>(), data.k.cast<double>(), data.v.cast<double>(),
                               c.causal ? MaskKind::causal : MaskKind::none, c.q_pos, c.k_pos);
  data.q_pos.assign(c.q_pos.begin(), c.q_pos.end());
  data.k_pos.assign(c.k_pos.begin(), c.k_pos.end());
  return data;
}

// ---- [emulated runs] ---------------------------------------------------------------------------

// Outputs start as this NaN payload: an element still holding it was never written.
constexpr uint32_t kUnwritten = 0x7fbadbadu;

float unwritten() {
  float x;
  std::memcpy(&x, &kUnwritten, sizeof x);
  return x;
}

bool is_unwritten(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits == kUnwritten;
}

BlockArgs args_of(const Case& c, const Data& data, float* out, float* lse) {
  BlockArgs a;
  a.q = data.q.data(), a.k = data.k.data(), a.v = data.v.data();
  a.q_pos = data.q_pos.data(), a.k_pos = data.k_pos.data();
  a.out = out, a.lse = lse;
  a.B = c.B, a.Sq = static_cast<int>(c.q_pos.size()), a.Sk = static_cast<int>(c.k_pos.size());
  a.H = c.H, a.HKV = c.HKV, a.D = c.D;
  a.causal = c.causal;
  a.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
  return a;
}

// The student's launch shape, or why it cannot be launched.
std::string shape_problem(const LaunchShape& s) {
  if (s.threads <= 0 || s.threads % 32 != 0 || s.threads > 1024)
    return "threads = " + std::to_string(s.threads) + ": must be a positive multiple of 32, at most 1024";
  if (s.grid_x == 0 || s.grid_y == 0 || s.grid_y > 65535)
    return "grid = (" + std::to_string(s.grid_x) + ", " + std::to_string(s.grid_y) +
           "): each must be 1 or more (y at most 65535)";
  if (s.smem_bytes < 0 || s.smem_bytes > 227 * 1024)
    return "smem_bytes = " + std::to_string(s.smem_bytes) + ": must be 0 .. 227 KiB";
  return "";
}

}  // namespace

template <class Ar>
void fields(Ar& ar, LaunchShape& s) {
  ar(s.grid_x, s.grid_y, s.threads, s.smem_bytes);
}

namespace {

// Runs the kernel on the emulator; false (with the reason in `result`) when it could not run. The
// launch shape, the outputs and why the emulator stopped cross to the judge (lab::across).
bool run_emulated(const Case& c, const Data& data, AttentionOutput<float>& got, CriterionResult& result) {
  const int64_t Sq = static_cast<int64_t>(c.q_pos.size());
  got = {Tensor<float>({c.B, Sq, c.H, c.D}, unwritten()), Tensor<float>({c.B, c.H, Sq}, unwritten())};
  const BlockArgs args = args_of(c, data, got.out.data(), got.lse.data());
  LaunchShape shape;
  std::string stopped;  // the emulator's exception, "" when the kernel ran to its end
  lab::across(
      "block_attention_kernel",
      [&] {
        shape = block_attention_launch(args);
        if (!shape_problem(shape).empty()) return;
        try {
          emu::launch({shape.grid_x, shape.grid_y, 1}, shape.threads, shape.smem_bytes,
                      [&] { block_attention_kernel(args); });
        } catch (const std::exception& e) {
          stopped = e.what();
        }
      },
      shape, got, stopped);
  lab::refuse_unless(got.out.shape() == Shape{c.B, Sq, c.H, c.D} && got.lse.shape() == Shape{c.B, c.H, Sq},
                     "block_attention_kernel", "out and lse are not the shapes the kernel was given");
  if (const std::string problem = shape_problem(shape); !problem.empty()) {
    result.fail(c.what + ": block_attention_launch gave " + problem);
    return false;
  }
  if (!stopped.empty()) {
    result.fail(c.what + ": the kernel stopped under the emulator: " + stopped);
    result.hint =
        "a barrier (sync_threads) or shuffle that not every thread of the block or warp reaches, e.g. "
        "after an early return, deadlocks; a shared-memory race means a sync_threads is missing between one "
        "warp's write and another warp's access; shared memory lives in RINGLAB_DYNAMIC_SMEM, within smem_bytes";
    return false;
  }
  return true;
}

// ---- [checks] ----------------------------------------------------------------------------------

// Compares one run with the oracle; names unwritten elements, NaN and the empty rows first.
bool check_outputs(const Case& c, const Data& data, const AttentionOutput<float>& got, CriterionResult& result,
                   Tolerance lse_tolerance) {
  const int64_t Sq = static_cast<int64_t>(c.q_pos.size());
  int64_t unwritten_count = 0, nan_count = 0;
  for (const Tensor<float>* t : {&got.out, &got.lse})
    for (int64_t i = 0; i < t->size(); ++i) {
      if (is_unwritten((*t)[i])) {
        ++unwritten_count;
      } else if (std::isnan((*t)[i])) {
        ++nan_count;
      }
    }
  const int64_t total = got.out.size() + got.lse.size();
  if (unwritten_count == total) {
    result.fail(c.what + ": the kernel wrote nothing to out or lse (the starter's TODOs?)");
    result.hint = "write out[b][i][h][:] and lse[b][h][i] for every query row your thread owns";
    return false;
  }
  if (unwritten_count > 0) {
    result.fail(c.what + ": " + std::to_string(unwritten_count) + " of " + std::to_string(total) +
                " elements of out and lse were never written");
    result.hint =
        "the launch shape must cover every (b, h, i): grid_x * threads >= Sq rows and grid_y = B * H, "
        "and every row writes all D outputs and its lse";
  }
  // Rows that see no key: out exactly 0 and lse -inf.
  for (int64_t b = 0; b < c.B && result.passed; ++b)
    for (int64_t h = 0; h < c.H && result.passed; ++h)
      for (int64_t i = 0; i < Sq && result.passed; ++i) {
        if (data.exact.lse(b, h, i) != -INFINITY) continue;
        bool zero = true;
        for (int64_t d = 0; d < c.D; ++d) zero &= got.out(b, i, h, d) == 0.0f;
        const float lse = got.lse(b, h, i);
        if (!zero || lse != -INFINITY) {
          result.fail(c.what + ": query row " + std::to_string(i) + " (position " +
                      std::to_string(c.q_pos[static_cast<size_t>(i)]) + ", b " + std::to_string(b) + ", h " +
                      std::to_string(h) + ") sees no key; it must get out 0 and lse -inf, got out[0] = " +
                      std::to_string(got.out(b, i, h, 0)) + " and lse = " + std::to_string(lse));
          result.hint = std::isfinite(lse)
                            ? "this row got a finite lse, so it counted keys in its future: the causal mask "
                              "compares global positions, a.k_pos[j] <= a.q_pos[i], not row indices"
                            : "a row that saw no key has l = 0 and o = 0: o / l is 0 / 0 = NaN; write 0 "
                              "and -INFINITY instead";
        }
      }
  if (nan_count > 0 && result.passed) {
    result.fail(c.what + ": " + std::to_string(nan_count) + " elements of out and lse are NaN");
    result.hint =
        "NaN comes from 0 / 0 (a row with no visible key), inf - inf (e^(m - m_new) with both -inf: "
        "skip masked keys instead of giving them a -inf score), or overflow of expf without a running max";
  }
  bool ok = result.passed;
  ok &= lab::compare_tensor(result, "out", got.out, data.exact.out, fp32_tolerance("out"), c.what);
  ok &= lab::compare_tensor(result, "lse", got.lse, data.exact.lse, lse_tolerance, c.what);
  return ok;
}

// lse grows with the scores: its absolute tolerance scales with q (as lab 01's large scores).
Tolerance lse_tolerance_of(const Case& c) { return {fp32_tolerance("lse").abs * c.q_scale, fp32_tolerance("lse").rel}; }

CriterionResult emulated(const std::vector<Case>& cases, const std::string& hint) {
  CriterionResult result;
  for (const Case& c : cases) {
    const Data data = make_data(c);
    AttentionOutput<float> got;
    if (!run_emulated(c, data, got, result)) break;
    if (!check_outputs(c, data, got, result, lse_tolerance_of(c))) break;
  }
  if (!result.passed && result.hint.empty()) result.hint = hint;
  return result;
}

// ---- [device] ----------------------------------------------------------------------------------

#ifndef RINGLAB_LAB_CUDA_ARCH
#define RINGLAB_LAB_CUDA_ARCH "90"
#endif

// Where nvcc and the lab's device runner are: the grader says (RINGLAB_LAB_NVCC, RINGLAB_LAB_SOURCE_DIR),
// so that no path of the machine that built this harness is in it.
std::string from_environment(const char* name, const char* otherwise) {
  const char* value = std::getenv(name);
  return value && *value ? value : otherwise;
}

std::string quote(const std::string& text) {
  std::string quoted = "'";
  for (char ch : text) quoted += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return quoted + "'";
}

// Runs a shell command; its exit status, and its output (stdout and stderr) in `output`.
int shell(const std::string& command, std::string& output) {
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (!pipe) return -1;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0;) output.append(buffer, n);
  const int status = pclose(pipe);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

template <class T>
void put(std::ofstream& out, const T* values, size_t count) {
  out.write(reinterpret_cast<const char*>(values), static_cast<std::streamsize>(sizeof(T) * count));
}

// The file format device_runner.cu reads: 7 int32 (B, Sq, Sk, H, HKV, D, causal), q_pos, k_pos,
// then q, k, v as float32. It writes out then lse, float32.
void write_case(const std::string& path, const Case& c, const Data& data) {
  std::ofstream out(path, std::ios::binary);
  const int32_t header[7] = {c.B,
                             static_cast<int32_t>(c.q_pos.size()),
                             static_cast<int32_t>(c.k_pos.size()),
                             c.H,
                             c.HKV,
                             c.D,
                             c.causal ? 1 : 0};
  put(out, header, 7);
  put(out, data.q_pos.data(), data.q_pos.size());
  put(out, data.k_pos.data(), data.k_pos.size());
  put(out, data.q.data(), static_cast<size_t>(data.q.size()));
  put(out, data.k.data(), static_cast<size_t>(data.k.size()));
  put(out, data.v.data(), static_cast<size_t>(data.v.size()));
}

std::vector<std::string> first_lines(const std::string& text, size_t count) {
  std::vector<std::string> lines;
  size_t begin = 0;
  while (begin < text.size() && lines.size() < count) {
    const size_t end = text.find('\n', begin);
    const std::string line = text.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    if (!line.empty()) lines.push_back(line);
    if (end == std::string::npos) break;
    begin = end + 1;
  }
  return lines;
}

// What the device run gave, as it crosses to the judge: how far it got, the compiler's or the
// runner's first lines, and each case's outputs (empty where the runner wrote none).
struct DeviceRun {
  int stage = 0;  // 0 ran, 1 no scratch folder, 2 nvcc failed, 3 the runner failed
  std::string command;
  std::vector<std::string> lines;
  std::vector<AttentionOutput<float>> got;
};

template <class Ar>
void fields(Ar& ar, DeviceRun& r) {
  ar(r.stage, r.command, r.lines, r.got);
}

// On the student's side: compiles the submission with nvcc and the lab's device runner, runs every
// case on the device and reads back what the runner wrote.
DeviceRun run_on_device(const std::vector<Case>& cases, const std::vector<Data>& data, const std::string& source) {
  DeviceRun run;
  std::string scratch = (std::filesystem::temp_directory_path() / "ringlab-lab07-XXXXXX").string();
  if (!mkdtemp(scratch.data())) {
    run.stage = 1;
    return run;
  }
  const std::string source_dir = from_environment("RINGLAB_LAB_SOURCE_DIR", ".");
  const std::string lab_dir = source_dir + "/exercises/labs/07-block-kernel";
  const std::string runner = scratch + "/runner";
  // The student's file sees the hand-out's headers only, as in the grader's host compile (the real
  // CUDA headers here: nvcc finds them itself).
  const std::string headers = from_environment("RINGLAB_LAB_HEADERS", "");
  const std::string includes = headers.empty() ? " -I" + quote(source_dir) + " -I" + quote(lab_dir)
                                               : " -I" + quote(headers) + " -I" + quote(headers + "/include");
  run.command = quote(from_environment("RINGLAB_LAB_NVCC", "nvcc")) +
                " -std=c++20 -O2 -arch=sm_" RINGLAB_LAB_CUDA_ARCH + includes + " " +
                quote("-DRINGLAB_LAB07_STUDENT_FILE=\"" + source + "\"") + " " + quote(lab_dir + "/device_runner.cu") +
                " -o " + quote(runner);
  std::string output;
  if (shell(run.command, output) != 0) {
    run.stage = 2;
    run.lines = first_lines(output, 20);
    std::filesystem::remove_all(scratch);
    return run;
  }
  std::string command = quote(runner);
  for (size_t n = 0; n < cases.size(); ++n) {
    write_case(scratch + "/case" + std::to_string(n) + ".in", cases[n], data[n]);
    command += " " + quote(scratch + "/case" + std::to_string(n) + ".in") + " " +
               quote(scratch + "/case" + std::to_string(n) + ".out");
  }
  output.clear();
  if (shell(command, output) != 0) {
    run.stage = 3;
    run.lines = first_lines(output, 20);
    std::filesystem::remove_all(scratch);
    return run;
  }
  for (size_t n = 0; n < cases.size(); ++n) {
    const Case& c = cases[n];
    const int64_t Sq = static_cast<int64_t>(c.q_pos.size());
    AttentionOutput<float> got{Tensor<float>({c.B, Sq, c.H, c.D}), Tensor<float>({c.B, c.H, Sq})};
    std::ifstream in(scratch + "/case" + std::to_string(n) + ".out", std::ios::binary);
    in.read(reinterpret_cast<char*>(got.out.data()),
            static_cast<std::streamsize>(sizeof(float) * static_cast<size_t>(got.out.size())));
    in.read(reinterpret_cast<char*>(got.lse.data()),
            static_cast<std::streamsize>(sizeof(float) * static_cast<size_t>(got.lse.size())));
    run.got.push_back(in ? std::move(got) : AttentionOutput<float>{});
  }
  std::filesystem::remove_all(scratch);
  return run;
}

CriterionResult device_criterion(const std::vector<Case>& cases) {
  CriterionResult result;
  const char* source = std::getenv("RINGLAB_GRADE_SOURCE");
  if (!source || !*source) {
    result.fail(
        "RINGLAB_GRADE_SOURCE is not set: run this criterion through 'ringlab grade', which names the file to compile");
    return result;
  }
  std::vector<Data> data;
  for (const Case& c : cases) data.push_back(make_data(c));
  DeviceRun run;
  lab::across(
      "device", [&] { run = run_on_device(cases, data, source); }, run);
  if (run.stage == 1) {
    result.fail("cannot create a temporary directory for the device build");
    return result;
  }
  if (run.stage == 2) {
    result.fail("nvcc could not compile your file for the device");
    result.details = run.lines;
    result.details.insert(result.details.begin(), "$ " + run.command);
    result.hint =
        "it compiled as host C++ under the emulator: look for host-only code in the kernel (std::, "
        "exceptions, new) or a missing RINGLAB_KERNEL";
    return result;
  }
  if (run.stage != 0) {
    result.fail("the kernel failed on the device");
    result.details = run.lines;
    result.hint =
        "a CUDA error: most often an access out of bounds, which the emulator does not check (run your "
        "kernel under compute-sanitizer), or a launch shape the device refuses";
    return result;
  }
  for (size_t n = 0; n < cases.size() && result.passed; ++n) {
    const Case& c = cases[n];
    const int64_t Sq = static_cast<int64_t>(c.q_pos.size());
    const AttentionOutput<float>* got = n < run.got.size() ? &run.got[n] : nullptr;
    if (!got || got->out.shape() != Shape{c.B, Sq, c.H, c.D} || got->lse.shape() != Shape{c.B, c.H, Sq}) {
      result.fail(c.what + ": the device runner wrote no result");
      break;
    }
    check_outputs(c, data[n], *got, result, lse_tolerance_of(c));
  }
  if (!result.passed && result.hint.empty())
    result.hint =
        "right under the emulator, wrong on the device: a race between threads (shared memory read before "
        "every thread wrote it, or overwritten before every thread read it: a sync_threads is missing)";
  return result;
}

// ---- [criteria] --------------------------------------------------------------------------------

Case full_s100() {
  Case c;
  c.what = "S = 100, D = 64, full attention";
  c.q_pos = c.k_pos = range(0, 100);
  c.seed = 701;
  return c;
}

Case d128() {
  Case c;
  c.what = "S = 72, D = 128, causal";
  c.D = 128;
  c.causal = true;
  c.q_pos = c.k_pos = range(0, 72);
  c.seed = 702;
  return c;
}

Case causal_s96() {
  Case c;
  c.what = "S = 96, D = 64, causal (both blocks at positions 0..95)";
  c.causal = true;
  c.q_pos = c.k_pos = range(0, 96);
  c.seed = 703;
  return c;
}

Case gqa() {
  Case c;
  c.what = "GQA: H = 6 query heads on HKV = 2 K/V heads, S = 80, causal";
  c.H = 6, c.HKV = 2;
  c.causal = true;
  c.q_pos = c.k_pos = range(0, 80);
  c.seed = 704;
  return c;
}

// Ring blocks: rank q_rank's queries against rank kv_rank's keys under a layout of S = 128, P = 4.
Case ring_block(LayoutKind kind, int64_t q_rank, int64_t kv_rank, uint64_t seed) {
  const Layout layout(kind, 128, 4);
  Case c;
  c.what = "rank " + std::to_string(q_rank) + "'s queries x rank " + std::to_string(kv_rank) + "'s keys (" +
           layout_name(kind) + ", S = 128, P = 4, H = 2, HKV = 1)";
  c.H = 2, c.HKV = 1;
  c.causal = true;
  c.q_pos = layout.positions(q_rank);
  c.k_pos = layout.positions(kv_rank);
  c.seed = seed;
  return c;
}

std::vector<Case> layouts() {
  return {ring_block(LayoutKind::zigzag, 1, 2, 705), ring_block(LayoutKind::zigzag, 0, 3, 706),
          ring_block(LayoutKind::striped, 1, 2, 707), ring_block(LayoutKind::zigzag, 2, 2, 708)};
}

std::vector<Case> empty_rows() {
  Case partial;
  partial.what = "queries at 0..47 x keys at 24..71, causal: rows 0..23 see no key";
  partial.causal = true;
  partial.q_pos = range(0, 48);
  partial.k_pos = range(24, 48);
  partial.seed = 709;
  Case none = partial;
  none.what = "queries at 0..31 x keys at 64..95, causal: no row sees a key";
  none.q_pos = range(0, 32);
  none.k_pos = range(64, 32);
  none.seed = 710;
  return {partial, none};
}

Case batch() {
  Case c;
  c.what = "B = 3, H = 4, HKV = 2, queries at 16..55 x keys at 0..55, causal";
  c.B = 3, c.H = 4, c.HKV = 2;
  c.causal = true;
  c.q_pos = range(16, 40);
  c.k_pos = range(0, 56);
  c.seed = 711;
  return c;
}

Case large_scores() {
  Case c;
  c.what = "S = 64, full attention, q scaled by 400 (scores in the hundreds)";
  c.q_pos = c.k_pos = range(0, 64);
  c.q_scale = 400;
  c.seed = 712;
  return c;
}

}  // namespace

}  // namespace ringlab::lab07

namespace ringlab::lab {

const char* lab_name() { return "07-block-kernel"; }

std::vector<Criterion> lab_criteria() {
  using namespace ringlab::lab07;
  return {
      {"full-s100", "S = 100 (not a power of two), D = 64, full attention", 20, false, false,
       [] {
         return emulated({full_s100()},
                         "out = softmax(scale q.k) v over the keys: keep m, l and o, and rescale l and "
                         "o by expf(m - m_new) whenever the running max grows");
       }},
      {"d128", "D = 128, causal", 20, false, false,
       [] {
         return emulated({d128()}, "every d of 0 .. D-1: the dot product, the output accumulator and the writes");
       }},
      {"causal", "causal, both blocks at positions 0..S-1", 20, false, false,
       [] {
         return emulated({causal_s96()}, "under a.causal, key j is visible to row i when a.k_pos[j] <= a.q_pos[i]");
       }},
      {"gqa", "GQA: 6 query heads on 2 K/V heads", 20, false, false,
       [] {
         return emulated({gqa()},
                         "query head h reads K/V head h / (H / HKV): heads are grouped (0, 1, 2 -> 0), not "
                         "interleaved (h % HKV)");
       }},
      {"zigzag-striped", "ring blocks of zig-zag and striped layouts: positions not contiguous", 20, false, false,
       [] {
         return emulated(layouts(),
                         "the causal mask compares global positions, a.k_pos[j] <= a.q_pos[i], never the "
                         "row indices j <= i (the book's erratum 2)");
       }},
      {"empty-rows", "rows that see no key: out 0 and lse -inf, never NaN", 20, false, false,
       [] { return emulated(empty_rows(), "a row with no visible key: out 0, lse -INFINITY"); }},
      {"batch", "B = 3 with GQA, more keys than queries", 20, false, false,
       [] {
         return emulated({batch()},
                         "index with both lengths: q and out by Sq, k and v by Sk, lse is (B, H, Sq); and the "
                         "queries start at position 16 here, so only positions tell what each row sees");
       }},
      {"large-scores", "scores in the hundreds: no overflow", 20, false, false,
       [] { return emulated({large_scores()}, "expf overflows above about 88: subtract the running max"); }},
      {"device", "on the GPU: your file compiled by nvcc, every case above on the device", 300, false, true,
       [] {
         std::vector<Case> cases{full_s100(), d128(), gqa(), batch(), large_scores()};
         for (const Case& c : layouts()) cases.push_back(c);
         for (const Case& c : empty_rows()) cases.push_back(c);
         return device_criterion(cases);
       }},
  };
}

}  // namespace ringlab::lab
