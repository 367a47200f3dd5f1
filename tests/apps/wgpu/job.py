"""A compute job on wgpu (the WebGPU engine, through its Python bindings from PyPI), for
the watch's tests on a third-party engine: each step creates a storage buffer, fills it
with a compute shader and reads a word of it back.

    python job.py leak|steady|too-big STEPS MIB

leak: every step's buffer is kept (a list that only grows); steady: each is destroyed
after its step; too-big: after a few steps, a buffer larger than the device allows is
asked for (wgpu's own validation refuses it before any driver sees it).
"""

import sys
import time

import wgpu

SHADER = """
@group(0) @binding(0) var<storage, read_write> data: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    if (id.x < arrayLength(&data)) { data[id.x] = id.x * 3u + 1u; }
}
"""


def main():
    mode, steps, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    adapter = wgpu.gpu.request_adapter_sync(power_preference="high-performance")
    device = adapter.request_device_sync()
    module = device.create_shader_module(code=SHADER)
    pipeline = device.create_compute_pipeline(layout="auto", compute={"module": module, "entry_point": "main"})
    kept = []
    words = mib * 1024 * 1024 // 4
    for step in range(steps):
        if mode == "too-big" and step == 5:
            device.create_buffer(size=64 << 30, usage=wgpu.BufferUsage.STORAGE)
        buf = device.create_buffer(size=words * 4, usage=wgpu.BufferUsage.STORAGE | wgpu.BufferUsage.COPY_SRC)
        group = device.create_bind_group(layout=pipeline.get_bind_group_layout(0),
                                          entries=[{"binding": 0, "resource": {"buffer": buf}}])
        encoder = device.create_command_encoder()
        compute = encoder.begin_compute_pass()
        compute.set_pipeline(pipeline)
        compute.set_bind_group(0, group)
        compute.dispatch_workgroups(min((words + 63) // 64, 65535))
        compute.end()
        device.queue.submit([encoder.finish()])
        first = device.queue.read_buffer(buf, 4, 4).cast("I")[0]
        if first != 4:
            print(f"step {step}: wrong result {first}", flush=True)
            return 1
        if mode == "leak":
            kept.append(buf)
        else:
            buf.destroy()
        print(f"step {step}", flush=True)
        time.sleep(0.05)
    return 0


if __name__ == "__main__":
    sys.exit(main())
