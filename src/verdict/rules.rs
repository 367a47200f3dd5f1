//! The rules: from one device's evidence (workload results, telemetry per phase) to
//! findings. Pure functions of the evidence: no rule reads a device.

use serde_json::json;

use super::DeviceReport;
use super::performance;
use super::thresholds::{Thresholds, pcie_reached};
use super::xid::{self, XidInfo};
use crate::evidence::DeviceErrorKind;
use crate::finding::{Class, Clock, Confidence, Finding, FindingCode, Severity, finding};
use crate::telemetry::process::Process;
use crate::telemetry::record::{DriverReset, Reading, XID_FALLEN_OFF_THE_BUS, XidEvent};
use crate::telemetry::summary::BETWEEN_PHASES;
use crate::telemetry::summary::PhaseTelemetry;
use crate::telemetry::throttle::ThrottleReason;
use crate::telemetry::{cause, signals};
use crate::workload::pcie::PcieReport;
use crate::workload::psu::Psu;
use crate::workload::{Kind, WorkloadResult, WorkloadStatus};

/// The finding of a GPU the machine has (NVML, sysfs) that Vulkan cannot see: not tested,
/// so nothing is known of its health and the run cannot pass. The cause read from the
/// machine is the action.
pub fn gpu_not_visible(
    gpu: &crate::inventory::InventoryGpu,
    cause: &crate::inventory::Cause,
) -> Finding {
    finding(
        FindingCode::GpuNotVisible,
        Severity::Major,
        Confidence::High,
        format!(
            "{} at {} is not visible to Vulkan: not tested",
            gpu.name,
            gpu.pci_address
                .as_deref()
                .unwrap_or("an unknown PCI address")
        ),
        json!({
            "cause": cause.cause,
            "pci_address": gpu.pci_address,
            "vendor_id": format!("0x{:04x}", gpu.vendor_id),
            "device_id": gpu.device_id.map(|d| format!("0x{d:04x}")),
            "uuid": gpu.uuid,
            "kernel_driver": gpu.kernel_driver,
            "mig_enabled": gpu.mig_enabled,
            "seen_by": gpu.seen_by,
        }),
        &cause.message,
    )
}

/// The finding of an evidence file the run wrote that is not in its directory: what
/// rests on it could not be judged, so the device cannot pass on what is left.
pub fn evidence_missing(file: crate::evidence::EvidenceFile) -> Finding {
    finding(
        FindingCode::EvidenceMissing,
        Severity::Major,
        Confidence::High,
        format!(
            "{} is missing from the run directory, though the run wrote it: {}",
            file.file_name(),
            file.judges()
        ),
        json!({"file": file.file_name()}),
        "judge the run directory as the run left it (copy every file, keep none out), or run the test again",
    )
}

/// The finding of a run a signal stopped (Ctrl+C, SIGTERM, a scheduler's time limit): what
/// ran before it stands, but the test did not go to its end, so it cannot pass. `at_s` is
/// when the signal came, `running` what the device was running then.
pub fn run_interrupted(
    at_s: f64,
    running: &[String],
    workloads: &[crate::workload::WorkloadOutcome],
) -> Finding {
    use crate::workload::WorkloadStatus;
    let named = |status: WorkloadStatus| -> Vec<&str> {
        workloads
            .iter()
            .filter(|w| w.status == status)
            .map(|w| w.workload.as_str())
            .collect()
    };
    let summary = if !workloads.iter().any(|w| w.reported()) && running.is_empty() {
        format!(
            "a signal interrupted the run at {at_s:.1} s, before this device's test started: nothing was tested"
        )
    } else if running.is_empty() {
        format!(
            "a signal interrupted the run at {at_s:.1} s, between workloads: the test did not finish"
        )
    } else {
        format!(
            "a signal interrupted the run at {at_s:.1} s, during {}: the test did not finish",
            running.join(", ")
        )
    };
    finding(
        FindingCode::RunInterrupted,
        Severity::Major,
        Confidence::High,
        summary,
        json!({
            "at_s": (at_s * 10.0).round() / 10.0,
            "running": running,
            "cut_short": named(WorkloadStatus::Incomplete),
            "not_run": named(WorkloadStatus::NotRun),
        }),
        "run the test again to its end without stopping it (a scheduler's time limit must exceed the profile's duration)",
    )
}

/// Every finding about one device.
pub fn judge(device: &DeviceReport, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    // Findings from each run of a workload: a workload rerun to confirm (the rma
    // profile) gives one finding per code, saying in how many of its runs it was found.
    let mut from_runs: Vec<(&str, Vec<Finding>)> = Vec::new();
    // Settings seen holding a rate below its product's floor, for the one finding of the
    // configuration.
    let mut held = Vec::new();
    let tenants = tenants(device);
    // Only what reported counts as a run (the verdict names the rest, with why).
    for (i, w) in device.workloads.iter().enumerate() {
        if !w.reported() {
            continue;
        }
        // What the result proves by itself, then how its rates compare with what
        // healthy cards reach: the n-th run of a workload ran in its n-th phase.
        let mut out = w.summary.judge();
        let nth = device.workloads[..i]
            .iter()
            .filter(|o| o.workload == w.workload)
            .count();
        let phase = device
            .telemetry
            .iter()
            .filter(|p| p.phase == w.workload)
            .nth(nth);
        performance::rates_of_run(device, w, phase, t, &tenants, &mut held, &mut out);
        if let WorkloadResult::Pcie(p) = &w.summary {
            pcie_bandwidth(p, t, &mut out);
        }
        from_runs.push((w.workload.as_str(), out));
    }
    out.extend(merge_runs(from_runs));
    let xid_codes: Vec<u32> = device.telemetry.iter().flat_map(phase_xid_codes).collect();
    for phase in &device.telemetry {
        throttling(phase, &device.setup, t, &mut out);
        link(phase, &mut out);
        counters(phase, &mut out);
        pcie_replays(phase, t, &mut out);
        xids(phase, &device.setup.kiln_pids, &mut out);
    }
    for code in [
        FindingCode::ThermalThrottle,
        FindingCode::PowerBrake,
        FindingCode::PowerDelivery,
    ] {
        one_per_device(&mut out, code);
    }
    memory_hot(device, t, &mut out);
    nvlinks(device, &mut out);
    standing(device, &mut out);
    device_failure(device, &xid_codes, &mut out);
    combined_load(device, &mut out);
    setup(device, &mut out);
    performance::configuration(device, t, held, &mut out);
    performance::product_unknown(device, t, &mut out);
    overclocked(device, &mut out);
    application_xids_beside_hardware(&mut out);
    telemetry_missing(device, &mut out);
    out
}

/// A condition found in several phases (a card hot all run long) said once: the first
/// phase's finding, naming the others, at the surest confidence of them, with every phase's
/// evidence.
fn one_per_device(out: &mut Vec<Finding>, code: FindingCode) {
    let found: Vec<Finding> = out.iter().filter(|f| f.code == code).cloned().collect();
    let [first, rest @ ..] = found.as_slice() else {
        return;
    };
    if rest.is_empty() {
        return;
    }
    let mut merged = first.clone();
    let phases: Vec<&str> = rest
        .iter()
        .filter_map(|f| f.evidence.get("phase").and_then(|p| p.as_str()))
        .collect();
    merged.summary = format!(
        "{}; the same in the {} {}",
        first.summary,
        crate::text::list(&phases),
        if phases.len() == 1 { "phase" } else { "phases" }
    );
    merged.confidence = found
        .iter()
        .map(|f| f.confidence)
        .min()
        .unwrap_or(first.confidence);
    merged.evidence = json!({"phases": found.iter().map(|f| &f.evidence).collect::<Vec<_>>()});
    let mut placed = false;
    out.retain_mut(|f| {
        if f.code != code {
            return true;
        }
        if placed {
            return false;
        }
        placed = true;
        *f = merged.clone();
        true
    });
}

/// An application's Xids (an engine exception, a channel reset) beside a hardware fault of
/// weight are its consequence, whoever's process raised them: kiln's own worker hit by a
/// double-bit error is not a software fault of kiln's. Kept as information naming the fault.
fn application_xids_beside_hardware(out: &mut [Finding]) {
    let Some(fault) = out
        .iter()
        .filter(|f| {
            f.class == Class::Hardware
                && f.severity <= Severity::Major
                && f.confidence <= Confidence::Medium
        })
        .map(|f| f.code)
        .next()
    else {
        return;
    };
    for f in out
        .iter_mut()
        .filter(|f| f.code == FindingCode::XidApplication)
    {
        f.class = Class::Info;
        f.severity = Severity::Note;
        f.summary = format!(
            "{}, beside a hardware fault ({fault}): its consequence, not the application's",
            f.summary
        );
        f.action = format!("follow the hardware finding ({fault})");
    }
}

/// One finding per workload and code: the first run's, with the count of runs that found
/// it when the workload ran more than once.
fn merge_runs(runs: Vec<(&str, Vec<Finding>)>) -> Vec<Finding> {
    let mut merged: Vec<(&str, Finding, usize)> = Vec::new();
    for (workload, findings) in &runs {
        let mut seen_here: Vec<FindingCode> = Vec::new();
        for f in findings {
            if seen_here.contains(&f.code) {
                // The same code twice from one run (a degraded link's width and
                // generation) stays as it is.
                merged.push((workload, f.clone(), 1));
                continue;
            }
            seen_here.push(f.code);
            match merged
                .iter_mut()
                .find(|(w, m, _)| w == workload && m.code == f.code)
            {
                Some((_, _, found)) => *found += 1,
                None => merged.push((workload, f.clone(), 1)),
            }
        }
    }
    merged
        .into_iter()
        .map(|(workload, mut f, found)| {
            let ran = runs.iter().filter(|(w, _)| *w == workload).count();
            if ran > 1 {
                f.summary = format!(
                    "{} (found in {found} of {ran} runs of {workload})",
                    f.summary
                );
                if let Some(map) = f.evidence.as_object_mut() {
                    map.insert("found_in_runs".into(), found.into());
                    map.insert("runs".into(), ran.into());
                }
            }
            f
        })
        .collect()
}

/// PCIe rates against what healthy cards reach on the link the transfers ran on.
fn pcie_bandwidth(p: &PcieReport, t: &Thresholds, out: &mut Vec<Finding>) {
    // Rates against the link the transfers actually ran on, per direction, against what
    // healthy cards reach on it (REFERENCE.md §5); a probe cut short measured too little,
    // and transfers that never left the device (no staging memory outside VRAM) measured
    // no bus at all.
    let Some((theory, generation)) = p
        .link
        .as_ref()
        .and_then(|l| l.theoretical_gbps.zip(l.generation))
    else {
        return;
    };
    if p.sizes.is_empty() || p.run.cut_short() || !p.staging_in_host_memory {
        return;
    }
    let (h2d, d2h, source) = pcie_reached(generation);
    let low: Vec<String> = [("H2D", p.peak_h2d_gbps, h2d), ("D2H", p.peak_d2h_gbps, d2h)]
        .into_iter()
        .filter(|(_, rate, reached)| *rate < t.pcie_low_share * reached * theory)
        .map(|(name, rate, reached)| {
            format!(
                "{name} {rate:.1} GB/s (floor {:.1})",
                t.pcie_low_share * reached * theory
            )
        })
        .collect();
    if !low.is_empty() {
        out.push(finding(
            FindingCode::PcieBandwidthLow,
            Severity::Major,
            Confidence::Medium,
            format!(
                "{} on a Gen{generation} link of {theory:.1} GB/s, below {:.0}% of what healthy cards reach on it",
                low.join(" and "),
                100.0 * t.pcie_low_share
            ),
            json!({"link": p.link, "peak_h2d_gbps": p.peak_h2d_gbps, "peak_d2h_gbps": p.peak_d2h_gbps,
                   "pcie_low_share": t.pcie_low_share, "reached_h2d_share": h2d, "reached_d2h_share": d2h, "source": source}),
            "check the slot, riser, BIOS link settings and IOMMU; rerun the pcie workload alone",
        ));
    }
}

/// The temperatures a phase reached, in words: the GPU's (edge), the junction's and the
/// memory's, those that were read (`hottest 88 °C, junction 104 °C`).
fn hottest(p: &PhaseTelemetry) -> String {
    let parts: Vec<String> = [
        ("hottest", signals::GPU_TEMP_C.name),
        ("junction", signals::GPU_HOTSPOT_TEMP_C.name),
        ("memory", signals::HBM_TEMP_C.name),
    ]
    .iter()
    .filter_map(|(word, key)| {
        p.gauges
            .get(*key)
            .map(|s| format!("{word} {:.0} °C", s.max))
    })
    .collect();
    if parts.is_empty() {
        "no temperature read".into()
    } else {
        parts.join(", ")
    }
}

fn throttling(p: &PhaseTelemetry, setup: &super::Setup, t: &Thresholds, out: &mut Vec<Finding>) {
    let share = |r: ThrottleReason| p.throttle_share_of(r);
    let evidence = json!({"phase": p.phase, "throttle_share": p.throttle_share,
        signals::GPU_TEMP_C.name: p.gauges.get(signals::GPU_TEMP_C.name),
        signals::GPU_HOTSPOT_TEMP_C.name: p.gauges.get(signals::GPU_HOTSPOT_TEMP_C.name),
        signals::HBM_TEMP_C.name: p.gauges.get(signals::HBM_TEMP_C.name)});
    let thermal =
        share(ThrottleReason::HwThermalSlowdown).max(share(ThrottleReason::SwThermalSlowdown));
    let cooling = "improve cooling: airflow, fans, dust, thermal paste";
    if thermal > t.throttle_share {
        out.push(finding(
            FindingCode::ThermalThrottle,
            Severity::Major,
            Confidence::High,
            format!(
                "thermal slowdown {:.0}% of the {} phase ({})",
                thermal * 100.0,
                p.phase,
                hottest(p)
            ),
            evidence.clone(),
            cooling,
        ));
    } else if let Some(hot) = performance::held_for_heat(p, setup, t) {
        // No throttle status could be read, but a sensor sat at its limit under load while
        // the clock stayed down: the card held itself back for heat.
        out.push(finding(
            FindingCode::ThermalThrottle,
            Severity::Major,
            Confidence::Medium,
            format!(
                "{hot} in the {} phase: held back for heat (no throttle status was read)",
                p.phase
            ),
            evidence.clone(),
            cooling,
        ));
    }
    if share(ThrottleReason::HwPowerBrakeSlowdown) > t.throttle_share {
        out.push(finding(
            FindingCode::PowerBrake,
            Severity::Major,
            Confidence::High,
            format!(
                "the hardware power brake held the clocks {:.0}% of the {} phase",
                share(ThrottleReason::HwPowerBrakeSlowdown) * 100.0,
                p.phase
            ),
            evidence.clone(),
            "check the PSU and the power cables to the card",
        ));
    } else if share(ThrottleReason::HwSlowdown) > t.throttle_share && thermal <= t.throttle_share {
        out.push(finding(
            FindingCode::PowerDelivery,
            Severity::Major,
            Confidence::Medium,
            format!(
                "HW slowdown {:.0}% of the {} phase while the card was not hot",
                share(ThrottleReason::HwSlowdown) * 100.0,
                p.phase
            ),
            evidence.clone(),
            "check the PSU and the power cables to the card",
        ));
    }
}

/// Memory within a few degrees of its rated temperature under load, where the card did
/// not slow for heat (that finding names the memory's temperature already): a note, not a
/// call (nothing went wrong), that the cooling leaves no margin for a hotter room or a
/// dustier card, and context for any memory error beside it.
fn memory_hot(device: &DeviceReport, t: &Thresholds, out: &mut Vec<Finding>) {
    if out.iter().any(|f| f.code == FindingCode::ThermalThrottle) {
        return;
    }
    let Some((phase, hottest, gpu, limit)) = performance::memory_near_limit(device, t) else {
        return;
    };
    let against = if hottest > limit + 0.5 {
        format!("over its limit of {limit:.0} °C")
    } else if hottest >= limit - 0.5 {
        format!("at its limit of {limit:.0} °C")
    } else {
        format!(
            "{:.0} °C short of its limit of {limit:.0} °C",
            limit - hottest
        )
    };
    out.push(finding(
        FindingCode::MemoryHot,
        Severity::Note,
        Confidence::Medium,
        format!(
            "the memory reached {hottest:.0} °C in the {} phase, {against}{}",
            phase.phase,
            gpu.map(|g| format!(" (GPU {g:.0} °C)")).unwrap_or_default()
        ),
        json!({"phase": phase.phase, signals::HBM_TEMP_C.name: phase.gauges.get(signals::HBM_TEMP_C.name),
               signals::GPU_TEMP_C.name: phase.gauges.get(signals::GPU_TEMP_C.name),
               "limit_c": limit, "thermal_margin_c": t.thermal_margin_c}),
        "improve the cooling over the card's memory (airflow, fan curve, the chassis' inlet temperature; on a consumer card its memory pads) before a hotter day takes it over its limit, where it slows itself and makes errors",
    ));
}

/// Clocks above the card's own maximum (an overclock, or raised application clocks): the
/// settings, not the card. Errors made while overclocked (wrong compute results with the
/// SM clock over, VRAM errors with the memory clock over) are then the environment's, and
/// say so; only errors at stock clocks are the card's.
fn overclocked(device: &DeviceReport, out: &mut Vec<Finding>) {
    let over = |clock: &str, max: &str| {
        device.telemetry.iter().find_map(|p| {
            let (now, limit) = (p.gauges.get(clock)?, p.gauges.get(max)?);
            (limit.min > 0.0 && now.max > limit.min * 1.02)
                .then(|| (p.phase.clone(), now.max, limit.min))
        })
    };
    let sm = over(signals::CLOCK_SM_MHZ.name, signals::CLOCK_SM_MAX_MHZ.name);
    let mem = over(signals::CLOCK_MEM_MHZ.name, signals::CLOCK_MEM_MAX_MHZ.name);
    if sm.is_none() && mem.is_none() {
        return;
    }
    let mut parts = Vec::new();
    if let Some((phase, now, max)) = &sm {
        parts.push(format!(
            "SM clock {now:.0} MHz over its {max:.0} MHz maximum in the {phase} phase"
        ));
    }
    if let Some((phase, now, max)) = &mem {
        parts.push(format!(
            "memory clock {now:.0} MHz over its {max:.0} MHz maximum in the {phase} phase"
        ));
    }
    let stock = "restore default clocks (no overclock, default application clocks) and rerun: only errors at stock clocks are the card's";
    out.push(finding(
        FindingCode::ClocksAboveMaximum,
        Severity::Major,
        Confidence::High,
        format!("the card ran above its rated clocks ({})", parts.join("; ")),
        json!({"sm": sm, "memory": mem}),
        stock,
    ));
    for f in out.iter_mut().filter(|f| f.class == Class::Hardware) {
        // Wrong results made while their clock was over: the settings', not the card's.
        // (A slow rate while clocked above the maximum is no overclock's doing: the
        // catalogue gives rates no clock.)
        let blamed = match f.code.info().overclocked {
            Some(Clock::Shader) => sm.is_some(),
            Some(Clock::Memory) => mem.is_some(),
            None => false,
        };
        if blamed {
            f.class = Class::Environment;
            f.summary = format!("{} while clocked above its maximum", f.summary);
            f.action = stock.into();
        }
    }
}

/// Standing states of the card, read from the last counters of the run: a failed or
/// pending row remap, a pending page retirement, a recovery action the driver asks for, an
/// ECC mode change waiting for a reset. They were set before the run as often as during it,
/// and are the card's lasting condition, not history: each gives its finding once, unless
/// an event of the run already gave it.
fn standing(device: &DeviceReport, out: &mut Vec<Finding>) {
    let last = |key: &str| {
        device
            .telemetry
            .iter()
            .filter(|p| p.counters_after.contains_key(key))
            .max_by(|a, b| a.end_ms.total_cmp(&b.end_ms))
            .and_then(|p| p.counters_after.get(key).copied())
    };
    let already = |out: &Vec<Finding>, code: FindingCode| out.iter().any(|f| f.code == code);
    let lasting = "(a lasting state of the card, whether set before or during the run)";
    if last(signals::REMAP_FAILURE.name).is_some_and(|v| v > 0.0)
        && !already(out, FindingCode::RowRemapFailure)
    {
        out.push(finding(
            FindingCode::RowRemapFailure,
            Severity::Critical,
            Confidence::High,
            format!("row remapping has failed: no spare rows are left {lasting}"),
            json!({signals::REMAP_FAILURE.name: last(signals::REMAP_FAILURE.name), signals::REMAPPED_UNCORRECTABLE.name: last(signals::REMAPPED_UNCORRECTABLE.name)}),
            "RMA the card",
        ));
    } else if last(signals::REMAP_PENDING.name).is_some_and(|v| v > 0.0)
        && !already(out, FindingCode::RowRemapPending)
    {
        out.push(finding(
            FindingCode::RowRemapPending,
            Severity::Major,
            Confidence::High,
            format!("a row remap is pending {lasting}"),
            json!({signals::REMAP_PENDING.name: last(signals::REMAP_PENDING.name), signals::REMAPPED_UNCORRECTABLE.name: last(signals::REMAPPED_UNCORRECTABLE.name)}),
            "reset the GPU to apply the remap, then retest",
        ));
    }
    if last(signals::RETIRED_PAGES_PENDING.name).is_some_and(|v| v > 0.0)
        && !already(out, FindingCode::RetiredPages)
    {
        out.push(finding(
            FindingCode::RetiredPages,
            Severity::Major,
            Confidence::High,
            format!(
                "a page retirement is pending ({} pages retired for double-bit errors) {lasting}",
                last(signals::RETIRED_PAGES_DBE.name).unwrap_or(0.0)
            ),
            json!({signals::RETIRED_PAGES_PENDING.name: last(signals::RETIRED_PAGES_PENDING.name), signals::RETIRED_PAGES_DBE.name: last(signals::RETIRED_PAGES_DBE.name)}),
            "reset the GPU to apply the retirement, retest, and send this report",
        ));
    }
    if let Some(action) = last(signals::RECOVERY_ACTION.name).and_then(xid::recovery_action_of) {
        out.push(finding(
            FindingCode::RecoveryActionPending,
            Severity::Critical,
            Confidence::High,
            format!("the driver asks to {action} before the GPU is used again"),
            json!({signals::RECOVERY_ACTION.name: last(signals::RECOVERY_ACTION.name)}),
            &format!("{action}, then retest; the kernel log's Xids say why"),
        ));
    }
    // How close the memory is to a remap failure, by bank (NVIDIA's RMA criterion is a
    // bank that needs one more uncorrectable row than it has spares).
    let (low, none) = (
        last(signals::REMAP_BANKS_LOW.name).unwrap_or(0.0),
        last(signals::REMAP_BANKS_NONE.name).unwrap_or(0.0),
    );
    if (low > 0.0 || none > 0.0) && !already(out, FindingCode::RowRemapFailure) {
        let banks = |n: f64| crate::text::count(n as u64, "memory bank");
        let (severity, said) = if none > 0.0 {
            (
                Severity::Major,
                format!(
                    "{} with no spare row left and {} with only a few: the next uncorrectable error in one without fails row remapping",
                    banks(none),
                    banks(low)
                ),
            )
        } else {
            (
                Severity::Minor,
                format!(
                    "{} with only a few spare rows left: the warning before a remap failure",
                    banks(low)
                ),
            )
        };
        out.push(finding(
            FindingCode::RowRemapBanksLow,
            severity,
            Confidence::High,
            format!("{said} {lasting}"),
            json!({
                signals::REMAP_BANKS_MAX.name: last(signals::REMAP_BANKS_MAX.name),
                signals::REMAP_BANKS_HIGH.name: last(signals::REMAP_BANKS_HIGH.name),
                signals::REMAP_BANKS_PARTIAL.name: last(signals::REMAP_BANKS_PARTIAL.name),
                signals::REMAP_BANKS_LOW.name: low,
                signals::REMAP_BANKS_NONE.name: none,
                signals::REMAPPED_UNCORRECTABLE.name: last(signals::REMAPPED_UNCORRECTABLE.name),
            }),
            "plan the card's replacement: watch its uncorrectable remaps and rerun the rma profile; RMA when a remap fails",
        ));
    }
    if last(signals::SRAM_THRESHOLD_EXCEEDED.name).is_some_and(|v| v > 0.0) {
        out.push(finding(
            FindingCode::SramThresholdExceeded,
            Severity::Critical,
            Confidence::High,
            format!(
                "the driver flags the GPU's on-chip SRAM past its threshold of uncorrectable errors ({} parity, {} SEC-DED) {lasting}",
                last(signals::SRAM_UNCORRECTED_PARITY.name).unwrap_or(0.0),
                last(signals::SRAM_UNCORRECTED_SECDED.name).unwrap_or(0.0)
            ),
            json!({
                signals::SRAM_THRESHOLD_EXCEEDED.name: last(signals::SRAM_THRESHOLD_EXCEEDED.name),
                signals::SRAM_UNCORRECTED_PARITY.name: last(signals::SRAM_UNCORRECTED_PARITY.name),
                signals::SRAM_UNCORRECTED_SECDED.name: last(signals::SRAM_UNCORRECTED_SECDED.name),
                "source": "NVIDIA RMA policy: more than 4 unique uncorrectable errors in a parity-protected SRAM bank, or 2 in a SEC-DED one",
            }),
            "RMA candidate: run NVIDIA's field diagnostic and send this report",
        ));
    }
    let text = |key: &str| device.setup.identity.get(key).and_then(Reading::text);
    if let (Some(now), Some(pending)) = (
        text(signals::ECC_ENABLED.name),
        text(signals::ECC_ENABLED_PENDING.name),
    ) && now != pending
    {
        out.push(finding(
            FindingCode::EccModePending,
            Severity::Major,
            Confidence::High,
            format!("an ECC mode change waits for a reset (ECC {now} now, {pending} after it): the card was tested in a mode it will not work in"),
            json!({signals::ECC_ENABLED.name: now, signals::ECC_ENABLED_PENDING.name: pending}),
            "reset the GPU to apply the ECC mode, then retest",
        ));
    }
}

/// A link below its maximum: its width at any time (a GPU keeps its lanes at idle, so
/// fewer is a slot, riser or contact), its generation only while the GPU is busy (links
/// drop their generation at idle by design; REFERENCE.md §4). Where sysfs gives the slot's
/// own maxima, the two are kept apart: a link at the slot's maximum but below the card's is
/// the slot limiting the card (`PCIE_SLOT_LIMITS`, a note), one below both is degraded. Once
/// per device and kind, from the first phase that shows it.
fn link(p: &PhaseTelemetry, out: &mut Vec<Finding>) {
    let busy = p
        .gauges
        .get(signals::UTIL_GPU_PCT.name)
        .is_some_and(|u| u.median >= 50.0);
    let least = |key: &str| p.gauges.get(key).map(|s| s.min);
    for (what, now, max, slot, judged) in [
        (
            "generation",
            signals::PCIE_GEN.name,
            signals::PCIE_GEN_MAX.name,
            signals::PCIE_SLOT_GEN_MAX.name,
            busy,
        ),
        (
            "width",
            signals::PCIE_WIDTH.name,
            signals::PCIE_WIDTH_MAX.name,
            signals::PCIE_SLOT_WIDTH_MAX.name,
            true,
        ),
    ] {
        let seen = |out: &[Finding], code: FindingCode| {
            out.iter()
                .any(|f| f.code == code && f.evidence.get("what") == Some(&json!(what)))
        };
        let (Some(card), Some(highest)) = (least(max), p.gauges.get(now).map(|s| s.max)) else {
            continue;
        };
        // What the link can reach here: the lower of the card's and the slot's maxima.
        let slot_max = least(slot);
        let limit = slot_max.map_or(card, |s| s.min(card));
        let evidence = json!({"what": what, "phase": p.phase, now: p.gauges.get(now), max: p.gauges.get(max), slot: p.gauges.get(slot)});
        if let Some(s) = slot_max.filter(|s| *s < card)
            && !seen(out, FindingCode::PcieSlotLimits)
        {
            // A fact of where the card sits, not a fault: the link is judged against it.
            out.push(finding(
                FindingCode::PcieSlotLimits,
                Severity::Note,
                Confidence::High,
                format!("the slot allows PCIe {what} {s} of the card's {card}: the card runs below its own maximum by where it sits, not by itself"),
                evidence.clone(),
                "move the card to a slot (or riser) with its own PCIe generation and width where the host bandwidth matters",
            ));
        }
        if !judged || seen(out, FindingCode::PcieLinkDegraded) || highest >= limit {
            continue;
        }
        let phase = if p.phase == "health" {
            String::new()
        } else {
            format!(" in the {} phase", p.phase)
        };
        let when = if busy {
            format!("while the GPU was busy{phase}")
        } else {
            phase.trim_start().to_owned()
        };
        let of = match slot_max {
            Some(s) if s < card => format!("{limit} (the slot's; the card's {card})"),
            _ => format!("{limit}"),
        };
        out.push(finding(
            FindingCode::PcieLinkDegraded,
            Severity::Major,
            Confidence::High,
            format!("PCIe {what} {highest} of {of} {when}")
                .trim_end()
                .to_owned(),
            evidence,
            "check the slot, riser and BIOS link settings; reseat the card",
        ));
    }
}

/// CRC errors per second on an NVLink from which they matter (DCGM's health watch: "CRC
/// errors only matter at rates of 100+ per second"); fewer are worth a look.
const NVLINK_CRC_PER_S: f64 = 100.0;

/// Every NVLink of the device over the run, one finding per bad link: one that went down
/// during a phase (`NVLINK_DOWN`), or one down while others of the GPU are up (a note of
/// weight only where the run saw it go: a PCIe card's bridges may leave links unused); and
/// its errors (`NVLINK_ERRORS`): any replay or recovery of its data link is a fault (as in
/// DCGM's health watch), CRC errors at 100 a second or more too, fewer are minor. A GPU
/// whose links are all down (MIG, no bridge) says nothing here.
fn nvlinks(device: &DeviceReport, out: &mut Vec<Finding>) {
    use std::collections::BTreeMap;
    #[derive(Default)]
    struct Link {
        went_down: Vec<String>,
        counts: BTreeMap<&'static str, f64>,
        crc_per_s: f64,
        phases: Vec<String>,
    }
    let mut links: BTreeMap<u32, Link> = BTreeMap::new();
    let mut last_state: BTreeMap<u32, f64> = BTreeMap::new();
    for p in &device.telemetry {
        let seconds = (p.end_ms - p.start_ms) / 1e3;
        let mut crc: BTreeMap<u32, f64> = BTreeMap::new();
        for (name, value) in &p.counter_deltas {
            let Some((l, what)) = signals::nvlink_part(name) else {
                continue;
            };
            if what == "state" {
                if *value < 0.0 {
                    links.entry(l).or_default().went_down.push(p.phase.clone());
                }
                continue;
            }
            let Some(kind) = signals::NVLINK_COUNTERS.iter().find(|k| **k == what) else {
                continue;
            };
            if *value > 0.0 {
                let link = links.entry(l).or_default();
                *link.counts.entry(kind).or_default() += value;
                if !link.phases.contains(&p.phase) {
                    link.phases.push(p.phase.clone());
                }
                if kind.starts_with("crc") {
                    *crc.entry(l).or_default() += value;
                }
            }
        }
        for (l, n) in crc {
            if seconds > 0.0 {
                let link = links.entry(l).or_default();
                link.crc_per_s = link.crc_per_s.max(n / seconds);
            }
        }
        for (name, value) in &p.counters_after {
            if let Some((l, "state")) = signals::nvlink_part(name) {
                last_state.insert(l, *value);
            }
        }
    }
    let up = last_state.values().filter(|v| **v > 0.0).count();
    for (l, state) in &last_state {
        if *state <= 0.0 && up > 0 && links.get(l).is_none_or(|k| k.went_down.is_empty()) {
            out.push(finding(
                FindingCode::NvlinkDown,
                Severity::Minor,
                Confidence::Medium,
                format!("NVLink {l} is down while {up} of the GPU's links are up"),
                json!({"link": l, "links_up": up}),
                "on a board whose links should all be up (SXM, a full set of bridges): reseat the card or bridge and check the NVLink topology (nvidia-smi nvlink -s)",
            ));
        }
    }
    for (l, link) in links {
        if !link.went_down.is_empty() {
            out.push(finding(
                FindingCode::NvlinkDown,
                Severity::Major,
                Confidence::High,
                format!(
                    "NVLink {l} went down during the {} {}",
                    crate::text::list(&link.went_down),
                    if link.went_down.len() == 1 { "phase" } else { "phases" }
                ),
                json!({"link": l, "phases": link.went_down}),
                "check the NVLink bridge or baseboard, reseat, and reset the GPU; RMA if it follows the card",
            ));
        }
        if link.counts.is_empty() {
            continue;
        }
        let count = |k: &str| link.counts.get(k).copied().unwrap_or(0.0);
        let fatal = count("replay") + count("recovery") > 0.0 || link.crc_per_s >= NVLINK_CRC_PER_S;
        let listed: Vec<String> = link
            .counts
            .iter()
            .map(|(k, n)| {
                let (one, many) = match *k {
                    "replay" => ("replay", "replays"),
                    "recovery" => ("recovery", "recoveries"),
                    "crc_flit" => (
                        "CRC error in a flow-control digit",
                        "CRC errors in flow-control digits",
                    ),
                    _ => ("CRC error in data", "CRC errors in data"),
                };
                format!("{n:.0} {}", if *n == 1.0 { one } else { many })
            })
            .collect();
        out.push(finding(
            FindingCode::NvlinkErrors,
            if fatal { Severity::Major } else { Severity::Minor },
            Confidence::Medium,
            format!(
                "NVLink {l}: {} {}{}",
                listed.join(", "),
                during_phases(&link.phases),
                if link.crc_per_s > 0.0 {
                    format!(" (CRC errors at {:.0} a second at most)", link.crc_per_s)
                } else {
                    String::new()
                }
            ),
            json!({"link": l, "counts": link.counts, "crc_per_s": link.crc_per_s, "phases": link.phases,
                   "source": "DCGM health watch: any replay or recovery fails a link; CRC errors fail it at 100 a second or more"}),
            "check the NVLink bridge or baseboard and reseat; rerun, and RMA if the errors follow the card",
        ));
    }
}

/// Phases in words: `during the vram phase`, `during the vram and compute phases`, or
/// `since the last check` for `kiln health`'s one phase.
fn during_phases(phases: &[String]) -> String {
    match phases {
        [one] if one == "health" => "since the last check".into(),
        [one] if one == BETWEEN_PHASES => "between the phases".into(),
        [_] => format!("during the {} phase", phases[0]),
        _ => format!("during the {} phases", crate::text::list(phases)),
    }
}

/// PCIe replays above what a bit error rate of 1e-12 allows on the link the phase ran at.
fn pcie_replays(p: &PhaseTelemetry, t: &Thresholds, out: &mut Vec<Finding>) {
    let replays = p
        .counter_deltas
        .get(signals::PCIE_REPLAYS.name)
        .copied()
        .unwrap_or(0.0);
    let generation = p.gauges.get(signals::PCIE_GEN.name).map(|s| s.median);
    let lanes = p.gauges.get(signals::PCIE_WIDTH.name).map(|s| s.median);
    let (Some(gts), Some(lanes)) = (
        generation.and_then(|g| crate::workload::pcie::transfer_rate_gts(g.round() as u32)),
        lanes,
    ) else {
        return;
    };
    if replays <= 0.0 || lanes <= 0.0 {
        return;
    }
    let allowed_per_minute = (t.replays_per_gts_lane_minute * gts * lanes).ceil();
    // A phase shorter than a minute is judged as a whole minute: a handful of replays in a
    // few seconds is not yet a rate.
    let minutes = ((p.end_ms - p.start_ms) / 60_000.0).max(1.0);
    let per_minute = replays / minutes;
    if per_minute > allowed_per_minute {
        out.push(finding(
            FindingCode::PcieReplaysHigh,
            Severity::Major,
            Confidence::Medium,
            format!(
                "{replays} PCIe replays in the {} phase ({per_minute:.0} per minute; a Gen{} x{} link at a bit error rate of 1e-12 allows {allowed_per_minute})",
                p.phase,
                generation.unwrap_or(0.0).round(),
                lanes.round()
            ),
            json!({"phase": p.phase, signals::PCIE_REPLAYS.name: replays, "minutes": minutes,
                   "allowed_per_minute": allowed_per_minute, signals::PCIE_GEN.name: generation, signals::PCIE_WIDTH.name: lanes}),
            "signal integrity: reseat the card, try another slot or riser; RMA if it follows the card",
        ));
    }
}

/// When a phase's events happened, in words: `during the vram phase`, or `between the
/// phases` for what no phase's window covered.
fn during(p: &PhaseTelemetry) -> String {
    match p.phase.as_str() {
        BETWEEN_PHASES => "between the phases".to_owned(),
        // `kiln health` judges what came since its last check.
        "health" => "since the last check".to_owned(),
        phase => format!("during the {phase} phase"),
    }
}

fn counters(p: &PhaseTelemetry, out: &mut Vec<Finding>) {
    let delta = |k: &str| p.counter_deltas.get(k).copied().unwrap_or(0.0);
    // Page retirement is how cards before row remapping take bad memory out of use.
    let dbe = delta(signals::RETIRED_PAGES_DBE.name);
    let sbe = delta(signals::RETIRED_PAGES_SBE.name);
    if dbe + sbe > 0.0 || delta(signals::RETIRED_PAGES_PENDING.name) > 0.0 {
        out.push(finding(
            FindingCode::RetiredPages,
            if dbe > 0.0 {
                Severity::Critical
            } else {
                Severity::Major
            },
            Confidence::High,
            format!(
                "{dbe} pages retired for double-bit and {sbe} for single-bit errors {}",
                during(p)
            ),
            json!({"counter_deltas": p.counter_deltas}),
            "RMA candidate: reset the GPU to apply pending retirements, retest, and send this report",
        ));
    }
    // On-chip SRAM's uncorrectable errors are ECC errors of the GPU's own, where the totals
    // did not count them.
    let ecc = delta(signals::ECC_UNCORRECTED_VOLATILE.name)
        .max(delta(signals::ECC_UNCORRECTED_AGGREGATE.name))
        .max(
            delta(signals::SRAM_UNCORRECTED_PARITY.name)
                + delta(signals::SRAM_UNCORRECTED_SECDED.name),
        );
    if ecc > 0.0 {
        out.push(finding(
            FindingCode::EccUncorrectable,
            Severity::Critical,
            Confidence::High,
            format!("{ecc} uncorrectable ECC errors {}", during(p)),
            json!({"counter_deltas": p.counter_deltas}),
            "RMA candidate: reset the GPU, retest, and send this report",
        ));
    }
    if delta(signals::REMAP_FAILURE.name) > 0.0 {
        out.push(finding(
            FindingCode::RowRemapFailure,
            Severity::Critical,
            Confidence::High,
            format!("row remapping failed {}", during(p)),
            json!({"counter_deltas": p.counter_deltas}),
            "RMA the card",
        ));
    } else if delta(signals::REMAP_PENDING.name) > 0.0 {
        out.push(finding(
            FindingCode::RowRemapPending,
            Severity::Major,
            Confidence::High,
            format!("a row remap became pending {}", during(p)),
            json!({"counter_deltas": p.counter_deltas}),
            "reset the GPU to apply the remap, then retest",
        ));
    }
    // AMD's RAS counters outside the memory controller (gfx, sdma, mmhub, xgmi, ...):
    // uncorrectable errors in the GPU's own blocks.
    let ras: Vec<String> = p
        .counter_deltas
        .iter()
        .filter(|(_, v)| **v > 0.0)
        .filter_map(|(k, v)| signals::ras_ue_block(k).map(|block| format!("{block} {v}")))
        .collect();
    if !ras.is_empty() {
        out.push(finding(
            FindingCode::RasUncorrectable,
            Severity::Critical,
            Confidence::High,
            format!(
                "uncorrectable RAS errors in the GPU's blocks {} ({})",
                during(p),
                ras.join(", ")
            ),
            json!({"counter_deltas": p.counter_deltas}),
            "RMA candidate: reset the GPU, retest, and send this report",
        ));
    }
    if delta(signals::RETIRED_PAGES_FAILED.name) > 0.0 {
        out.push(finding(
            FindingCode::RowRemapFailure,
            Severity::Critical,
            Confidence::High,
            format!("bad pages could not be retired {}", during(p)),
            json!({"counter_deltas": p.counter_deltas}),
            "RMA the card",
        ));
    }
    if delta(signals::AER_FATAL.name) + delta(signals::AER_NONFATAL.name) > 0.0 {
        out.push(finding(
            FindingCode::PcieAerErrors,
            Severity::Major,
            Confidence::High,
            format!("PCIe AER errors {}", during(p)),
            json!({"counter_deltas": p.counter_deltas}),
            "reseat the card, try another slot or riser",
        ));
    }
}

/// The finding of an application's Xid raised by a process that is not kiln's own:
/// information about the node, never a finding against the card.
const XID_OTHER_PROCESS: FindingCode = FindingCode::XidOtherProcess;

/// The Xids of a phase, judged from the one catalogue ([`super::xid`]): one finding per
/// finding code, naming every code and count behind it, at the most serious row's class
/// and severity. Xid 154's recovery action, read from its text, is the action.
fn xids(p: &PhaseTelemetry, kiln_pids: &[u32], out: &mut Vec<Finding>) {
    let mut groups: Vec<(
        FindingCode,
        Vec<(&XidInfo, &crate::telemetry::record::XidEvent)>,
    )> = Vec::new();
    // An application's fault raised by a process that is not one of kiln's (where kiln
    // knows its own) is that process's, not this test's.
    let others = |e: &XidEvent| {
        e.pid
            .is_some_and(|pid| !kiln_pids.is_empty() && !kiln_pids.contains(&pid))
    };
    for event in &p.xids {
        let Some(info) = event.code().and_then(xid::lookup) else {
            continue;
        };
        let finding = if info.finding == FindingCode::XidApplication && others(event) {
            XID_OTHER_PROCESS
        } else {
            info.finding
        };
        match groups.iter_mut().find(|(f, _)| *f == finding) {
            Some((_, members)) => members.push((info, event)),
            None => groups.push((finding, vec![(info, event)])),
        }
    }
    for (code, members) in groups {
        // The most serious row decides (a 48 beside a 94 is a critical memory fault).
        let Some(worst) = members
            .iter()
            .map(|(info, _)| *info)
            .min_by_key(|info| (info.class(), info.severity, info.confidence))
        else {
            continue;
        };
        let mut counts: Vec<(u32, usize)> = Vec::new();
        for (info, _) in &members {
            match counts.iter_mut().find(|(c, _)| *c == info.code) {
                Some((_, n)) => *n += 1,
                None => counts.push((info.code, 1)),
            }
        }
        let listed = counts
            .iter()
            .map(|(c, n)| {
                let meaning = xid::lookup(*c).map_or("", |i| i.meaning);
                if *n > 1 {
                    format!("Xid {c} x{n} ({meaning})")
                } else {
                    format!("Xid {c} ({meaning})")
                }
            })
            .collect::<Vec<_>>()
            .join(", ");
        let asked = members
            .iter()
            .filter(|(info, _)| info.code == 154)
            .find_map(|(_, e)| xid::recovery_action(&e.message));
        let action = match asked {
            Some(words) => format!("{words} (the driver's recovery action, Xid 154); then retest"),
            None => worst.action.to_owned(),
        };
        let mut phase = during(p);
        // Whose processes raised them, where the kernel log names them.
        let mut raised_by: Vec<serde_json::Value> = Vec::new();
        for (_, e) in &members {
            if let Some(pid) = e.pid {
                let who =
                    json!({"pid": pid, "process": e.process, "kiln": kiln_pids.contains(&pid)});
                if !raised_by.contains(&who) {
                    raised_by.push(who);
                }
            }
        }
        let pids = |kiln: bool| -> Vec<String> {
            members
                .iter()
                .filter_map(|(_, e)| {
                    let pid = e.pid.filter(|p| kiln_pids.contains(p) == kiln)?;
                    Some(match &e.process {
                        Some(name) => format!("pid {pid} {name}"),
                        None => format!("pid {pid}"),
                    })
                })
                .fold(Vec::new(), |mut all, p| {
                    if !all.contains(&p) {
                        all.push(p);
                    }
                    all
                })
        };
        let (mut class, mut severity, mut confidence, mut action) =
            (worst.class(), worst.severity, worst.confidence, action);
        if code == XID_OTHER_PROCESS {
            // A fact about the node, not about the card: another process's engine fault,
            // or the cleanup of a process stopped (43, 45), is that process's.
            phase = format!(
                "raised by another process ({}) {phase}",
                pids(false).join(", ")
            );
            (class, severity, confidence) = (Class::Info, Severity::Note, Confidence::High);
            action = "nothing against this card: the other process's owner should look at it (a tenant on the GPU during the test is its own finding)".into();
        } else if worst.finding == FindingCode::XidApplication && !pids(true).is_empty() {
            phase = format!("in kiln's own worker ({}) {phase}", pids(true).join(", "));
        }
        // Every way the faults reached kiln, each fault counted once however many there were.
        let mut seen_by: Vec<crate::telemetry::record::XidChannel> =
            members.iter().flat_map(|(_, e)| e.channels()).collect();
        seen_by.sort();
        seen_by.dedup();
        out.push(Finding {
            code,
            class,
            severity,
            confidence,
            summary: format!("{listed} {phase}"),
            evidence: json!({
                "phase": p.phase,
                "worst_code": worst.code,
                "codes": counts.iter().map(|(c, n)| json!({"code": c, "count": n})).collect::<Vec<_>>(),
                "xids": members.iter().take(16).map(|(_, e)| e).collect::<Vec<_>>(),
                "seen_by": seen_by,
                "raised_by": raised_by,
                "source": worst.source,
            }),
            action,
        });
    }
}

/// The Xid codes of a device's telemetry that point at the card (hardware rows of major
/// severity or worse), and those of an application fault, from the catalogue.
fn xid_kinds(codes: &[u32]) -> (bool, bool) {
    let rows: Vec<&XidInfo> = codes.iter().filter_map(|c| xid::lookup(*c)).collect();
    let hardware = rows
        .iter()
        .any(|r| r.class() == Class::Hardware && r.severity <= Severity::Major);
    let application = rows
        .iter()
        .any(|r| r.finding == FindingCode::XidApplication && r.severity <= Severity::Major);
    (hardware, application)
}

fn device_failure(device: &DeviceReport, xid_codes: &[u32], out: &mut Vec<Finding>) {
    let mut errors: Vec<String> = device
        .workloads
        .iter()
        .filter_map(|w| w.summary.envelope().device_error.clone())
        .collect();
    // A worker the watchdog abandoned, or one that died, ended its test as a loss does.
    let stopped = device
        .failures
        .iter()
        .find(|f| matches!(f.error, DeviceErrorKind::Hang | DeviceErrorKind::Crash));
    errors.extend(stopped.map(|f| f.message.clone()));
    // Windows' resets of the display driver after a timeout (TDR) during the run.
    let resets: Vec<&DriverReset> = device.driver_resets().collect();
    let Some(error) = errors.first() else {
        driver_resets(&resets, out);
        return;
    };
    let (hardware_xid, app_xid) = xid_kinds(xid_codes);
    let lost = errors.len() > usize::from(stopped.is_some());
    // A loss, a hang or a dead worker with the OS saying it reset the driver for a
    // timeout is that timeout, said by the OS itself.
    let reset = !resets.is_empty() && !hardware_xid && !app_xid;
    let (code, action) = if hardware_xid {
        (
            FindingCode::DeviceLostHardware,
            "RMA candidate: the loss came with hardware Xids",
        )
    } else if app_xid {
        (
            FindingCode::DeviceLostApplication,
            "a shader or application fault: the card is likely fine",
        )
    } else if reset {
        (
            FindingCode::DeviceLostTimeout,
            "Windows reset the display driver after a timeout (TDR): close other GPU work, update the driver, then rerun; the card is likely fine",
        )
    } else if lost {
        (
            FindingCode::DeviceLostTimeout,
            "a watchdog or driver timeout with no hardware evidence: check the driver",
        )
    } else if stopped.is_some_and(|f| f.error == DeviceErrorKind::Hang) {
        (
            FindingCode::DeviceHang,
            "the device stopped answering with no hardware evidence: check the driver and the kernel log, then rerun it alone",
        )
    } else {
        (
            FindingCode::WorkerCrashed,
            "the device's worker process died (a driver crash is the usual cause): check the driver and the kernel log, then rerun",
        )
    };
    // Without telemetry no Xid could be seen, so "no hardware evidence" proves nothing: the
    // loss is reported but does not decide the device, which stays inconclusive.
    let blind = !device.telemetry.iter().any(|p| p.samples > 0);
    let (confidence, blind_note) = if reset {
        (
            Confidence::High,
            format!(
                " (Windows reset the display driver after a timeout: {})",
                reset_words(&resets)
            ),
        )
    } else if blind && !hardware_xid && !app_xid {
        (
            Confidence::Low,
            " (no telemetry was read, so a hardware cause cannot be ruled out)".to_owned(),
        )
    } else {
        (Confidence::Medium, String::new())
    };
    out.push(finding(
        code,
        Severity::Major,
        confidence,
        format!("the device failed mid-test: {error}{blind_note}"),
        json!({"errors": errors, "xids": xid_codes, "driver_resets": resets}),
        action,
    ));
}

/// A card lost, off the bus (Xid 79) or reset by the OS only under the combined CPU and
/// GPU load (`psu`), after the GPU's heaviest load alone (`heat`) ran clean: the power
/// supply, which sags only when the whole machine draws. It replaces what the loss alone
/// would say (a timeout, a card off the bus), since it explains it. Nothing when `heat`
/// did not run clean first: then the card was not shown to hold its own load.
fn combined_load(device: &DeviceReport, out: &mut Vec<Finding>) {
    let in_psu = |w: &&crate::workload::WorkloadOutcome| w.together_with() == Some(Psu::NAME);
    let lost = device
        .workloads
        .iter()
        .filter(in_psu)
        .find_map(|w| w.summary.envelope().device_error.clone());
    let (psu_phases, others): (Vec<&PhaseTelemetry>, Vec<&PhaseTelemetry>) =
        device.telemetry.iter().partition(|p| p.phase == Psu::NAME);
    let off_bus = psu_phases
        .iter()
        .any(|p| phase_xid_codes(p).contains(&XID_FALLEN_OFF_THE_BUS));
    let resets = psu_phases
        .iter()
        .map(|p| p.driver_resets.iter().filter(|r| !r.before_run).count())
        .sum::<usize>();
    // The same failure before the combined load began is not the power supply's to
    // explain (what follows a loss is its aftermath); nor is another hardware Xid.
    let psu_began = psu_phases
        .iter()
        .map(|p| p.start_ms)
        .fold(f64::MAX, f64::min);
    let first_psu = device
        .workloads
        .iter()
        .position(|w| w.together_with() == Some(Psu::NAME) || w.workload == Psu::NAME)
        .unwrap_or(device.workloads.len());
    let others_failed = others.iter().filter(|p| p.end_ms <= psu_began).any(|p| {
        phase_xid_codes(p).contains(&XID_FALLEN_OFF_THE_BUS)
            || p.driver_resets.iter().any(|r| !r.before_run)
    }) || device.workloads[..first_psu]
        .iter()
        .any(|w| w.summary.envelope().device_error.is_some());
    let other_hardware: Vec<u32> = device
        .telemetry
        .iter()
        .flat_map(phase_xid_codes)
        .filter(|c| *c != XID_FALLEN_OFF_THE_BUS)
        .collect();
    // heat ran, and none of its parts failed or lost the device (a part the budget cut
    // short still loaded the card as hard).
    let heat: Vec<&crate::workload::WorkloadOutcome> = device
        .workloads
        .iter()
        .filter(|w| w.together_with() == Some(crate::workload::heat::Heat::NAME))
        .collect();
    let heat_clean = !heat.is_empty()
        && heat.iter().all(|w| {
            w.summary.envelope().device_error.is_none()
                && matches!(
                    w.status,
                    WorkloadStatus::Passed | WorkloadStatus::Incomplete
                )
        });
    if !(lost.is_some() || off_bus || resets > 0)
        || others_failed
        || xid_kinds(&other_hardware).0
        || !heat_clean
    {
        return;
    }
    let figures = device
        .workloads
        .iter()
        .find_map(|w| match &w.summary {
            WorkloadResult::Psu(r) => Some(r.power_words()),
            _ => None,
        })
        .unwrap_or_else(|| "no power figures".into());
    let what = match (&lost, off_bus, resets) {
        (_, true, _) => "fell off the bus (Xid 79)".to_owned(),
        (Some(e), _, _) => format!("was lost ({e})"),
        _ => format!(
            "was reset by the OS ({})",
            crate::text::count(resets as u64, "reset")
        ),
    };
    out.retain(|f| {
        !matches!(
            f.code,
            FindingCode::DeviceLostTimeout
                | FindingCode::DeviceLostHardware
                | FindingCode::XidFallenOffBus
                | FindingCode::DriverTimeoutReset
        )
    });
    out.push(finding(
        FindingCode::PsuCombinedLoad,
        Severity::Critical,
        Confidence::High,
        format!(
            "the card {what} only while the CPU and the GPU were loaded together ({figures}); the GPU's heaviest load alone (heat) ran clean: the power supply, not the card"
        ),
        json!({"lost": lost, "xid_79": off_bus, "resets": resets, "figures": figures}),
        "check the power supply: its rating against the card's and the CPU's power together, its age, the cables to the card (no daisy-chained connectors); rerun psu after a change",
    ));
}

/// The Xid codes a phase's events carry.
fn phase_xid_codes(p: &PhaseTelemetry) -> Vec<u32> {
    p.xids.iter().filter_map(XidEvent::code).collect()
}

/// The resets in words: how many, of which driver, and what says so.
pub(super) fn reset_words(resets: &[&DriverReset]) -> String {
    let drivers: Vec<&str> = resets
        .iter()
        .map(|r| r.driver.as_str())
        .filter(|d| !d.is_empty())
        .fold(Vec::new(), |mut all, d| {
            if !all.contains(&d) {
                all.push(d);
            }
            all
        });
    let evidence: Vec<&str> = resets
        .iter()
        .flat_map(|r| r.evidence.iter().map(String::as_str))
        .take(3)
        .collect();
    format!(
        "{} of {} ({})",
        crate::text::count(resets.len() as u64, "reset"),
        if drivers.is_empty() {
            "the display driver".to_owned()
        } else {
            drivers.join(", ")
        },
        evidence.join("; ")
    )
}

/// Windows reset the display driver after a timeout (TDR) while kiln's work on the card
/// finished and verified: the OS gave up on some GPU work (kiln's dispatches stay well
/// under the delay, so more likely another program's, or the driver's), which is software,
/// and a burn-in that saw it is not clean.
fn driver_resets(resets: &[&DriverReset], out: &mut Vec<Finding>) {
    if resets.is_empty() {
        return;
    }
    out.push(finding(
        FindingCode::DriverTimeoutReset,
        Severity::Major,
        Confidence::Medium,
        format!(
            "Windows reset the display driver after a timeout during the test: {}",
            reset_words(resets)
        ),
        json!({"driver_resets": resets}),
        "close other GPU work (games, browsers, video), update the driver, then rerun; a reset that comes back on an idle machine with a fresh driver points at the card",
    ));
}

/// The installation, as the driver and the vendor's source saw it at the start
/// (REFERENCE.md §4): a driver not loaded or at odds with its libraries (software), and
/// other processes on the GPU (the environment: they take memory and time from the test).
fn setup(device: &DeviceReport, out: &mut Vec<Finding>) {
    let s = &device.setup;
    let problem = |cause: &str| s.source_problems.iter().any(|c| c == cause);
    let reinstall = "reinstall the driver or reboot into the installed one, then rerun";
    if problem(cause::DRIVER_NOT_LOADED) {
        out.push(finding(
            FindingCode::DriverNotLoaded,
            Severity::Major,
            Confidence::High,
            "the NVIDIA libraries are installed but the kernel driver is not loaded: its GPUs cannot be tested".into(),
            json!({"source_problems": s.source_problems}),
            "load the driver (modprobe nvidia) or reinstall it, then rerun",
        ));
    }
    let text = |key: &str| s.identity.get(key).and_then(Reading::text);
    let nvml_version = text(signals::DRIVER_VERSION.name);
    let differ = s.vendor_id == NVIDIA_VENDOR_ID
        && !s.vulkan_driver_version.is_empty()
        && nvml_version.is_some_and(|n| !same_version(n, &s.vulkan_driver_version));
    if problem(cause::VERSION_MISMATCH) || differ {
        out.push(finding(
            FindingCode::DriverVersionMismatch,
            Severity::Major,
            Confidence::High,
            match nvml_version {
                Some(n) if differ => format!("the Vulkan driver is version {} but NVML reports {n}: a half-finished driver upgrade", s.vulkan_driver_version),
                _ => "NVML and the kernel driver differ in version: the driver was upgraded without a reboot".into(),
            },
            json!({"vulkan_driver_version": s.vulkan_driver_version, "nvml_driver_version": nvml_version, "source_problems": s.source_problems}),
            reinstall,
        ));
    }
    if s.watching {
        // A watched application's neighbours are judged by its own rule.
        return;
    }
    let tenants = tenants(device);
    // Those that came after the start, each with when and what its coming did to the rates.
    let arrived = performance::arrivals(device, &tenants);
    if tenants.is_empty() && arrived.is_empty() {
        return;
    }
    let mut said = Vec::new();
    if !tenants.is_empty() {
        let listed: Vec<String> = tenants.iter().map(Process::said).collect();
        said.push(format!(
            "{} {} using the GPU when the test started",
            crate::text::list(&listed),
            if tenants.len() == 1 { "was" } else { "were" }
        ));
    }
    for a in &arrived {
        let changes = performance::before_and_after(device, a);
        said.push(format!(
            "{} started using the GPU during the test, {:.1} s into the {} phase{}",
            a.process.said(),
            (a.first_ms - a.phase.start_ms) / 1e3,
            a.phase.phase,
            if changes.is_empty() {
                String::new()
            } else {
                format!(": {}", changes.join("; "))
            }
        ));
    }
    out.push(finding(
        FindingCode::OtherTenants,
        Severity::Major,
        Confidence::High,
        said.join("; "),
        json!({
            signals::OTHER_PROCESSES.name: tenants,
            "arrived": arrived.iter().map(|a| json!({
                "process": a.process,
                "phase": a.phase.phase,
                "first_seen_ms": a.first_ms,
                "rates": performance::before_and_after(device, a),
            })).collect::<Vec<_>>(),
        }),
        "rerun when the GPU is idle (drain the node, or --wait-idle)",
    ));
}

const NVIDIA_VENDOR_ID: u32 = 0x10de;

/// Other processes on the GPU when the test started (`pid:bytes[:name]`), per the vendor
/// source.
pub(super) fn tenants(device: &DeviceReport) -> Vec<Process> {
    device
        .setup
        .identity
        .get(signals::OTHER_PROCESSES.name)
        .and_then(Reading::processes)
        .unwrap_or_default()
}

/// True when two dotted driver versions agree in the parts both give (Vulkan packs
/// NVIDIA's version as major.minor.patch.build; NVML writes major.minor[.patch], and
/// `550.54.01` is `550.54.1`).
fn same_version(a: &str, b: &str) -> bool {
    let parts =
        |v: &str| -> Vec<Option<u32>> { v.split('.').map(|p| p.trim().parse().ok()).collect() };
    let (a, b) = (parts(a), parts(b));
    a.iter().zip(&b).take(3).all(|(x, y)| x == y)
}

/// No telemetry sample in any phase: the checks that rest on it (heat, power, clocks,
/// ECC and remap counters, Xids) could not run, and the report must not read as if they
/// passed.
fn telemetry_missing(device: &DeviceReport, out: &mut Vec<Finding>) {
    if device.telemetry.is_empty() || device.telemetry.iter().any(|p| p.samples > 0) {
        return;
    }
    out.push(finding(
        FindingCode::TelemetryMissing,
        Severity::Note,
        Confidence::High,
        "no telemetry was read for this device: thermal, power, clock, ECC, remap and Xid checks could not run".into(),
        json!({"phases": device.telemetry.iter().map(|p| &p.phase).collect::<Vec<_>>()}),
        "install the vendor's driver tools (NVML for NVIDIA) or grant access to sysfs and the kernel log, then rerun",
    ));
}

/// The rates a device can be compared with its peers on: VRAM streaming (GiB/s), fp32
/// compute (G ops/s) and PCIe each way (GB/s), from workloads that ran to their end.
pub fn rates(device: &DeviceReport) -> Vec<(&'static str, f64)> {
    let mut out = Vec::new();
    let finished = |w: &&crate::workload::WorkloadOutcome| {
        matches!(
            w.status,
            crate::workload::WorkloadStatus::Passed | crate::workload::WorkloadStatus::Failed
        ) && w.together_with().is_none()
    };
    for w in device.workloads.iter().filter(finished) {
        out.extend(w.summary.rates());
    }
    out.retain(|(_, v)| v.is_finite() && *v > 0.0);
    out
}

/// Devices of the same model in one run, each against the median of the others: one
/// `peer_slow_share` below them in VRAM or compute rate is slower than its model should be. Its own
/// environment findings (heat, power, the slot) explain it; without them it is the card.
/// CPU devices share the host's cores, so they are never compared.
pub fn peers(devices: &[DeviceReport], t: &Thresholds) -> Vec<Vec<Finding>> {
    // PCIe rates depend on where a GPU sits (its socket, its switch), not only on the
    // card: they are judged against the link's theory instead.
    let all: Vec<Vec<(&str, f64)>> = devices
        .iter()
        .map(|d| {
            let mut r = rates(d);
            r.retain(|(name, _)| !name.starts_with("pcie_"));
            r
        })
        .collect();
    devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            if !d.kind.is_gpu() {
                return Vec::new();
            }
            let peers: Vec<usize> = (0..devices.len())
                .filter(|&j| j != i && devices[j].name == d.name && devices[j].kind.is_gpu())
                .collect();
            let slow: Vec<serde_json::Value> = all[i]
                .iter()
                .filter_map(|(name, value)| {
                    let others: Vec<f64> = peers
                        .iter()
                        .filter_map(|&j| all[j].iter().find(|(n, _)| n == name).map(|(_, v)| *v))
                        .collect();
                    let m = performance::median(others)?;
                    (*value < (1.0 - t.peer_slow_share) * m).then(|| json!({"rate": name, "value": value, "peer_median": m, "share_below": 1.0 - value / m}))
                })
                .collect();
            if slow.is_empty() {
                return Vec::new();
            }
            let explained = d.findings.iter().any(|f| f.class == Class::Environment);
            let what = slow
                .iter()
                .map(|s| format!("{} {:.0}% below", s["rate"].as_str().unwrap_or(""), 100.0 * s["share_below"].as_f64().unwrap_or(0.0)))
                .collect::<Vec<_>>()
                .join(", ");
            let (class, summary, action) = if explained {
                (Class::Environment, format!("slower than the {} other {} in this run ({what}), explained by its environment findings", peers.len(), d.name), "fix the environment findings, then compare again")
            } else {
                (Class::Hardware, format!("slower than the {} other {} in this run ({what}) with nothing in its environment to explain it", peers.len(), d.name), "rerun it alone and cool; RMA if it stays behind its peers")
            };
            let mut slower = finding(FindingCode::PeerSlower, Severity::Major, Confidence::Medium, summary, json!({"slow": slow, "peers": peers.iter().map(|&j| devices[j].index).collect::<Vec<_>>()}), action);
            // Its own environment findings explain it: not the card's.
            slower.class = class;
            vec![slower]
        })
        .collect()
}
