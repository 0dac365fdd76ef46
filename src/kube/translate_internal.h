// Pieces of pod and node translation shared by translate.cc (pods) and translate_node.cc (nodes,
// scheduling constraints). Internal to tessera_kube.
#pragma once

#include <string>
#include <vector>

#include "kube/translate.h"

namespace tessera::kube::detail {

// spec.affinity.nodeAffinity required terms; InvalidArgument naming the bad field.
Result<std::vector<NodeSelectorTerm>> ParseAffinity(const Json& spec);
// spec.tolerations; InvalidArgument naming the bad field.
Result<std::vector<Toleration>> ParseTolerations(const Json& spec);
// "nvidia.com/mig-1g.10gb.me" (resource name) -> "1g.10gb+me" (profile).
std::string MigProfileFromResource(const std::string& resource);

}  // namespace tessera::kube::detail
