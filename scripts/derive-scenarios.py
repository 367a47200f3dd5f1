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
    return events


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
    for e in events:
        if e["kind"] == "workload_end" and e["workload"] == "compute":
            e["summary"]["kinds"][0]["gops"] = fp32_gops[e["device"]]
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
        "about": "an H200 at half its bandwidth, cool and unthrottled, against kiln's built-in reference: named at low confidence, so not a hardware call by itself, and not a pass either: could not judge yet, recheck against the site's own floor",
        "run_from": "h200_slow_while_throttled", "telemetry_fixture": "healthy_load", "exit_code": 4,
        "result": "inconclusive", "codes": ["VRAM_BANDWIDTH_LOW"], "incomplete": False})
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
    scenario("unknown_gpu_bandwidth_unjudged", {
        "about": "a GPU kiln has no bandwidth reference for: its memory is checked for errors and the report says speed was not judged",
        "exit_code": 0, "result": "pass", "codes": ["VRAM_BANDWIDTH_UNJUDGED", "TELEMETRY_MISSING"],
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
           (0x100, "display_clock_setting")]


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
         "remap_failure": 0, "recovery_action": 0, "pcie_replays": 0, "energy_mj": 2_000_000}
    c.update(over)
    return c


def h200_sample(phase, t, temp=None, mask=None, sm=1980, mem=3201, power=None, limit=700.0):
    idle = phase == "preflight"
    if temp is None:
        temp = 36.0 if idle else 58.0 + 0.5 * t
    if mask is None:
        mask = 0x1 if idle else 0
    if power is None:
        power = 90.0 if idle else 640.0
    return {"gpu_temp_c": round(temp, 1), "hbm_temp_c": round(temp + 7, 1),
            "power_w": power, "power_limit_enforced_w": limit, "power_limit_default_w": 700.0,
            "clock_sm_mhz": 345 if idle else sm, "clock_sm_max_mhz": 1980,
            "clock_mem_mhz": 1593 if idle else mem, "clock_mem_max_mhz": 3201,
            "clock_graphics_mhz": 345 if idle else sm, "clock_graphics_max_mhz": 1980,
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
                  identity=None, sysfs=False, source="nvml"):
    """A whole run's telemetry for device 0: `sample(phase, t)` every 200 ms in each phase,
    `counters_at(t)` at every phase boundary, and kernel-log Xids `(t, code, message)`."""
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
          "an administrator capped an H200 at 450 W of its 700 W default and its VRAM streamed 2600 GB/s, below the 3225 GB/s floor: the configuration explains it (environment, of weight), not a slow card",
          2, "environment", ["ADMIN_POWER_CAP", "BANDWIDTH_LOW_THROTTLED"],
          events=h200_events(2600.0, 2450.0), telemetry=run_telemetry(sample=capped),
          reason="administrator's power limit of 450 W")
    field("admin_cap_within_the_floor",
          "the same 450 W cap on an H200 that still streamed 4100 GB/s: the cap is noted, and the card passed",
          0, "pass", ["ADMIN_POWER_CAP"], run_from="h200_healthy", telemetry=run_telemetry(sample=capped))
    field("tenants_explain_low_bandwidth",
          "two other processes used the GPU while its VRAM streamed 2300 GB/s: they share the bandwidth, so the low rate is theirs, not a slow card",
          2, "environment", ["BANDWIDTH_LOW_THROTTLED", "OTHER_TENANTS"],
          events=h200_events(2300.0, 2200.0),
          telemetry=run_telemetry(identity=h200_identity(other_processes="5120:34359738368,5121:8589934592")))

    # A lone, low-confidence call is not a FAIL.
    field("lone_flip_on_a_hot_card",
          "one bit flipped once on an H200 at 83 C, unthrottled, and never came back on retest: a recheck (rerun with the rma profile), not an RMA and not a pass",
          4, "inconclusive", ["VRAM_TRANSIENT_ERROR"],
          events=h200_events(4100.0, 3900.0, "vram_single_flip"),
          telemetry=run_telemetry(sample=lambda ph, t: h200_sample(ph, t, temp=36.0 if ph == "preflight" else 83.0)))

    # The Xid catalogue at work.
    field("nvlink_error_during_compute",
          "Xid 74 (NVLink error) three times during the compute phase on an HGX board: the link, hardware",
          1, "fail", ["XID_NVLINK"], run_from="h200_healthy",
          telemetry=run_telemetry(xids=[(15.0 + i, 74, "NVLink: fatal error detected on link 7(0x10000, 0x0, 0x0, 0x0, 0x0, 0x0, 0x0)") for i in range(3)]))
    field("high_single_bit_error_rate",
          "Xid 92 (high single-bit ECC rate) with 1400 corrected errors during VRAM: an early warning to recheck, not yet an RMA",
          4, "inconclusive", ["XID_ECC_RATE"], run_from="h200_healthy",
          telemetry=run_telemetry(
              counters_at=lambda t: h200_counters(ecc_corrected_volatile=1400 if t > 1.05 else 0),
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
    field("gen5_card_in_a_gen4_slot",
          "a Gen5 card in a Gen4 x16 slot, trained to the slot's best and moving 25/27 GB/s: the link the slot allows, not a degraded one",
          0, "pass", [], run_from="h200_healthy", events=pcie_on(gen4_slot, 25.0, 27.0))
    field("staging_in_vram_not_judged",
          "transfers whose staging buffers could only live in device memory (no host memory type) never crossed the bus: their 300 GB/s is not a PCIe rate and is not judged either way",
          0, "pass", [], run_from="h200_healthy",
          events=pcie_on(dict(gen5, generation=3, theoretical_gbps=15.75), 2.0, 300.0, in_host=False))

    # AMD through sysfs: RAS counters judged by the same rules.
    amd_events = copy.deepcopy(events_of("unknown_gpu_bandwidth_unjudged"))
    for e in amd_events:
        if e["kind"] == "device_start":
            e["info"].update({"name": "AMD Instinct MI300X", "device_id": 0x74A1,
                              "driver_name": "radv", "pci_address": "0000:0c:00.0"})

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
          1, "fail", ["VRAM_BANDWIDTH_UNJUDGED", "RAS_UNCORRECTABLE"], events=amd_events,
          telemetry=run_telemetry(sample=amd_sample, identity=amd_identity, source="sysfs",
                                  counters_at=lambda t: amd_counters(gfx_ue=2 if t > 13.05 else 0)))
    field("amd_memory_uncorrectable",
          "the same MI300X with one uncorrectable error in its memory controller (umc) during VRAM: an uncorrectable ECC error, as NVML's would be",
          1, "fail", ["VRAM_BANDWIDTH_UNJUDGED", "ECC_UNCORRECTABLE"], events=amd_events,
          telemetry=run_telemetry(sample=amd_sample, identity=amd_identity, source="sysfs",
                                  counters_at=lambda t: amd_counters(umc_ue=1 if t > 1.05 else 0)))
    field("amd_healthy",
          "a healthy MI300X read through sysfs (temperatures, power, clocks, RAS counters all readable and quiet): a pass, not 'could not check'",
          0, "pass", ["VRAM_BANDWIDTH_UNJUDGED"], events=amd_events,
          telemetry=run_telemetry(sample=amd_sample, identity=amd_identity, source="sysfs",
                                  counters_at=lambda t: amd_counters()))

    # The headline names the finding that decided.
    field("fragmented_allocator_headline",
          "the allocator torture found fragmentation while VRAM and compute passed: the device line says fragmentation, not 'vram: no errors'",
          3, "software", ["ALLOC_FAIL_FRAGMENTED", "TELEMETRY_MISSING"], run_from="alloc_fragmented",
          reason="alloc_fail_fragmented")


if __name__ == "__main__":
    main()
