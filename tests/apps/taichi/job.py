"""A compute job on Taichi (its Vulkan backend, from PyPI), for the watch's tests on a
third-party engine kiln has no words for: each step creates an ndarray (a storage buffer,
which Taichi's own allocator places in blocks it takes from the driver), fills it with a
kernel and reads a word of it back.

    python job.py leak|steady|too-big STEPS MIB

leak: every step's array is kept (a list that only grows); steady: each is dropped after
its step; too-big: after five steps, an array of 2^34 elements (at least 16 GiB) is asked
for, which Taichi's own check refuses before any driver call, with the shape in its
error line.
"""

import sys
import time

import taichi as ti


def main():
    mode, steps, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    ti.init(arch=ti.vulkan, log_level=ti.WARN, offline_cache=False)

    @ti.kernel
    def fill(a: ti.types.ndarray(dtype=ti.u32, ndim=1)):
        for i in range(a.shape[0]):
            a[i] = ti.u32(i) * ti.u32(3) + ti.u32(1)

    kept = []
    words = mib * 1024 * 1024 // 4
    for step in range(steps):
        if mode == "too-big" and step == 5:
            ti.ndarray(dtype=ti.u32, shape=(16 << 30,))
        arr = ti.ndarray(dtype=ti.u32, shape=(words,))
        fill(arr)
        first = int(arr[1])
        if first != 4:
            print(f"step {step}: wrong result {first}", flush=True)
            return 1
        if mode == "leak":
            kept.append(arr)
        else:
            del arr
        print(f"step {step}", flush=True)
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
