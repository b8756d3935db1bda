#include "sim/pipeline/config.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdint>
#include <cstdio>

#include "reference/error.hpp"
#include "reference/precision.hpp"
#include "sim/pipeline/command_line.hpp"

namespace ringlab {

std::string RunConfig::describe() const {
  std::string text = algo;
  if (algo == "hybrid") text += "(U=" + std::to_string(ulysses) + ")";
  text += " | " + layout + (block ? "(block=" + std::to_string(block) + ")" : "");
  text += " | P=" + std::to_string(ranks) + " | " + dims.to_string();
  const Mask m = mask();
  text += m.none() ? " | full" : " | " + m.describe() + (no_skip ? ", no skip" : "") + (full_ring ? ", full ring" : "");
  text += backward ? " | fwd+bwd" : " | fwd";
  text += " | seed " + std::to_string(seed);
  if (!erratum.empty()) text += " | erratum " + erratum;
  if (precision != "fp32")
    text += " | " + precision + ", accumulate " + (accumulate == "storage" ? precision : accumulate);
  if (merge != "exp") text += " | merge " + merge;
  return text;
}

void add_run_flags(CLI::App& command, RunConfig& config) {
  add_schedule_flags(command, config);
  command.add_option("--in", config.in_dir, "read q.npy k.npy v.npy [dout.npy] from DIR");
  command.add_option("--save", config.save_dir, "write out.npy lse.npy [dq.npy dk.npy dv.npy] into DIR");
  command.add_option("--trace", config.trace_file, "write a Chrome trace event JSON file");
  command.add_flag("--json", config.json, "one JSON summary object on stdout");
  command.add_flag("--dry-run", config.dry_run, "plan and cost model only, no tensors");
  command
      .add_option("--hw", config.hw,
                  "cost-model machine for --dry-run: h100-nvlink | h100-ib | h100-pcie | cpu, or a JSON file")
      ->capture_default_str();
  command.add_option("--inject", config.inject,
                     "fault injection KIND@RANK:STEP, KIND = drop|duplicate|corrupt|delay|alter");
  command.add_option("--timeout", config.timeout, "deadlock watchdog: seconds without progress")->capture_default_str();
  command.add_flag("!--no-progress", config.progress, "no progress bar on stderr");
  add_precision_flags(command, config);
}

void add_precision_flags(CLI::App& command, RunConfig& config) {
  command
      .add_option("--precision", config.precision,
                  "storage precision of the inputs, K/V on the wire and each step's partial results: fp32 | bf16 | "
                  "fp16 (rounded to nearest even, emulated on the CPU)")
      ->capture_default_str();
  command
      .add_option("--accumulate", config.accumulate,
                  "precision of the running output and the dq, dK/dV accumulators: fp32 (each step's result "
                  "stored in the storage precision, then added in fp32) | storage (rounded after every merge) | "
                  "fused (each step added into fp32 accumulators by the kernel itself, never rounded)")
      ->check(CLI::IsMember({"fp32", "storage", "fused"}))
      ->capture_default_str();
  command
      .add_option("--merge", config.merge,
                  "the LSE merge: exp (max-shifted exponentials) | logsigmoid (sigmoid form, no exponential of a "
                  "difference that can overflow)")
      ->check(CLI::IsMember({"exp", "logsigmoid"}))
      ->capture_default_str();
}

void add_schedule_flags(CLI::App& command, RunConfig& config, bool ranks) {
  command.add_option("--algo", config.algo, "communication pattern: ring | allgather | ulysses | hybrid")
      ->check(CLI::IsMember({"ring", "allgather", "ulysses", "hybrid"}))
      ->capture_default_str();
  command
      .add_option("--layout", config.layout,
                  "token-to-rank mapping: contiguous | zigzag | striped (per document with --docs) | balanced "
                  "(units placed by their work under the mask)")
      ->check(CLI::IsMember({"contiguous", "zigzag", "striped", "balanced"}))
      ->capture_default_str();
  // Every integer flag takes only a whole number an int64_t holds (cli::whole_number); the ranges
  // are checked with the problem (validate()).
  cli::whole_number(command.add_option("--block", config.block,
                                       "tokens per layout unit (default: contiguous S/P, zigzag S/(2P), striped 1)"),
                    1);
  if (ranks)
    cli::whole_number(command.add_option("--ranks,-P", config.ranks, "number of ranks P")->capture_default_str(),
                      INT64_MIN);
  cli::whole_number(command.add_option("--ulysses", config.ulysses, "hybrid: Ulysses degree U (ring degree P/U)"),
                    INT64_MIN);
  // Size flags remember that they were given, so that --in files that contradict them are an error.
  auto size = [&](const char* flag, int64_t& value, const char* text) {
    return cli::whole_number(command.add_option(flag, value, text), INT64_MIN)
        ->each([&config, flag](const std::string&) { config.sizes_given.emplace_back(flag); });
  };
  size("--batch", config.dims.batch, "batch B")->capture_default_str();
  size("--seq", config.dims.seq, "sequence length S (tokens)")->capture_default_str();
  size("--heads", config.dims.heads, "query heads H")->capture_default_str();
  size("--kv-heads", config.dims.kv_heads, "key/value heads HKV (default H; fewer is GQA)");
  size("--dim", config.dims.dim, "head dimension D")->capture_default_str();
  command.add_flag("--causal", config.causal, "causal mask by global token position");
  size("--window", config.window,
       "sliding window W: a query sees the W keys up to itself (causal), or within W-1 either side");
  command.add_option("--docs", config.docs,
                     "packed documents: lengths L1,L2,... summing to S, or random:N (N long-tailed lengths from "
                     "--seed); attention never crosses a document");
  cli::whole_number_unsigned(
      command.add_option("--seed", config.seed, "seed of the generated inputs and of --docs random:N's lengths")
          ->capture_default_str());
  command.add_flag("--no-skip", config.no_skip, "compute fully masked blocks instead of skipping them");
  command.add_flag("--full-ring", config.full_ring,
                   "a plain ring: every K/V block makes all P-1 hops, even where a window or documents leave no rank "
                   "that needs it (ringlab's ring stops each block where the last rank that needs it is)");
  command.add_flag("--backward", config.backward, "also run the backward pass (dq, dk, dv)");
  command
      .add_option("--erratum", config.erratum,
                  "run a source-material mistake: reverse-dkv (dK/dV against the K/V direction) | "
                  "kv-offset-mask (causal mask by kv offset)")
      ->check(CLI::IsMember({"reverse-dkv", "kv-offset-mask"}));
}

PlanSpec plan_spec(const RunConfig& config) {
  PlanSpec spec;
  spec.algo = parse_algorithm(config.algo);
  spec.layout = parse_layout(config.layout);
  spec.block = config.block;
  spec.ranks = config.ranks;
  spec.ulysses = config.ulysses;
  spec.dims = config.dims;
  spec.causal = config.causal;
  spec.window = config.window;
  spec.documents = config.documents;
  // Uneven shapes: pad S (or each document) to what the layout needs; the mask hides the padding,
  // the pipeline crops it.
  pad_to_layout(spec);
  pad_heads(spec);
  spec.skip = !config.no_skip;
  spec.full_ring = config.full_ring;
  spec.backward = config.backward;
  spec.erratum = parse_erratum(config.erratum);
  return spec;
}

void check_countable(const AttentionDims& dims, int64_t ranks) {
  // Sizes, pairs and bytes are counted in int64_t (a rank's visible pairs are up to S^2, a tensor
  // in fp64 8 B S (H + 2 HKV) D bytes), padding may add up to 2P - 1 tokens, and no executor runs
  // more ranks than tokens usefully: past these bounds the counts wrap and a dry run prints
  // negative megabytes. Checked in long double, which holds every product exactly enough here.
  constexpr int64_t kMostTokens = int64_t{1} << 31;  // S^2 below 2^62
  constexpr long double kMostBytes = 0x1p62L;
  const long double bytes = 8.0L * static_cast<long double>(dims.batch) * static_cast<long double>(dims.seq) *
                            (static_cast<long double>(dims.heads) + 2.0L * static_cast<long double>(dims.kv_heads)) *
                            static_cast<long double>(dims.dim);
  // Ranks: every plan holds per-rank state (a dry run's clocks, the plan's op lists), and 2^20 is
  // more than any machine has; P = 10^8 took 47 s and 15 GB before any check could refuse it.
  constexpr int64_t kMostRanks = int64_t{1} << 20;
  if (ranks > kMostRanks) {
    throw UsageError("P=" + std::to_string(ranks) + " is more ranks than ringlab plans (at most 2^20 = " +
                     std::to_string(kMostRanks) + "); use --ranks " + std::to_string(kMostRanks) + " or fewer");
  }
  if (dims.seq > kMostTokens || bytes > kMostBytes) {
    throw UsageError("B=" + std::to_string(dims.batch) + " S=" + std::to_string(dims.seq) +
                     " H=" + std::to_string(dims.heads) + " HKV=" + std::to_string(dims.kv_heads) +
                     " D=" + std::to_string(dims.dim) + " P=" + std::to_string(ranks) +
                     " is too large to count in 64 bits; keep --seq at most 2^31 = " + std::to_string(kMostTokens) +
                     " and B x S x (H + 2 HKV) x D below 2^59");
  }
}

void validate(const RunConfig& flags) {
  if (flags.ranks <= 0) {
    throw UsageError("--ranks must be positive, got " + std::to_string(flags.ranks) + "; pass --ranks N with N >= 1");
  }
  if (flags.ulysses != 0 && flags.algo != "hybrid") {
    throw UsageError("--ulysses " + std::to_string(flags.ulysses) + " applies to --algo hybrid only (" +
                     (flags.algo == "ulysses" ? "--algo ulysses spreads the heads over all P ranks"
                                              : "--algo " + flags.algo + " has no Ulysses degree") +
                     "); drop --ulysses, or use --algo hybrid --ulysses U");
  }
  const auto given = [&flags](const char* flag) {
    return std::find(flags.sizes_given.begin(), flags.sizes_given.end(), flag) != flags.sizes_given.end();
  };
  if (given("--kv-heads") && flags.dims.kv_heads <= 0) {
    throw UsageError("--kv-heads must be positive, got " + std::to_string(flags.dims.kv_heads) +
                     "; e.g. --kv-heads 8, or leave it out for HKV = H");
  }
  AttentionDims dims = flags.dims;
  if (dims.kv_heads == 0) dims.kv_heads = dims.heads;  // --kv-heads' default
  dims.validate();
  check_countable(dims, flags.ranks);
  if (flags.timeout <= 0) {
    char text[64];
    std::snprintf(text, sizeof text, "%g", flags.timeout);
    throw UsageError(std::string("--timeout must be positive seconds, got ") + text + "; e.g. --timeout 10");
  }
  if (!flags.save_dir.empty() && flags.dry_run) {
    throw UsageError("--save needs tensors but --dry-run computes none; drop one of them");
  }
  if (!flags.in_dir.empty() && flags.dry_run) {
    throw UsageError("--in reads tensors but --dry-run computes none; drop one of them");
  }
  const bool window_given =
      std::find(flags.sizes_given.begin(), flags.sizes_given.end(), "--window") != flags.sizes_given.end();
  if (window_given && flags.window <= 0) {
    throw UsageError("--window must be at least 1 (the keys a query sees, its own included), got " +
                     std::to_string(flags.window) + "; e.g. --window 4096, or leave it out for no window");
  }
  parse_precision(flags.precision);  // an unknown one: one line with the choices
  if (flags.dry_run && (flags.precision != "fp32" || flags.accumulate != "fp32" || flags.merge != "exp")) {
    throw UsageError(
        "--precision, --accumulate and --merge round the simulator's tensors but --dry-run computes none; drop "
        "them (the cost model's element size comes from --hw) or drop --dry-run");
  }
}

}  // namespace ringlab
