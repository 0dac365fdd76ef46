#!/usr/bin/env python3
"""tessera-demo-node end to end: runs the demo and checks each step of the flow it prints.

  demo_node_test.py TESSERA_DEMO_NODE
"""
import re
import subprocess
import sys


def main():
    r = subprocess.run([sys.argv[1], "--timeout", "60"], capture_output=True, text=True,
                       timeout=110)
    out = r.stdout
    print(out)
    print(r.stderr, file=sys.stderr)
    failures = []
    if r.returncode != 0:
        failures.append(f"exit code {r.returncode}")
    want = [
        (r"published tessera\.io/gpu-inventory \(format version 2\)", "inventory published"),
        (r'GPU 0 GPU-demo-0 A100-80GB numa 0 pci 00000000:10:00\.0 MIG "3g\.40gb@0 3g\.40gb@4"',
         "GPU 0 with its MIG layout and topology"),
        (r"3g\.40gb@4 = MIG-\S+", "MIG device UUIDs"),
        (r"GPU 1 GPU-demo-1 .* nvlink 2 MIG off", "NVLink peers"),
        (r'MigLayout demo-node: GPU 0 should become "[^"]*1g\.10gb@', "re-layout asked"),
        (r"MigLayout demo-node: GPU 0 Applied", "re-layout applied"),
        (r"re-published tessera\.io/gpu-inventory .*\n.*\n(?:.*\n)*?\s+1g\.10gb@\d = MIG-\S+",
         "inventory re-published with the new instance"),
        (r'bound demo/mig-small to demo-node: .*"kind":"mig"', "MIG pod bound"),
        (r"bound demo/strict-share to demo-node", "strict share bound"),
        (r'bound demo/standard-share to demo-node: .*"kind":"mps"', "standard share as MPS"),
        (r'bound demo/whole to demo-node: .*"kind":"exclusive"', "whole GPU bound"),
        (r"MPS control daemons running: 1", "MPS daemon started"),
        (r"Allocate 1 nvidia\.com/mig-1g\.10gb for demo/mig-small .*\n"
         r"(?:.*\n)*?\s+env NVIDIA_VISIBLE_DEVICES=MIG-", "MIG Allocate"),
        (r"Allocate 20 tessera\.io/gpu-compute for demo/standard-share .*\n"
         r"(?:.*\n)*?\s+env CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=\d+", "MPS Allocate"),
        (r"Allocate 1 nvidia\.com/gpu for demo/whole .*\n\s+env NVIDIA_VISIBLE_DEVICES=GPU-demo-",
         "whole GPU Allocate"),
        (r"done: every pod was bound and allocated", "completion"),
    ]
    for pattern, what in want:
        if not re.search(pattern, out):
            failures.append(f"missing {what}: /{pattern}/")
    cdi = re.findall(r"CDI device tessera\.io/gpu=\S+", out)
    if len(cdi) != 4:
        failures.append(f"{len(cdi)} CDI devices, want 4")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(want) + 1 - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
