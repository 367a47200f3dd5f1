//! The verdict rules on recorded scenarios: each fixture's cause becomes the right finding,
//! class and device result; a healthy card gets none.

use crate::common;

use kiln::finding::{Class, Confidence};
use kiln::gpu::{DeviceInfo, DeviceKind, DeviceLimits};
use kiln::telemetry::summary::summarize;
use kiln::thresholds::Thresholds;
use kiln::verdict::{DeviceEvidence, DeviceReport, DeviceResult, judge_device};
use kiln::workload::KindTest;

fn info() -> DeviceInfo {
    DeviceInfo {
        index: 0,
        name: "NVIDIA H200".into(),
        vendor_id: 0x10de,
        vendor_name: "NVIDIA".into(),
        device_id: 0x2335,
        kind: DeviceKind::DiscreteGpu,
        driver_name: "NVIDIA".into(),
        driver_info: "550.54.15".into(),
        driver_version: "550.54.15.0".into(),
        driver_version_raw: 0,
        api_version: "1.3.277".into(),
        device_uuid: "6c4f3a5e-1b2c-4d5e-8f90-123456789abc".into(),
        pci_address: Some("0000:05:00.0".into()),
        luid: None,
        heaps: vec![],
        memory_types: vec![],
        memory_budget_supported: true,
        limits: DeviceLimits {
            max_storage_buffer_range_bytes: 1 << 32,
            max_memory_allocation_size_bytes: 1 << 34,
            max_buffer_size_bytes: None,
            max_texel_buffer_elements: 1 << 27,
            max_compute_work_group_count: [1 << 31, 65535, 65535],
            max_compute_work_group_invocations: 1024,
            timestamp_period_ns: 1.0,
            timestamp_valid_bits: 64,
            max_push_constants_size_bytes: 256,
        },
        shader_int64: true,
        shader_float16: true,
        cooperative_matrix: false,
        matrix_units: Default::default(),
        compute_queue_family: Some(0),
    }
}

/// A device report with one passed workload and the fixture's telemetry, judged.
fn judged(fixture: &str) -> DeviceReport {
    judged_with(fixture, |_| {})
}

/// [`judged`], the fixture's phase summaries changed by `edit` first.
fn judged_with(
    fixture: &str,
    edit: impl Fn(&mut kiln::telemetry::summary::PhaseTelemetry),
) -> DeviceReport {
    let (records, mut phases) = common::replay_phase(fixture, "vram");
    phases.iter_mut().for_each(edit);
    let outcome = kiln::workload::WorkloadOutcome {
        workload: "vram".into(),
        status: kiln::workload::WorkloadStatus::Passed,
        headline: "no errors".into(),
        summary: kiln::workload::WorkloadResult::from_json("vram", serde_json::json!({})),
    };
    let mut d = DeviceEvidence::tested(&info(), vec![outcome], None);
    // Who the card is, as its telemetry source said: its rated limits among it.
    for r in records {
        if let kiln::telemetry::record::TelemetryData::Identity { fields } = r.data {
            d.setup.identity.extend(fields);
        }
    }
    d.telemetry = phases;
    judge_device(d, &Thresholds::default())
}

fn codes(d: &DeviceReport) -> Vec<&str> {
    d.findings.iter().map(|f| f.code.name()).collect()
}

#[test]
fn healthy_cards_get_no_finding_and_pass() {
    for fixture in ["healthy_load", "healthy_idle"] {
        let d = judged(fixture);
        assert!(d.findings.is_empty(), "{fixture}: {:?}", codes(&d));
        assert_eq!(d.result, DeviceResult::Pass);
    }
}

#[test]
fn heat_and_power_are_the_environment() {
    let d = judged("thermal_throttle");
    assert_eq!(codes(&d), vec!["THERMAL_THROTTLE"]);
    assert_eq!(
        (d.result, d.result.exit_code()),
        (DeviceResult::Environment, 2)
    );
    let d = judged("hw_power_brake");
    assert_eq!(codes(&d), vec!["POWER_BRAKE"]);
    assert_eq!(d.result, DeviceResult::Environment);
    let d = judged("sw_power_cap");
    // A 400 W cap of 700 held the SM clock at 1410 of 1980 MHz under load: a configuration
    // that holds the card below its product, environment of weight, with the limit to restore.
    assert_eq!(codes(&d), vec!["CONFIG_LIMITS_CARD"]);
    assert_eq!(d.findings[0].class, Class::Environment);
    assert!(
        d.findings[0].action.contains("nvidia-smi -pl 700"),
        "{}",
        d.findings[0].action
    );
    assert_eq!(d.result, DeviceResult::Environment);
    let d = judged("pcie_downtrained");
    assert_eq!(codes(&d), vec!["PCIE_LINK_DEGRADED", "PCIE_LINK_DEGRADED"]);
    assert_eq!(d.result, DeviceResult::Environment);
}

#[test]
fn ecc_remaps_and_a_lost_bus_are_hardware() {
    let d = judged("ecc_uncorrectable_remap_pending");
    let c = codes(&d);
    for code in [
        "ECC_UNCORRECTABLE",
        "ROW_REMAP_PENDING",
        "XID_MEMORY_HARDWARE",
    ] {
        assert!(c.contains(&code), "{code} in {c:?}");
    }
    assert_eq!((d.result, d.result.exit_code()), (DeviceResult::Fail, 1));
    assert!(
        d.findings
            .iter()
            .all(|f| f.class == Class::Hardware && f.confidence == Confidence::High)
    );
    let d = judged("xid79");
    assert!(codes(&d).contains(&"XID_FALLEN_OFF_BUS"));
    assert_eq!(d.result, DeviceResult::Fail);
}

#[test]
fn an_xid_13_storm_is_software_not_hardware() {
    let d = judged("xid13_storm");
    assert_eq!(codes(&d), vec!["XID_APPLICATION"]);
    assert_eq!(
        (d.result, d.result.exit_code()),
        (DeviceResult::Software, 3)
    );
}

/// Judges the device that ran `outcome` (the real driver) on that outcome.
fn judge_outcome(ran_on: &DeviceInfo, outcome: kiln::workload::WorkloadOutcome) -> DeviceReport {
    judge_device(
        DeviceEvidence::tested(ran_on, vec![outcome], None),
        &Thresholds::default(),
    )
}

fn lavapipe() -> (std::sync::Arc<kiln::gpu::Vulkan>, kiln::gpu::DeviceContext) {
    let (vulkan, info) = common::device();
    let ctx = kiln::gpu::DeviceContext::open(&vulkan, &info).unwrap();
    (vulkan, ctx)
}

#[test]
fn workload_results_become_findings_of_the_right_class() {
    use kiln::workload::Report;
    use kiln::workload::vram::engine::PlantedFault;
    let (_vk, mut ctx) = lavapipe();
    let ran_on = ctx.info().clone();
    let control = kiln::workload::RunControl::new(None);
    let mut sink = kiln::evidence::MemorySink::default();
    let vram = |planted: Vec<PlantedFault>,
                ctx: &mut kiln::gpu::DeviceContext,
                sink: &mut kiln::evidence::MemorySink| {
        kiln::workload::vram::VramTest {
            config: kiln::workload::vram::VramConfig {
                algorithms: vec![kiln::workload::vram::algorithm::Algorithm::OwnAddress],
                bytes: Some(16 << 20),
                passes: Some(1),
                planted,
                ..Default::default()
            },
        }
        .run_report(ctx, &control, sink)
        .unwrap()
        .outcome("vram")
    };
    let stuck = PlantedFault {
        word: 1000,
        and_mask: u32::MAX,
        or_mask: 0,
        xor_mask: 0,
        source: 1000,
        persistent: true,
    };
    let flip = PlantedFault {
        xor_mask: 1 << 5,
        persistent: false,
        ..stuck
    };
    let d = judge_outcome(&ran_on, vram(vec![flip], &mut ctx, &mut sink));
    assert_eq!(codes(&d), vec!["VRAM_TRANSIENT_ERROR"]);
    assert_eq!(
        d.findings[0].confidence,
        Confidence::Low,
        "one flip never repeated is not a high-confidence call"
    );
    let stuck_both = PlantedFault {
        and_mask: !(1 << 3),
        or_mask: 1 << 9,
        ..stuck
    };
    let d = judge_outcome(&ran_on, vram(vec![stuck_both], &mut ctx, &mut sink));
    assert!(codes(&d).contains(&"VRAM_STUCK_BIT"), "{:?}", codes(&d));
    assert_eq!(d.result, DeviceResult::Fail);

    let compute = kiln::workload::compute::ComputeTest {
        config: kiln::workload::compute::ComputeConfig {
            rounds: Some(1),
            inject: Some((7, 1)),
            ..Default::default()
        },
    }
    .run_report(&mut ctx, &control, &mut sink)
    .unwrap()
    .outcome("compute");
    let d = judge_outcome(&ran_on, compute);
    assert_eq!(codes(&d), vec!["COMPUTE_MISMATCH"]);
    assert_eq!(d.result, DeviceResult::Fail);

    let fragment = kiln::workload::fragment::FragmentTest {
        config: kiln::workload::fragment::FragmentConfig {
            rounds: Some(1),
            plant_fragmentation: true,
            ..Default::default()
        },
    }
    .run_report(&mut ctx, &control, &mut sink)
    .unwrap()
    .outcome("fragment");
    let d = judge_outcome(&ran_on, fragment);
    assert_eq!(codes(&d), vec!["ALLOC_FAIL_FRAGMENTED"]);
    assert_eq!(
        (d.result, d.result.exit_code()),
        (DeviceResult::Software, 3)
    );

    let pcie = kiln::workload::pcie::PcieTest {
        config: kiln::workload::pcie::PcieConfig {
            max_bytes: 1 << 20,
            repeats: 1,
            inject_offset: Some(77),
            ..Default::default()
        },
    }
    .run_report(&mut ctx, &control, &mut sink)
    .unwrap()
    .outcome("pcie");
    let d = judge_outcome(&ran_on, pcie);
    assert_eq!(codes(&d), vec!["PCIE_CORRUPTION"]);
}

#[test]
fn history_before_the_run_is_not_evidence_against_the_card() {
    use kiln::telemetry::record::{Reading, TelemetryData, TelemetryRecord, XidEvent};
    // A card that logged a double-bit ECC Xid and 3 uncorrectable errors long before this
    // run, and nothing during it.
    let path = common::telemetry_fixture("healthy_load");
    let (mut records, _) = kiln::evidence::read_jsonl::<TelemetryRecord>(&path).unwrap();
    for r in &mut records {
        if let TelemetryData::Snapshot { counters, .. } = &mut r.data {
            counters.insert("ecc_uncorrected_aggregate".into(), Reading::Number(3.0));
        }
    }
    records.insert(
        3,
        TelemetryRecord {
            t_ms: 50.0,
            device: Some(0),
            source: "kmsg".into(),
            data: TelemetryData::Xid {
                xid: XidEvent {
                    bus_id: Some("0000:05:00".into()),
                    code: Some(48),
                    pid: None,
                    process: None,
                    message: "An uncorrectable double bit error".into(),
                    kernel_us: Some(1_000),
                    before_run: true,
                    t_ms: None,
                    seen_by: Vec::new(),
                },
            },
        },
    );
    let mut d = DeviceEvidence::tested(&info(), vec![], None);
    d.telemetry = summarize(&records);
    assert!(
        d.telemetry[0].xids.is_empty(),
        "history is kept apart from the phase"
    );
    assert_eq!(
        d.telemetry[0].counter_deltas["ecc_uncorrected_aggregate"],
        0.0
    );
    let d = judge_device(d, &Thresholds::default());
    assert!(d.findings.is_empty(), "{:?}", codes(&d));
}

#[test]
fn a_device_without_telemetry_says_what_could_not_be_checked() {
    let mut d = DeviceEvidence::tested(&info(), vec![], None);
    d.telemetry = vec![kiln::telemetry::summary::PhaseTelemetry {
        device: 0,
        phase: "vram".into(),
        start_ms: 0.0,
        end_ms: 10.0,
        samples: 0,
        gauges: Default::default(),
        throttle_share: Default::default(),
        reasons_read: 0,
        counter_deltas: Default::default(),
        counters_after: Default::default(),
        counters_unavailable: vec![],
        xids: vec![],
        driver_resets: vec![],
        other_processes: vec![],
        processes_first_ms: Default::default(),
    }];
    let d = judge_device(d, &Thresholds::default());
    assert_eq!(codes(&d), vec!["TELEMETRY_MISSING"]);
    assert_eq!(d.findings[0].class, Class::Info);
    assert_ne!(
        d.result,
        DeviceResult::Fail,
        "a missing signal is no fault of the card"
    );
}

/// The healthy H200 under load with its HBM at its hottest `hbm_max_c` (its limit is 95 °C,
/// NVML's memory max temperature), or with no memory sensor read at all; `status_read`:
/// whether its throttle status was read.
fn hbm_at(hbm_max_c: Option<f64>, status_read: bool) -> DeviceReport {
    judged_with("healthy_load", |p| {
        match hbm_max_c {
            Some(c) => {
                if let Some(g) = p.gauges.get_mut("hbm_temp_c") {
                    g.max = c;
                }
            }
            None => {
                p.gauges.remove("hbm_temp_c");
            }
        }
        if !status_read {
            p.reasons_read = 0;
        }
    })
}

#[test]
fn memory_near_its_rated_temperature_under_load_is_a_note() {
    for (hottest, status_read, against) in [
        (91.0, true, "4 °C short of its limit of 95 °C"),
        (94.6, true, "at its limit of 95 °C"),
        (93.0, false, "2 °C short of its limit of 95 °C"),
        // Over it where no throttle status says whether it slowed the card.
        (97.0, false, "over its limit of 95 °C"),
    ] {
        let d = hbm_at(Some(hottest), status_read);
        assert_eq!(codes(&d), vec!["MEMORY_HOT"], "{hottest}");
        let f = &d.findings[0];
        assert_eq!(f.class, Class::Info);
        assert_eq!(
            f.summary,
            format!("the memory reached {hottest:.0} °C in the vram phase, {against} (GPU 68 °C)")
        );
        assert!(f.action.contains("cooling"), "{}", f.action);
        // Nothing went wrong and the card did not slow: a pass, with the note.
        assert_eq!(d.result, DeviceResult::Pass, "{hottest}");
    }
    // The near misses: warm, with more than the margin to spare.
    for hottest in [75.9, 85.0, 89.9] {
        let d = hbm_at(Some(hottest), true);
        assert!(d.findings.is_empty(), "{hottest}: {:?}", codes(&d));
        assert_eq!(d.result, DeviceResult::Pass);
    }
    // Over its limit where the throttle status was read: the status judges whether it
    // slowed the card (and a site's thresholds for it hold), not this note.
    let d = hbm_at(Some(97.0), true);
    assert!(d.findings.is_empty(), "{:?}", codes(&d));
    // A card that slowed for heat says so once, its memory's temperature in the words.
    let d = judged("thermal_throttle");
    assert_eq!(codes(&d), vec!["THERMAL_THROTTLE"]);
    assert!(
        d.findings[0].summary.contains("memory 100 °C"),
        "{}",
        d.findings[0].summary
    );
}

#[test]
fn a_card_with_no_memory_sensor_says_its_memory_temperature_was_not_checked() {
    let d = hbm_at(None, true);
    assert!(d.findings.is_empty(), "{:?}", codes(&d));
    let unread = d.not_checked();
    assert!(
        unread
            .iter()
            .any(|u| u.starts_with("memory temperature (NVML reads it on HBM parts only")),
        "{unread:?}"
    );
    // Read, it is not said.
    let d = hbm_at(Some(80.0), true);
    assert!(
        !d.not_checked()
            .iter()
            .any(|u| u.contains("memory temperature")),
        "{:?}",
        d.not_checked()
    );
    // With no telemetry at all, the one line for all of it says so.
    let d = judged_with("healthy_load", |p| p.gauges.clear());
    assert!(
        !d.not_checked()
            .iter()
            .any(|u| u.starts_with("memory temperature"))
    );
}
