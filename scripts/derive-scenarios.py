#!/usr/bin/env python3
"""Derives the scenarios that no CPU device can record from ones that were recorded.

Some evidence cannot be planted on lavapipe: a NaN from a faulty ALU, a read that is wrong
while the cell holds the right value, a cell that fails only now and then, an H200's
bandwidth, another tenant on the GPU, a half-upgraded driver. These scenarios start from a
recorded run (`cargo run --example plant_run`) or a telemetry fixture
(`scripts/synth-telemetry.py`) and change only the fields that carry that evidence, through
the same JSON formats kiln writes. Deterministic: run it again and nothing changes.

    python3 scripts/derive-scenarios.py
"""

import copy
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "scenarios"
FIXTURES = ROOT / "tests" / "fixtures" / "telemetry"
GIB_PER_GB = 1e9 / (1 << 30)


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in records))


def events_of(scenario):
    """The events a scenario runs on: its own, or those of the scenario it starts from."""
    while True:
        own = CORPUS / scenario / "events.jsonl"
        if own.exists():
            return read_jsonl(own)
        expected = json.loads((CORPUS / scenario / "expected.json").read_text())
        scenario = expected.get("run_from", "_base")


def workload_end(events, workload):
    return next(e for e in events if e["kind"] == "workload_end" and e["workload"] == workload)


def scenario(name, expected, events=None, telemetry=None, thresholds=None):
    d = CORPUS / name
    d.mkdir(exist_ok=True)
    (d / "expected.json").write_text(json.dumps(expected) + "\n")
    if events is not None:
        write_jsonl(d / "events.jsonl", events)
    if telemetry is not None:
        write_jsonl(d / "telemetry.jsonl", telemetry)
    if thresholds is not None:
        (d / "thresholds.json").write_text(json.dumps(thresholds) + "\n")


def retest_class(name, cls, about, codes, errors=1, exit_code=1, result="fail"):
    """The single-flip run with its retest saying `cls` instead of `not_reproduced`."""
    events = copy.deepcopy(events_of("vram_single_flip"))
    summary = workload_end(events, "vram")["summary"]
    record = summary["records"][0]
    retest = summary["retests"][0]
    retest["class"] = cls
    if cls == "intermittent":
        # Two of three re-reads of the pattern that failed come back wrong again.
        retest["rereads"] = [record["actual"], record["expected"], record["actual"]]
    if errors > 1:
        # The same flip at more offsets, none reproduced.
        records, retests = [], []
        for i in range(errors):
            r = dict(record, offset_bytes=record["offset_bytes"] + 4096 * i,
                     buffer_offset_bytes=record["buffer_offset_bytes"] + 4096 * i)
            records.append(r)
            retests.append(dict(retest, offset_bytes=r["offset_bytes"]))
        summary["records"], summary["retests"] = records, retests
        summary["errors_total"] = errors
        summary["algorithms"][0]["errors"] = errors
        summary["histograms"]["bit_position"][5] = errors
        summary["histograms"]["flipped_bits"][1] = errors
        summary["histograms"]["zero_to_one"] = errors
        workload_end(events, "vram")["headline"] = \
            f"{errors} wrong words in 0.02 GiB tested ({errors} recorded)"
    scenario(name, {"about": about, "run_from": "vram_single_flip", "exit_code": exit_code,
                    "result": result, "codes": codes, "incomplete": False}, events=events)


def h200_events(verify_gbps, write_gbps, scenario_from="_base"):
    """The healthy recorded run (or `scenario_from`'s), as an H200 on NVIDIA's driver would
    have written it."""
    events = copy.deepcopy(events_of(scenario_from))
    events = [e for e in events
              if not (e["kind"] == "note" and ("CPU Vulkan device" in e["message"]
                                               or "no PCI address" in e["message"]
                                               or "NVML is not available" in e["message"]))]
    for e in events:
        if e["kind"] == "device_start":
            e["info"].update({
                "name": "NVIDIA H200", "vendor_id": 0x10DE, "vendor_name": "NVIDIA",
                "device_id": 0x2335, "kind": "discrete_gpu", "driver_name": "NVIDIA",
                "driver_info": "550.54.15", "driver_version": "550.54.15.0",
                "device_uuid": "6c4f3a5e-1b2c-4d5e-8f90-123456789abc",
                "pci_address": "0000:05:00.0",
            })
    throughput = workload_end(events, "vram")["summary"]["throughput"]
    for key, gbps in (("verify", verify_gbps), ("write", write_gbps)):
        rate = throughput[key]
        rate["gib_per_s"] = gbps * GIB_PER_GB
        rate["gpu_s"] = rate["bytes"] / (gbps * 1e9)
    set_compute_rates(events, H200_COMPUTE_GOPS)
    return events


# What kiln's verified chains compute on a healthy H200, 10^9 operations per second: about
# three quarters of the spec sheet's 67 TFLOP/s fp32 and 33.5 TOP/s int32.
H200_COMPUTE_GOPS = {"fp32": 50000.0, "int32": 25000.0}


def set_compute_rates(events, gops, device=None):
    """The compute workload's rates (per kind, 10^9 operations per second) in a run's events,
    its headline to match."""
    for e in events:
        if e["kind"] != "workload_end" or e["workload"] != "compute":
            continue
        if device is not None and e.get("device") != device:
            continue
        for k in e["summary"]["kinds"]:
            if k["kind"] in gops and k["rounds"] > 0:
                k["gops"] = gops[k["kind"]]
                k["best_gops"] = round(gops[k["kind"]] * 1.04, 1)
                k["gpu_s"] = k["verified_ops"] * 2 * k["rounds"] / (gops[k["kind"]] * 1e9)
        head, sep, _ = e["headline"].partition(" (FP32")
        if sep:
            rates = ", ".join(f"{k['kind'].upper()} {k['gops']:.1f} Gop/s"
                              for k in e["summary"]["kinds"] if k["rounds"] > 0)
            e["headline"] = f"{head} ({rates})"


def pair(fp32_gops):
    """The healthy H200 run as two H200s side by side, with these fp32 rates."""
    base = h200_events(4100.0, 3900.0)
    events = []
    for e in base:
        events.append(e)
        if e.get("device") == 0:
            twin = copy.deepcopy(e)
            twin["device"] = 1
            if twin["kind"] == "device_start":
                twin["info"].update({"index": 1, "device_uuid": "7d5e4b6f-2c3d-4e6f-9a01-23456789abcd",
                                     "pci_address": "0000:06:00.0"})
            events.append(twin)
    for device, fp32 in enumerate(fp32_gops):
        set_compute_rates(events, dict(H200_COMPUTE_GOPS, fp32=fp32), device)
    return events


def identity_changed(fixture, **fields):
    telemetry = read_jsonl(FIXTURES / f"{fixture}.jsonl")
    for r in telemetry:
        if r["kind"] == "identity":
            r["fields"].update(fields)
    return telemetry


def nvml_failed(cause, message):
    """A run whose NVML would not start: the header, the fact, and the phase snapshots."""
    base = read_jsonl(CORPUS / "_base" / "telemetry.jsonl")
    for r in base:
        if r["kind"] == "unavailable" and r.get("source") == "nvml":
            r["message"] = message
            r["cause"] = cause
    return base


def main():
    # Compute: NaNs where the arithmetic cannot make them.
    events = copy.deepcopy(events_of("_base"))
    end = workload_end(events, "compute")
    end["status"] = "failed"
    end["headline"] = "3 non-finite results (silent data corruption) in 461373440 verified multiply-adds"
    end["summary"]["kinds"][0]["nonfinite"] = 3
    scenario("compute_nonfinite", {
        "about": "three fp32 results came back NaN from arithmetic that cannot produce one: silent data corruption",
        "exit_code": 1, "result": "fail", "codes": ["COMPUTE_NONFINITE", "TELEMETRY_MISSING"],
        "incomplete": False}, events=events)

    # VRAM by retest class.
    retest_class("vram_transfer_only", "transfer",
                 "the read was wrong but every retest of the cell read right: the transfer (memory clock, overclock), not the cell",
                 ["VRAM_TRANSFER_ERROR", "TELEMETRY_MISSING"])
    retest_class("vram_intermittent", "intermittent",
                 "a cell that fails on some re-reads of the same pattern and not others: a marginal part",
                 ["VRAM_MARGINAL", "TELEMETRY_MISSING"])
    retest_class("vram_unreproduced_errors", "not_reproduced",
                 "five words flipped once and none came back on retest: memory errors, medium confidence, not yet a located fault",
                 ["VRAM_ERRORS", "TELEMETRY_MISSING"], errors=5)

    # PCIe rates against a Gen4 x16 link that trained fully.
    events = copy.deepcopy(events_of("_base"))
    end = workload_end(events, "pcie")
    end["summary"]["link"] = {"generation": 4, "generation_max": 4, "width": 16, "width_max": 16,
                              "theoretical_gbps": 16.0 * 242.0 / 256.0 / 8.0 * 16}
    # A discrete card: its staging buffers sit in host memory, so the transfers cross the bus.
    end["summary"]["staging_in_host_memory"] = True
    scenario("pcie_bandwidth_low", {
        "about": "about 9 GB/s each way over a Gen4 x16 link that trained fully (theory 30 GB/s): slot, riser or platform",
        "exit_code": 2, "result": "environment", "codes": ["PCIE_BANDWIDTH_LOW", "TELEMETRY_MISSING"],
        "incomplete": False}, events=events)
    scenario("pcie_bandwidth_low_lenient_site", {
        "about": "the same rates judged by a site that accepts a quarter of what healthy cards reach (a platform it knows): no finding",
        "run_from": "pcie_bandwidth_low", "exit_code": 0, "result": "pass",
        "codes": ["TELEMETRY_MISSING"], "incomplete": False}, thresholds={"pcie_low_share": 0.25})

    # An H200: healthy, then slow with and without an explanation.
    scenario("h200_healthy", {
        "about": "an H200 streaming 4.1 TB/s with healthy telemetry: nothing to say",
        "telemetry_fixture": "healthy_load", "exit_code": 0, "result": "pass", "codes": [],
        "incomplete": False}, events=h200_events(4100.0, 3900.0))
    slow = h200_events(2100.0, 1900.0)
    scenario("h200_slow_while_throttled", {
        "about": "an H200 at half its bandwidth while thermally throttled: the throttling explains it (environment, not hardware)",
        "run_from": "h200_healthy", "telemetry_fixture": "thermal_throttle", "exit_code": 2,
        "result": "environment", "codes": ["BANDWIDTH_LOW_THROTTLED", "THERMAL_THROTTLE"],
        "incomplete": False}, events=slow)
    scenario("h200_slow_unexplained", {
        "about": "an H200 at half its bandwidth (2150 of the 4300 GB/s measured on healthy H200s), full memory clock, cool and unthrottled, nothing else on the GPU: below a measured reference by half, the card (hardware, high confidence)",
        "run_from": "h200_slow_while_throttled", "telemetry_fixture": "healthy_load", "exit_code": 1,
        "result": "fail", "codes": ["VRAM_BANDWIDTH_LOW"], "incomplete": False})
    scenario("h200_slow_below_site_floor", {
        "about": "the same run judged by a site floor measured on its own H200s: a slow card, medium confidence",
        "run_from": "h200_slow_unexplained", "exit_code": 1, "result": "fail",
        "codes": ["VRAM_BANDWIDTH_LOW"], "incomplete": False}, thresholds={"vram_floor_gbps": 3500})

    # Setup: other tenants, driver versions, a driver not loaded.
    scenario("other_tenants", {
        "about": "two other processes held 80 GiB of the GPU when the test started: the environment, rerun on an idle GPU",
        "run_from": "h200_healthy", "exit_code": 2, "result": "environment", "codes": ["OTHER_TENANTS"],
        "incomplete": False},
        telemetry=identity_changed("healthy_load", other_processes="4242:68719476736,4243:17179869184"))
    scenario("driver_half_upgraded", {
        "about": "the Vulkan driver is 550.54.15 but NVML is 550.90.07: a half-finished upgrade (software)",
        "run_from": "h200_healthy", "exit_code": 3, "result": "software",
        "codes": ["DRIVER_VERSION_MISMATCH"], "incomplete": False},
        telemetry=identity_changed("healthy_load", driver_version="550.90.07"))
    scenario("nvml_kernel_version_mismatch", {
        "about": "NVML will not start because the kernel driver is another version (upgraded without a reboot): software, and nothing read from NVML",
        "run_from": "h200_healthy", "exit_code": 3, "result": "software",
        "codes": ["DRIVER_VERSION_MISMATCH", "TELEMETRY_MISSING"], "incomplete": False},
        telemetry=nvml_failed("version_mismatch",
                              "NVML and the NVIDIA kernel driver differ in version (driver upgraded without a reboot): "
                              "no telemetry from NVML"))
    scenario("driver_not_loaded", {
        "about": "NVIDIA's libraries are installed but its kernel driver is not loaded, so only the CPU device ran: software, not a pass",
        "exit_code": 3, "result": "software", "codes": ["DRIVER_NOT_LOADED", "TELEMETRY_MISSING"],
        "incomplete": False},
        telemetry=nvml_failed("driver_not_loaded",
                              "the NVIDIA kernel driver is not loaded: no telemetry from NVML"))

    # A device's worker: abandoned as hung on a card whose telemetry is healthy, and dead.
    scenario("device_hung_quiet_card", {
        "about": "the watchdog abandoned a device whose telemetry shows no Xid and no fault: a driver hang (software)",
        "run_from": "device_hung_blind", "telemetry_fixture": "healthy_load", "exit_code": 3,
        "result": "software", "codes": ["DEVICE_HANG"], "incomplete": False})
    events = copy.deepcopy(events_of("device_hung_blind"))
    for e in events:
        if e["kind"] == "device_error":
            e["error"] = "crash"
            e["message"] = "the device's worker process ended before its test did (signal: 11 (SIGSEGV))"
    scenario("worker_crashed", {
        "about": "the device's worker process died of SIGSEGV inside the driver, on a card whose telemetry is healthy: software",
        "run_from": "device_hung_blind", "telemetry_fixture": "healthy_load", "exit_code": 3,
        "result": "software", "codes": ["WORKER_CRASHED"], "incomplete": False}, events=events)

    # Two H200s in one run, the first with 20% less fp32 compute than the second.
    scenario("h200_slower_than_its_peer", {
        "about": "two H200s in one run; the first computes fp32 20% slower than its twin with nothing in its environment to explain it",
        "run_from": "h200_healthy", "exit_code": 1, "result": "fail", "codes": ["PEER_SLOWER"],
        "incomplete": False}, events=pair(fp32_gops=(40000.0, 50000.0)))
    scenario("h200_slower_than_its_peer_while_throttled", {
        "about": "the same pair, the slow one thermally throttled: its cooling explains it (environment)",
        "run_from": "h200_slower_than_its_peer", "telemetry_fixture": "thermal_throttle", "exit_code": 2,
        "result": "environment", "codes": ["THERMAL_THROTTLE", "PEER_SLOWER"], "incomplete": False})
    scenario("h200_slower_than_its_peer_above_its_site_floor", {
        "about": "the same pair judged with a site floor of 36000 Gop/s fp32: the slow one's 40000 clears the floor, but it is 20% behind its identical twin at the same clocks with nothing in its environment to explain it: the card",
        "run_from": "h200_slower_than_its_peer", "exit_code": 1, "result": "fail",
        "codes": ["PEER_SLOWER"], "incomplete": False},
        thresholds={"floors": {"compute_fp32_gops": 36000}})
    scenario("h200_pair_within_tolerance", {
        "about": "two H200s 5% apart in fp32 compute: within the 10% peers may differ by",
        "run_from": "h200_healthy", "exit_code": 0, "result": "pass", "codes": [],
        "incomplete": False}, events=pair(fp32_gops=(47500.0, 50000.0)))

    # A GPU kiln has no bandwidth reference for.
    events = h200_events(800.0, 700.0)
    for e in events:
        if e["kind"] == "device_start":
            e["info"].update({"name": "AMD Radeon RX 7900 XTX", "vendor_id": 0x1002,
                              "vendor_name": "AMD", "device_id": 0x744C, "driver_name": "radv",
                              "driver_info": "Mesa 24.2.8", "driver_version": "24.2.8"})
    scenario("unknown_gpu_rates_unjudged", {
        "about": "a GPU kiln has no product figures for: its results are verified and its stability judged, and the report says its rates were not held to a floor",
        "exit_code": 0, "result": "pass", "codes": ["PRODUCT_UNKNOWN", "TELEMETRY_MISSING"],
        "incomplete": False}, events=events)

    field_cases()


# ---------------------------------------------------------------------------------------
# Field situations: telemetry of a whole run (preflight, vram, compute, pcie), written the
# way the sidecar records it, for how datacenter cards really fail and mislead.

PHASES = [("preflight", 0.0, 1.0), ("vram", 1.05, 13.0), ("compute", 13.05, 19.0),
          ("pcie", 19.05, 21.0)]
NS = "not_supported"
REASONS = [(0x1, "gpu_idle"), (0x2, "applications_clocks_setting"), (0x4, "sw_power_cap"),
           (0x8, "hw_slowdown"), (0x10, "sync_boost"), (0x20, "sw_thermal_slowdown"),
           (0x40, "hw_thermal_slowdown"), (0x80, "hw_power_brake_slowdown"),
           (0x100, "display_clock_setting"), (0x200, "board_limit"), (0x400, "reliability_policy")]


def h200_identity(**over):
    f = {"name": "NVIDIA H200", "uuid": "GPU-6c4f3a5e-1b2c-4d5e-8f90-123456789abc",
         "serial": "1654923012345", "board_part_number": "692-2G520-0200-000",
         "vbios": "96.00.74.00.01", "inforom_image": "G520.0200.00.05",
         "pci_bus_id": "00000000:05:00.0", "driver_version": "550.54.15",
         "cuda_driver_version": 12040, "ecc_enabled": "true", "ecc_enabled_pending": "true",
         "temp_slowdown_c": 87, "temp_shutdown_c": 92, "temp_gpu_max_c": 85,
         "temp_mem_max_c": 95, "other_processes": "", "matched_by": "uuid", "nvml_index": 0}
    f.update(over)
    return f


def h200_counters(**over):
    c = {"ecc_corrected_volatile": 0, "ecc_uncorrected_volatile": 0,
         "ecc_corrected_aggregate": 3, "ecc_uncorrected_aggregate": 0,
         "retired_pages_sbe": {"unavailable": NS}, "retired_pages_dbe": {"unavailable": NS},
         "retired_pages_pending": {"unavailable": NS},
         "remapped_correctable": 0, "remapped_uncorrectable": 0, "remap_pending": 0,
         "remap_failure": 0, "recovery_action": 0, "pcie_replays": 0, "energy_mj": 2_000_000,
         "remap_banks_max": 2560, "remap_banks_high": 0, "remap_banks_partial": 0,
         "remap_banks_low": 0, "remap_banks_none": 0, "sram_uncorrected_parity": 0,
         "sram_uncorrected_secded": 0, "sram_corrected": 0, "sram_threshold_exceeded": 0}
    c.update(over)
    return c


def h200_sample(phase, t, temp=None, mask=None, sm=1980, mem=3201, power=None, limit=700.0,
                sm_max=1980, mem_max=3201, default=700.0):
    """An H200's sample (or, with its maxima and default limit, another NVIDIA card's)."""
    idle = phase == "preflight"
    if temp is None:
        temp = 36.0 if idle else 58.0 + 0.5 * t
    if mask is None:
        mask = 0x1 if idle else 0
    if power is None:
        power = 90.0 if idle else 0.91 * default
    return {"gpu_temp_c": round(temp, 1), "hbm_temp_c": round(temp + 7, 1),
            "power_w": power, "power_limit_enforced_w": limit, "power_limit_default_w": default,
            "clock_sm_mhz": 345 if idle else sm, "clock_sm_max_mhz": sm_max,
            "clock_mem_mhz": mem_max // 2 if idle else mem, "clock_mem_max_mhz": mem_max,
            "clock_graphics_mhz": 345 if idle else sm, "clock_graphics_max_mhz": sm_max,
            "throttle_reasons_mask": mask,
            "throttle_reasons": ",".join(n for b, n in REASONS if mask & b),
            "util_gpu_pct": 0 if idle else 100, "util_mem_pct": 0 if idle else 88,
            "pstate": "P0", "pcie_gen": 1 if idle else 5, "pcie_width": 16, "pcie_gen_max": 5,
            "pcie_width_max": 16, "pcie_replays": 0}


def sysfs_sample(phase):
    """What the sysfs source records of the same card: the link and hwmon, no throttle mask."""
    idle = phase == "preflight"
    return {"pcie_speed_gts": 2.5 if idle else 32.0, "pcie_gen": 1 if idle else 5,
            "pcie_speed_max_gts": 32.0, "pcie_gen_max": 5, "pcie_width": 16, "pcie_width_max": 16}


def run_telemetry(sample=h200_sample, counters_at=lambda t: h200_counters(), xids=(),
                  identity=None, sysfs=False, source="nvml", resets=()):
    """A whole run's telemetry for device 0: `sample(phase, t)` every 200 ms in each phase,
    `counters_at(t)` at every phase boundary, kernel-log Xids `(t, code, message)`, and
    Windows' display-driver resets `(t, before_run, evidence)`."""
    recs = [{"t_ms": 0.0, "source": "sidecar", "kind": "header", "schema": "kiln.telemetry/1",
             "interval_ms": 200.0}]
    if identity is not False:
        recs.append({"t_ms": 0.1, "device": 0, "source": source, "kind": "identity",
                     "fields": identity or h200_identity()})
    for phase, start, end in PHASES:
        recs.append({"t_ms": start * 1000, "device": 0, "source": source, "kind": "snapshot",
                     "phase": phase, "when": "before", "counters": counters_at(start)})
        t = start + 0.05
        while t < end:
            recs.append({"t_ms": round(t * 1000, 1), "device": 0, "source": source,
                         "kind": "sample", "readings": sample(phase, t)})
            if sysfs:
                recs.append({"t_ms": round(t * 1000 + 1, 1), "device": 0, "source": "sysfs",
                             "kind": "sample", "readings": sysfs_sample(phase)})
            t += 0.2
        recs.append({"t_ms": end * 1000, "device": 0, "source": source, "kind": "snapshot",
                     "phase": phase, "when": "after", "counters": counters_at(end)})
    for (t, code, message) in xids:
        recs.append({"t_ms": t * 1000, "device": 0, "source": "kmsg", "kind": "xid",
                     "xid": {"bus_id": "0000:05:00", "code": code, "pid": None, "process": None,
                             "message": message, "kernel_us": int(9_000_000 + t * 1e6),
                             "before_run": False}})
    for (t, before_run, evidence) in resets:
        recs.append({"t_ms": t * 1000, "device": 0, "source": "kmsg", "kind": "driver_reset",
                     "reset": {"driver": "nvlddmkm", "logged_unix_us": int(1_796_000_000e6 + t * 1e6),
                               "before_run": before_run, "evidence": evidence}})
    recs.sort(key=lambda r: r["t_ms"])
    return recs


def field(name, about, exit_code, result, codes, events=None, telemetry=None, run_from=None,
          reason=None, thresholds=None):
    expected = {"about": about}
    if run_from:
        expected["run_from"] = run_from
    expected.update({"exit_code": exit_code, "result": result, "codes": codes,
                     "incomplete": False})
    if reason:
        expected["reason"] = reason
    scenario(name, expected, events=events, telemetry=telemetry, thresholds=thresholds)


def h200_with(**summary_changes):
    """The healthy H200 run with a workload's summary changed."""
    events = h200_events(4100.0, 3900.0)
    for workload, change in summary_changes.items():
        change(workload_end(events, workload))
    return events


def compute_mismatch(end):
    end["status"] = "failed"
    end["headline"] = "2 work items computed differently on two compute units"
    end["summary"]["kinds"][0]["mismatches"] = 2


def field_cases():
    # Two sources on one device: a short thermal excursion (7% of the VRAM phase on NVML's
    # samples) must not be diluted to 3.5% by sysfs samples that carry no throttle mask.
    def brief_heat(phase, t):
        hot = phase == "vram" and 6.0 <= t < 6.85
        return h200_sample(phase, t, temp=86.5 if hot else None, mask=0x40 if hot else None,
                           sm=1600 if hot else 1980)
    field("brief_thermal_slowdown_with_sysfs_alongside",
          "an H200 on a host where NVML and sysfs both sample it: HW thermal slowdown in 4 of 60 NVML samples of the VRAM phase at 86.5 C; the sysfs samples carry no throttle mask and must not halve the share below the 5% that makes it a finding",
          2, "environment", ["THERMAL_THROTTLE"], run_from="h200_healthy",
          telemetry=run_telemetry(sample=brief_heat, sysfs=True))

    # Events between phases, and after the last one.
    field("fallen_off_the_bus_after_the_last_phase",
          "the run's last phase closed cleanly, then the kernel logged Xid 79 before the run ended: an event of the run, judged (hardware or platform), not lost in the gap",
          1, "fail", ["XID_FALLEN_OFF_BUS"], run_from="h200_healthy",
          telemetry=run_telemetry(xids=[(21.4, 79, "GPU has fallen off the bus.")]))
    field("double_bit_error_between_phases",
          "a double-bit error (Xid 48) and its uncorrectable ECC count landed in the 50 ms between the VRAM and compute phases: the memory, judged though no phase window covers it",
          1, "fail", ["ECC_UNCORRECTABLE", "XID_MEMORY_HARDWARE"], run_from="h200_healthy",
          telemetry=run_telemetry(
              counters_at=lambda t: h200_counters(ecc_uncorrected_volatile=1 if t > 13.0 else 0,
                                                  ecc_uncorrected_aggregate=1 if t > 13.0 else 0),
              xids=[(13.02, 48, "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 3, subpartition 1.")]))

    # Standing states set before the run: the card's condition, not history.
    field("remap_failed_before_the_run",
          "an H200 whose row remapper ran out of spare rows weeks ago (remap_failure 1, 512 uncorrectable remaps) and that passes every pattern today: still an RMA, the counter does not need to move during the run",
          1, "fail", ["ROW_REMAP_FAILURE"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=lambda t: h200_counters(remap_failure=1, remapped_uncorrectable=512)))
    field("remap_pending_before_the_run",
          "a row remap pending since a double-bit error before this run (remap_pending 1): the card needs a reset to apply it and a retest; a clean run does not clear it",
          1, "fail", ["ROW_REMAP_PENDING"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=lambda t: h200_counters(remap_pending=1, remapped_uncorrectable=1)))
    v100 = dict(retired_pages_sbe=4, retired_pages_dbe=2, retired_pages_pending=1,
                remapped_correctable={"unavailable": NS}, remapped_uncorrectable={"unavailable": NS},
                remap_pending={"unavailable": NS}, remap_failure={"unavailable": NS})
    field("page_retirement_pending_before_the_run",
          "a V100-generation card (page retirement, no remapper) with two pages retired for double-bit errors and a retirement pending since before the run: reset and retest, an RMA candidate",
          1, "fail", ["RETIRED_PAGES"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=lambda t: h200_counters(**v100)))
    field("driver_asks_for_a_reset",
          "NVML's recovery action says the GPU needs a reset (set by an earlier fault) although this run's workloads passed: not healthy until reset, and the cause is in the kernel log, not the card by itself",
          3, "software", ["RECOVERY_ACTION_PENDING"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=lambda t: h200_counters(recovery_action=1)))
    field("ecc_mode_change_pending",
          "someone disabled ECC (nvidia-smi -e 0) and the change waits for a reset: the card was tested with ECC on and will run without it, a configuration to fix before trusting the result",
          2, "environment", ["ECC_MODE_PENDING"], run_from="h200_healthy",
          telemetry=run_telemetry(identity=h200_identity(ecc_enabled="true", ecc_enabled_pending="false")))

    # The configuration explains performance and errors.
    field("overclocked_sm_with_compute_mismatch",
          "an SM clock of 2110 MHz on a card rated 1980 MHz (an overclock) and two work items computed differently: the settings, not the card, until it fails at stock clocks",
          2, "environment", ["COMPUTE_MISMATCH", "CLOCKS_ABOVE_MAXIMUM"], run_from="h200_healthy",
          events=h200_with(compute=compute_mismatch),
          telemetry=run_telemetry(sample=lambda ph, t: h200_sample(ph, t, sm=2110)))
    field("memory_overclock_with_transfer_errors",
          "a memory clock of 3500 MHz on HBM rated 3201 MHz and a read that was wrong while the cell held the right value: the overclock, not the memory",
          2, "environment", ["VRAM_TRANSFER_ERROR", "CLOCKS_ABOVE_MAXIMUM"],
          events=h200_events(4100.0, 3900.0, "vram_transfer_only"),
          telemetry=run_telemetry(sample=lambda ph, t: h200_sample(ph, t, mem=3500)))
    capped = lambda ph, t: h200_sample(ph, t, mask=0x4 if ph != "preflight" else None,
                                       power=448.0 if ph != "preflight" else None, limit=450.0,
                                       sm=1410)
    field("admin_cap_holds_the_card_below_its_floor",
          "an administrator capped an H200 at 450 W of its 700 W default: its SM clock sat at 1410 of 1980 MHz and its VRAM streamed 2600 GB/s, below the 3225 GB/s floor: the configuration holds the card below its product (environment, of weight), named with how to restore it, not a slow card",
          2, "environment", ["CONFIG_LIMITS_CARD"],
          events=h200_events(2600.0, 2450.0), telemetry=run_telemetry(sample=capped),
          reason="administrator's power limit of 450 W")
    mild_cap = lambda ph, t: h200_sample(ph, t, mask=0x4 if ph != "preflight" else None,
                                         power=598.0 if ph != "preflight" else None, limit=600.0,
                                         sm=1830)
    field("admin_cap_within_the_floor",
          "near miss: a 600 W cap on an H200 (700 W default) that held the SM clock at 1830 of 1980 MHz while VRAM streamed 4100 GB/s and compute stayed above its floor: the cap is noted, and the card passed",
          0, "pass", ["ADMIN_POWER_CAP"], run_from="h200_healthy", telemetry=run_telemetry(sample=mild_cap))
    field("tenants_explain_low_bandwidth",
          "two other processes used the GPU while its VRAM streamed 2300 GB/s: they share the bandwidth, so the low rate is theirs, not a slow card",
          2, "environment", ["BANDWIDTH_LOW_THROTTLED", "OTHER_TENANTS"],
          events=h200_events(2300.0, 2200.0),
          telemetry=run_telemetry(identity=h200_identity(other_processes="5120:34359738368,5121:8589934592")))

    # A lone, low-confidence call is not a FAIL.
    field("lone_flip_on_a_hot_card",
          "one bit flipped once on an H200 at 83 C, its HBM at 90 C (5 C short of its limit: a note beside it), unthrottled, and never came back on retest: a recheck (rerun with the rma profile), not an RMA and not a pass",
          4, "inconclusive", ["VRAM_TRANSIENT_ERROR", "MEMORY_HOT"],
          events=h200_events(4100.0, 3900.0, "vram_single_flip"),
          telemetry=run_telemetry(sample=lambda ph, t: h200_sample(ph, t, temp=36.0 if ph == "preflight" else 83.0)))

    # The Xid catalogue at work.
    field("nvlink_error_during_compute",
          "Xid 74 (NVLink error) three times during the compute phase on an HGX board: the link, hardware",
          1, "fail", ["XID_NVLINK"], run_from="h200_healthy",
          telemetry=run_telemetry(xids=[(15.0 + i, 74, "NVLink: fatal error detected on link 7(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)") for i in range(3)]))
    field("high_single_bit_error_rate",
          "Xid 92 (high single-bit ECC rate) while the corrected-ECC count climbed by 1400 in the few seconds of the VRAM phase (judged as a whole minute: 1400 a minute, over the budget of 1000): memory degrading under load, the card's, and the driver says the same (hardware, high confidence); the Xid is said inside it",
          1, "fail", ["ECC_CORRECTED_RATE_HIGH"], run_from="h200_healthy",
          telemetry=run_telemetry(
              counters_at=lambda t: h200_counters(ecc_corrected_volatile=1400 if t > 1.05 else 0),
              xids=[(8.0, 92, "High single-bit ECC error rate detected")]),
          reason="Xid 92")
    field("single_bit_error_rate_xid_with_few_corrections",
          "near miss: Xid 92 raised once, with the corrected-ECC count up by only 40 during the run: the driver's early warning, a recheck with the rma profile, not yet an RMA",
          4, "inconclusive", ["XID_ECC_RATE"], run_from="h200_healthy",
          telemetry=run_telemetry(
              counters_at=lambda t: h200_counters(ecc_corrected_volatile=40 if t > 1.05 else 0),
              xids=[(8.0, 92, "High single-bit ECC error rate detected")]))
    field("gsp_timeout_then_reset_required",
          "a GSP RPC timeout (Xid 119) and then Xid 154 asking for a GPU reset: firmware or driver (software); the action is the reset the driver asks for",
          3, "software", ["XID_FIRMWARE", "XID_RECOVERY_ACTION"], run_from="h200_healthy",
          telemetry=run_telemetry(xids=[
              (14.0, 119, "Timeout after 6s of waiting for RPC response from GPU0 GSP! Expected function 76 (GSP_RM_CONTROL)."),
              (14.1, 154, "GPU recovery action changed from 0x0 (None) to 0x1 (Reset Required)")]))
    field("fallen_off_the_bus_then_reboot_required",
          "Xid 79 during VRAM followed by Xid 154 asking for a node reboot: the fall off the bus decides (hardware or platform); the reboot is what to do first",
          1, "fail", ["XID_FALLEN_OFF_BUS", "XID_RECOVERY_ACTION"], run_from="h200_healthy",
          telemetry=run_telemetry(xids=[
              (9.0, 79, "GPU has fallen off the bus."),
              (9.2, 154, "GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)")]))
    field("context_switch_timeout_with_device_lost",
          "the device was lost in compute while the kernel logged Xid 109 (context-switch timeout) on a cool card: a long non-preemptible dispatch hit the watchdog, the driver's and the workload's, not the card's",
          3, "software", ["XID_TIMEOUT", "DEVICE_LOST_TIMEOUT"], run_from="device_lost_no_telemetry",
          telemetry=run_telemetry(xids=[(15.5, 109, "Ch 00000010, engmask 00000101, intr 10000000")]))
    # Windows' display-driver timeouts (TDR), from the System log.
    field("windows_tdr_during_compute",
          "Windows reset nvlddmkm after a timeout during compute (Display event 4101 and a watchdog report) while every kiln result verified: the OS gave up on GPU work, software, and no clean burn-in",
          3, "software", ["DRIVER_TIMEOUT_RESET"], run_from="h200_healthy",
          telemetry=run_telemetry(resets=[
              (15.2, False, ["System log: Display event 4101"]),
              (15.9, False, [r"watchdog report C:\Windows\LiveKernelReports\WATCHDOG\WATCHDOG-20261128-2114.dmp"])]),
          reason="Windows reset the display driver")
    field("windows_tdr_before_the_run",
          "near miss: the System log holds a display-driver reset from two days before the run; nothing during it: the card passed",
          0, "pass", [], run_from="h200_healthy",
          telemetry=run_telemetry(resets=[(0.5, True, ["System log: Display event 4101"])]))
    field("windows_tdr_with_device_lost",
          "the device was lost in compute and Windows logged a display-driver reset for a timeout at that moment: the timeout, said by the OS, high confidence (software), not the card",
          3, "software", ["DEVICE_LOST_TIMEOUT"], run_from="device_lost_no_telemetry",
          telemetry=run_telemetry(resets=[(15.5, False, ["System log: Display event 4101"])]),
          reason="Windows reset the display driver after a timeout")
    # WDDM placing "device-local" memory in system RAM under pressure: an RTX 4090 on
    # Windows with a game still holding 6 GiB.
    def rtx4090(placed):
        events = h200_events(900.0, 850.0)
        for e in events:
            if e["kind"] == "device_start":
                e["info"].update({"name": "NVIDIA GeForce RTX 4090", "device_id": 0x2684})
        sizing = workload_end(events, "vram")["summary"]["sizing"]
        if placed:
            sizing["placed_in_system_bytes"] = placed
        set_compute_rates(events, {"fp32": 60000.0, "int32": 30000.0})
        return events
    field("windows_vram_placed_in_system_memory",
          "Windows placed 6 GiB of the memory kiln allocated as an RTX 4090's in system RAM while a game held the card's: part of the VRAM test was of system memory, the environment's doing, not a pass of 24 GiB of VRAM",
          2, "environment", ["VRAM_IN_SYSTEM_MEMORY"], run_from="h200_healthy",
          events=rtx4090(6 << 30))
    field("windows_vram_all_in_the_card",
          "near miss: the same RTX 4090 with everything kiln allocated in the card's memory: nothing to say",
          0, "pass", [], run_from="h200_healthy", events=rtx4090(None))
    field("push_buffer_corruption",
          "Xid 32 (invalid or corrupted push buffer) during PCIe transfers with no replays or AER errors: the driver first",
          3, "software", ["XID_DRIVER"], run_from="h200_healthy",
          telemetry=run_telemetry(xids=[(19.6, 32, "Channel ID 00000020 intr 00008000")]))
    field("lone_cleanup_xid",
          "three Xid 45 (preemptive cleanup) with no other Xid: the tail of something the log no longer shows, a recheck rather than a verdict",
          4, "inconclusive", ["XID_APPLICATION"], run_from="h200_healthy",
          telemetry=run_telemetry(xids=[(16.0 + i, 45, "Ch 00000008") for i in range(3)]))

    # PCIe judged per direction against what healthy cards reach on the link in use.
    def pcie_on(link, h2d, d2h, in_host=True):
        events = h200_events(4100.0, 3900.0)
        end = workload_end(events, "pcie")
        end["summary"]["link"] = link
        end["summary"]["peak_h2d_gbps"] = h2d
        end["summary"]["peak_d2h_gbps"] = d2h
        end["summary"]["staging_in_host_memory"] = in_host
        return events
    gen5 = {"generation": 5, "generation_max": 5, "width": 16, "width_max": 16,
            "theoretical_gbps": 63.0, "samples": 40}
    field("h100_like_h2d_at_56_percent_of_gen5",
          "a Hopper card moving 35 GB/s host-to-device and 53 GB/s device-to-host on Gen5 x16: what healthy H100s reach (H2D is about 56% of the theory with SM copies), not a slow slot",
          0, "pass", [], run_from="h200_healthy", events=pcie_on(gen5, 35.0, 53.0))
    field("gen5_device_to_host_half_speed",
          "the same card reading back at 27 GB/s of Gen5 x16's 63 (a healthy one reaches about 53): a slot, riser or platform problem",
          2, "environment", ["PCIE_BANDWIDTH_LOW"], run_from="h200_healthy", events=pcie_on(gen5, 35.0, 27.0))
    gen4_slot = {"generation": 4, "generation_max": 4, "width": 16, "width_max": 16,
                 "theoretical_gbps": 31.5, "card_max": [5, 16], "samples": 40}
    # Its telemetry (the slot's maxima from sysfs) is the scenario's own file.
    field("gen5_card_in_a_gen4_slot",
          "a Gen5 x16 H200 in a Gen4 x16 slot, its link at Gen4 x16 all load long: the slot, not the card, sets the link, said as a note (half the host bandwidth the card could have), and the link is not degraded",
          0, "pass", ["PCIE_SLOT_LIMITS"], events=pcie_on(gen4_slot, 25.0, 27.0))
    field("staging_in_vram_not_judged",
          "transfers whose staging buffers could only live in device memory (no host memory type) never crossed the bus: their 300 GB/s is not a PCIe rate and is not judged either way",
          0, "pass", [], run_from="h200_healthy",
          events=pcie_on(dict(gen5, generation=3, theoretical_gbps=15.75), 2.0, 300.0, in_host=False))

    # AMD through sysfs: RAS counters judged by the same rules.
    # What a healthy MI300X streams and computes with kiln's kernels (about 80% of its
    # 5.3 TB/s, about 60% of its 163.4 TFLOP/s fp32).
    amd_events = h200_events(4300.0, 4100.0)
    set_compute_rates(amd_events, {"fp32": 98000.0, "int32": 49000.0})
    for e in amd_events:
        if e["kind"] == "device_start":
            e["info"].update({"name": "AMD Instinct MI300X", "vendor_id": 0x1002,
                              "vendor_name": "AMD", "device_id": 0x74A1, "driver_name": "radv",
                              "driver_info": "Mesa 24.2.8", "driver_version": "24.2.8",
                              "pci_address": "0000:0c:00.0"})

    def amd_sample(phase, t):
        idle = phase == "preflight"
        return {"gpu_temp_c": 38.0 if idle else 71.0, "gpu_hotspot_temp_c": 45.0 if idle else 88.0,
                "hbm_temp_c": 40.0 if idle else 76.0, "power_w": 140.0 if idle else 690.0,
                "power_limit_enforced_w": 750.0, "power_limit_default_w": 750.0,
                "util_gpu_pct": 0 if idle else 100, "clock_sm_mhz": 150 if idle else 2100,
                "clock_sm_max_mhz": 2100, "clock_mem_mhz": 900 if idle else 1300,
                "clock_mem_max_mhz": 1300, "mem_used_bytes": 1 << 30, "mem_total_bytes": 192 << 30,
                "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": 16, "pcie_width_max": 16}

    def amd_counters(gfx_ue=0, umc_ue=0):
        return {"ecc_uncorrected_volatile": umc_ue, "ecc_corrected_volatile": 7,
                "ras_gfx_ue": gfx_ue, "ras_gfx_ce": 0, "ras_sdma_ue": 0, "ras_sdma_ce": 0,
                "ras_uncorrected_other": gfx_ue, "retired_pages_dbe": 0, "retired_pages_pending": 0,
                "aer_correctable": 0, "aer_nonfatal": 0, "aer_fatal": 0}
    amd_identity = {"name": "AMD Instinct MI300X", "serial": "692412000123", "vbios": "113-M3000100-102",
                    "kernel_driver": "amdgpu", "driver_version": "6.8.5"}
    field("amd_gfx_uncorrectable_ras",
          "an MI300X whose amdgpu RAS counters show two uncorrectable errors in the graphics block during compute: hardware, read from sysfs without any vendor library",
          1, "fail", ["RAS_UNCORRECTABLE"], events=amd_events,
          telemetry=run_telemetry(sample=amd_sample, identity=amd_identity, source="sysfs",
                                  counters_at=lambda t: amd_counters(gfx_ue=2 if t > 13.05 else 0)))
    field("amd_memory_uncorrectable",
          "the same MI300X with one uncorrectable error in its memory controller (umc) during VRAM: an uncorrectable ECC error, as NVML's would be",
          1, "fail", ["ECC_UNCORRECTABLE"], events=amd_events,
          telemetry=run_telemetry(sample=amd_sample, identity=amd_identity, source="sysfs",
                                  counters_at=lambda t: amd_counters(umc_ue=1 if t > 1.05 else 0)))
    field("amd_healthy",
          "a healthy MI300X read through sysfs (temperatures, power, clocks, RAS counters all readable and quiet): a pass, not 'could not check'",
          0, "pass", [], events=amd_events,
          telemetry=run_telemetry(sample=amd_sample, identity=amd_identity, source="sysfs",
                                  counters_at=lambda t: amd_counters()))

    product_cases()
    whose_xid_cases()
    amd_and_intel_heat_cases()
    nvlink_and_rma_cases()
    links_and_fabric_cases()
    peers_at_their_clocks_cases()
    tenant_arrival_cases()
    fan_cases()

    # The headline names the finding that decided.
    field("fragmented_allocator_headline",
          "the allocator torture found fragmentation while VRAM and compute passed: the device line says fragmentation, not 'vram: no errors'",
          3, "software", ["ALLOC_FAIL_FRAGMENTED", "TELEMETRY_MISSING"], run_from="alloc_fragmented",
          reason="alloc_fail_fragmented")


def card_events(name, device_id, verify_gbps, write_gbps, gops, uuid=None):
    """The healthy H200 run as another NVIDIA card would have written it: its name, its VRAM
    rates (GB/s) and its compute rates (10^9 operations per second, per kind)."""
    events = h200_events(verify_gbps, write_gbps)
    set_compute_rates(events, gops)
    for e in events:
        if e["kind"] == "device_start":
            e["info"].update({"name": name, "device_id": device_id})
            if uuid:
                e["info"]["device_uuid"] = uuid
    return events


def product_cases():
    """The card against its product: rates below their floors, and configurations that hold
    a card below what its product does, each with the near miss that must not fire."""
    # An H100 SXM whose clocks were locked for a benchmark (nvidia-smi -lgc 1275) and never
    # reset: the applications-clocks reason all load long, cool, every rate a third down.
    h100 = dict(name="NVIDIA H100 80GB HBM3", device_id=0x2330)
    h100_identity = h200_identity(name="NVIDIA H100 80GB HBM3", temp_slowdown_c=87)
    locked = lambda ph, t: h200_sample(ph, t, mask=0x2 if ph != "preflight" else None,
                                       sm=1275, power=None if ph == "preflight" else 455.0)
    field("locked_application_clocks",
          "an H100 SXM whose SM clock someone locked at 1275 MHz (nvidia-smi -lgc) and never reset: the applications-clocks reason all load long on a cool card, fp32 compute 34 TFLOP/s where a healthy one computes 50: a configuration that holds the card below its product (environment), with the command that restores it; the card is not slow",
          2, "environment", ["CONFIG_LIMITS_CARD"],
          events=card_events(**h100, verify_gbps=2450.0, write_gbps=2300.0,
                             gops={"fp32": 33600.0, "int32": 16800.0}),
          telemetry=run_telemetry(sample=locked, identity=h100_identity),
          reason="locked or application clocks")
    near_max = lambda ph, t: dict(h200_sample(ph, t, mask=0x2 if ph != "preflight" else None, sm=1935),
                                  clock_sm_app_mhz=1935, clock_sm_app_default_mhz=1980)
    field("application_clocks_near_the_maximum",
          "near miss: application clocks set to 1935 MHz on an H100 SXM whose default target and maximum are 1980 (the reason set all load long, the clock at 98% of its maximum, every rate at its product's): noted with the target, not a finding of weight",
          0, "pass", ["CLOCKS_LOCKED"],
          events=card_events(**h100, verify_gbps=2700.0, write_gbps=2600.0,
                             gops={"fp32": 49000.0, "int32": 24500.0}),
          telemetry=run_telemetry(sample=near_max, identity=h100_identity))

    # A lock a newer driver does not name: the clock held, no reason given at all.
    unnamed = lambda sm: lambda ph, t: h200_sample(ph, t, sm=sm if ph != "preflight" else 1980,
                                                   power=None if ph == "preflight" else 430.0)
    field("sm_clock_held_with_no_reason_named",
          "an H200 on an R580 driver (which no longer names the applications-clocks reason) whose SM clock sat at 1200 of 1980 MHz all load long with no throttle reason at all, cool and far from its power limit: a lock all the same, the configuration's, with the commands that undo it",
          2, "environment", ["CONFIG_LIMITS_CARD"], run_from="h200_healthy",
          telemetry=run_telemetry(sample=unnamed(1200)), reason="locked or application clocks")
    field("sm_clock_a_little_below_its_maximum",
          "near miss: the same card with its SM clock at 1710 of 1980 MHz (86%) and no reason named, as boost behaves: nothing to say",
          0, "pass", [], run_from="h200_healthy", telemetry=run_telemetry(sample=unnamed(1710)))

    # An RTX 4090 (450 W) that its owner limited to 300 W and forgot: the software power cap
    # all load long, the SM clock at 2010 of its 3105 MHz maximum, fp32 compute 30% down.
    rtx = dict(name="NVIDIA GeForce RTX 4090", device_id=0x2684)
    rtx_identity = h200_identity(name="NVIDIA GeForce RTX 4090", serial="[N/A]",
                                 board_part_number="[N/A]", ecc_enabled="false",
                                 ecc_enabled_pending="false", temp_slowdown_c=90,
                                 temp_shutdown_c=93, temp_gpu_max_c=88,
                                 temp_mem_max_c={"unavailable": NS})
    rtx_counters = lambda t: h200_counters(
        ecc_corrected_volatile={"unavailable": NS}, ecc_uncorrected_volatile={"unavailable": NS},
        ecc_corrected_aggregate={"unavailable": NS}, ecc_uncorrected_aggregate={"unavailable": NS},
        remapped_correctable={"unavailable": NS}, remapped_uncorrectable={"unavailable": NS},
        remap_pending={"unavailable": NS}, remap_failure={"unavailable": NS},
        recovery_action={"unavailable": NS})
    rtx_sample = lambda sm, limit, mask: lambda ph, t: h200_sample(
        ph, t, mask=mask if ph != "preflight" else None, sm=sm, mem=10501, limit=limit,
        power=None if ph == "preflight" else limit - 2.0, sm_max=3105, mem_max=10501,
        default=450.0, temp=None if ph == "preflight" else 64.0)
    field("rtx4090_power_limited_to_300w",
          "an RTX 4090 whose owner set a 300 W limit (of 450 W) and forgot it: the software power cap all load long, the SM clock at 2010 of 3105 MHz (65%) and fp32 compute 35 TFLOP/s (under the floor of 37.2 that rests on an unmeasured share of the spec sheet: a note): the configuration holds the card below its product, shown by its clock, environment of weight, with the default limit to restore",
          2, "environment", ["RATE_BELOW_SPEC_SHARE", "CONFIG_LIMITS_CARD"],
          events=card_events(**rtx, verify_gbps=880.0, write_gbps=840.0,
                             gops={"fp32": 35000.0, "int32": 17500.0}),
          telemetry=run_telemetry(sample=rtx_sample(2010, 300.0, 0x4), identity=rtx_identity,
                                  counters_at=rtx_counters),
          reason="administrator's power limit of 300 W")
    field("rtx4090_at_its_own_power_limit",
          "near miss: the same RTX 4090 at its own 450 W limit, the software power cap holding it now and then as it does on every healthy 4090 under full load, the SM clock at 2745 MHz and fp32 compute 62 TFLOP/s: its product's behaviour, nothing to say",
          0, "pass", [],
          events=card_events(**rtx, verify_gbps=900.0, write_gbps=860.0,
                             gops={"fp32": 62000.0, "int32": 31000.0}),
          telemetry=run_telemetry(sample=rtx_sample(2745, 450.0, 0x4), identity=rtx_identity,
                                  counters_at=rtx_counters))

    # VRAM streaming against a share of the spec sheet that streaming tools were measured to
    # reach on GPUs (DCGM's diag-skus.yaml; the memtest_vulkan Readme): a measured reference, so a shortfall is a call.
    rtx4080 = dict(name="NVIDIA GeForce RTX 4080", device_id=0x2704)
    rtx4080_identity = h200_identity(name="NVIDIA GeForce RTX 4080", serial="[N/A]",
                                     board_part_number="[N/A]", ecc_enabled="false",
                                     ecc_enabled_pending="false", temp_slowdown_c=90,
                                     temp_shutdown_c=93, temp_gpu_max_c=88,
                                     temp_mem_max_c={"unavailable": NS})
    rtx4080_sample = lambda ph, t: h200_sample(
        ph, t, sm=2715, mem=11201, sm_max=3105, mem_max=11201, default=320.0, limit=320.0,
        power=None if ph == "preflight" else 255.0, temp=None if ph == "preflight" else 63.0)
    field("rtx4080_vram_at_half_its_spec",
          "an RTX 4080 streaming VRAM at 366 GB/s, 51% of its 716.8 GB/s spec sheet (68% of the 538 GB/s streaming tools reach on healthy cards, floor 403), its memory clock at its full 11201 MHz, cool, no throttle reason, no other process: below a measured reference with nothing to explain it, the card (hardware, a call)",
          1, "fail", ["VRAM_BANDWIDTH_LOW"],
          events=card_events(**rtx4080, verify_gbps=366.0, write_gbps=350.0,
                             gops={"fp32": 40000.0, "int32": 20000.0}),
          telemetry=run_telemetry(sample=rtx4080_sample, identity=rtx4080_identity,
                                  counters_at=rtx_counters),
          reason="VRAM streaming")
    field("rtx4080_vram_at_six_tenths_of_its_spec",
          "near miss: the same RTX 4080 streaming at 430 GB/s, 60% of its spec sheet (80% of what healthy cards reach, above the floor of 403): a slower card of its product, not a fault",
          0, "pass", [],
          events=card_events(**rtx4080, verify_gbps=430.0, write_gbps=415.0,
                             gops={"fp32": 40000.0, "int32": 20000.0}),
          telemetry=run_telemetry(sample=rtx4080_sample, identity=rtx4080_identity,
                                  counters_at=rtx_counters))

    # A GeForce at its GPU Boost temperature target: the software thermal reason all load
    # long, clocks a few bins down, rates at its product's: its own design, no cost.
    rtx3090 = dict(name="NVIDIA GeForce RTX 3090", device_id=0x2204)
    rtx3090_identity = h200_identity(name="NVIDIA GeForce RTX 3090", serial="[N/A]",
                                     board_part_number="[N/A]", ecc_enabled="false",
                                     ecc_enabled_pending="false", temp_slowdown_c=93,
                                     temp_shutdown_c=98, temp_gpu_max_c=91,
                                     temp_mem_max_c={"unavailable": NS})
    at_target = lambda sm: lambda ph, t: h200_sample(
        ph, t, mask=0x20 if ph != "preflight" else None, sm=sm, mem=9751, sm_max=2100,
        mem_max=9751, default=350.0, limit=350.0, power=None if ph == "preflight" else 338.0,
        temp=None if ph == "preflight" else 83.0)
    field("rtx3090_at_its_boost_temperature_target",
          "an RTX 3090 Founders Edition at 83 C, its GPU Boost target, with the software thermal reason set all load long and the SM clock at 2040 of 2100 MHz (97%), VRAM at 750 GB/s and fp32 at its product's: the card running as designed, a note at no measurable cost, not a cooling fault",
          0, "pass", ["THERMAL_THROTTLE"],
          events=card_events(**rtx3090, verify_gbps=750.0, write_gbps=730.0,
                             gops={"fp32": 25000.0, "int32": 12500.0}),
          telemetry=run_telemetry(sample=at_target(2040), identity=rtx3090_identity,
                                  counters_at=rtx_counters))
    field("rtx3090_held_far_below_its_clock_for_heat",
          "near miss: the same RTX 3090 at 83 C with the thermal reason set and its SM clock held at 1560 of 2100 MHz (74%) all load long: heat that cost a quarter of its clock, the cooling's finding of weight",
          2, "environment", ["THERMAL_THROTTLE"],
          events=card_events(**rtx3090, verify_gbps=740.0, write_gbps=720.0,
                             gops={"fp32": 19000.0, "int32": 9500.0}),
          telemetry=run_telemetry(sample=at_target(1560), identity=rtx3090_identity,
                                  counters_at=rtx_counters),
          reason="thermal slowdown")

    # HBM held at half its clock with nothing thermal or power-related to explain it: a
    # locked memory clock (nvidia-smi -lmc), shown by VRAM streaming below its floor.
    slow_hbm = lambda ph, t: h200_sample(ph, t, mem=1593)
    field("memory_clock_locked",
          "an H200 whose memory clock sat at 1593 of 3201 MHz all load long with no thermal or power reason (nvidia-smi -lmc) and whose VRAM streamed 2150 GB/s, below the 3225 GB/s floor: the configuration, not the memory",
          2, "environment", ["CONFIG_LIMITS_CARD"],
          events=h200_events(2150.0, 2050.0), telemetry=run_telemetry(sample=slow_hbm),
          reason="a locked memory clock")
    idle_memory = lambda ph, t: dict(h200_sample(ph, t, mem=1593 if ph == "compute" else 3201),
                                     util_mem_pct=4 if ph == "compute" else 88)
    field("memory_clock_lowered_while_the_memory_idled",
          "near miss: the memory clock fell to 1593 of 3201 MHz during compute, whose work barely touches memory (4% busy): power management at work, not a lock",
          0, "pass", [], run_from="h200_healthy", telemetry=run_telemetry(sample=idle_memory))

    # Compute below its product with nothing to explain it: the card, said with the
    # confidence the floor allows.
    a100 = dict(name="NVIDIA A100-SXM4-80GB", device_id=0x20B2)
    a100_identity = h200_identity(name="NVIDIA A100-SXM4-80GB", temp_slowdown_c=89,
                                  temp_shutdown_c=92, temp_gpu_max_c=85, temp_mem_max_c=95)
    a100_sample = lambda ph, t: h200_sample(ph, t, sm=1410, mem=1593, sm_max=1410, mem_max=1593,
                                            default=400.0, limit=400.0)
    slow_a100 = card_events(**a100, verify_gbps=1500.0, write_gbps=1450.0,
                            gops={"fp32": 6500.0, "int32": 6400.0})
    field("compute_slow_unexplained",
          "an A100 SXM4 at its full 1410 MHz, cool and unthrottled, computing fp32 at 6.5 TFLOP/s, 33% of its spec sheet's 19.5, under a floor (8.8) that rests on a share kiln's kernel has never been measured to reach on a GPU: a note with the share and how to set floors, never a call on its own (no exit 4 that a fleet would drain on)",
          0, "pass", ["RATE_BELOW_SPEC_SHARE"], events=slow_a100,
          telemetry=run_telemetry(sample=a100_sample, identity=a100_identity))
    field("compute_slow_below_site_floor",
          "the same A100 judged by the site's own floors from its healthy A100s (fp32 12 TFLOP/s, int32 12 TOP/s): a slow card at medium confidence, hardware",
          1, "fail", ["COMPUTE_RATE_LOW"], run_from="compute_slow_unexplained",
          thresholds={"floors": {"compute_fp32_gops": 12000, "compute_int32_gops": 12000}})
    hot_a100 = lambda ph, t: h200_sample(
        ph, t, sm=1410 if ph != "compute" else 870, mem=1593, sm_max=1410, mem_max=1593,
        default=400.0, limit=400.0, temp=None if ph != "compute" else 88.5,
        mask=None if ph != "compute" else 0x40)
    field("compute_slow_while_throttled",
          "the same slow A100 while its compute phase ran at 88.5 C under hardware thermal slowdown (the SM clock at 870 MHz): the cooling is the finding (environment); the rate under its unmeasured floor is a note beside it",
          2, "environment", ["RATE_BELOW_SPEC_SHARE", "THERMAL_THROTTLE"],
          events=slow_a100, telemetry=run_telemetry(sample=hot_a100, identity=a100_identity))
    field("compute_slow_while_throttled_below_site_floor",
          "the same hot A100 judged by the site's own floors from its healthy A100s (fp32 12 TFLOP/s): the rate is below a measured floor, and the thermal slowdown explains it: the cooling is the finding (environment), the rate its symptom",
          2, "environment", ["COMPUTE_RATE_LOW_THROTTLED", "THERMAL_THROTTLE"],
          run_from="compute_slow_while_throttled",
          thresholds={"floors": {"compute_fp32_gops": 12000, "compute_int32_gops": 12000}})


def whose_xid_cases():
    """Whose Xid it is: kiln's own worker is pid 31337 in these runs (its `worker` event)."""
    telemetry = read_jsonl(CORPUS / "xid13_from_kiln_itself" / "telemetry.jsonl")
    base = [r for r in telemetry if r["kind"] != "xid"]

    def with_xids(xids):
        recs = base + [{"t_ms": t, "device": 0, "source": "kmsg", "kind": "xid",
                        "xid": {"bus_id": "0000:05:00", "code": code, "pid": pid,
                                "process": name, "message": message,
                                "kernel_us": int(5_000_000 + t * 1000), "before_run": False}}
                       for (t, code, pid, name, message) in xids]
        recs.sort(key=lambda r: r["t_ms"])
        return recs
    field("xid43_and_45_after_another_process_was_killed",
          "someone killed another user's python3 (pid 4242) on the GPU during the test: the driver logged Xid 43 (channel stopped) and Xid 45 (preemptive cleanup) for it, a normal consequence of stopping a process: facts about the node naming the process, never against the card",
          0, "pass", ["XID_OTHER_PROCESS"], run_from="xid13_from_kiln_itself",
          telemetry=with_xids([(3001.0, 43, 4242, "python3", "Ch 0000001c, engmask 00000101"),
                               (3002.0, 45, 4242, "python3", "Ch 0000001c")]))
    field("xid13_in_kiln_worker_beside_a_double_bit_error",
          "a double-bit error (Xid 48) hit the memory kiln's own worker (pid 31337) was using, and the worker's kernel faulted on the bad data (Xid 13): the memory decides (hardware); the engine exception is the fault's consequence, kept as information, not a software finding against kiln",
          1, "fail", ["XID_MEMORY_HARDWARE", "XID_APPLICATION"], run_from="xid13_from_kiln_itself",
          telemetry=with_xids([(3001.0, 48, 31337, "kiln", "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."),
                               (3003.0, 13, 31337, "kiln", "Graphics SM Warp Exception on (GPC 4, TPC 1, SM 0): Out Of Range Address")]),
          reason="Xid 48")
    field("smbpbi_test_message_during_the_run",
          "the board's management controller sent its SMBPBI test message (Xid 106) during the run: the driver informs, nothing against the card",
          0, "pass", ["XID_INFORMATIONAL"], run_from="h200_healthy",
          telemetry=run_telemetry(xids=[(7.5, 106, "SMBPBI test message")]))
    field("gpu_fatal_timeout_during_compute",
          "Xid 158 (GPU fatal timeout) during compute on an H200 whose workloads otherwise passed: a fault of the GPU outside its memory, hardware, reset and retest, RMA if it returns after resets",
          1, "fail", ["XID_GPU_HARDWARE"], run_from="h200_healthy",
          telemetry=run_telemetry(xids=[(15.2, 158, "GPU fatal timeout")]))


def amd_and_intel_heat_cases():
    """Heat on cards read through sysfs: amdgpu's junction and memory temperatures against
    the limits its driver protects them at, its gpu_metrics throttle status, Intel's throttle
    files."""
    def mi300x_events(fp32):
        events = h200_events(4300.0, 4100.0)
        set_compute_rates(events, {"fp32": fp32, "int32": fp32 / 2})
        for e in events:
            if e["kind"] == "device_start":
                e["info"].update({"name": "AMD Instinct MI300X", "vendor_id": 0x1002,
                                  "vendor_name": "AMD", "device_id": 0x74A1, "driver_name": "radv",
                                  "driver_info": "Mesa 24.2.8", "driver_version": "24.2.8",
                                  "pci_address": "0000:0c:00.0"})
        return events
    identity = {"name": "AMD Instinct MI300X", "serial": "692412000456", "vbios": "113-M3000100-102",
                "kernel_driver": "amdgpu", "driver_version": "6.8.5", "temp_hotspot_max_c": 110,
                "temp_mem_max_c": 95}

    def mi300x(junction, sclk, reasons=None, hbm=80.0, cap=750.0):
        """An MI300X's sysfs sample under load: `reasons` the gpu_metrics throttle status
        (None: not decoded, said as such)."""
        def sample(phase, t):
            idle = phase == "preflight"
            r = {"gpu_hotspot_temp_c": 46.0 if idle else junction, "hbm_temp_c": 41.0 if idle else hbm,
                 "power_w": 140.0 if idle else min(cap, 735.0), "power_limit_enforced_w": cap,
                 "power_limit_default_w": 750.0, "util_gpu_pct": 0 if idle else 100,
                 "clock_sm_mhz": 150 if idle else sclk, "clock_sm_max_mhz": 2100,
                 "clock_mem_mhz": 900 if idle else 1300, "clock_mem_max_mhz": 1300,
                 "mem_used_bytes": 1 << 30, "mem_total_bytes": 192 << 30,
                 "pcie_gen": 5, "pcie_gen_max": 5, "pcie_width": 16, "pcie_width_max": 16}
            if reasons is None:
                r["throttle_reasons"] = {"unavailable": "unknown_layout"}
            else:
                r["throttle_reasons"] = "" if idle else reasons
            return r
        return sample
    counters = lambda t: {"ecc_uncorrected_volatile": 0, "ecc_corrected_volatile": 3,
                          "ras_gfx_ue": 0, "ras_gfx_ce": 0, "ras_uncorrected_other": 0,
                          "retired_pages_dbe": 0, "retired_pages_pending": 0,
                          "aer_correctable": 0, "aer_nonfatal": 0, "aer_fatal": 0}
    amd = dict(identity=identity, source="sysfs", counters_at=counters)
    field("mi300x_junction_at_its_limit_with_clocks_down",
          "an MI300X whose junction sat at 108 C against its 110 C limit with the graphics clock at 1550 of 2100 MHz all load long, on a driver whose gpu_metrics layout kiln cannot decode (no throttle status): held back for heat, the cooling's finding; its fp32 rate (72 TFLOP/s) is held against the 81.7 TFLOP/s kiln's scalar chains can issue (the sheet's 163.4 counts packed fp32), and is above that floor",
          2, "environment", ["THERMAL_THROTTLE"],
          events=mi300x_events(72000.0), telemetry=run_telemetry(sample=mi300x(108.0, 1550), **amd),
          reason="junction at 108")
    field("mi300x_hot_with_a_throttle_status_that_names_nothing",
          "an MI300X whose gpu_metrics decode but flag no throttle residency at all while its junction sits at 108 C of its 110 C limit and the graphics clock at 1550 of 2100 MHz all load long: a status that names nothing is no evidence against heat, so the card held itself back for heat (the cooling's finding), not a clock lock",
          2, "environment", ["THERMAL_THROTTLE"],
          events=mi300x_events(72000.0),
          telemetry=run_telemetry(sample=mi300x(108.0, 1550, reasons=""), **amd),
          reason="junction at 108")
    field("mi300x_clock_held_cool_with_no_reason",
          "near miss: the same MI300X at a 78 C junction, its graphics clock at 1550 of 2100 MHz all load long and no throttle reason named: nothing thermal holds it, so the clock is held by a setting (a lock inferred from the clock: the configuration's, medium confidence)",
          2, "environment", ["CONFIG_LIMITS_CARD"],
          events=mi300x_events(72000.0),
          telemetry=run_telemetry(sample=mi300x(78.0, 1550, reasons=""), **amd),
          reason="locked or application clocks")
    field("mi300x_socket_thermal_limit_from_gpu_metrics",
          "an MI300X whose gpu_metrics residency counters show the socket's thermal limit holding its clocks (1700 of 2100 MHz) all load long at a 104 C junction: thermal slowdown read from the firmware itself, the cooling's finding",
          2, "environment", ["THERMAL_THROTTLE"],
          events=mi300x_events(80000.0),
          telemetry=run_telemetry(sample=mi300x(104.0, 1700, reasons="sw_thermal_slowdown"), **amd),
          reason="junction 104")
    field("mi300x_warm_at_full_clock",
          "near miss: an MI300X with a 96 C junction (limit 110 C) at its full 2100 MHz and no throttle status readable: warm, not held back, nothing to say",
          0, "pass", [], events=mi300x_events(98000.0),
          telemetry=run_telemetry(sample=mi300x(96.0, 2100), **amd))
    field("mi300x_at_its_own_power_limit",
          "near miss: an MI300X at its own 750 W cap, the firmware's package power limit (PPT) holding it now and then at a cool 85 C junction: its product's behaviour under full load, nothing to say",
          0, "pass", [], events=mi300x_events(96000.0),
          telemetry=run_telemetry(sample=mi300x(85.0, 1950, reasons="sw_power_cap"), **amd))
    field("mi300x_power_capped_by_its_administrator",
          "an MI300X whose administrator set a 450 W cap (of 750 W): the firmware's package power limit holding the graphics clock at 1350 of 2100 MHz all load long: a configuration that holds the card below its product, with the AMD command that restores it",
          2, "environment", ["CONFIG_LIMITS_CARD"], events=mi300x_events(70000.0),
          telemetry=run_telemetry(sample=mi300x(78.0, 1350, reasons="sw_power_cap", cap=450.0), **amd),
          reason="administrator's power limit of 450 W")

    # An Arc A770 in a case with poor airflow: i915's throttle files name the thermal limit.
    arc_events = card_events("Intel(R) Arc(TM) A770 Graphics", 0x56A0, 420.0, 400.0,
                             {"fp32": 12500.0, "int32": 6200.0})
    for e in arc_events:
        if e["kind"] == "device_start":
            e["info"].update({"vendor_id": 0x8086, "vendor_name": "Intel", "driver_name": "Intel open-source Mesa driver",
                              "driver_info": "Mesa 24.2.8", "pci_address": "0000:03:00.0"})

    def arc(reasons, temp):
        def sample(phase, t):
            idle = phase == "preflight"
            return {"gpu_temp_c": 40.0 if idle else temp, "power_w": 30.0 if idle else 205.0,
                    "power_limit_enforced_w": 225.0, "power_limit_default_w": 225.0,
                    "clock_sm_mhz": 600 if idle else (1700 if reasons else 2400),
                    "clock_sm_max_mhz": 2400, "throttle_reasons": "" if idle else reasons,
                    "pcie_gen": 4, "pcie_gen_max": 4, "pcie_width": 16, "pcie_width_max": 16}
        return sample
    intel = dict(identity={"name": "Intel(R) Arc(TM) A770 Graphics", "kernel_driver": "i915"},
                 source="sysfs", counters_at=lambda t: {"aer_correctable": 0, "aer_nonfatal": 0, "aer_fatal": 0})
    field("arc_a770_thermal_limit",
          "an Arc A770 whose i915 throttle files name the thermal limit all load long at 97 C, the GT clock at 1700 of 2400 MHz: thermal slowdown, the case's cooling",
          2, "environment", ["THERMAL_THROTTLE"], events=arc_events,
          telemetry=run_telemetry(sample=arc("sw_thermal_slowdown", 97.0), **intel))
    field("arc_a770_cool",
          "near miss: the same Arc A770 in a cooled case, no throttle file set, the GT clock at 2400 MHz: nothing to say",
          0, "pass", [], events=arc_events,
          telemetry=run_telemetry(sample=arc("", 71.0), **intel))


def nvlink_counters(links=18, state=lambda l: 1, **counts):
    """An HGX H200's 18 NVLinks at a boundary: `state(l)` each, and counts given as
    `replay={7: 14}`."""
    c = {}
    for l in range(links):
        c[f"nvlink{l}_state"] = state(l)
        for kind in ("replay", "recovery", "crc_flit", "crc_data"):
            c[f"nvlink{l}_{kind}"] = counts.get(kind, {}).get(l, 0)
    return c


def nvlink_and_rma_cases():
    """NVLink read passively at every boundary, and NVIDIA's RMA criteria: spare rows per
    bank and the SRAM's threshold flag."""
    def counters(nvlink):
        return lambda t: h200_counters(**nvlink(t))
    in_compute = lambda t: t > 13.05
    field("nvlink_replays_during_compute",
          "near miss: an HGX H200 whose NVLink 7 replayed 14 times during compute (2.3 a second; its other 17 links clean): replays are the far end's corrections of flits it saw corrupted, far under the 100 a second at which corrected errors cost the link: a note, not a fault",
          0, "pass", ["NVLINK_ERRORS"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=counters(
              lambda t: nvlink_counters(replay={7: 14 if in_compute(t) else 0}))))
    field("nvlink_crc_trickle",
          "near miss: six CRC flit errors on NVLink 3 over the six-second compute phase, one a second, the other end's replays of the same flits: one corrected fault far under its budget, a note at both ends",
          0, "pass", ["NVLINK_ERRORS"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=counters(
              lambda t: nvlink_counters(crc_flit={3: 6 if in_compute(t) else 0}))))
    field("nvlink_corrected_errors_over_budget",
          "NVLink 7 of an HGX H200 corrected 700 CRC errors and replayed 600 flits over the six-second compute phase (over 200 a second together, against a budget of 100): a link that spends itself correcting, the link's fault; reseat the baseboard connection",
          1, "fail", ["NVLINK_ERRORS"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=counters(
              lambda t: nvlink_counters(crc_data={7: 700 if in_compute(t) else 0},
                                        replay={7: 600 if in_compute(t) else 0}))),
          reason="NVLink 7")
    field("nvlink_recovery_during_compute",
          "NVLink 2 of an HGX H200 went through two recoveries (the link retrained) during compute, with a few CRC errors: a link failing, not correcting, hardware",
          1, "fail", ["NVLINK_ERRORS"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=counters(
              lambda t: nvlink_counters(recovery={2: 2 if in_compute(t) else 0},
                                        crc_flit={2: 4 if in_compute(t) else 0}))),
          reason="recoveries")
    field("nvlink_old_errors_not_growing",
          "near miss: NVLink 7 carries 120 replays and 3 recoveries from weeks ago that did not grow during the run: history, not this run's fault",
          0, "pass", [], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=counters(
              lambda t: nvlink_counters(replay={7: 120}, recovery={7: 3}))))
    field("nvlink_went_down_during_vram",
          "NVLink 5 of an HGX H200 was up when the run started and down after the VRAM phase: a link lost under load, hardware",
          1, "fail", ["NVLINK_DOWN"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=counters(
              lambda t: nvlink_counters(state=lambda l: 0 if l == 5 and t > 10 else 1))))
    field("nvlink_links_unused",
          "near miss: a PCIe card whose NVLinks are all down (no bridge fitted): nothing to judge",
          0, "pass", [], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=counters(
              lambda t: nvlink_counters(state=lambda l: 0))))
    field("remap_banks_with_no_spare_left",
          "an H200 whose row remapper histogram shows one memory bank with no spare row left and one with few (12 uncorrectable remaps, no failure yet): the next uncorrectable error there fails remapping, an RMA criterion; plan the replacement",
          1, "fail", ["ROW_REMAP_BANKS_LOW"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=lambda t: h200_counters(
              remap_banks_max=2550, remap_banks_high=6, remap_banks_partial=2, remap_banks_low=1,
              remap_banks_none=1, remapped_uncorrectable=12)))
    field("remap_banks_running_low",
          "near miss: two banks with few spare rows left and none exhausted (4 uncorrectable remaps): a warning worth a recheck, not yet a fault",
          4, "inconclusive", ["ROW_REMAP_BANKS_LOW"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=lambda t: h200_counters(
              remap_banks_max=2556, remap_banks_high=1, remap_banks_partial=1, remap_banks_low=2,
              remapped_uncorrectable=4)))
    field("sram_threshold_exceeded",
          "an H200 whose driver flags its on-chip SRAM past the threshold of unique uncorrectable errors (5 parity errors in one bank), though every workload passed: NVIDIA's RMA criterion, hardware",
          1, "fail", ["SRAM_THRESHOLD_EXCEEDED"], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=lambda t: h200_counters(
              sram_uncorrected_parity=5, sram_threshold_exceeded=1)))
    field("sram_errors_below_threshold",
          "near miss: two uncorrectable SRAM parity errors in the card's history, below the threshold, none during the run: nothing to say",
          0, "pass", [], run_from="h200_healthy",
          telemetry=run_telemetry(counters_at=lambda t: h200_counters(sram_uncorrected_parity=2)))


def links_and_fabric_cases():
    """Links and fabrics (issue 56): an NVLink down on a board that wires every link, and
    the bridge left off that is no fault."""
    def counters(nvlink):
        return lambda t: h200_counters(**nvlink(t))
    on_switches = h200_identity(nvlink_switch_links=18)
    field("hgx_h200_nvlink_down_all_run",
          "an HGX H200 whose NVML says all 18 of its NVLinks end at NVSwitches, NVLink 11 down from the first snapshot to the last and the other 17 up: on an NVSwitch baseboard every link is wired, and DCGM's health watch fails a GPU for a link down: the GPU's hardware, not a bridge left off",
          1, "fail", ["NVLINK_DOWN"], run_from="h200_healthy",
          telemetry=run_telemetry(identity=on_switches, counters_at=counters(
              lambda t: nvlink_counters(state=lambda l: 0 if l == 11 else 1))),
          reason="NVLink 11")
    # An H100 NVL: a PCIe card whose 12 links go to three NVLink bridges of four links
    # each; one bridge fitted, two left off.
    h100_nvl = dict(name="NVIDIA H100 NVL", device_id=0x2321)
    field("h100_nvl_with_one_bridge_of_three",
          "near miss: an H100 NVL (a PCIe card) with one NVLink bridge of three fitted: links 0-3 up, 4-11 down all run, NVML naming another GPU (not an NVSwitch) at their ends: bridges left off are how the card was installed, not a failure; said, never a failed GPU",
          0, "pass", ["NVLINK_DOWN"],
          events=card_events(**h100_nvl, verify_gbps=3000.0, write_gbps=2850.0,
                             gops={"fp32": 42000.0, "int32": 21000.0}),
          telemetry=run_telemetry(identity=h200_identity(name="NVIDIA H100 NVL", nvlink_switch_links=0),
                                  counters_at=counters(lambda t: nvlink_counters(
                                      links=12, state=lambda l: 1 if l < 4 else 0))))

    # Two GPUs of one node: the same links down on both are the fabric they share.
    def on_both(states, identity=on_switches, links=18):
        """Both GPUs' telemetry: device 1 a copy of device 0's, its own identity, and its
        links by `states[device](link, t)`."""
        recs = []
        for device, state in enumerate(states):
            ident = dict(identity, uuid="GPU-7d5e4b6f-2c3d-4e6f-9a01-23456789abcd",
                         pci_bus_id="00000000:06:00.0", nvml_index=1) if device else identity
            run = run_telemetry(identity=ident, counters_at=counters(
                lambda t, state=state: nvlink_counters(links=links, state=lambda l: state(l, t))))
            for r in run:
                if "device" in r:
                    r["device"] = device
                    recs.append(r)
                elif device == 0:
                    recs.append(r)
        recs.sort(key=lambda r: (r["t_ms"], r.get("device", -1)))
        return recs
    # The link's far end: corrected AER errors the port above the GPU counted.
    def with_port_aer(port_at):
        """The healthy run with sysfs's AER snapshots beside NVML's: the GPU's own counters
        still, the port's `port_at(t)`."""
        recs = run_telemetry()
        for r in list(recs):
            if r["kind"] == "snapshot":
                recs.append(dict(r, t_ms=r["t_ms"] + 0.5, source="sysfs", counters={
                    "aer_correctable": 0, "aer_nonfatal": 0, "aer_fatal": 0,
                    "aer_port_correctable": port_at(r["t_ms"] / 1000)}))
        recs.sort(key=lambda r: r["t_ms"])
        return recs
    field("pcie_port_aer_storm_replays_flat",
          "the root port above an H200 counted 4800 corrected AER errors (receiver and bad-TLP errors) during the six-second compute phase, far over the 31 a minute a Gen5 x16 link at a bit error rate of 1e-12 allows, while the GPU's own replay counter stayed at 0: the link errs between the two, the slot, riser or cable, not the card",
          2, "environment", ["PCIE_PORT_ERRORS"], run_from="h200_healthy",
          telemetry=with_port_aer(lambda t: 4800 if t > 13.05 else 0),
          reason="port above the GPU")
    field("pcie_port_aer_trickle",
          "near miss: the same port counted 12 corrected AER errors over the whole run, within what a bit error rate of 1e-12 allows on the link: the GPU's own counters flat, nothing to say",
          0, "pass", [], run_from="h200_healthy",
          telemetry=with_port_aer(lambda t: 12 if t > 13.05 else 0))

    h200_pair = pair(fp32_gops=(50000.0, 50000.0))
    field("hgx_h200_pair_same_links_down",
          "two HGX H200s on one NVSwitch baseboard, NVLinks 16 and 17 down all run on both and the other 16 up: the same links on every GPU are the fabric they share (an NVSwitch tray, the fabric manager), said once, environment; neither GPU is failed for it",
          2, "environment", ["NVLINK_FABRIC_DOWN"], events=h200_pair,
          telemetry=on_both([lambda l, t: 0 if l >= 16 else 1] * 2),
          reason="fabric")
    field("hgx_h200_pair_one_gpu_link_down",
          "near miss: the same pair with NVLink 11 down all run on the first GPU alone, every link of the second up: not the fabric, the first GPU's own link: hardware",
          1, "fail", ["NVLINK_DOWN"], events=h200_pair,
          telemetry=on_both([lambda l, t: 0 if l == 11 else 1, lambda l, t: 1]))
    nvl_pair = copy.deepcopy(h200_pair)
    for e in nvl_pair:
        if e["kind"] == "device_start":
            e["info"].update({"name": "NVIDIA H100 NVL", "device_id": 0x2321})
    set_compute_rates(nvl_pair, {"fp32": 42000.0, "int32": 21000.0}, 0)
    set_compute_rates(nvl_pair, {"fp32": 42000.0, "int32": 21000.0}, 1)
    field("h100_nvl_pair_with_one_bridge",
          "near miss: two H100 NVLs (PCIe cards) joined by one NVLink bridge of three: links 0-3 up, 4-11 down all run on both: the same links down on both, but bridges a person fits and left off, not a fabric that failed: a note, both pass",
          0, "pass", ["NVLINK_DOWN"], events=nvl_pair,
          telemetry=on_both([lambda l, t: 1 if l < 4 else 0] * 2, links=12,
                            identity=h200_identity(name="NVIDIA H100 NVL", nvlink_switch_links=0)))


def peers_at_their_clocks_cases():
    """Peers (issue 56): one GPU behind identical peers at the same clocks is the card; at
    clocks held below theirs, the clocks."""
    def both(samples):
        recs = []
        for device, sample in enumerate(samples):
            ident = h200_identity(uuid="GPU-7d5e4b6f-2c3d-4e6f-9a01-23456789abcd",
                                  pci_bus_id="00000000:06:00.0", nvml_index=1) if device else None
            for r in run_telemetry(sample=sample, identity=ident):
                if "device" in r:
                    r["device"] = device
                    recs.append(r)
                elif device == 0:
                    recs.append(r)
        recs.sort(key=lambda r: (r["t_ms"], r.get("device", -1)))
        return recs
    slow_pair = pair(fp32_gops=(40000.0, 50000.0))
    field("h200_slower_than_its_peer_at_the_same_clocks",
          "two H200s whose telemetry shows both at 1980 MHz all compute long, cool and unthrottled; the first computes fp32 20% slower than its twin: at the same clocks, less work per clock is the card's hardware",
          1, "fail", ["PEER_SLOWER"], events=slow_pair,
          telemetry=both([h200_sample, h200_sample]))
    capped = lambda ph, t: h200_sample(ph, t, sm=1600 if ph != "preflight" else 1980,
                                       mask=0x4 if ph != "preflight" else None, power=700.0)
    field("h200_slower_than_its_peer_at_lower_clocks",
          "near miss: the same 20% gap, but the first H200 ran compute at 1600 MHz against its twin's 1980, held at its 700 W power cap (sw_power_cap): per clock it does its twin's work; the clocks, not the card, environment",
          2, "environment", ["PEER_SLOWER"], events=slow_pair,
          telemetry=both([capped, h200_sample]),
          reason="lower clocks")


def tenant_arrival_cases():
    """A process that starts using the GPU mid-run: its arrival, its memory and what it did
    to the rates, which are judged on the part of the phase before it came."""
    def with_rates(events, before, after, arrives_s):
        """The compute phase's rate a second (fp32, 10^9 op/s): `before` until the other
        process arrives, `after` from then; the run's compute result the mean of both."""
        out = []
        for e in events:
            out.append(e)
            if e["kind"] == "workload_start" and e["workload"] == "compute":
                t = 14.0
                while t < 19.0:
                    out.append({"t_ms": t * 1000, "device": 0, "kind": "rates", "workload": "compute",
                                "rates": {"compute_fp32_gops": before if t < arrives_s else after}})
                    t += 1.0
        share = (arrives_s - 13.05) / (19.0 - 13.05)
        set_compute_rates(out, {"fp32": before * share + after * (1 - share),
                                "int32": H200_COMPUTE_GOPS["int32"]})
        return out

    def tenant_from(arrives_s, gib):
        def sample(phase, t):
            r = h200_sample(phase, t)
            if t >= arrives_s:
                r["other_processes_now"] = f"5120:{gib << 30}"
            return r
        return sample
    field("tenant_arrives_mid_compute",
          "another user's job (pid 5120, 40 GiB) started on the H200 two seconds into the compute phase and halved kiln's fp32 rate (50 TFLOP/s before it, 25 after): the environment, with its arrival, its memory and the rates before and after; the card, judged on the part of the phase before it came, is not slow",
          2, "environment", ["OTHER_TENANTS"],
          events=with_rates(h200_events(4100.0, 3900.0), 50000.0, 25000.0, 15.0),
          telemetry=run_telemetry(sample=tenant_from(15.0, 40)),
          reason="50.0 TFLOP/s before it, 25.0 after")
    field("slow_before_the_tenant_came",
          "near miss: the same arrival on an H200 that already computed only 22 TFLOP/s before the other process came (under the floor of 30.2 that rests on an unmeasured share: a note): the tenant is the environment's finding, and the card's own rate before it came is still said",
          2, "environment", ["RATE_BELOW_SPEC_SHARE", "OTHER_TENANTS"],
          events=with_rates(h200_events(4100.0, 3900.0), 22000.0, 11000.0, 15.0),
          telemetry=run_telemetry(sample=tenant_from(15.0, 40)))

    def tenant_between(arrives_s, leaves_s, gib):
        def sample(phase, t):
            r = h200_sample(phase, t)
            if arrives_s <= t < leaves_s:
                r["other_processes_now"] = f"5120:{gib << 30}"
            return r
        return sample
    field("tenant_killed_within_two_seconds",
          "a job (pid 5120, 2 GiB) that came onto the H200 two seconds into compute and was killed two seconds later, kiln's fp32 rate 50.0 TFLOP/s before it and 49.7 after (-1%): the process is said, but it cost the test nothing measurable, so it is a note and the run passes",
          0, "pass", ["OTHER_TENANTS"],
          events=with_rates(h200_events(4100.0, 3900.0), 50000.0, 49700.0, 15.0),
          telemetry=run_telemetry(sample=tenant_between(15.0, 17.0, 2)))
    field("tenant_arrives_between_phases_and_stays",
          "another job (pid 5120, 40 GiB) came onto the H200 between the VRAM and compute phases and stayed through compute, where kiln's fp32 rate was 25 TFLOP/s against the site's floor of 45: the process was on the GPU all phase long, so it explains the slow rate (environment), never a slow card; with no rate measured before it came, its cost cannot be weighed and it stays of weight",
          2, "environment", ["COMPUTE_RATE_LOW_THROTTLED", "OTHER_TENANTS"],
          events=with_rates(h200_events(4100.0, 3900.0), 25000.0, 25000.0, 12.5),
          telemetry=run_telemetry(sample=tenant_from(12.5, 40)),
          thresholds={"floors": {"compute_fp32_gops": 45000}})


def fan_cases():
    """An RTX 3090's fan against its heat: a fan that reads 0% (or far below its share)
    while the GPU is hot under load is the card's cooler; zero-RPM fan stop on a cool card
    is by design, and a hot card whose fan runs flat out is the room's."""
    rtx3090 = dict(name="NVIDIA GeForce RTX 3090", device_id=0x2204)
    identity = h200_identity(name="NVIDIA GeForce RTX 3090", serial="[N/A]",
                             board_part_number="[N/A]", ecc_enabled="false",
                             ecc_enabled_pending="false", temp_slowdown_c=93,
                             temp_shutdown_c=98, temp_gpu_max_c=91,
                             temp_mem_max_c={"unavailable": NS})
    counters = lambda t: h200_counters(
        ecc_corrected_volatile={"unavailable": NS}, ecc_uncorrected_volatile={"unavailable": NS},
        ecc_corrected_aggregate={"unavailable": NS}, ecc_uncorrected_aggregate={"unavailable": NS},
        remapped_correctable={"unavailable": NS}, remapped_uncorrectable={"unavailable": NS},
        remap_pending={"unavailable": NS}, remap_failure={"unavailable": NS},
        recovery_action={"unavailable": NS})

    def with_fan(sm, temp, mask, fan_at):
        def sample(phase, t):
            idle = phase == "preflight"
            r = h200_sample(phase, t, mask=None if idle else mask, sm=sm, mem=9751, sm_max=2100,
                            mem_max=9751, default=350.0, limit=350.0,
                            power=None if idle else 338.0, temp=None if idle else temp)
            # Zero-RPM fan stop at idle, on every case.
            r["fan0_speed_pct"] = 0 if idle else fan_at(t)
            return r
        return sample

    def hot_card(fan_at):
        return dict(events=card_events(**rtx3090, verify_gbps=740.0, write_gbps=720.0,
                                       gops={"fp32": 19000.0, "int32": 9500.0}),
                    telemetry=run_telemetry(sample=with_fan(1560, 89.0, 0x20, fan_at),
                                            identity=identity, counters_at=counters))

    field("rtx3090_fan_stopped_under_load",
          "an RTX 3090 whose fan reads 0% all run long, idle and under load, while the GPU sits at 89 C of its 93 C slowdown with the thermal reason set and the SM clock at 1560 of 2100 MHz: a fan that never answers a hot GPU is the card's cooler failing (hardware), and the thermal slowdown is its doing, not the room's",
          1, "fail", ["FAN_FAILED", "THERMAL_THROTTLE"], reason="fan",
          **hot_card(lambda t: 0))
    field("rtx3090_fan_stuck_low_under_load",
          "the same hot RTX 3090 at 89 C under thermal slowdown with its fan at 0% at idle and never above 10% under load, where a working fan curve runs at 60-100%: far below its share, the card's fan control (hardware)",
          1, "fail", ["FAN_FAILED", "THERMAL_THROTTLE"], reason="fan",
          **hot_card(lambda t: 10))
    field("rtx3090_hot_room_fan_at_full",
          "near miss: the same RTX 3090 at 89 C under thermal slowdown with its SM clock at 1560 of 2100 MHz, its fan at 0% at idle (fan stop) and at 100% all load long: the cooler does all it can, the heat is the room's or the case's (environment), not the fan's",
          2, "environment", ["THERMAL_THROTTLE"], reason="thermal slowdown",
          **hot_card(lambda t: 100))
    field("rtx3090_fan_stop_while_cool",
          "near miss: an RTX 3090 whose fan reads 0% at idle at 36 C and for its first second under load (zero-RPM fan stop), then 45% with the GPU at 66 C and no throttle reason: fan stop on a cool card is by design, no finding",
          0, "pass", [],
          events=card_events(**rtx3090, verify_gbps=750.0, write_gbps=730.0,
                             gops={"fp32": 25000.0, "int32": 12500.0}),
          telemetry=run_telemetry(sample=with_fan(2040, 66.0, 0, lambda t: 0 if t < 2.05 else 45),
                                  identity=identity, counters_at=counters))


if __name__ == "__main__":
    main()
