#!/usr/bin/env python3
"""Writes the `kiln watch` scenarios of the corpus (tests/scenarios/watch_*): applications
watched on an H200 as they really fail (kiln's fingerprint rules, src/verdict/watch/rules/), each a whole run directory
in the formats kiln writes: the manifest, the events (the application's start, its
iterations, what its output said, its end), the telemetry (NVML samples with the
per-process lists, counters, Xids) and, for Vulkan applications, the allocation trace.
Each rule has the case that fires and the near miss that must not. The numbers are this
script's own; the shapes follow a real watch recorded on the emulated NVIDIA node.
Deterministic: run it again and nothing changes.

    python3 scripts/watch-scenarios.py
"""

import json
import math
import pathlib
import random

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "scenarios"

MIB = 1 << 20
GIB = 1 << 30
TOTAL = 150754820096  # an H200's memory as NVML reports it
UUID = "4b494c4e-4832-3030-8000-00000000003b"
TRACED = "4b494c4e48323030"  # the first eight bytes of the UUID, as the trace names it
BUS = "0000:3b:00"

DEVICE = {
    "index": 0, "name": "NVIDIA H200", "vendor_id": 4318, "vendor_name": "NVIDIA",
    "device_id": 9013, "kind": "discrete_gpu", "driver_name": "NVIDIA",
    "driver_info": "550.90.07", "driver_version": "550.90.7.0",
    "driver_version_raw": 2308342208, "api_version": "1.3.277", "device_uuid": UUID,
    "pci_address": "0000:3b:00.0",
    "heaps": [
        {"index": 0, "size_bytes": TOTAL, "device_local": True, "budget_bytes": TOTAL - GIB, "usage_bytes": 0},
        {"index": 1, "size_bytes": 64 * GIB, "device_local": False, "budget_bytes": 64 * GIB, "usage_bytes": 0},
    ],
    "memory_types": [
        {"index": 0, "heap_index": 0, "flags": ["device_local"]},
        {"index": 1, "heap_index": 1, "flags": ["host_visible", "host_coherent"]},
    ],
    "memory_budget_supported": True,
    "limits": {
        "max_storage_buffer_range_bytes": 4294967295, "max_memory_allocation_size_bytes": 4294967296,
        "max_buffer_size_bytes": 4294967296, "max_texel_buffer_elements": 134217728,
        "max_compute_work_group_count": [2147483647, 65535, 65535],
        "max_compute_work_group_invocations": 1024, "timestamp_period_ns": 1.0,
        "timestamp_valid_bits": 64, "max_push_constants_size_bytes": 256,
    },
    "shader_int64": True, "shader_float16": True, "cooperative_matrix": False,
    "matrix_units": {"shapes": [], "subgroup_size": 32, "int8": True},
    "compute_queue_family": 0,
}

IDENTITY = {
    "board_part_number": "692-2G520-0280-000", "driver_version": "550.90.07",
    "cuda_driver_version": 12040.0, "ecc_enabled": "true", "matched_by": "uuid",
    "name": "NVIDIA H200", "nvml_index": 0.0, "other_processes": [],
    "pci_bus_id": "00000000:3B:00.0", "persistence_mode": "on", "serial": "1654923012345",
    "temp_gpu_max_c": 87.0, "temp_mem_max_c": 95.0, "temp_shutdown_c": 92.0,
    "temp_slowdown_c": 90.0, "uuid": "GPU-" + UUID, "vbios": "96.00.A5.00.01",
}

COUNTERS = {
    "ecc_corrected_volatile": 0.0, "ecc_uncorrected_volatile": 0.0,
    "ecc_corrected_aggregate": 0.0, "ecc_uncorrected_aggregate": 0.0,
    "remapped_correctable": 0.0, "remapped_uncorrectable": 0.0, "remap_pending": 0.0,
    "remap_failure": 0.0, "pcie_replays": 0.0,
}


class Run:
    """One watch: its events, telemetry and trace as kiln writes them."""

    def __init__(self, command, pid, name, iteration=None, trace=False, attached=False):
        self.command, self.pid, self.name = command, pid, name
        self.iteration, self.trace_on, self.attached = iteration, trace, attached
        self.events = [
            {"t_ms": 30.0, "kind": "header", "schema": "kiln.events/1", "tool_version": "0.1.0", "run_id": "watch"},
            {"t_ms": 31.0, "device": 0, "kind": "device_start", "info": DEVICE},
        ]
        start = {"t_ms": 240.0, "kind": "app_start", "pid": pid}
        if attached:
            start["attached"] = True
        else:
            start["command"] = command
        self.telemetry = [
            {"t_ms": 150.0, "source": "sidecar", "kind": "header", "schema": "kiln.telemetry/2", "interval_ms": 1000.0},
            {"t_ms": 151.0, "device": 0, "source": "nvml", "kind": "identity", "fields": IDENTITY},
            {"t_ms": 190.0, "device": 0, "source": "nvml", "kind": "snapshot", "phase": "watch", "when": "before", "counters": COUNTERS},
        ]
        self.pending = [start]
        self.trace = []
        self.seq = 0
        self.live = {}
        self.counts = {}
        self.iterations = 0
        self.end_ms = None

    def event(self, t, kind, **fields):
        self.pending.append({"t_ms": float(t), "kind": kind, **fields})

    def step(self, t, n):
        self.iterations += 1
        self.event(t, "iteration", n=self.iterations, line=f"step {n}")

    def said(self, t, failure, line):
        self.event(t, "app_said", failure=failure, line=line)

    def sample(self, t, app_bytes, others=(), util=97.0, temp=64.0, listed=True, children=()):
        """An NVML sample: the application's memory (its pid, and its `children`, each
        (pid, name, bytes)), the other processes'."""
        processes = []
        if app_bytes is not None and listed:
            processes.append({"pid": self.pid, "used_bytes": int(app_bytes), "name": self.name})
        for pid, name, used in children:
            processes.append({"pid": pid, "used_bytes": int(used), "name": name})
        for pid, name, used in others:
            processes.append({"pid": pid, "used_bytes": int(used), "name": name})
        used = sum(p["used_bytes"] for p in processes) + 512 * MIB
        readings = {
            "clock_sm_mhz": 1980.0, "clock_sm_max_mhz": 1980.0, "clock_mem_mhz": 3201.0,
            "clock_mem_max_mhz": 3201.0, "gpu_temp_c": temp, "hbm_temp_c": temp + 6.0,
            "mem_total_bytes": float(TOTAL), "mem_used_bytes": float(min(used, TOTAL)),
            "mem_free_bytes": float(max(TOTAL - used, 0)), "power_w": 520.0,
            "power_limit_default_w": 700.0, "power_limit_enforced_w": 700.0, "pstate": "P0",
            "throttle_reasons": "", "throttle_reasons_mask": 0.0, "util_gpu_pct": util,
            "util_mem_pct": 60.0,
        }
        if listed:
            readings["other_processes_now"] = processes
        self.telemetry.append({"t_ms": float(t), "device": 0, "source": "nvml", "kind": "sample", "readings": readings})

    def driver_reset(self, t, evidence):
        """Windows reset the display driver after a timeout (the System log's event 4101)."""
        self.telemetry.append({"t_ms": float(t), "device": 0, "source": "kmsg", "kind": "driver_reset", "reset": {
            "driver": "nvlddmkm", "logged_unix_us": int(t * 1000) + 1_796_000_000_000_000,
            "before_run": False, "evidence": [evidence]}})

    def xid(self, t, code, message, pid=None, process=None):
        self.telemetry.append({"t_ms": float(t), "device": 0, "source": "kmsg", "kind": "xid", "xid": {
            "bus_id": BUS, "code": code, "pid": pid, "process": process, "message": message,
            "kernel_us": int(t * 1000) + 5_000_000_000, "before_run": False, "t_ms": float(t)}})

    # The trace, as the layer writes it and kiln drains it.
    def _record(self, t, kind, **fields):
        self.trace.append({"seq": self.seq, "t_ms": float(t), "pid": self.pid, "kind": kind, **fields})
        self.seq += 1

    def traced_device(self, t):
        self._record(t, "attach")
        self._record(t, "device", device=TRACED, max_allocation_bytes=4 * GIB, max_allocations=4096)
        self._record(t, "heap", device=TRACED, heap=0, bytes=TOTAL, device_local=True)
        self._record(t, "heap", device=TRACED, heap=1, bytes=64 * GIB, device_local=False)

    def _class(self, size):
        return max(0, (size - 1).bit_length()) if size > 1 else 0

    def alloc(self, t, size):
        handle = 0x1000 + self.seq
        self._record(t, "alloc", device=TRACED, bytes=size, heap=0, memory_type=0, handle=handle)
        self.live[handle] = size
        self.counts.setdefault(self._class(size), [0, 0, 0])[0] += 1
        return handle

    def free(self, t, handle):
        size = self.live.pop(handle)
        self._record(t, "free", device=TRACED, bytes=size, heap=0, memory_type=0, handle=handle)
        self.counts.setdefault(self._class(size), [0, 0, 0])[1] += 1

    def refused(self, t, size, budget, usage, result="VK_ERROR_OUT_OF_DEVICE_MEMORY"):
        self._record(t, "alloc_failed", device=TRACED, bytes=size, heap=0, memory_type=0, result=result)
        self._record(t, "budget", device=TRACED, heap=0, budget_bytes=budget, usage_bytes=usage)
        self.counts.setdefault(self._class(size), [0, 0, 0])[2] += 1

    def lost(self, t, call="vkQueueSubmit"):
        self._record(t, "device_lost", device=TRACED, call=call)

    def live_bytes(self):
        return sum(self.live.values())

    def end(self, t, exit_code=0, signal=None, counters=None):
        self.end_ms = float(t)
        self.event(t, "app_end", exit_code=exit_code, signal=signal)
        after = dict(COUNTERS)
        after.update(counters or {})
        self.telemetry.append({"t_ms": t + 60.0, "device": 0, "source": "nvml", "kind": "snapshot", "phase": "watch", "when": "after", "counters": after})

    def write(self, name, about, codes, exit_code, result, reason=None, interval_s=1.0):
        out = CORPUS / name
        out.mkdir(parents=True, exist_ok=True)
        watch = {"interval_s": interval_s, "trace": self.trace_on}
        if self.attached:
            watch["pid"] = self.pid
        else:
            watch["command"] = self.command
        if self.iteration:
            watch["iteration"] = self.iteration
        files = ["events.jsonl", "telemetry.jsonl"] + (["trace.jsonl"] if self.trace_on else [])
        command_line = ["kiln", "watch"] + (["--iteration", self.iteration] if self.iteration else [])
        command_line += ["--pid", str(self.pid)] if self.attached else ["--"] + self.command
        manifest = {
            "schema": "kiln.manifest/2", "tool_version": "0.1.0", "command_line": command_line,
            "host": "node-a07", "started_utc": "2026-12-01T09:00:00Z", "devices": [DEVICE],
            "settings": {"telemetry_interval_s": interval_s, "stop_on_first_failure": False, "watch": watch},
            "evidence": files,
        }
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        events = self.events + sorted(self.pending, key=lambda e: e["t_ms"])
        last = max(e["t_ms"] for e in events) + 80.0
        events.append({"t_ms": last, "kind": "run_end", "exit_code": exit_code, "result": result})
        write_jsonl(out / "events.jsonl", events)
        write_jsonl(out / "telemetry.jsonl", sorted(self.telemetry, key=lambda r: r["t_ms"]))
        if self.trace_on:
            classes = [self.counts.get(k, [0, 0, 0]) for k in range(48)]
            counts = {"seq": self.seq, "t_ms": last, "pid": 0, "kind": "counts", "attached": 1,
                      "lost_device_calls": 0, "lost_records": 0, "classes": classes}
            write_jsonl(out / "trace.jsonl", self.trace + [counts])
        else:
            (out / "trace.jsonl").unlink(missing_ok=True)
        expected = {"about": about, "exit_code": exit_code, "result": result, "codes": codes, "incomplete": False}
        if reason:
            expected["reason"] = reason
        (out / "expected.json").write_text(json.dumps(expected) + "\n")


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))


TRAIN = ["python3", "train.py", "--batch", "64"]


def training(name, about, codes, exit_code, result, baseline, peak=None, steps=40, step_s=3.0,
             others=None, ending=None, reason=None, seed=7):
    """A training job: a step every `step_s`, sampled each second: its baseline
    `baseline(n)` between steps and its peak `peak(n)` mid-step (GiB); `others(t)` gives
    the other processes; `ending(run, t, n)` may end it early (return True)."""
    rnd = random.Random(seed)
    run = Run(TRAIN, 4242, "python3", iteration=r"^step \d+")
    t = 1000.0
    peak = peak or (lambda n: baseline(n) + 14)
    for n in range(steps):
        start = t
        run.step(start + 5.0, n)
        if ending and ending(run, start, n):
            return run.write(name, about, codes, exit_code, result, reason)
        for k in range(int(step_s)):
            ts = start + 1000.0 * k + 400.0
            if k == 0:
                used = baseline(n) + rnd.uniform(0, 0.05)
            elif k == 1:
                used = peak(n)
            else:
                used = (baseline(n) + peak(n)) / 2
            run.sample(ts, used * GIB, others(ts) if others else ())
        t += step_s * 1000.0
    run.end(t + 200.0, 0)
    run.write(name, about, codes, exit_code, result, reason)


def main():
    # A healthy job: a flat baseline under a sawtooth.
    training("watch_training_steady",
             "a training job on an H200 whose memory rises and falls back to 38 GiB every step: healthy",
             [], 0, "pass", lambda n: 38.0)
    # A leak: the baseline climbs 0.75 GiB a step and never falls back.
    training("watch_leak_per_step",
             "the lowest memory between steps climbs 0.75 GiB a step (a tensor kept per step): a leak, with the time left",
             ["APP_MEMORY_LEAK"], 3, "software", lambda n: 38.0 + 0.75 * n, reason="a leak")
    # Near miss: an allocator's cache warms for four steps, then holds.
    warm = [30.0, 33.0, 35.0, 36.0]
    training("watch_warmup_plateau_not_a_leak",
             "the caching allocator grows for four steps, then the baseline holds at 36 GiB: warming up, not a leak",
             [], 0, "pass", lambda n: warm[n] if n < len(warm) else 36.0)
    # Near miss: a baseline that wanders by a gigabyte either way, with no trend.
    jitter = random.Random(11)
    wander = [40.0 + jitter.uniform(-1.0, 1.0) for _ in range(40)]
    training("watch_noisy_baseline_not_a_leak",
             "the baseline wanders by up to 1 GiB either way from step to step with no trend: not a leak",
             [], 0, "pass", lambda n: wander[n])

    # Over the limit: a flat baseline, and one step that needs more than the card has.
    def big_batch(run, t, n):
        if n != 15:
            return False
        run.sample(t + 400.0, 20.0 * GIB)
        run.sample(t + 1400.0, 139.2 * GIB)
        run.said(t + 1700.0, "out_of_memory",
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 12.00 GiB. GPU 0 has a total capacity of 140.4 GiB of which 1.19 GiB is free.")
        run.end(t + 2100.0, 1)
        return True
    training("watch_over_the_limit",
             "a step whose batch needs 151 GiB peaks at 139 GiB and fails for memory while the baseline sits flat at 20 GiB: over the limit, not a leak",
             ["APP_OVER_MEMORY_LIMIT"], 3, "software", lambda n: 20.0, peak=lambda n: 60.0,
             ending=big_batch, reason="more memory than the card has")

    # PyTorch's caching allocator holds 16 GiB reserved but unallocated and still cannot
    # find 2 GiB in one piece: fragmentation of its cache, with its own remedy.
    def cache_in_pieces(run, t, n):
        if n != 18:
            return False
        run.sample(t + 400.0, 77.6 * GIB)
        run.said(t + 900.0, "out_of_memory",
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.72 GiB of which 1.50 GiB is free. Including non-PyTorch memory, this process has 138.10 GiB memory in use. Of the allocated memory 121.00 GiB is allocated by PyTorch, and 16.00 GiB is reserved by PyTorch but unallocated.")
        run.end(t + 1300.0, 1)
        return True
    training("watch_pytorch_cache_in_pieces",
             "PyTorch asks for 2 GiB with 16 GiB reserved by its caching allocator but unallocated: its cache is fragmented (expandable_segments), not the card's memory too small",
             ["APP_FRAGMENTATION"], 3, "software", lambda n: 60.0, peak=lambda n: 120.0,
             ending=cache_in_pieces, reason="fragmentation")
    # Near miss: the same OOM with 512 MiB cached, less than the request: over the limit.
    def cache_small(run, t, n):
        if n != 18:
            return False
        run.sample(t + 400.0, 137.6 * GIB)
        run.said(t + 900.0, "out_of_memory",
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 139.72 GiB of which 1.50 GiB is free. Including non-PyTorch memory, this process has 138.10 GiB memory in use. Of the allocated memory 137.00 GiB is allocated by PyTorch, and 512.00 MiB is reserved by PyTorch but unallocated.")
        run.end(t + 1300.0, 1)
        return True
    training("watch_pytorch_cache_too_small_to_help",
             "the same PyTorch OOM with 512 MiB cached, less than the 2 GiB it asks for, the step peaking at the card's size: over the limit, not fragmentation",
             ["APP_OVER_MEMORY_LIMIT"], 3, "software", lambda n: 60.0, peak=lambda n: 137.0,
             ending=cache_small, reason="more memory than the card has")
    # A request larger than the card in JAX's words: over the limit whatever the memory did.
    def too_big_for_any_card(run, t, n):
        if n != 6:
            return False
        run.said(t + 600.0, "out_of_memory",
                 "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 171798691840 bytes.")
        run.end(t + 900.0, 1)
        return True
    training("watch_jax_asks_for_more_than_the_card",
             "JAX asks for 160 GiB at once on a 140 GiB card with its memory at 30 GiB: one request the card can never hold, over the limit",
             ["APP_OVER_MEMORY_LIMIT"], 3, "software", lambda n: 30.0, peak=lambda n: 34.0,
             ending=too_big_for_any_card, reason="can never hold")

    # A leak that ends in running out: the leak, not the limit, is the cause.
    def leak_runs_out(run, t, n):
        if 30.0 + 6.0 * n + 14 < 138.0:
            return False
        run.sample(t + 400.0, (30.0 + 6.0 * n) * GIB)
        run.said(t + 900.0, "out_of_memory", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 8.00 GiB.")
        run.end(t + 1300.0, 1)
        return True
    training("watch_leak_runs_out_of_memory",
             "the baseline climbs 6 GiB a step until a step fails for memory at step 17: the leak is the cause, not a step over the limit",
             ["APP_MEMORY_LEAK"], 3, "software", lambda n: 30.0 + 6.0 * n, ending=leak_runs_out,
             reason="a leak")

    # Fragmentation without a failure: the floor creeps under flat peaks.
    training("watch_creeping_floor",
             "the floor between steps creeps 0.3 GiB a step while every peak stays at 70 GiB: memory not handed back (fragmentation), not yet a failure",
             ["APP_FRAGMENTATION"], 4, "inconclusive", lambda n: 30.0 + 0.3 * n,
             peak=lambda n: 70.0, reason="not yet a call")

    # Another process arrives and takes 60 GiB four seconds before the job fails.
    def tenant(ts):
        return [(5151, "python3", 60.0 * GIB)] if ts >= 80_000.0 else []

    def squeezed(run, t, n):
        if t < 84_000.0:
            return False
        run.sample(t + 400.0, 85.0 * GIB, tenant(t + 400.0))
        run.said(t + 700.0, "out_of_memory", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 10.00 GiB.")
        run.end(t + 1100.0, 1)
        return True
    training("watch_other_process_before_oom",
             "a second job (pid 5151) takes 60 GiB at 80 s and the training job, flat at 50-90 GiB, fails for memory at 84 s: another process, the environment",
             ["APP_OTHER_PROCESS"], 2, "environment", lambda n: 50.0, peak=lambda n: 90.0,
             others=tenant, ending=squeezed, reason="another process took GPU memory")

    # Near miss: a neighbour with a flat 20 GiB all along; the job's own step is too big.
    def neighbour(ts):
        return [(2020, "Xorg", 20.0 * GIB)]

    def too_big(run, t, n):
        if n != 12:
            return False
        run.sample(t + 400.0, 118.5 * GIB, neighbour(t))
        run.said(t + 800.0, "out_of_memory", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.00 GiB.")
        run.end(t + 1200.0, 1)
        return True
    training("watch_flat_neighbour_not_the_cause",
             "a display server holds a flat 20 GiB all run long while the job's own step peaks at 118.5 GiB and fails: over the limit, the neighbour did not grow",
             ["APP_OVER_MEMORY_LIMIT"], 3, "software", lambda n: 40.0, peak=lambda n: 80.0,
             others=neighbour, ending=too_big, reason="more memory than the card has")

    # A job that exits with an error of its own, its memory healthy.
    def own_error(run, t, n):
        if n != 20:
            return False
        run.end(t + 300.0, 1)
        run.said(t + 320.0, "error", "ValueError: Expected input batch_size (64) to match target batch_size (32).")
        return True
    training("watch_own_error",
             "the job exits with 1 at step 20 with its memory flat and nothing on the card: the application's own failure (software), never healthy",
             ["APP_EXIT"], 3, "software", lambda n: 38.0, ending=own_error,
             reason="ValueError: Expected input batch_size")

    # A pooling allocator hides a leak: it grows its blocks in steps (floors 96, 224, then
    # 480 MiB), flat between them, never handing them back.
    def pooled(n):
        return (96 if n < 5 else 224 if n < 11 else 480) / 1024
    training("watch_pooled_allocator_leak",
             "a job's floor rises in steps as its pooling allocator grows (96, 224, then 480 MiB at steps 5 and 11), flat for the last 14 steps and never falling back: a leak the pool hides, not a healthy plateau",
             ["APP_MEMORY_LEAK"], 3, "software", pooled, peak=lambda n: pooled(n) + 0.5, steps=25,
             reason="leak")
    # Near miss: a cache that grows once at start-up, then holds.
    training("watch_cache_warms_up_once",
             "a job's floor rises once, from 96 to 480 MiB at its second step (its caches filling), then holds for 23 steps: start-up, healthy",
             [], 0, "pass", lambda n: (96 if n < 1 else 480) / 1024,
             peak=lambda n: (96 if n < 1 else 480) / 1024 + 0.5, steps=25)
    # Near miss: two growths at once, early (a cache and a workspace), then flat.
    training("watch_two_growths_at_start_up",
             "a job's floor grows at steps 2 and 3 (96, 224, then 480 MiB: a cache and a workspace filling) and holds for 21 steps: start-up, healthy",
             [], 0, "pass", lambda n: (96 if n < 2 else 224 if n < 3 else 480) / 1024,
             peak=lambda n: (96 if n < 2 else 224 if n < 3 else 480) / 1024 + 0.5, steps=25)

    vulkan_scenarios()
    by_time_scenarios()
    unseen_scenarios()
    children_scenarios()
    attached_scenarios()


def renderer(name, about, codes, exit_code, result, frames, at_end, reason=None, xids=()):
    """A Vulkan renderer, traced: each frame allocates twelve 256 MiB textures on top of a
    resident 8 GiB scene, and frees them; `at_end(run, t)` ends it after `frames`."""
    run = Run(["./render", "--frames", "400"], 6161, "render", iteration=r"^frame \d+", trace=True)
    run.traced_device(300.0)
    scene = [run.alloc(310.0 + i, GIB) for i in range(8)]
    t = 1000.0
    for f in range(frames):
        run.event(t + 2.0, "iteration", n=f + 1, line=f"frame {f}")
        textures = [run.alloc(t + 5.0 + i, 256 * MIB) for i in range(12)]
        run.sample(t + 300.0, run.live_bytes())
        for h in textures:
            run.free(t + 700.0, h)
        run.sample(t + 800.0, run.live_bytes())
        t += 1000.0
    for code, message, pid in xids:
        run.xid(t - 100.0, code, message, pid, "render" if pid else None)
    counters = at_end(run, t)
    if counters is not None:
        run.write(name, about, codes, exit_code, result, reason)
    return scene


def vulkan_scenarios():
    # An allocation refused with 98 GiB free: fragmentation.
    def refused_with_room(run, t):
        run.refused(t + 10.0, 2 * GIB, budget=TOTAL - GIB, usage=10 * GIB)
        run.said(t + 20.0, "out_of_memory", "vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY (2048 MiB texture atlas)")
        run.end(t + 300.0, 1)
        return {}
    renderer("watch_refused_with_room_is_fragmentation",
             "a 2 GiB allocation is refused with VK_ERROR_OUT_OF_DEVICE_MEMORY while the driver's budget leaves 130 GiB free: fragmentation, not a lack of memory",
             ["APP_FRAGMENTATION"], 3, "software", 30, refused_with_room, reason="fragmentation")

    # Near miss: refused when the budget's rest is smaller than the request.
    def refused_when_full(run, t):
        big = [run.alloc(t + i, 4 * GIB) for i in range(31)]
        run.sample(t + 200.0, run.live_bytes())
        run.refused(t + 300.0, 2 * GIB, budget=TOTAL - GIB, usage=TOTAL - GIB - 512 * MIB)
        run.said(t + 310.0, "out_of_memory", "vkAllocateMemory: VK_ERROR_OUT_OF_DEVICE_MEMORY (2048 MiB texture atlas)")
        run.end(t + 600.0, 1)
        return big
    renderer("watch_refused_when_full_is_over_the_limit",
             "a 2 GiB allocation is refused when the budget has 512 MiB left, the renderer holding 132 GiB: over the limit, not fragmentation",
             ["APP_OVER_MEMORY_LIMIT"], 3, "software", 30, refused_when_full, reason="more memory than the card has")

    # A device lost with the memory flat and Xid 109 naming the renderer: a timeout.
    def timed_out(run, t):
        run.lost(t + 50.0)
        run.said(t + 60.0, "device_lost", "vkQueueSubmit failed: VK_ERROR_DEVICE_LOST")
        run.end(t + 400.0, 1)
        return {}
    renderer("watch_device_lost_timeout",
             "the renderer's queue submission returns VK_ERROR_DEVICE_LOST with its memory flat at 8-11 GiB, Xid 109 naming it: a driver timeout",
             ["XID_TIMEOUT", "APP_DRIVER_TIMEOUT"], 3, "software", 40, timed_out,
             xids=[(109, "Ch 00000010, errorString CTX SWITCH TIMEOUT, Info 0x3c046", 6161)],
             reason="lost its device")

    # The same on Windows: no Xid, the System log's display-driver timeout (TDR) instead.
    def reset_by_windows(run, t):
        run.driver_reset(t + 58.0, "System log: Display event 4101")
        run.said(t + 60.0, "device_lost", "vkQueueSubmit failed: VK_ERROR_DEVICE_LOST")
        run.end(t + 400.0, 1)
        return {}
    renderer("watch_device_lost_windows_tdr",
             "a game's queue submission returns VK_ERROR_DEVICE_LOST on Windows with its memory flat at 8-11 GiB and Windows resetting the display driver after a timeout (Display event 4101): a driver timeout, said by the OS, not the card",
             ["DRIVER_TIMEOUT_RESET", "APP_DRIVER_TIMEOUT"], 3, "software", 40, reset_by_windows,
             reason="Windows reset the display driver")

    # A device lost with Xid 13 of the renderer's own: its shader's fault.
    def faulted(run, t):
        run.lost(t + 50.0, "vkWaitForFences")
        run.end(t + 400.0, 1)
        return {}
    renderer("watch_device_lost_shader_fault",
             "the renderer loses its device after Xid 13 (graphics engine exception) naming its own process: a fault of its own work, not the card",
             ["XID_APPLICATION", "APP_DRIVER_TIMEOUT"], 3, "software", 25, faulted,
             xids=[(13, "Graphics Exception: ESR 0x504648=0x1000e 0x504650=0x0", 6161)],
             reason="lost its device")

    # The card falls off the bus under the renderer.
    def fell_off(run, t):
        run.lost(t + 50.0)
        run.end(t + 400.0, 1)
        return {}
    renderer("watch_card_fell_off_the_bus",
             "Xid 79 (the GPU fell off the bus) just before the renderer lost its device: the card (or its slot and power), test it with the rma profile",
             ["XID_FALLEN_OFF_BUS", "APP_CARD_FAULT"], 1, "fail", 20, fell_off,
             xids=[(79, "GPU has fallen off the bus.", None)], reason="fallen off the bus")


def by_time_scenarios():
    """Vulkan applications watched without --iteration, traced: judged by time."""
    # A 17 s leak of 16 MiB every half second, everything freed at exit: the frees of its
    # teardown never cancel what it held.
    # Requests come as clients send them, at no period kiln could find.
    rnd = random.Random(17)
    run = Run(["./infer", "--serve"], 7373, "infer", trace=True)
    run.traced_device(300.0)
    held = []
    t = 1000.0
    while t < 18000.0:
        held.append(run.alloc(t, 16 * MIB))
        scratch = run.alloc(t + 100.0, rnd.choice([32, 64, 96]) * MIB)
        run.free(t + 300.0, scratch)
        run.sample(t + 400.0, run.live_bytes())
        t += rnd.uniform(350.0, 650.0)
    for i, h in enumerate(held):
        run.free(18200.0 + i, h)
    run.sample(18500.0, run.live_bytes())
    run.end(18600.0, 0)
    run.write("watch_leak_by_time_freed_at_exit",
              "a server leaks 16 MiB every half second for 17 s without --iteration and frees it all at exit: a leak, the frees of its teardown left out",
              ["APP_MEMORY_LEAK"], 3, "software", reason="leak")

    # Near miss: the same server with its memory flat, freed at exit.
    run = Run(["./infer", "--serve"], 7373, "infer", trace=True)
    run.traced_device(300.0)
    model = [run.alloc(400.0 + i, 256 * MIB) for i in range(4)]
    t = 1000.0
    while t < 18000.0:
        scratch = run.alloc(t + 100.0, 64 * MIB)
        run.free(t + 300.0, scratch)
        run.sample(t + 400.0, run.live_bytes())
        t += 500.0
    for i, h in enumerate(model):
        run.free(18200.0 + i, h)
    run.end(18600.0, 0)
    run.write("watch_flat_by_time_freed_at_exit",
              "the same server holds a flat 1 GiB for 17 s and frees it at exit: healthy",
              [], 0, "pass")

    # Start-up is not a leak: a model uploaded (0 to 56 MiB in 0.6 s), then a request the
    # card cannot hold refused in the first second.
    run = Run(["./infer", "--model", "big.gguf"], 7373, "infer", trace=True)
    run.traced_device(300.0)
    for i in range(14):
        run.alloc(400.0 + 45.0 * i, 4 * MIB)
        run.sample(410.0 + 45.0 * i, run.live_bytes())
    run.refused(1150.0, 160 * GIB, budget=TOTAL - GIB, usage=56 * MIB)
    run.said(1160.0, "out_of_memory", "ggml_vulkan: Device memory allocation of size 171798691840 failed.")
    run.end(1300.0, 1)
    run.write("watch_start_up_upload_then_refused",
              "a model upload climbs from 0 to 56 MiB in 0.6 s and a 160 GiB request is refused in the first second: over the limit, never a leak",
              ["APP_OVER_MEMORY_LIMIT"], 3, "software", reason="can never hold")


def children_scenarios():
    """An application whose memory is held by its children."""
    # A launcher that holds 512 MiB starts two workers; worker 4302 leaks 256 MiB a step,
    # worker 4301 holds a flat 20 GiB: the leak is said with the worker that held the most.
    run = Run(["torchrun", "--nproc", "2", "train.py"], 4300, "torchrun", iteration=r"^step \d+")
    run.event(900.0, "app_processes", pids=[4301, 4302])
    t = 1000.0
    for n in range(30):
        run.step(t + 5.0, n)
        for k in range(3):
            leaked = (24.0 + 0.25 * n) * GIB
            busy = 4.0 * GIB if k == 1 else 0.0
            run.sample(t + 1000.0 * k + 400.0, 512 * MIB,
                       children=[(4301, "python3", 20 * GIB + busy), (4302, "python3", leaked + busy)])
        t += 3000.0
    run.end(t + 200.0, 0)
    run.write("watch_leak_in_a_child_process",
              "a launcher's second worker (pid 4302) leaks 256 MiB a step while the first holds a flat 20 GiB: a leak, said with the worker that held the most",
              ["APP_MEMORY_LEAK"], 3, "software", reason="pid 4302 (python3) held the most")


def unseen_scenarios():
    """What kiln could not see: sources that disagree, a watch too short, a trace that
    stopped."""
    # The trace holds 30 allocations of 16 MiB never freed while NVML's per-process figure
    # stays flat at 8 GiB: the sources disagree, and the watch is not judged healthy.
    run = Run(["./sim", "--steps", "30"], 8181, "sim", iteration=r"^step \d+", trace=True)
    run.traced_device(300.0)
    t = 1000.0
    for n in range(30):
        run.step(t + 2.0, n)
        run.alloc(t + 10.0, 16 * MIB)
        scratch = run.alloc(t + 20.0, 64 * MIB)
        run.sample(t + 300.0, 8 * GIB)
        run.free(t + 600.0, scratch)
        run.sample(t + 800.0, 8 * GIB)
        t += 1000.0
    run.end(t + 100.0, 0)
    run.write("watch_sources_disagree",
              "the trace holds 30 allocations of 16 MiB never freed while NVML's per-process figure stays flat at 8 GiB: the sources disagree, said with which was believed, not judged healthy",
              ["APP_NOT_JUDGED"], 4, "inconclusive", reason="sources disagree")

    # A watch of three seconds while the memory climbs, no iterations: too short to judge.
    run = Run(["./serve"], 8282, "serve", trace=True)
    run.traced_device(300.0)
    t = 400.0
    while t < 3400.0:
        run.alloc(t, 8 * MIB)
        run.sample(t + 50.0, run.live_bytes())
        t += 150.0
    run.end(3500.0, 0)
    run.write("watch_too_short_while_rising",
              "a server watched for three seconds climbs from 8 to 160 MiB with no iterations: too short to call a leak or to call it healthy",
              ["APP_NOT_JUDGED"], 4, "inconclusive", reason="too short to judge a leak")
    # Near miss: as short, and flat.
    run = Run(["./serve"], 8282, "serve", trace=True)
    run.traced_device(300.0)
    held = [run.alloc(400.0 + i, 32 * MIB) for i in range(4)]
    t = 500.0
    while t < 3400.0:
        scratch = run.alloc(t, 8 * MIB)
        run.free(t + 60.0, scratch)
        run.sample(t + 80.0, run.live_bytes())
        t += 150.0
    run.end(3500.0, 0)
    run.write("watch_short_and_flat",
              "the same server, as short, holding a flat 128 MiB: nothing rose, healthy",
              [], 0, "pass")

    # kiln's layer stopped tracing halfway (its own failure, caught): the trace after that
    # is not the application's memory, and the watch is not judged healthy on it.
    run = Run(["./render", "--frames", "40"], 6161, "render", iteration=r"^frame \d+", trace=True)
    run.traced_device(300.0)
    t = 1000.0
    for f in range(40):
        run.event(t + 2.0, "iteration", n=f + 1, line=f"frame {f}")
        if f < 20:
            h = run.alloc(t + 5.0, 256 * MIB)
            run.free(t + 700.0, h)
        if f == 20:
            run._record(t + 5.0, "stopped", call="vkAllocateMemory")
        # A driver that lists no processes: the trace is the application's only figure.
        run.sample(t + 300.0, None, listed=False)
        t += 1000.0
    run.end(t + 100.0, 0)
    run.write("watch_trace_stopped",
              "kiln's layer stops tracing at frame 20 (its own failure, caught before it reached the renderer): the trace after that says nothing, not judged healthy",
              ["APP_NOT_JUDGED"], 4, "inconclusive", reason="trace stopped")


def attached_scenarios():
    # Attached with --pid: a service whose memory climbs 200 MiB a minute, read every 10 s.
    run = Run([], 7300, "llm-serve", attached=True)
    for k in range(180):
        ts = 1000.0 + k * 10_000.0
        saw = 2.0 * math.sin(k * 0.7)
        run.sample(ts, (24.0 + 0.2 * k / 6.0) * GIB + saw * 64 * MIB)
    run.end(1000.0 + 180 * 10_000.0, None)
    run.write("watch_attached_leak_by_time",
              "a service watched with --pid for 30 minutes climbs 200 MiB a minute with no iterations to go by: a leak, said per minute",
              ["APP_MEMORY_LEAK"], 3, "software", reason="a minute", interval_s=10.0)

    # Attached where the driver lists no processes: nothing of its memory is seen.
    run = Run([], 7301, "game", attached=True)
    for k in range(30):
        run.sample(1000.0 + k * 1000.0, None, listed=False)
    run.end(31_000.0, None)
    run.write("watch_memory_unseen",
              "a process watched with --pid on a driver that lists no per-process memory, and no trace: nothing of its memory seen, not a pass",
              ["APP_MEMORY_UNSEEN"], 4, "inconclusive", reason="could be read")


if __name__ == "__main__":
    main()
