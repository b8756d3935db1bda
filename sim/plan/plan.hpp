// Plans: a schedule compiled into data.
//
// A plan is a program of phases that every rank runs. A phase is a loop of `steps` steps whose
// body is a list of op *templates*: the fields that vary across ranks and steps (the peer of a
// send, the slot a buffer lives in, the block whose keys a rank holds) are small expressions of
// (rank, step). So a uniform schedule — a ring — is a few templates whatever P is, and
//   * expand(plan, rank) turns it into the concrete, ordered list of operations of one rank —
//     what the sim and GPU executors run, the checker checks, `ringlab plan` prints and the
//     viewer animates;
//   * the dry executor evaluates each template for all ranks at once, which is how P = 16384
//     stays fast.
// One file per algorithm (sim/plan/algorithms/*.cpp) writes these templates; executors only know the
// op vocabulary below, never an algorithm.
//
// Ranks and groups: world rank p = g U + u, with g in [0, R) its position on the ring and u in
// [0, U) its index in its Ulysses group (U = Ulysses degree, R = P / U ring degree; ring and
// all-gather have U = 1, Ulysses has R = 1). A Ulysses group is U consecutive ranks; a ring
// group is the R ranks that share u. The tokens of ring position g — its "block" — are the union
// of its Ulysses group's tokens, in ascending position order.
//
// Sections: [spec] [expressions] [templates] [plan] [concrete ops] [building]
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "reference/attention.hpp"
#include "reference/flash_attention.hpp"
#include "reference/layout.hpp"

namespace ringlab {

// ---- [spec] ----------------------------------------------------------------------------------

enum class Algorithm : uint8_t { ring, allgather, ulysses, hybrid };
enum class Erratum : uint8_t {
  none,
  reverse_dkv,     // erratum 1 of the book: dK/dV travel against the K/V direction
  kv_offset_mask,  // erratum 2 of the book: the source's `if kv_offset > 0` mask by the query's local index
};

const char* algorithm_name(Algorithm algo);
Algorithm parse_algorithm(const std::string& name);  // throws UsageError
const char* erratum_name(Erratum erratum);
Erratum parse_erratum(const std::string& name);  // "" -> none; throws UsageError

// What a plan is compiled from.
struct PlanSpec {
  Algorithm algo = Algorithm::ring;
  LayoutKind layout = LayoutKind::contiguous;
  int64_t block = 0;    // tokens per layout unit; 0 = the layout's default
  int64_t ranks = 4;    // P
  int64_t ulysses = 1;  // U
  AttentionDims dims;
  bool causal = false;
  int64_t window = 0;                   // sliding window W (keys a query sees, its own included); 0 = none
  std::vector<int64_t> documents = {};  // packed document lengths summing to S - padding; empty = one document
  int64_t padding = 0;  // the last `padding` of dims.seq tokens are padding: hidden by the mask, never returned
  // Per-document layouts with any lengths: document_padding[d] padding tokens after document d
  // (empty = none), so that every document spans a multiple of what the layout cuts it into
  // (pad_to_layout below). Hidden by the mask, never returned, like `padding`.
  std::vector<int64_t> document_padding = {};
  int64_t padding_heads = 0;  // the last of dims.heads (and their kv heads) are padding, never returned
  bool skip = true;           // skip fully masked blocks (with any mask)
  bool full_ring = false;     // ring: every K/V block makes all R-1 hops, whatever the mask (a plain ring)
  bool backward = false;
  Erratum erratum = Erratum::none;
  int64_t element_bytes = 4;  // of q, k, v, out on the wire: 4 in the simulator (fp32), 2 for bf16

  int64_t ring_degree() const { return ranks / ulysses; }  // R
  Mask mask() const { return Mask(causal, window, documents, padding > 0 ? dims.seq - padding : 0, document_padding); }
  bool masked() const { return causal || window > 0 || documents.size() > 1 || padding > 0 || padded_documents(); }
  int64_t padding_tokens() const;                                 // padding + the documents' padding
  bool padded_documents() const;                                  // some document_padding > 0
  int64_t tokens() const { return dims.seq - padding_tokens(); }  // the real tokens
  // The user's sizes: S without the padding tokens, H and HKV without the padding heads.
  AttentionDims real_dims() const;
  // Where the user's tokens 0..tokens()-1 sit among the plan's dims.seq positions (ascending;
  // 0..tokens()-1 unless documents are padded). The pipeline scatters inputs there and gathers
  // outputs from there.
  std::vector<int64_t> token_positions() const;
  // The inverse: for each of the plan's dims.seq positions, the user's token there, -1 for padding.
  std::vector<int64_t> user_positions() const;
  // One line: algorithm, layout, P, shape, padding, mask, passes. Throws UsageError where the
  // layout does not fit (as build_plan does); O(documents) whatever S.
  std::string describe() const;
};

// The checks build_plan applies before it builds anything: every field the command line sets and
// their consistency (U divides P and H, an erratum with its plan, documents that add up to S and
// fit the layout, padding that leaves real tokens and heads). Throws UsageError, one line naming the
// field and the fix. O(documents): for specs read from files (a trace's run) before anything uses
// them.
void validate_plan_spec(const PlanSpec& spec);

// ---- [expressions] ---------------------------------------------------------------------------

// A ring position relative to the rank's own: (g + offset + per_step * step) mod R.
struct Shift {
  int64_t offset = 0;
  int64_t per_step = 0;
};

// One of two buffer slots chosen by step parity: slot[(step + offset) % 2] (double buffering).
enum class Slot : uint8_t {
  // K/V blocks (double buffer)
  kv0,
  kv1,
  // dK/dV accumulators travelling with K/V (fp32; double buffer)
  dkv0,
  dkv1,
  // this step's dK/dV contribution, before it joins the travelling accumulator
  dkv_local,
  // all ring positions' K/V, after an all-gather (ring position order)
  gathered_kv,
  // dK/dV for all ring positions, before the reduce-scatter
  gathered_dkv,
  // the rank's own block's dK/dV, sent home by the last rank its block reached (trimmed ring)
  dkv_home,
  count
};
const char* slot_name(Slot slot);

struct SlotPair {
  Slot even = Slot::kv0, odd = Slot::kv0;  // the same slot twice = no double buffering
  int64_t offset = 0;
  Slot at(int64_t step) const { return (step + offset) % 2 == 0 ? even : odd; }
};

// The steps on which a template is present: first <= step <= steps - 1 - skip_last.
struct Steps {
  int64_t first = 0;
  int64_t skip_last = 0;
  bool contains(int64_t step, int64_t steps) const { return step >= first && step <= steps - 1 - skip_last; }
};

// ---- [templates] -----------------------------------------------------------------------------

enum class Payload : uint8_t {
  kv,   // K and V of a block (input precision)
  dkv,  // dK and dV accumulators of a block (fp32)
};

// Which ranks take part in an exchange. `fixed`: every rank sends and receives. The other two
// follow a trimmed ring (Phase::travel, block b makes travel[b] hops, b -> b+1 -> ... ):
//   along: at step t a rank sends the block it holds (position g - t) on iff hop t + 1 of it is
//          needed, t + 1 <= travel[g - t], and receives block g - 1 - t iff t + 1 <= travel[g - 1 - t];
//   home:  a rank sends the block it holds home (to g - t) iff its travel ends here,
//          t == travel[g - t] > 0, and receives its own block's home-coming from g + t iff
//          t == travel[g] > 0.
// A side that does not take part is absent from the ExchangeOp; with neither, there is no op, and
// no Wait for it.
enum class Route : uint8_t { fixed, along, home };

// Posts a non-blocking send of a slot to one ring neighbour and a receive into a slot from
// another; the matching Wait completes both. Either side may be absent.
struct ExchangeT {
  int id = 0;  // names the exchange for its Wait; unique within the phase
  Payload payload = Payload::kv;
  bool sends = true, receives = true;
  SlotPair send_slot, recv_slot;
  Shift send_to{1, 0}, recv_from{-1, 0};
  Route route = Route::fixed;
};

// Waits for the exchange `exchange_id` posted `lag` steps ago (0 = this step).
struct WaitT {
  int exchange_id = 0;
  int64_t lag = 0;
};

// Puts this rank's own K/V (its block's, its heads') into a slot: the ring's step 0.
struct LoadKvT {
  SlotPair slot;
};

enum class Pass : uint8_t { forward, backward };

// Attention of this rank's queries (its block's tokens, its heads) against the keys of one ring
// position held in a slot. Forward: merged into the accumulator. Backward: dq accumulates
// locally and dK/dV go to grad_slot.
struct ComputeT {
  Pass pass = Pass::forward;
  SlotPair kv_slot;
  Shift origin;                  // ring position whose keys the slot holds
  bool gathered = false;         // kv_slot is gathered_kv: the origin's rows within it
  SlotPair grad_slot;            // backward only
  bool accumulate_grad = false;  // backward: add into grad_slot instead of overwriting it
};

// dK/dV bookkeeping of the ring backward: to += from.
struct AccumulateT {
  SlotPair from, to;
};

enum class Collective : uint8_t {
  all_to_all_qkv,      // sequence-sharded q, k, v -> this Ulysses group's tokens, 1/U of the heads
  all_to_all_out,      // back: out and lse to sequence-sharded
  all_to_all_dout,     // dout (and out) to head-sharded, for the backward
  all_to_all_grads,    // dq, dk, dv back to sequence-sharded
  all_gather_kv,       // every ring position's K/V into gathered_kv
  reduce_scatter_dkv,  // gathered_dkv summed over the ring, each position keeps its own
};
const char* collective_name(Collective collective);

struct CollectiveT {
  Collective collective = Collective::all_gather_kv;
};

// Forward: out and lse of this rank's rows from the accumulator.
struct FinalizeT {};
// Backward: delta = rowsum(dout o out) of this rank's rows, dq = 0, and the dK/dV accumulator of
// the rank's own block (slot dkv0) = 0.
struct PrepareBackwardT {};
// Backward: the dK/dV accumulator in the slot is this rank's block's gradient: store it.
struct StoreGradsT {
  SlotPair slot;
};

using OpTemplate = std::variant<ExchangeT, WaitT, LoadKvT, ComputeT, AccumulateT, CollectiveT, FinalizeT,
                                PrepareBackwardT, StoreGradsT>;

// Which ranks run an entry at a step it is present on, in a trimmed ring (Phase::travel):
//   always:     every rank;
//   held:       ranks that hold the block of the step, t <= travel[g - t] (it reached them);
//   home_first: t == 0 and travel[g] == 0 (the rank's own block never left: its accumulator is home);
//   home_now:   t == travel[g] > 0 (the rank's own block's accumulator comes home this step).
enum class Needs : uint8_t { always, held, home_first, home_now };

struct TemplateEntry {
  OpTemplate op;
  Steps when;
  Needs needs = Needs::always;
};

// Which group a phase's ring positions and collectives refer to.
enum class Family : uint8_t { ring, ulysses };

struct Phase {
  std::string name;  // "ring forward", "all-to-all q, k, v"...
  Pass pass = Pass::forward;
  Family family = Family::ring;
  int64_t steps = 1;
  std::vector<TemplateEntry> body;
  // A trimmed ring: the hops each ring position's block makes (empty = every block every step).
  // Routes and Needs other than fixed/always read it.
  std::vector<int64_t> travel = {};
  // Whether a rank at ring position g runs an entry at `step` (Needs), and which sides of an
  // exchange it posts (Route): what expand() and the dry executor both evaluate.
  bool runs(Needs needs, int64_t g, int64_t step) const;
  bool route_sends(Route route, int64_t g, int64_t step) const;
  bool route_receives(Route route, int64_t g, int64_t step) const;
};

// ---- [plan] ----------------------------------------------------------------------------------

class Plan {
 public:
  Plan(PlanSpec spec, std::vector<Phase> phases);

  const PlanSpec& spec() const { return spec_; }
  const Layout& layout() const { return layout_; }
  const Mask& mask() const { return mask_; }
  // Blocks decided by counting visible pairs under the mask (a window, documents, or a layout
  // given as a table) rather than by the causal closed forms.
  bool counted_blocks() const { return mask_.general() || layout_.is_explicit(); }
  const std::vector<Phase>& phases() const { return phases_; }

  int64_t ranks() const { return spec_.ranks; }
  int64_t ulysses() const { return spec_.ulysses; }
  int64_t ring() const { return spec_.ring_degree(); }
  int64_t ring_position(int64_t rank) const { return rank / spec_.ulysses; }
  int64_t ulysses_index(int64_t rank) const { return rank % spec_.ulysses; }
  int64_t rank_at(int64_t ring_position, int64_t ulysses_index) const {
    return ring_position * spec_.ulysses + ulysses_index;
  }
  // World rank at a shift along the rank's ring (same Ulysses index).
  int64_t ring_peer(int64_t rank, Shift shift, int64_t step) const;
  // Ring position at a shift from the rank's own.
  int64_t ring_position_at(int64_t rank, Shift shift, int64_t step) const;

  // The tokens of a ring position (its Ulysses group's), ascending, and as layout units.
  std::vector<int64_t> block_positions(int64_t ring_position) const;
  std::vector<int64_t> block_units(int64_t ring_position) const;
  int64_t block_tokens() const { return spec_.dims.seq / ring(); }
  // Heads a rank computes after the Ulysses all-to-all: [first, first + count).
  int64_t heads_per_rank() const { return spec_.dims.heads / spec_.ulysses; }
  int64_t kv_heads_per_rank() const { return spec_.dims.kv_heads / spec_.ulysses; }

 private:
  PlanSpec spec_;
  Mask mask_;
  Layout layout_;
  std::vector<Phase> phases_;
};

// ---- [concrete ops] --------------------------------------------------------------------------

// How a compute step covers its (query block x key block) pair.
enum class BlockShape : uint8_t {
  full,      // every query sees every key: no mask
  diagonal,  // the causal mask cuts through: masked by position
  q_half,    // only some query units see the keys, fully (zig-zag: the late half of the queries)
  kv_half,   // all queries see some key units, fully (zig-zag: the early half of the keys)
  masked,    // fully masked but computed anyway (--no-skip)
  skipped,   // fully masked and skipped: no kernel call
  erratum,   // computed with the erratum mask
  partial,   // a window or document mask cuts through: masked by position
};
const char* block_shape_name(BlockShape shape);

// One kernel call: local query rows x rows of the key slot, under a mask.
struct KernelBlock {
  RowRange q_rows, kv_rows;
  Mask mask;                               // none: every pair of the rows is visible
  bool skip_masked_tiles = true;           // false with --no-skip: masked tiles are computed too
  bool erratum_local_query_index = false;  // kv-offset-mask erratum: queries masked by local index
};

struct ExchangeOp {
  int id = 0;
  Payload payload = Payload::kv;
  int64_t send_to = -1, recv_from = -1;  // world ranks, -1 = absent
  Slot send_slot = Slot::kv0, recv_slot = Slot::kv0;
  int64_t bytes = 0;         // each direction
  int tag = 0;               // same on both ends
  int64_t origin_sent = -1;  // ring position whose data is sent (for labels and checks)
};
struct WaitOp {
  int exchange_id = 0;
  int64_t exchange_step = 0;  // the step that posted it
};
struct LoadKvOp {
  Slot slot = Slot::kv0;
  int64_t block = 0;  // the rank's own ring position
};
struct ComputeOp {
  Pass pass = Pass::forward;
  Slot kv_slot = Slot::kv0;
  int64_t q_block = 0;        // the rank's own ring position
  int64_t kv_block = 0;       // the ring position whose keys are used
  int64_t kv_row_offset = 0;  // first row of the block within the slot (gathered slots)
  Slot grad_slot = Slot::dkv_local;
  bool accumulate_grad = false;
  BlockShape shape = BlockShape::full;
  std::vector<KernelBlock> kernels;  // empty when skipped
  int64_t pairs = 0;                 // visible (query, key) pairs per (batch, head) actually used
  int64_t computed_pairs = 0;        // rows x cols of the kernel calls (work done incl. masked)
  double flops = 0;                  // of the visible pairs, all of this rank's heads and batch
};
struct AccumulateOp {
  Slot from = Slot::dkv_local, to = Slot::dkv0;
};
struct CollectiveOp {
  Collective collective = Collective::all_gather_kv;
  int64_t group = 0;             // the group's index in its family
  std::vector<int64_t> members;  // world ranks, in group order
  int64_t send_bytes = 0;        // bytes this rank sends in total
  int64_t recv_bytes = 0;
};
struct FinalizeOp {};
struct PrepareBackwardOp {};
struct StoreGradsOp {
  Slot slot = Slot::dkv0;
};

using OpBody = std::variant<ExchangeOp, WaitOp, LoadKvOp, ComputeOp, AccumulateOp, CollectiveOp, FinalizeOp,
                            PrepareBackwardOp, StoreGradsOp>;

struct Op {
  int phase = 0;
  int64_t step = 0;
  OpBody body;
};

// The ordered operations of one rank.
std::vector<Op> expand(const Plan& plan, int64_t rank);

// Resolves one compute of a ring step: this rank's block against ring position kv_block,
// under the spec's mask, skip and erratum. Shared by expand() and the dry executor.
ComputeOp resolve_compute(const Plan& plan, int64_t rank, int64_t kv_block, Pass pass);

// Visible (query, key) pairs between two ring positions' blocks under the plan's window or
// document mask (what resolve_compute's pairs are then). Exact; by whole layout units when blocks
// have few of them.
int64_t block_mask_pairs(const Plan& plan, int64_t q_block, int64_t kv_block);

// Bytes of one payload of a ring position's block (what an Exchange of it sends).
int64_t payload_bytes(const Plan& plan, Payload payload);
// The tag of exchange `id` of phase `phase` at `step`, the same on both ends and distinct for every
// (phase, exchange, step) of a plan: (phase x 4 + id) x 10^6 + step, as every trace ringlab has
// written reads it. Exact for ids below 4, steps below 10^6 and up to 255 phases, where 2 x tag + 1
// (the simulator sends K and V as tags 2x and 2x + 1) still fits an int. Throws std::logic_error
// outside those bounds rather than wrap into another exchange's tag. Only op lists (expand) and
// traces carry tags: neither exists for a ring of 10^6 steps (plans that large are refused for
// showing, and a traced dry run for its size), while a dry run without a trace needs none.
int exchange_tag(int64_t phase, int id, int64_t step);
// The inverse's exchange: (phase x 4 + id) of a tag (a trace's send; old traces alike).
inline int64_t exchange_of_tag(int64_t tag) { return tag / 1'000'000; }

// Bytes one rank sends (and as many it receives) in one collective of this plan; the same on every
// rank. What CollectiveOp::send_bytes holds, without building the op (the dry executor's use).
int64_t collective_bytes(const Plan& plan, Collective collective);

// ---- [building] ------------------------------------------------------------------------------

// Uneven shapes: sets spec.padding and spec.document_padding from the real S (spec.dims.seq) and
// documents, and grows spec.dims.seq by them, so that the layout divides. Without --block:
//   * S padded at its end to a multiple of P (2P for zig-zag) — PlanSpec::padding;
//   * with packed documents on a per-document layout (zig-zag, striped), each document padded at
//     its own end to a multiple of 2P (zig-zag) or P (striped) — PlanSpec::document_padding — as
//     TransformerEngine pads each THD sequence to a multiple of 2 cp. Padding rather than uneven
//     chunks: every rank's block stays the same size (the ring's buffers, the kernels and every
//     executor are unchanged), for at most 2P - 1 idle rows per document. The mask hides them,
//     so pairs, FLOPs and the balance figures count real tokens only.
// With --block only the per-document padding applies (to multiples of 2P block or P block).
// `ringlab run`, `ringlab plan`, `ringlab compare` and the viewer all pad through here.
void pad_to_layout(PlanSpec& spec);
// Heads that do not divide over the Ulysses degree U: HKV padded up to a multiple of U, with the
// query heads of its group (H = group x HKV), all zero and cut from the outputs
// (PlanSpec::padding_heads). Not when U > HKV: every rank would then hold a zero head or more per
// real one (that needs K/V heads replicated across ranks, which ringlab does not do: build_plan
// refuses it with the fix). Called after pad_to_layout, by the same commands.
void pad_heads(PlanSpec& spec);
// The spec padded anew for its own algorithm, layout and U: what `ringlab run` would run for the
// user's sizes (real_dims) with these (compare changes them row by row; a row must not inherit
// padding that another layout or U needed).
PlanSpec repadded(const PlanSpec& spec);

// Compiles a spec into a plan; throws UsageError naming what does not fit (divisibility by the
// layout, H and HKV by U, U by P, an erratum the algorithm does not have).
Plan build_plan(const PlanSpec& spec);

// One function per algorithm, each in its own file under sim/plan/algorithms/.
std::vector<Phase> ring_phases(const PlanSpec& spec);
std::vector<Phase> allgather_phases(const PlanSpec& spec);
std::vector<Phase> ulysses_phases(const PlanSpec& spec);  // also the hybrid: Ulysses x ring

// The ring loops shared by ring and hybrid (sim/plan/algorithms/ring.cpp). ring_travel: per ring
// position, the hops its block makes: the farthest hop h <= R - 1 at which the rank g + h still sees
// some of its keys, with a window or documents and skipping on (the trimmed ring). Otherwise every
// entry is the largest of those hops (all the untrimmed loops use): R - 1 without a mask.
// ring_hops: the most of them, R - 1 unless the mask leaves the farthest blocks unneeded by every rank.
// The two phases take ring_travel(spec), computed once per plan (it probes the mask block by block).
std::vector<int64_t> ring_travel(const PlanSpec& spec);
int64_t ring_hops(const PlanSpec& spec);
Phase ring_forward_phase(const PlanSpec& spec, const std::vector<int64_t>& travel);
Phase ring_backward_phase(const PlanSpec& spec, const std::vector<int64_t>& travel);

}  // namespace ringlab
