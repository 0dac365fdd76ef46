// Renderings of an AdvisorReport: a readable table, the full JSON report, and Kubernetes
// manifests for `kubectl apply --server-side` that annotate each resized owner. Pure functions.
#pragma once

#include <string>

#include "advisor/closed_loop.h"
#include "advisor/recommend.h"

namespace tessera::advisor {

// One row per workload (key, model, request, memory peak/p95, compute p95, prediction,
// recommendation, $/h saved, state), then the totals.
std::string ReportTable(const AdvisorReport& r);

// {"window": {...}, "totals": {...}, "workloads": [{... every field of Recommendation ...}]}.
std::string ReportJson(const AdvisorReport& r);

// The annotation value an owner gets: compact JSON of the recommended slice,
// {"slice":"mig","model":"A100-80GB","mig_profile":"1g.10gb","memory_mib":9728,...}.
std::string RecommendationAnnotation(const Recommendation& rec);

// Multi-document YAML: per resized owner of a Kubernetes kind (Deployment, StatefulSet, Job,
// JobSet, Pod), a partial object setting metadata.annotations["tessera.io/rightsize-
// recommendation"] (and "tessera.io/rightsize-reason"), for Deployments and StatefulSets also
// on spec.template.metadata.annotations, so that their new pods carry it to the scheduler
// (tessera.io/rightsize: auto). Owners of kind WorkloadGroup have no API object: they appear as
// a comment. "# no resized owners" when there is none.
inline constexpr const char* kRecommendationAnnotation = "tessera.io/rightsize-recommendation";
std::string ReportPatches(const AdvisorReport& r);

}  // namespace tessera::advisor
