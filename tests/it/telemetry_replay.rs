//! Recorded telemetry replayed through the sidecar's own loop, then summarised per
//! phase as `report.json` carries it: every fixture's cause shows in the summary.

use crate::common;

use kiln::telemetry::record::{TelemetryData, TelemetryRecord};
use kiln::telemetry::summary::PhaseTelemetry;

/// Replays a fixture with `before`/`after` snapshots around all its ticks: one phase.
fn replay(name: &str) -> (Vec<TelemetryRecord>, PhaseTelemetry) {
    let (records, mut phases) = common::replay_phase(name, "vram");
    assert_eq!(phases.len(), 1, "{name}: one phase");
    (records, phases.remove(0))
}

#[test]
fn every_fixture_replays_through_the_sidecar_in_the_recorded_format() {
    for name in [
        "healthy_idle",
        "healthy_load",
        "thermal_throttle",
        "hw_power_brake",
        "sw_power_cap",
        "ecc_uncorrectable_remap_pending",
        "pcie_downtrained",
        "xid79",
        "xid13_storm",
    ] {
        let (records, phase) = replay(name);
        assert!(
            matches!(records[0].data, TelemetryData::Header { .. }),
            "{name}"
        );
        assert!(records.iter().any(|r| matches!(&r.data, TelemetryData::Identity { fields } if fields.contains_key("serial"))), "{name}");
        let ticks = records
            .iter()
            .filter(|r| matches!(r.data, TelemetryData::Sample { .. }))
            .count();
        assert!(ticks >= 99, "{name}: {ticks} sample records");
        // A tick that read nothing (a GPU fallen off the bus) is no sample.
        let read = records
            .iter()
            .filter(|r| r.t_ms >= phase.start_ms && r.t_ms <= phase.end_ms)
            .filter(|r| matches!(&r.data, TelemetryData::Sample { readings } if readings.values().any(|v| v.number().is_some())))
            .count();
        assert_eq!(phase.samples, read, "{name}");
        assert_eq!(phase.device, 0);
    }
}

#[test]
fn a_healthy_loaded_card_shows_no_throttle_no_counter_growth_no_xid() {
    let (_, p) = replay("healthy_load");
    assert!(p.throttle_share.is_empty(), "{:?}", p.throttle_share);
    assert!(p.xids.is_empty());
    assert_eq!(p.counter_deltas["ecc_uncorrected_volatile"], 0.0);
    assert!(p.gauges["power_w"].median > 550.0);
    assert_eq!(p.gauges["pcie_gen"].min, 5.0);
    assert!(
        p.counters_unavailable
            .contains(&"retired_pages_pending".to_string()),
        "not supported is never zero"
    );
    assert!(!p.counter_deltas.contains_key("retired_pages_pending"));
}

#[test]
fn an_idle_card_is_throttled_for_idle_only() {
    let (_, p) = replay("healthy_idle");
    assert_eq!(
        p.throttle_share.keys().collect::<Vec<_>>(),
        vec!["gpu_idle"]
    );
    assert!((p.throttle_share["gpu_idle"] - 1.0).abs() < 1e-9);
    assert_eq!(
        p.gauges["pcie_gen"].max, 1.0,
        "links drop their generation at idle"
    );
}

#[test]
fn thermal_throttling_shows_heat_and_thermal_reasons() {
    let (_, p) = replay("thermal_throttle");
    assert!(p.gauges["gpu_temp_c"].max >= 87.0);
    assert!(p.throttle_share["hw_thermal_slowdown"] > 0.4);
    assert!(p.throttle_share["sw_thermal_slowdown"] > 0.2);
    assert!(p.gauges["clock_sm_mhz"].min < p.gauges["clock_sm_mhz"].max);
}

#[test]
fn a_power_brake_on_a_cool_card_points_at_power_delivery() {
    let (_, p) = replay("hw_power_brake");
    assert!(p.throttle_share["hw_power_brake_slowdown"] > 0.1);
    assert!(p.throttle_share["hw_slowdown"] > 0.1);
    assert!(p.gauges["gpu_temp_c"].max < 60.0);
}

#[test]
fn an_admin_power_cap_shows_below_the_default_limit() {
    let (_, p) = replay("sw_power_cap");
    assert!((p.throttle_share["sw_power_cap"] - 1.0).abs() < 1e-9);
    assert!(p.gauges["power_limit_enforced_w"].max < p.gauges["power_limit_default_w"].min);
}

#[test]
fn uncorrectable_ecc_and_a_pending_remap_show_as_counter_deltas_and_xids() {
    let (_, p) = replay("ecc_uncorrectable_remap_pending");
    assert_eq!(p.counter_deltas["ecc_uncorrected_volatile"], 2.0);
    assert_eq!(p.counter_deltas["remap_pending"], 1.0);
    assert_eq!(p.counter_deltas["remapped_uncorrectable"], 1.0);
    let codes: Vec<u32> = p.xids.iter().filter_map(|x| x.code).collect();
    assert_eq!(codes, vec![48, 63]);
}

#[test]
fn a_downtrained_link_shows_under_load() {
    let (_, p) = replay("pcie_downtrained");
    assert_eq!(p.gauges["pcie_gen"].max, 3.0);
    assert_eq!(p.gauges["pcie_gen_max"].min, 5.0);
    assert_eq!(p.gauges["pcie_width"].max, 8.0);
    assert_eq!(p.gauges["pcie_width_max"].min, 16.0);
}

#[test]
fn xid_79_and_a_storm_of_xid_13_are_kept_with_their_details() {
    let (records, p) = replay("xid79");
    assert_eq!(p.xids.len(), 1);
    assert_eq!(p.xids[0].code, Some(79));
    assert_eq!(p.xids[0].bus_id.as_deref(), Some("0000:05:00"));
    // A lost GPU stops answering: its readings go unavailable, and those ticks are no
    // samples (the phase is watched only as long as the GPU answered).
    assert_eq!(p.gauges["gpu_temp_c"].samples, p.samples);
    let silent = records
        .iter()
        .filter(|r| matches!(&r.data, TelemetryData::Sample { readings } if readings.values().all(|v| v.number().is_none())))
        .count();
    assert!(
        silent > 0 && p.samples > 0,
        "{silent} silent ticks, {} samples",
        p.samples
    );
    let (_, p) = replay("xid13_storm");
    assert_eq!(p.xids.len(), 50);
    assert!(p.xids.iter().all(|x| x.code == Some(13) && !x.before_run));
}
