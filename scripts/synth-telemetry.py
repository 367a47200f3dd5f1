#!/usr/bin/env python3
"""Synthesises the recorded-format telemetry fixtures under tests/fixtures/telemetry/.

No GPU was available when these were made, so each scenario is written in exactly the
format `kiln run` records (kiln.telemetry/1): a header, the device's identity, a
`before` snapshot, 200 ms samples, Xid events, an `after` snapshot. Rerun to regenerate.
"""
import json
import math
import os

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "telemetry")
TICKS = 100  # 20 s at 200 ms
NS = "not_supported"


def identity(second=False):
    fields = {
        "name": "NVIDIA H200", "uuid": "GPU-6c4f3a5e-1b2c-4d5e-8f90-123456789abc",
        "serial": "1654923012345", "board_part_number": "692-2G520-0200-000",
        "vbios": "96.00.74.00.01", "inforom_image": "G520.0200.00.05",
        "pci_bus_id": "00000000:05:00.0", "driver_version": "550.54.15",
        "cuda_driver_version": 12040, "ecc_enabled": "true", "temp_slowdown_c": 87,
        "temp_shutdown_c": 92, "temp_gpu_max_c": 85, "temp_mem_max_c": 95,
        "other_processes": "", "matched_by": "uuid", "nvml_index": 0,
    }
    if second:
        fields.update({"uuid": "GPU-9a2b7c41-3d5e-4f60-a1b2-c3d4e5f60718",
                       "serial": "1654923012399", "pci_bus_id": "00000000:06:00.0",
                       "nvml_index": 1})
    return fields


def counters(**over):
    c = {
        "ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0,
        "ecc_corrected_aggregate": 12, "ecc_uncorrected_aggregate": 0,
        "retired_pages_sbe": {"unavailable": NS}, "retired_pages_dbe": {"unavailable": NS},
        "retired_pages_pending": {"unavailable": NS},
        "remapped_correctable": 0, "remapped_uncorrectable": 0, "remap_pending": 0,
        "remap_failure": 0, "pcie_replays": 0, "energy_mj": 1_000_000,
    }
    c.update(over)
    return c


def sample(t, load=True, temp=None, power=None, sm=None, mask=None, gen=5, width=16,
           limit=700.0, default=700.0):
    if temp is None:
        temp = 62 + 6 * (1 - math.exp(-t / 5)) if load else 34
    if power is None:
        power = 610 + 20 * math.sin(t) if load else 82
    if sm is None:
        sm = 1980 if load else 345
    if mask is None:
        mask = 0 if load else 1
    return {
        "gpu_temp_c": round(temp, 1), "hbm_temp_c": round(temp + 8, 1),
        "power_w": round(power, 1), "power_limit_enforced_w": limit,
        "power_limit_default_w": default, "clock_sm_mhz": sm, "clock_sm_max_mhz": 1980,
        "clock_mem_mhz": 3201 if load else 1593, "clock_mem_max_mhz": 3201,
        "clock_graphics_mhz": sm, "clock_graphics_max_mhz": 1980,
        "throttle_reasons_mask": mask,
        "throttle_reasons": ",".join(n for b, n in REASONS if mask & b),
        "fan0_speed_pct": {"unavailable": NS},
        "util_gpu_pct": 100 if load else 0, "util_mem_pct": 92 if load else 0,
        "pstate": "P0", "pcie_gen": gen, "pcie_width": width, "pcie_gen_max": 5,
        "pcie_width_max": 16, "pcie_replays": 0,
    }


REASONS = [(0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
           (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"),
           (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
           (0x100, "display_clock_setting")]


def write(name, sample_at, before=None, after=None, xids=(), healthy_peer=False):
    """One device's recording; with `healthy_peer`, a second H200 (NVML index 1) beside
    it, loaded and healthy throughout."""
    recs = [{"t_ms": 0.0, "source": "sidecar", "kind": "header",
             "schema": "kiln.telemetry/1", "interval_ms": 200.0},
            {"t_ms": 0.1, "device": 0, "source": "nvml", "kind": "identity",
             "fields": identity()},
            {"t_ms": 0.2, "device": 0, "source": "nvml", "kind": "snapshot",
             "phase": "vram", "when": "before", "counters": before or counters()}]
    if healthy_peer:
        recs += [{"t_ms": 0.1, "device": 1, "source": "nvml", "kind": "identity",
                  "fields": identity(second=True)},
                 {"t_ms": 0.2, "device": 1, "source": "nvml", "kind": "snapshot",
                  "phase": "vram", "when": "before", "counters": counters()}]
    xids = sorted(xids)
    for k in range(TICKS):
        t_ms = 1.0 + 200.0 * k
        recs.append({"t_ms": t_ms, "device": 0, "source": "nvml", "kind": "sample",
                     "readings": sample_at(t_ms / 1000.0)})
        if healthy_peer:
            recs.append({"t_ms": t_ms, "device": 1, "source": "nvml", "kind": "sample",
                         "readings": sample(t_ms / 1000.0)})
        for (xt, code, msg) in [x for x in xids if t_ms <= x[0] < t_ms + 200.0]:
            recs.append({"t_ms": t_ms, "device": 0, "source": "kmsg", "kind": "xid",
                         "xid": {"bus_id": "0000:05:00", "code": code, "pid": None,
                                 "process": None, "message": msg,
                                 "kernel_us": int(5_000_000 + xt * 1000),
                                 "before_run": False}})
    recs.append({"t_ms": 1.0 + 200.0 * TICKS, "device": 0, "source": "nvml",
                 "kind": "snapshot", "phase": "vram", "when": "after",
                 "counters": after or counters(energy_mj=1_000_000 + 12_000_000)})
    if healthy_peer:
        recs.append({"t_ms": 1.0 + 200.0 * TICKS, "device": 1, "source": "nvml",
                     "kind": "snapshot", "phase": "vram", "when": "after",
                     "counters": counters(energy_mj=1_000_000 + 12_000_000)})
    with open(os.path.join(OUT, name + ".jsonl"), "w") as f:
        for r in recs:
            f.write(json.dumps(r, separators=(",", ":")) + "\n")


def main():
    os.makedirs(OUT, exist_ok=True)
    write("healthy_idle", lambda t: sample(t, load=False, gen=1),
          after=counters(energy_mj=1_000_000 + 1_640_000))
    write("healthy_load", lambda t: sample(t))
    # Heats past the slowdown threshold; HW then SW thermal slowdown pull the clocks down.
    write("thermal_throttle", lambda t: sample(
        t, temp=70 + 1.1 * t, sm=1980 if t < 10 else 1980 - 40 * (t - 10),
        mask=0 if t < 10 else (0x40 | 0x20 if t > 14 else 0x40)))
    # Cool card, brake asserted in bursts: power delivery, not heat.
    write("hw_power_brake", lambda t: sample(
        t, temp=48, mask=(0x80 | 0x8) if int(t) % 4 == 0 else 0,
        sm=1200 if int(t) % 4 == 0 else 1980))
    # An administrator capped the card at 400 W of a 700 W default.
    write("sw_power_cap", lambda t: sample(t, power=398, limit=400.0, default=700.0, mask=0x4, sm=1410))
    write("ecc_uncorrectable_remap_pending", lambda t: sample(t),
          after=counters(ecc_uncorrected_volatile=2, ecc_uncorrected_aggregate=2,
                         remapped_uncorrectable=1, remap_pending=1,
                         energy_mj=1_000_000 + 12_000_000),
          xids=[(9000.0, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."),
                (9000.5, 63, "Row Remapper: New row marked for remapping, reset gpu to activate.")])
    write("pcie_downtrained", lambda t: sample(t, gen=3, width=8))
    write("xid79", lambda t: sample(t) if t < 12 else {
        k: {"unavailable": "GPU is lost"} for k in sample(t)},
          xids=[(12000.0, 79, "GPU has fallen off the bus.")])
    # The same fall off the bus on a two-GPU node whose other GPU stays healthy: a job on
    # the other GPU is not this one's fault.
    write("xid79_beside_a_healthy_gpu", lambda t: sample(t) if t < 12 else {
        k: {"unavailable": "GPU is lost"} for k in sample(t)},
          xids=[(12000.0, 79, "GPU has fallen off the bus.")], healthy_peer=True)
    write("xid13_storm", lambda t: sample(t),
          xids=[(300.0 + 390.0 * i, 13, "Graphics SM Warp Exception on (GPC 1, TPC 0, SM 0): Out Of Range Address")
                for i in range(50)])
    # The remapper ran out of spare rows: the memory can no longer heal itself.
    write("remap_failure", lambda t: sample(t),
          after=counters(remapped_uncorrectable=1, remap_failure=1,
                         energy_mj=1_000_000 + 12_000_000),
          xids=[(7000.0, 64, "Row Remapper: Failed to remap a row.")])
    # Cool and unbraked, yet the board's HW slowdown fires: power delivery to the board.
    write("power_delivery", lambda t: sample(
        t, temp=50, mask=0x8 if int(t) % 3 == 0 else 0, sm=1100 if int(t) % 3 == 0 else 1980))
    write("aux_power_missing", lambda t: sample(t, power=140, sm=900, mask=0x8),
          xids=[(400.0, 54, "Auxiliary power is not connected to the GPU board")])
    write("gsp_firmware_xid119", lambda t: sample(t),
          xids=[(6000.0, 119, "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL).")])
    write("pcie_aer_errors", lambda t: sample(t),
          before=counters(aer_fatal=0, aer_nonfatal=0, aer_correctable=0),
          after=counters(aer_fatal=0, aer_nonfatal=3, aer_correctable=40,
                         energy_mj=1_000_000 + 12_000_000))
    # 20 s at Gen5 x16, judged as a minute: 31 replays are allowed, 200 are far over.
    write("pcie_replays_high", lambda t: sample(t),
          after=counters(pcie_replays=200, energy_mj=1_000_000 + 12_000_000))
    write("pcie_replays_within_ber", lambda t: sample(t),
          after=counters(pcie_replays=30, energy_mj=1_000_000 + 12_000_000))
    # A card from before row remapping retires pages instead.
    write("retired_pages_dbe", lambda t: sample(t),
          before=counters(retired_pages_sbe=3, retired_pages_dbe=0, retired_pages_pending=0),
          after=counters(retired_pages_sbe=3, retired_pages_dbe=2, retired_pages_pending=1,
                         energy_mj=1_000_000 + 12_000_000))


if __name__ == "__main__":
    main()
