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


def h200_events(verify_gbps, write_gbps):
    """The healthy recorded run, as an H200 on NVIDIA's driver would have written it."""
    events = copy.deepcopy(events_of("_base"))
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
    scenario("pcie_bandwidth_low", {
        "about": "about 9 GB/s each way over a Gen4 x16 link that trained fully (theory 30 GB/s): slot, riser or platform",
        "exit_code": 2, "result": "environment", "codes": ["PCIE_BANDWIDTH_LOW", "TELEMETRY_MISSING"],
        "incomplete": False}, events=events)
    scenario("pcie_bandwidth_low_lenient_site", {
        "about": "the same rates judged by a site that accepts 25% of the link (a platform it knows): no finding",
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
        "about": "an H200 at half its bandwidth, cool and unthrottled, against kiln's built-in reference: named, low confidence, not a failure by itself",
        "run_from": "h200_slow_while_throttled", "telemetry_fixture": "healthy_load", "exit_code": 0,
        "result": "pass", "codes": ["VRAM_BANDWIDTH_LOW"], "incomplete": False})
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


if __name__ == "__main__":
    main()
