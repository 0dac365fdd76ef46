// Inventory: what the node agent publishes about its GPUs, computed from a NodeGpuState.
//
// Contract:
// * InventoryEntries / InventoryAnnotation give the `tessera.io/gpu-inventory` annotation
//   (docs/OPERATIONS.md): per GPU index, UUID, catalog model, NVML total memory, MIG mode, MIG
//   layout ("profile@start ...") and health, and (format version 2) the MIG devices (instance
//   "profile@start" and MIG device UUID, per compute instance), the NUMA node and PCI bus id
//   when NVML reports them, and the GPUs it reaches over NVLink (from the link matrix). The
//   annotation is encoded with kube::EncodeInventory and checked to decode (kube::DecodeInventory)
//   to the same entries before it is returned, so the scheduler will accept it. A GPU whose product
//   the catalog does not know, or a node with mixed models, is InvalidArgument naming the GPU: the
//   scheduler could not use such an inventory. Zero GPUs give "[]".
// * GfdLabels gives the node labels NVIDIA GPU Feature Discovery documents, with its value
//   formats, for the "mixed" MIG strategy (Tessera handles MIG per GPU):
//     nvidia.com/gpu.count, gpu.product (NVML name, spaces as '-'), gpu.memory (MiB),
//     gpu.family (ampere, hopper, ...), gpu.compute.major / .minor, mig.capable ("true" /
//     "false"), mig.strategy ("mixed", only when MIG-capable), and per MIG device type present
//     on the node, nvidia.com/mig-<profile>.count, .memory, .multiprocessors, .slices.gi,
//     .slices.ci, .engines.copy, .engines.decoder, .engines.encoder, .engines.jpeg,
//     .engines.ofa ('+' of a profile name becomes '.', e.g. mig-1g.10gb.me).
//   GPU-wide values come from GPU 0. No GPUs: no labels.
// * Pure and thread-safe.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/discovery.h"
#include "core/status.h"
#include "kube/translate.h"

namespace tessera::agent {

Result<std::vector<kube::GpuInventoryEntry>> InventoryEntries(const NodeGpuState& state);
Result<std::string> InventoryAnnotation(const NodeGpuState& state);

std::map<std::string, std::string> GfdLabels(const NodeGpuState& state);
// GFD's architecture family for a CUDA compute capability ("ampere", "hopper", ...);
// "undefined" when unknown.
std::string GpuFamily(int major, int minor);

}  // namespace tessera::agent
