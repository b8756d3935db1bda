#include "sim/plan/queries.hpp"

#include <algorithm>

#include "reference/attention.hpp"
#include "reference/layout.hpp"

namespace ringlab {

Family collective_family(Collective collective) {
  switch (collective) {
    case Collective::all_to_all_qkv:
    case Collective::all_to_all_out:
    case Collective::all_to_all_dout:
    case Collective::all_to_all_grads: return Family::ulysses;
    case Collective::all_gather_kv:
    case Collective::reduce_scatter_dkv: return Family::ring;
  }
  return Family::ring;
}

namespace {

template <class Match>
bool any_collective(const Plan& plan, Match&& match) {
  for (const Phase& phase : plan.phases())
    for (const TemplateEntry& entry : phase.body)
      if (const auto* c = std::get_if<CollectiveT>(&entry.op); c && match(c->collective)) return true;
  return false;
}

}  // namespace

bool plan_uses(const Plan& plan, Collective collective) {
  return any_collective(plan, [&](Collective c) { return c == collective; });
}

bool plan_uses(const Plan& plan, Family family) {
  return any_collective(plan, [&](Collective c) { return collective_family(c) == family; });
}

std::vector<int64_t> gathered_positions(const Plan& plan) {
  std::vector<int64_t> positions;
  positions.reserve(static_cast<size_t>(plan.spec().dims.seq));
  for (int64_t g = 0; g < plan.ring(); ++g) {
    const std::vector<int64_t> block = plan.block_positions(g);
    positions.insert(positions.end(), block.begin(), block.end());
  }
  return positions;
}

std::vector<int64_t> member_rows(const Plan& plan, int64_t rank) {
  const std::vector<int64_t> block = plan.block_positions(plan.ring_position(rank));
  std::vector<int64_t> rows;
  for (int64_t position : plan.layout().positions(rank))
    rows.push_back(std::lower_bound(block.begin(), block.end(), position) - block.begin());
  return rows;
}

int64_t total_ops(const Plan& plan) {
  int64_t total = 0;
  for (const Phase& phase : plan.phases())
    for (int64_t step = 0; step < phase.steps; ++step)
      for (const TemplateEntry& entry : phase.body) total += entry.when.contains(step, phase.steps) ? 1 : 0;
  return total * plan.ranks();
}

std::string erratum_mask_problem(const Plan& plan, const ComputeOp& op) {
  if (plan.spec().erratum != Erratum::kv_offset_mask) return "";
  // A query's index within its block is at most its position, so the local-index mask shows a
  // subset of the keys it should, and the unmasked block a superset: the op is wrong exactly when
  // the counts of visible pairs differ.
  const std::vector<int64_t> queries = plan.block_positions(op.q_block), keys = plan.block_positions(op.kv_block);
  const int64_t right = causal_pairs_of_positions(queries, keys);
  for (const KernelBlock& k : op.kernels) {
    if (k.erratum_local_query_index) {
      if (causal_pairs_of_positions(iota_positions(static_cast<int64_t>(queries.size())), keys) != right)
        return "hides keys its queries should see: it masks by the query's index within its block, not its "
               "position (erratum kv-offset-mask)";
    } else if (k.mask == MaskKind::none && right < static_cast<int64_t>(queries.size() * keys.size())) {
      return "leaves the block at offset 0 unmasked (`if kv_offset > 0`): its future keys are visible "
             "(erratum kv-offset-mask)";
    }
  }
  return "";
}

bool erratum_mask_is_wrong(const Plan& plan, const ComputeOp& op) { return !erratum_mask_problem(plan, op).empty(); }

FlopsBalance flops_balance(const std::vector<RankWork>& work) {
  FlopsBalance balance;
  double most = 0, sum = 0;
  for (size_t r = 0; r < work.size(); ++r) {
    if (work[r].flops > most) most = work[r].flops, balance.busiest = static_cast<int64_t>(r);
    sum += work[r].flops;
  }
  if (sum > 0) balance.ratio = most * static_cast<double>(work.size()) / sum;
  return balance;
}

RankWork rank_work(const Plan& plan, int64_t rank, const std::vector<Op>& ops) {
  RankWork w;
  std::vector<int64_t> forward_pairs(static_cast<size_t>(plan.ring()), -1);  // per key block; -1 = not seen
  for (const Op& op : ops) {
    if (const auto* c = std::get_if<ComputeOp>(&op.body)) {
      (c->kernels.empty() ? w.skipped : w.computed) += 1;
      if (!c->kernels.empty() && c->shape != BlockShape::full && c->shape != BlockShape::q_half &&
          c->shape != BlockShape::kv_half)
        ++w.partial;
      w.pairs += c->pairs;
      w.flops += c->flops;
      if (c->pass == Pass::forward) forward_pairs[static_cast<size_t>(c->kv_block)] = c->pairs;
    } else if (const auto* e = std::get_if<ExchangeOp>(&op.body)) {
      if (e->payload == Payload::kv && e->recv_from >= 0) w.kv_bytes_received += e->bytes;
    } else if (const auto* col = std::get_if<CollectiveOp>(&op.body)) {
      if (col->collective == Collective::all_gather_kv) w.kv_bytes_received += col->recv_bytes;
    }
  }
  if (w.kv_bytes_received > 0) {
    const int64_t own = plan.ring_position(rank), block = payload_bytes(plan, Payload::kv);
    for (int64_t g = 0; g < plan.ring(); ++g)
      if (g != own && forward_pairs[static_cast<size_t>(g)] == 0) w.kv_bytes_unused += block;
  }
  return w;
}

}  // namespace ringlab
