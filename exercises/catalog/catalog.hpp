// The exercises of the catalog, one file each (exercises/catalog/<id>.cpp), each defining the
// CatalogEntry that names it: its id, title, sources and lab, declared once and used by the
// listing, by the Exercise its function writes, and by its variant draws. catalog.cpp lists them
// in the order `ringlab exercises` prints them.
//
// The entries are constexpr (constant-initialised: no static-initialisation order to mind); this
// header gives them external linkage so that the catalog's table can name them. Each file keeps its
// names in a namespace of its own (the catalog is compiled as one unit): its entry is
// catalog::<id, with underscores>::kEntry.
#pragma once

#include "exercises/exercise.hpp"
#include "sim/pipeline/config.hpp"

namespace ringlab::exercises::catalog {

// the source material's exercises 1-7
namespace attention_memory {
extern const CatalogEntry kEntry;
}
namespace comm_volume {
extern const CatalogEntry kEntry;
}
namespace overlap_time {
extern const CatalogEntry kEntry;
}
namespace causal_skip {
extern const CatalogEntry kEntry;
}
namespace hybrid_plan {
extern const CatalogEntry kEntry;
}
namespace online_softmax {
extern const CatalogEntry kEntry;
}
namespace flash_ring_memory {
extern const CatalogEntry kEntry;
}

// the worked numbers of the context-parallelism notes
namespace imbalance_ratio {
extern const CatalogEntry kEntry;
}
namespace zigzag_positions {
extern const CatalogEntry kEntry;
}
namespace layout_efficiency {
extern const CatalogEntry kEntry;
}
namespace overlap_threshold {
extern const CatalogEntry kEntry;
}
namespace overlap_profile {
extern const CatalogEntry kEntry;
}
namespace ring_vs_allgather {
extern const CatalogEntry kEntry;
}
namespace backward_volume {
extern const CatalogEntry kEntry;
}
namespace ulysses_degree {
extern const CatalogEntry kEntry;
}
namespace memory_table {
extern const CatalogEntry kEntry;
}

// one per known mistake of the source material
namespace erratum_dkv_direction {
extern const CatalogEntry kEntry;
}
namespace erratum_causal_mask {
extern const CatalogEntry kEntry;
}
namespace erratum_softmax_scale {
extern const CatalogEntry kEntry;
}
namespace erratum_skip_speedup {
extern const CatalogEntry kEntry;
}
namespace erratum_initial_transfer {
extern const CatalogEntry kEntry;
}
namespace erratum_merge_weights {
extern const CatalogEntry kEntry;
}
namespace erratum_head_memory {
extern const CatalogEntry kEntry;
}

// documents and windows
namespace packed_balance {
extern const CatalogEntry kEntry;
}
namespace window_hops {
extern const CatalogEntry kEntry;
}
namespace redundant_bytes {
extern const CatalogEntry kEntry;
}

// low precision
namespace precision_growth {
extern const CatalogEntry kEntry;
}
// The precision-growth exercise's problem at P ranks (tests re-derive its answers on it).
RunConfig precision_growth_problem(int64_t ranks, bool fp16, int64_t seed);

}  // namespace ringlab::exercises::catalog
