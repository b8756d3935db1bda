// The exercises of the catalog, one file each (exercises/catalog/<id>.cpp), each defining the
// CatalogEntry that names it: its id, title, sources and lab, declared once and used by the
// listing, by the Exercise its function writes, and by its variant draws. catalog.cpp lists them
// in the order `ringlab exercises` prints them.
//
// The entries are constexpr (constant-initialised: no static-initialisation order to mind); this
// header gives them external linkage so that the catalog's table can name them.
#pragma once

#include "exercises/exercise.hpp"
#include "sim/pipeline/config.hpp"

namespace ringlab::exercises::catalog {

// the source material's exercises 1-7
extern const CatalogEntry kAttentionMemory;
extern const CatalogEntry kCommVolume;
extern const CatalogEntry kOverlapTime;
extern const CatalogEntry kCausalSkip;
extern const CatalogEntry kHybridPlan;
extern const CatalogEntry kOnlineSoftmax;
extern const CatalogEntry kFlashRingMemory;

// the worked numbers of the context-parallelism notes
extern const CatalogEntry kImbalanceRatio;
extern const CatalogEntry kZigzagPositions;
extern const CatalogEntry kLayoutEfficiency;
extern const CatalogEntry kOverlapThreshold;
extern const CatalogEntry kOverlapProfile;
extern const CatalogEntry kRingVsAllgather;
extern const CatalogEntry kBackwardVolume;
extern const CatalogEntry kUlyssesDegree;
extern const CatalogEntry kMemoryTable;

// one per known mistake of the source material
extern const CatalogEntry kErratumDkvDirection;
extern const CatalogEntry kErratumCausalMask;
extern const CatalogEntry kErratumSoftmaxScale;
extern const CatalogEntry kErratumSkipSpeedup;
extern const CatalogEntry kErratumInitialTransfer;
extern const CatalogEntry kErratumMergeWeights;
extern const CatalogEntry kErratumHeadMemory;

// documents and windows
extern const CatalogEntry kPackedBalance;
extern const CatalogEntry kWindowHops;
extern const CatalogEntry kRedundantBytes;

// low precision
extern const CatalogEntry kPrecisionGrowth;
// The precision-growth exercise's problem at P ranks (tests re-derive its answers on it).
RunConfig precision_growth_problem(int64_t ranks, bool fp16, int64_t seed);

}  // namespace ringlab::exercises::catalog
