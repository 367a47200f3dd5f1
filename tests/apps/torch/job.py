"""A short PyTorch job on the GPU (CUDA), for `kiln watch` on a real card in a session lent
one (scripts/gpu-session.sh): each step allocates a tensor, computes on it and reads one
value back.

    python job.py leak|steady|too-big STEPS MIB

leak: every step's tensor is kept (a list that only grows); steady: each is dropped
after its step; too-big: after a few steps, a tensor larger than the card's whole memory is
asked for (PyTorch's caching allocator fails with its out-of-memory error, naming the
sizes).
"""

import sys
import time

import torch


def main():
    mode, steps, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if not torch.cuda.is_available():
        print("no CUDA device", flush=True)
        return 2
    device = torch.device("cuda")
    total = torch.cuda.get_device_properties(device).total_memory
    kept = []
    elements = mib * 1024 * 1024 // 4
    for step in range(steps):
        if mode == "too-big" and step == 5:
            torch.empty(2 * total // 4, dtype=torch.float32, device=device)
        t = torch.arange(elements, dtype=torch.float32, device=device) * 3 + 1
        if float(t[1]) != 4.0:
            print(f"step {step}: wrong result {float(t[1])}", flush=True)
            return 1
        if mode == "leak":
            kept.append(t)
        else:
            del t
        print(f"step {step}", flush=True)
        time.sleep(0.2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
