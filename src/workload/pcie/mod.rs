//! The PCIe probe: host-to-device, device-to-host and both at once through host-visible
//! staging buffers, from 4 KiB to 256 MiB, every transfer verified (a device-side
//! checksum after upload, a byte comparison after the round trip), with bandwidth and
//! latency curves and the link's generation and width read while it is loaded.
//!
//! The workload in parts: this module its settings, its kind and what it finds; `model`
//! the report it gives; `run` the probe on the device; `link` the link read while the
//! largest transfers run, and judged.

mod link;
mod model;
mod run;

use link::{judge_link, upstream_max};
pub use link::{link_under_load, sample_during, theoretical_gbps, transfer_rate_gts};
pub use model::{
    Corruption, LinkUnderLoad, PcieFinding, PcieFindingKind, PcieReport, SizeResult, Sustained,
};
pub use run::checksum;

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::settings::{SettingError, SettingsTable};
use super::show::{Bar, Section, Table, TableRow};
use super::{
    Envelope, FindingKind, Kind, KindTest, PlanDetail, Report, RunControl, Workload, WorkloadError,
    WorkloadFinding, WorkloadStatus, join_findings, record_device_error,
};
use crate::evidence::{DeviceEvents, Event, EventSink};
use crate::finding::GBps;
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::gpu::DeviceInfo;
use crate::gpu::{
    BufferKind, DeviceContext, GpuBuffer, GpuError, GpuResult, ShaderCode, embedded_shader,
};
use crate::limits::bounds;
use crate::telemetry::record::Reading;
use crate::telemetry::{signals, sysfs};
use crate::units::{KIB, MIB};

/// Settings of the PCIe probe.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PcieConfig {
    /// Smallest transfer.
    pub min_bytes: u64,
    /// Largest transfer.
    pub max_bytes: u64,
    /// Transfers per size and direction (the best time is the latency).
    pub repeats: u32,
    /// Corrupt one byte at this offset of the largest upload, on the device, before it is
    /// checked (self-test and detector tests).
    pub inject_offset: Option<u64>,
    /// Root of sysfs (tests use a fake tree).
    pub sysfs_root: std::path::PathBuf,
}

impl Default for PcieConfig {
    fn default() -> Self {
        PcieConfig {
            min_bytes: 4 * KIB,
            max_bytes: 256 * MIB,
            repeats: 3,
            inject_offset: None,
            sysfs_root: "/".into(),
        }
    }
}

/// The `pcie` workload.
pub struct Pcie;

impl Kind for Pcie {
    const NAME: &'static str = "pcie";
    const DEFAULT_WEIGHT: u32 = 1;
    // Its rates are kiln_rate_bytes_per_second{rate="pcie_h2d"} and {rate="pcie_d2h"}
    // (from `rates`): no family of its own says them again under another name.
    type Settings = PcieConfig;
    type Result = PcieReport;

    fn from_profile(table: &mut dyn SettingsTable) -> Result<PcieConfig, SettingError> {
        let mut c = PcieConfig::default();
        if let Some(bytes) = table.size("max_bytes", &bounds::PCIE_MAX_BYTES)? {
            c.max_bytes = bytes;
        }
        Ok(c)
    }

    fn build(settings: &PcieConfig) -> Vec<Box<dyn Workload + Send>> {
        vec![Box::new(PcieTest {
            config: settings.clone(),
        })]
    }

    fn describe(settings: &PcieConfig, _device: &DeviceInfo) -> Result<PlanDetail, String> {
        Ok(PlanDetail {
            detail: format!(
                "transfers from {} KiB to {} MiB, each way and both, verified",
                settings.min_bytes >> 10,
                settings.max_bytes >> 20
            ),
            ..PlanDetail::default()
        })
    }

    fn judge(result: &PcieReport) -> Vec<Finding> {
        let mut out = Vec::new();
        found(result, &mut out);
        out
    }

    fn rates(result: &PcieReport) -> Vec<(&'static str, f64)> {
        vec![
            ("pcie_h2d_gbps", result.peak_h2d_gbps),
            ("pcie_d2h_gbps", result.peak_d2h_gbps),
        ]
    }

    fn sections(p: &PcieReport) -> Vec<Section> {
        let theory = p.link.as_ref().and_then(|l| l.theoretical_gbps);
        let mut out = Vec::new();
        if !p.corruption.is_empty() {
            out.push(Section::Table(Table {
                title: "Corrupted transfers".into(),
                noun: crate::workload::fault_noun("pcie"),
                place: "place",
                columns: vec![
                    "Direction",
                    "Transfer size",
                    "First wrong byte",
                    "Sent",
                    "Got",
                    "XOR",
                    "Bytes differing",
                ],
                rows: p
                    .corruption
                    .iter()
                    .map(|c| TableRow {
                        count: 1,
                        key: format!("{} {} {}", c.direction, c.bytes, c.offset),
                        cells: vec![
                            c.direction.clone(),
                            crate::units::format_exact(c.bytes),
                            format!("0x{:x}", c.offset),
                            format!("0x{:02x}", c.expected),
                            format!("0x{:02x}", c.actual),
                            format!("0x{:02x}", c.expected ^ c.actual),
                            c.differing_bytes.to_string(),
                        ],
                    })
                    .collect(),
                total: p.corruption.len() as u64,
            }));
        }
        out.push(Section::Bars {
            title: "PCIe bandwidth (mark: the link's theory, where known)".into(),
            unit: "GB/s".into(),
            bars: vec![
                Bar::marked("host to device", p.peak_h2d_gbps, theory),
                Bar::marked("device to host", p.peak_d2h_gbps, theory),
                Bar::new("both at once", p.peak_bidir_gbps),
            ],
        });
        out
    }
}

/// Corrupted transfers, and a link that trained below what the card and slot can do.
fn found(p: &PcieReport, out: &mut Vec<Finding>) {
    if !p.corruption.is_empty() {
        out.push(finding(
            FindingCode::PcieCorruption,
            Severity::Critical,
            Confidence::High,
            format!("{} transfers arrived corrupted", p.corruption.len()),
            crate::finding::evidence(&Corrupted {
                corruption: &p.corruption,
            }),
            "reseat the card, try another slot or riser; RMA if it follows the card",
        ));
    }
    let evidence = crate::finding::evidence(&Degraded {
        link: p.link.as_ref(),
        peak_h2d_gbps: GBps(p.peak_h2d_gbps),
        peak_d2h_gbps: GBps(p.peak_d2h_gbps),
        staging_in_host_memory: p.staging_in_host_memory,
    });
    let reseat = "check the slot, riser and BIOS link settings; reseat the card";
    for f in p
        .findings
        .iter()
        .filter(|f| f.kind == PcieFindingKind::LinkDegraded)
    {
        out.push(finding(
            FindingCode::PcieLinkDegraded,
            Severity::Major,
            Confidence::Medium,
            f.message.clone(),
            evidence.clone(),
            reseat,
        ));
    }
}

crate::evidence! {
    /// The evidence of `PCIE_CORRUPTION`: every transfer that arrived changed.
    struct Corrupted<'a> {
        corruption: &'a [Corruption] => "Corrupted transfer",
    }
}

crate::evidence! {
    /// The evidence of the probe's link findings: the link under load and the peaks.
    struct Degraded<'a> {
        link: Option<&'a LinkUnderLoad> => "Link",
        peak_h2d_gbps: GBps => "Best host-to-device rate",
        peak_d2h_gbps: GBps => "Best device-to-host rate",
        staging_in_host_memory: bool => "Staging in host memory",
    }
}

/// The probe as a workload.
pub struct PcieTest {
    /// Its settings.
    pub config: PcieConfig,
}

crate::said_record!(Corruption {
    direction => "Direction",
    bytes => "Size" in crate::finding::Unit::Bytes,
    offset => "Offset" in crate::finding::Unit::Hex,
    differing_bytes => "Bytes that differ" in crate::finding::Unit::Bytes,
    expected => "Expected" in crate::finding::Unit::Hex,
    actual => "Read" in crate::finding::Unit::Hex,
});
