#include "sim/pipeline/problem.hpp"

#include "reference/layout.hpp"

namespace ringlab {

PlanSpec Problem::plan_spec(int64_t element_bytes) const {
  PlanSpec spec = ringlab::plan_spec(config);
  spec.element_bytes = element_bytes;
  return spec;
}

Problem resolve_problem(const RunConfig& flags, const AttentionDims* files) {
  validate(flags);
  Problem problem{flags};
  RunConfig& config = problem.config;
  if (files) {
    config.dims = *files;
  } else if (config.dims.kv_heads == 0) {
    config.dims.kv_heads = config.dims.heads;
  }
  config.documents.clear();
  if (!config.docs.empty()) {
    config.documents = layout_documents(config.docs, config.dims.seq, config.seed, parse_layout(config.layout),
                                        config.ranks, config.block);
  }
  return problem;
}

}  // namespace ringlab
