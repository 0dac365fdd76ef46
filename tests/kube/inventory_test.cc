// The tessera.io/gpu-inventory annotation, format version 2 (MIG device UUIDs and topology), as
// the scheduler reads it; version 1 annotations and later versions' unknown fields.
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kube/translate.h"

namespace tessera::kube {
namespace {

TEST(TranslateNode, InventoryVersion2) {
  GpuInventoryEntry mig{0, "GPU-aaaa", "A100-80GB", 81920, true, "3g.40gb@0 2g.20gb@4", true};
  mig.mig_devices = {{"3g.40gb@0", "MIG-1111"}, {"2g.20gb@4", "MIG-2222"}};
  mig.numa_node = 1;
  mig.pci_bus_id = "00000000:07:00.0";
  mig.nvlink_peers = {1};
  GpuInventoryEntry whole{1, "GPU-bbbb", "A100-80GB", 81920, false, "", true};
  whole.nvlink_peers = {0};
  const std::vector<GpuInventoryEntry> inv = {mig, whole};
  const std::string text = EncodeInventory(inv);
  const Json j = Json::parse(text);
  EXPECT_EQ(j[0]["version"], kInventoryVersion);
  EXPECT_EQ(j[0]["mig_devices"][1]["uuid"], "MIG-2222");
  EXPECT_FALSE(j[1].contains("mig_devices"));
  EXPECT_FALSE(j[1].contains("numa_node"));
  const Json node = {
      {"apiVersion", "v1"},
      {"kind", "Node"},
      {"metadata", {{"name", "v2"}, {"annotations", {{kAnnotationInventory, text}}}}},
      {"status",
       {{"allocatable", {{"cpu", "64"}, {"memory", "512Gi"}}},
        {"conditions", Json::array({{{"type", "Ready"}, {"status", "True"}}})}}}};
  auto n = TranslateNode(node);
  ASSERT_TRUE(n.ok()) << n.status().message();
  EXPECT_EQ(n->spec.gpu_count, 2);
  EXPECT_EQ(n->inventory, inv);
  EXPECT_EQ(n->inventory[0].mig_devices[0].uuid, "MIG-1111");
  EXPECT_EQ(n->inventory[0].numa_node, 1);

  // A version 1 annotation (no version field, none of the new fields) still reads.
  auto v1 = DecodeInventory(
      R"([{"index": 0, "uuid": "GPU-1", "model": "A100-80GB", "memory_mib": 81920,
           "mig_enabled": true, "mig_layout": "7g.80gb@0", "health": "healthy"}])");
  ASSERT_TRUE(v1.ok()) << v1.status().message();
  EXPECT_EQ((*v1)[0].version, 1);
  EXPECT_TRUE((*v1)[0].mig_devices.empty());
  EXPECT_EQ((*v1)[0].numa_node, std::nullopt);
  EXPECT_EQ((*v1)[0].mig_layout, "7g.80gb@0");
  // A later version's unknown fields are ignored; peers come back sorted.
  auto v3 = DecodeInventory(
      R"([{"index": 0, "uuid": "GPU-1", "model": "T4", "version": 3, "nvlink_peers": [2, 1],
           "fabric": {"clique": 4}}, {"index": 1, "uuid": "GPU-2", "model": "T4"},
          {"index": 2, "uuid": "GPU-3", "model": "T4"}])");
  ASSERT_TRUE(v3.ok()) << v3.status().message();
  EXPECT_EQ((*v3)[0].version, 3);
  EXPECT_EQ((*v3)[0].nvlink_peers, (std::vector<int>{1, 2}));

  struct Bad {
    const char* text;
    const char* message;
  };
  const std::vector<Bad> bad = {
      {R"([{"index": 0, "uuid": "G", "model": "T4", "version": 0}])",
       "entry 0: version must be a positive integer"},
      {R"([{"index": 0, "uuid": "G", "model": "T4", "version": "2"}])",
       "entry 0.version must be an integer"},
      {R"([{"index": 0, "uuid": "G", "model": "A100-80GB", "mig_enabled": true,
            "mig_layout": "7g.80gb@0", "mig_devices": [{"instance": "3g.40gb@0", "uuid": "M"}]}])",
       "entry 0.mig_devices: instance \"3g.40gb@0\" is not in mig_layout \"7g.80gb@0\""},
      {R"([{"index": 0, "uuid": "G", "model": "A100-80GB", "mig_enabled": true,
            "mig_layout": "7g.80gb@0", "mig_devices": [{"instance": "7g.80gb@0"}]}])",
       "entry 0.mig_devices: 7g.80gb@0 has no uuid"},
      {R"([{"index": 0, "uuid": "G", "model": "A100-80GB", "mig_enabled": true,
            "mig_layout": "3g.40gb@0 3g.40gb@4", "mig_devices": [
              {"instance": "3g.40gb@0", "uuid": "M"}, {"instance": "3g.40gb@4", "uuid": "M"}]}])",
       "entry 0.mig_devices: uuid M appears twice"},
      {R"([{"index": 0, "uuid": "G", "model": "A100-80GB",
            "mig_devices": [{"instance": "7g.80gb@0", "uuid": "M"}]}])",
       "entry 0: mig_devices given but mig_enabled is false"},
      {R"([{"index": 0, "uuid": "G", "model": "T4", "mig_devices": {}}])",
       "entry 0.mig_devices must be a list"},
      {R"([{"index": 0, "uuid": "G", "model": "T4", "numa_node": -1}])",
       "entry 0: numa_node must be within 0.."},
      {R"([{"index": 0, "uuid": "G", "model": "T4", "pci_bus_id": 7}])",
       "entry 0.pci_bus_id must be a string"},
      {R"([{"index": 0, "uuid": "G", "model": "T4", "nvlink_peers": [0]}])",
       "entry 0.nvlink_peers: peers must be indices of the node's other GPUs (0..0)"},
      {R"([{"index": 0, "uuid": "G", "model": "T4", "nvlink_peers": [1, 1]},
           {"index": 1, "uuid": "H", "model": "T4"}])",
       "entry 0.nvlink_peers: a peer appears twice"},
  };
  for (const auto& b : bad) {
    auto r = DecodeInventory(b.text);
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_EQ(r.status().message().substr(0, std::string(b.message).size()), b.message)
        << r.status().message();
  }
}

}  // namespace
}  // namespace tessera::kube
