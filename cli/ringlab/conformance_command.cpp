// `ringlab conformance cases DIR [--suite quick|full] [--force]`: the case suite that judges a
// context-parallel attention implementation ringlab did not write (executors/sim/conformance_suite.hpp
// builds the cases; python3 -m ringlab.conformance runs an implementation on them).
//
// The case format is the text below (kFormat): the contract with the harness that runs an
// implementation on the cases (python3 -m ringlab.conformance); `ringlab conformance cases --help`
// prints it.
#include <iostream>
#include <memory>
#include <string>

#include "cli/ringlab/commands.hpp"
#include "executors/sim/conformance_suite.hpp"

namespace ringlab::cli {

namespace {

constexpr const char* kFormat = R"(
The case format, ringlab-conformance-case/1:

DIR/suite.json   {"format", "suite", "cases": [names, in order], "written_by"}
DIR/<case>/      one folder per case:
  case.json      the problem, the layout, the tolerances and the ring schedule (below)
  q.npy k.npy v.npy dout.npy   inputs, float32 '<f4', global token order, shapes (B, S, H, D) for q
                 and dout, (B, S, HKV, D) for k and v. For dtype bf16 (fp16) every value is exactly
                 a bf16 (fp16) value stored as float32: cast to the dtype loses nothing.
  out.npy lse.npy dq.npy dk.npy dv.npy   the oracle: exact attention in float64 ('<f8') on those
                 inputs; out, dq (B, S, H, D), dk, dv (B, S, HKV, D), lse (B, H, S) natural log.
                 dq, dk, dv are the gradients of sum(out * dout).

case.json keys:
  format         "ringlab-conformance-case/1"
  name, title    folder name; one line saying what the case tests
  stands_for     [{"report": "TransformerEngine #1930", "what": "..."}]: the real-world failures it
                 would have caught ([] with "stands_for_note" where no single report fits)
  B S H HKV D    sizes; GQA: query head h reads K/V head h / (H / HKV)
  dtype          "fp32" | "bf16" | "fp16": the dtype the implementation runs in
  causal         key position j <= query position i
  documents      packed document lengths summing to S ([] = one document): a query never sees a
                 key of another document (cu_seqlens = prefix sums)
  window         0 = none; causal: i - window < j <= i; not causal: |i - j| < window
  scale          softmax scale, 1/sqrt(D)
  lse_base       "e": lse = log(sum_j exp(scale q_i.k_j)) over the keys row i sees
  P              ranks (world size)
  layout         {"name": contiguous | zigzag | striped, "per_document": bool, "rows_per_rank",
                  "padding_rule": text, "positions": P lists of rows_per_rank integers}
                 positions[r][i] = global position (0..S-1) of rank r's local row i, or -1 for a
                 padding row. Every global position appears exactly once. A rank's q, k, v, dout
                 are the global rows at its positions, zeros at -1; its out, lse, dq, dk, dv rows
                 map back the same way (padding rows are dropped, never compared).
                 zigzag = the sequence cut into 2P chunks, rank r holding chunks r and 2P-1-r
                 (ring-flash-attention's zigzag, TransformerEngine's DualChunkSwap, PyTorch's
                 head-tail); with documents, per document (TransformerEngine's THD: each document
                 padded at its end to a multiple of 2P, then cut into 2P chunks).
  padding        {"rows": padding rows over all ranks, "rule": text}
  cu_seqlens     prefix sums of the documents ([0, S] with one document)
  cu_seqlens_padded   the same over the padded documents the ranks hold: document d's real rows are
                 [cu_seqlens_padded[d], cu_seqlens_padded[d] + len_d), its padding up to
                 cu_seqlens_padded[d + 1] (tail padding: the last entry is S plus the padding)
  no_key_rows    what out/lse are for a row that sees no key and how the harness treats them
  tolerances     {"out"|"lse"|"dq"|"dk"|"dv": {"abs", "rel"[, "rms", "rms_single_device"]},
                  "compare": text, "why": text}: an output passes when every element has
                 |actual - oracle| <= abs + rel |oracle| and, where "rms" is given (bf16, fp16),
                 sqrt(mean((actual - oracle)^2)) <= rms — over every element of the global tensors
                 (real rows only); NaN or inf never passes. rms_single_device: the RMS error of
                 the same problem on one device with the dtype's rounding points; rms = 1.5 times
                 it (an error that grows with P, such as bf16 accumulators, crosses it)
  ring           ringlab's ring schedule for this layout, for diagnosis:
                 {"direction": text, "steps": P, "kv_origin": [[...]]: kv_origin[r][t] = the rank
                 whose K/V block rank r computes with at step t ((r - t) mod P: K/V travel from
                 rank r to r + 1), "pairs": [[...]]: pairs[r][t] = visible (query, key) pairs
                 per (batch, head) between rank r's rows and that block (0: nothing to compute —
                 a block that changes such a row is an extra block), "dkv": text (where the
                 dK/dV of the block held at step t go)}. A wrong output row at global position p
                 on rank r with keys from rank s points at step (r - s) mod P of rank r.
  work           {"pairs_per_rank": [...], "imbalance": max / mean}: the layout's balance
  inputs         {"seed", "distribution": text, "logit_shift"}: how q k v dout were made

Exit status: 0 written; 2 bad usage (unknown suite, DIR not writable, DIR already holding
cases without --force): one line, and no case folder is left half-written (the cases are written
to a staging folder beside DIR and renamed into place whole).
)";

struct CasesFlags {
  std::string dir;
  std::string suite = "quick";
  bool force = false;
};

}  // namespace

void add_conformance_commands(CLI::App& app, Registry& registry) {
  CLI::App* conformance =
      app.add_subcommand("conformance", "cases that verify a context-parallel attention implementation");
  conformance->require_subcommand(1);
  auto flags = std::make_shared<CasesFlags>();
  CLI::App* cases = conformance->add_subcommand(
      "cases", "write the conformance cases (inputs, the float64 oracle's outputs, tolerances) into DIR");
  cases->add_option("DIR", flags->dir, "directory to write (created; it must not hold cases unless --force)")
      ->required();
  cases->add_option("--suite", flags->suite, "quick (small shapes, seconds) | full (adds larger ones)")
      ->capture_default_str();
  cases->add_flag("--force", flags->force, "replace the cases DIR already holds");
  cases->footer(kFormat);
  registry.add(cases, [flags] {
    const CasesWritten written = write_conformance_cases(flags->dir, flags->suite, flags->force);
    std::cout << "wrote " << written.cases << " " << flags->suite << " cases into " << flags->dir << " ("
              << written.files << " files)\n";
    return 0;
  });
}

}  // namespace ringlab::cli
