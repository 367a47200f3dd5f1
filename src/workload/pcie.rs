//! The PCIe probe: host-to-device, device-to-host and both at once through host-visible
//! staging buffers, from 4 KiB to 256 MiB, every transfer verified (a device-side
//! checksum after upload, a byte comparison after the round trip), with bandwidth and
//! latency curves and the link's generation and width read while it is loaded.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::settings::{SettingError, SettingsTable};
use super::show::{Bar, Metric, MetricFamily, Section, Table, TableRow};
use super::{
    Envelope, FindingKind, Kind, KindTest, PlanDetail, Report, RunControl, Workload, WorkloadError,
    WorkloadFinding, WorkloadStatus, join_findings, record_device_error,
};
use crate::evidence::{DeviceEvents, Event, EventSink};
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::gpu::DeviceInfo;
use crate::gpu::{
    BufferKind, DeviceContext, GpuBuffer, GpuError, GpuResult, ShaderCode, embedded_shader,
};
use crate::limits::bounds;
use crate::telemetry::record::Reading;
use crate::telemetry::{signals, sysfs};
use crate::units::{KIB, MIB};

/// Checksums a transferred buffer on the device.
const CHECKSUM: ShaderCode = embedded_shader!("pcie_checksum");

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

/// The sustained phase: the largest transfers, verified, until the budget is spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sustained {
    /// Seconds it ran.
    pub seconds: f64,
    /// Rounds (each `repeats` uploads, readbacks and two-way transfers).
    pub rounds: u32,
    /// Median host-to-device rate over the rounds, GB/s.
    pub h2d_gbps: f64,
    /// Median device-to-host rate, GB/s.
    pub d2h_gbps: f64,
    /// The slowest round's host-to-device rate, GB/s: a link that slows under sustained
    /// load shows here before it shows in the median.
    pub min_h2d_gbps: f64,
}

/// Rates at one transfer size, in GB/s (10^9 bytes per second).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SizeResult {
    /// Transfer size.
    pub bytes: u64,
    /// Host to device.
    pub h2d_gbps: f64,
    /// Device to host.
    pub d2h_gbps: f64,
    /// Both directions at once (bytes moved both ways per second).
    pub bidir_gbps: f64,
    /// Shortest host-to-device transfer, in microseconds.
    pub h2d_latency_us: f64,
    /// Shortest device-to-host transfer, in microseconds.
    pub d2h_latency_us: f64,
}

/// A transfer whose data arrived wrong.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Corruption {
    /// `h2d` when the device's checksum already disagreed, else `d2h`.
    pub direction: String,
    /// Transfer size.
    pub bytes: u64,
    /// First wrong byte.
    pub offset: u64,
    /// Bytes that differ.
    pub differing_bytes: u64,
    /// What was sent there.
    pub expected: u8,
    /// What came back.
    pub actual: u8,
}

/// The link as read while the largest transfers ran.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LinkUnderLoad {
    /// Generation while the largest transfers ran (the highest sampled: a link trains up
    /// under load and drops at idle).
    pub generation: Option<u32>,
    /// The most the link can train to: the lower of the card's and its upstream port's
    /// maximum (a Gen5 card in a Gen4 slot is not degraded).
    pub generation_max: Option<u32>,
    /// Width while the largest transfers ran.
    pub width: Option<u32>,
    /// The lower of the card's and the upstream port's maximum width.
    pub width_max: Option<u32>,
    /// Theoretical bandwidth per direction of the link in use, GB/s.
    pub theoretical_gbps: Option<f64>,
    /// The card's own maximum generation and width, when the upstream port is lower.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_max: Option<(Option<u32>, Option<u32>)>,
    /// Link samples taken during the largest transfers.
    #[serde(default)]
    pub samples: usize,
}

/// Everything the probe found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PcieReport {
    /// The largest transfer: the configured one, or less where the device's storage-range
    /// or allocation limit is smaller.
    pub largest_bytes: u64,
    /// Memory types of the upload staging buffer.
    pub upload_memory: Vec<String>,
    /// Memory types of the readback staging buffer.
    pub readback_memory: Vec<String>,
    /// True when both staging buffers are in host memory (a heap that is not
    /// device-local): only then do the transfers cross the bus and their rates say
    /// anything of the link. False on a device with no such memory (then the rates are
    /// not judged).
    #[serde(default)]
    pub staging_in_host_memory: bool,
    /// Per size.
    pub sizes: Vec<SizeResult>,
    /// Best host-to-device rate.
    pub peak_h2d_gbps: f64,
    /// Best device-to-host rate.
    pub peak_d2h_gbps: f64,
    /// Best two-way rate.
    pub peak_bidir_gbps: f64,
    /// Transfers verified.
    pub transfers_verified: u64,
    /// Corrupted transfers.
    pub corruption: Vec<Corruption>,
    /// The link under load, where sysfs shows it.
    pub link: Option<LinkUnderLoad>,
    /// Verified transfers of the largest size repeated for the rest of the time budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained: Option<Sustained>,
    /// Evidence for the verdict: `pcie_link_degraded`.
    pub findings: Vec<PcieFinding>,
    /// How its run ended and how long it took.
    #[serde(flatten)]
    pub run: Envelope,
}

/// What the probe can find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PcieFindingKind {
    /// The link ran below its generation or width under load (`pcie_link_degraded`).
    LinkDegraded,
    /// Any other sentence, read back from evidence of an older kiln (`pcie_bandwidth_low`,
    /// before the verdict judged the rates itself): kept, judged by nothing. This kiln
    /// writes none.
    Other,
}

impl FindingKind for PcieFindingKind {
    fn name(self) -> &'static str {
        match self {
            PcieFindingKind::LinkDegraded => "pcie_link_degraded",
            PcieFindingKind::Other => "other",
        }
    }

    fn of(message: &str) -> PcieFindingKind {
        if message.starts_with("pcie_link_degraded") {
            PcieFindingKind::LinkDegraded
        } else {
            PcieFindingKind::Other
        }
    }
}

/// One finding of the probe.
pub type PcieFinding = WorkloadFinding<PcieFindingKind>;

/// Raw transfer rate of a PCIe generation per lane, GT/s.
pub fn transfer_rate_gts(generation: u32) -> Option<f64> {
    match generation {
        1 => Some(2.5),
        2 => Some(5.0),
        3 => Some(8.0),
        4 => Some(16.0),
        5 => Some(32.0),
        6 => Some(64.0),
        _ => None,
    }
}

/// Theoretical bandwidth per direction of a link, GB/s: per-lane rate after line coding.
pub fn theoretical_gbps(generation: u32, width: u32) -> Option<f64> {
    let gts = transfer_rate_gts(generation)?;
    // Payload bits per line bits: 8b/10b, 128b/130b, then FLIT mode from Gen6.
    let (payload, line) = match generation {
        1 | 2 => (8.0, 10.0),
        3..=5 => (128.0, 130.0),
        _ => (242.0, 256.0),
    };
    Some(gts * payload / line / 8.0 * f64::from(width))
}

impl Report for PcieReport {
    super::envelope_in!(run);

    /// Failed on corruption (bandwidth findings are evidence for the verdict, not
    /// failures of the card by themselves).
    fn found(&self) -> Option<WorkloadStatus> {
        (!self.corruption.is_empty()).then_some(WorkloadStatus::Failed)
    }

    fn began(&self) -> bool {
        !self.sizes.is_empty()
    }

    /// One sentence for people.
    fn headline(&self) -> String {
        let mut rates = format!(
            "H2D {:.1} GB/s, D2H {:.1} GB/s, both {:.1} GB/s",
            self.peak_h2d_gbps, self.peak_d2h_gbps, self.peak_bidir_gbps
        );
        if let Some(s) = &self.sustained {
            rates.push_str(&format!(
                "; sustained {:.0} s: H2D {:.1} GB/s (slowest {:.1}), D2H {:.1} GB/s",
                s.seconds, s.h2d_gbps, s.min_h2d_gbps, s.d2h_gbps
            ));
        }
        match self.status() {
            WorkloadStatus::Failed => {
                format!("{} corrupted transfers ({rates})", self.corruption.len())
            }
            WorkloadStatus::NotRun => format!(
                "nothing ran: {}",
                self.run
                    .device_error
                    .as_deref()
                    .unwrap_or("no size completed")
            ),
            _ if !self.findings.is_empty() => {
                format!("{rates}; {}", join_findings(&self.findings))
            }
            WorkloadStatus::Incomplete => format!(
                "{} transfers verified ({rates}), but the probe stopped early: {}",
                self.transfers_verified,
                self.run.why_cut_short().unwrap_or("unknown")
            ),
            _ => format!("{} transfers verified, {rates}", self.transfers_verified),
        }
    }
}

/// The `pcie` workload.
pub struct Pcie;

impl Kind for Pcie {
    const NAME: &'static str = "pcie";
    const DEFAULT_WEIGHT: u32 = 1;
    const METRICS: &'static [MetricFamily] = &[
        MetricFamily {
            name: "kiln_pcie_h2d_bytes_per_second",
            help: "Best host-to-device rate of the last run.",
        },
        MetricFamily {
            name: "kiln_pcie_d2h_bytes_per_second",
            help: "Best device-to-host rate of the last run.",
        },
    ];
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

    fn metrics(result: &PcieReport) -> Vec<Metric> {
        vec![
            Metric {
                family: "kiln_pcie_h2d_bytes_per_second",
                value: result.peak_h2d_gbps * 1e9,
            },
            Metric {
                family: "kiln_pcie_d2h_bytes_per_second",
                value: result.peak_d2h_gbps * 1e9,
            },
        ]
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
        peak_h2d_gbps: p.peak_h2d_gbps,
        peak_d2h_gbps: p.peak_d2h_gbps,
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

/// The evidence of `PCIE_CORRUPTION`: every transfer that arrived changed.
#[derive(Serialize)]
struct Corrupted<'a> {
    corruption: &'a [Corruption],
}

/// The evidence of the probe's link findings: the link under load and the peaks.
#[derive(Serialize)]
struct Degraded<'a> {
    link: Option<&'a LinkUnderLoad>,
    peak_h2d_gbps: f64,
    peak_d2h_gbps: f64,
    staging_in_host_memory: bool,
}

/// The probe as a workload.
pub struct PcieTest {
    /// Its settings.
    pub config: PcieConfig,
}

struct Staging {
    up: GpuBuffer,
    down: GpuBuffer,
    dev: GpuBuffer,
    dev2: GpuBuffer,
    /// The device checksum pair, accumulated in device-local memory.
    sums: GpuBuffer,
    /// The host's copy of `sums`.
    sums_out: GpuBuffer,
}

/// The probe's pattern: a xorshift64 stream from `seed`.
fn fill(bytes: &mut [u8], seed: u64) {
    kiln_hostmath::fill_xorshift(bytes, seed);
}

/// The host side of the device checksum (`pcie_checksum.comp`).
pub fn checksum(bytes: &[u8]) -> (u32, u32) {
    kiln_hostmath::word_checksum(bytes)
}

impl KindTest for PcieTest {
    type Kind = Pcie;

    /// Runs the probe and returns its typed report.
    fn run_report(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<PcieReport, WorkloadError> {
        let run_started = std::time::Instant::now();
        let cfg = self.config.clone();
        if cfg.min_bytes < 4
            || cfg.min_bytes > cfg.max_bytes
            || !cfg.max_bytes.is_multiple_of(4)
            || !cfg.min_bytes.is_multiple_of(4)
        {
            return Err(WorkloadError::Config(format!(
                "PCIe transfer sizes must be multiples of 4 bytes with min <= max (got {} .. {})",
                cfg.min_bytes, cfg.max_bytes
            )));
        }
        let device = Some(ctx.info().index);
        let pci = ctx.info().pci_address.clone();
        // The device checksums a transfer through one storage binding: keep within it.
        let limits = &ctx.info().limits;
        let device_max = limits
            .max_storage_buffer_range_bytes
            .min(limits.max_memory_allocation_size_bytes)
            & !3;
        let max = cfg.max_bytes.min(device_max);
        if cfg.inject_offset.is_some_and(|o| o >= max) {
            return Err(WorkloadError::Config(
                "the PCIe inject offset lies past the largest transfer".into(),
            ));
        }
        let mut st = Staging {
            up: ctx.buffer(BufferKind::Upload, max, "kiln pcie upload staging")?,
            down: ctx.buffer(BufferKind::Readback, max, "kiln pcie readback staging")?,
            dev: ctx.buffer(BufferKind::Device, max, "kiln pcie device")?,
            dev2: ctx.buffer(BufferKind::Device, max, "kiln pcie device (two-way)")?,
            sums: ctx.buffer(BufferKind::Device, 64, "kiln pcie checksums")?,
            sums_out: ctx.buffer(BufferKind::Readback, 64, "kiln pcie checksums readback")?,
        };
        let on_device = Checksum {
            binding: ctx.bind([&mut st.dev, &mut st.sums, &mut st.down])?,
            pipeline: ctx.pipeline(CHECKSUM, &[])?,
        };
        events.emit(
            device,
            Event::WorkloadStart {
                workload: "pcie".into(),
                settings: serde_json::json!({ "config": &cfg }),
            },
        );
        let mut report = PcieReport {
            largest_bytes: max,
            staging_in_host_memory: BufferKind::Upload.ideal_on(ctx.info())
                && BufferKind::Readback.ideal_on(ctx.info()),
            upload_memory: st
                .up
                .memory_flags()
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            readback_memory: st
                .down
                .memory_flags()
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            sizes: Vec::new(),
            peak_h2d_gbps: 0.0,
            peak_d2h_gbps: 0.0,
            peak_bidir_gbps: 0.0,
            transfers_verified: 0,
            corruption: Vec::new(),
            link: None,
            sustained: None,
            findings: Vec::new(),
            run: Envelope::default(),
        };
        let mut size = cfg.min_bytes;
        let result: GpuResult<()> = (|| {
            while size <= max {
                if control.stop_requested() {
                    report.run.stopped_early = Some(super::STOPPED_ON_REQUEST.into());
                    break;
                }
                if control.out_of_time() && !report.sizes.is_empty() {
                    report.run.stopped_early = Some(format!(
                        "time budget spent before {} transfers",
                        crate::units::format_exact(size)
                    ));
                    break;
                }
                let largest = size.saturating_mul(4) > max;
                let mut transfer = || {
                    one_size(
                        ctx,
                        &mut st,
                        on_device,
                        (size, largest),
                        &cfg,
                        &mut report,
                        &mut DeviceEvents::new(events, device),
                    )
                };
                // The link is read while the largest transfers run, from a thread of its
                // own: afterwards it may already have dropped to its idle speed.
                let r = match (&pci, largest) {
                    (Some(pci), true) => {
                        let dir = cfg.sysfs_root.join("sys/bus/pci/devices").join(pci);
                        let (r, samples) = sample_during(|| sysfs::read_link(&dir), transfer);
                        let upstream = upstream_max(&dir);
                        report.link = Some(link_under_load(&samples, upstream));
                        r?
                    }
                    _ => transfer()?,
                };
                report.peak_h2d_gbps = report.peak_h2d_gbps.max(r.h2d_gbps);
                report.peak_d2h_gbps = report.peak_d2h_gbps.max(r.d2h_gbps);
                report.peak_bidir_gbps = report.peak_bidir_gbps.max(r.bidir_gbps);
                report.sizes.push(r);
                size = if size == max {
                    max + 1
                } else {
                    (size * 4).min(max)
                };
            }
            // With budget left, the largest transfers go on, each verified, until it is
            // spent: the workload holds its share of the profile's time, and a link that
            // corrupts or slows only under sustained traffic shows.
            // A round that would end past the deadline does not start (a round of large
            // transfers can take seconds on a slow link).
            if let Some(deadline) = control.deadline
                && report.run.stopped_early.is_none()
            {
                let started = Instant::now();
                let mut rounds = Vec::new();
                let mut last_round = Duration::ZERO;
                while Instant::now() + last_round < deadline && !control.stop_requested() {
                    let round_started = Instant::now();
                    rounds.push(one_size(
                        ctx,
                        &mut st,
                        on_device,
                        (max, false),
                        &cfg,
                        &mut report,
                        &mut DeviceEvents::new(events, device),
                    )?);
                    last_round = round_started.elapsed();
                }
                if control.stop_requested() {
                    report.run.stopped_early = Some(super::STOPPED_ON_REQUEST.into());
                }
                report.sustained = sustained(&rounds, started.elapsed());
            }
            Ok(())
        })();
        if let Err(e) = result {
            report.run.device_error = Some(record_device_error(events, device, &e));
        }
        judge_link(&mut report);
        report.run.wall_s = run_started.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// The sustained phase's summary (None when no round ran).
fn sustained(rounds: &[SizeResult], took: Duration) -> Option<Sustained> {
    let median = |rate: fn(&SizeResult) -> f64| {
        let mut v: Vec<f64> = rounds.iter().map(rate).collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    };
    Some(Sustained {
        seconds: took.as_secs_f64(),
        rounds: rounds.len() as u32,
        h2d_gbps: median(|r| r.h2d_gbps)?,
        d2h_gbps: median(|r| r.d2h_gbps)?,
        min_h2d_gbps: rounds
            .iter()
            .map(|r| r.h2d_gbps)
            .fold(f64::INFINITY, f64::min),
    })
}

/// Runs `work` while a thread reads the link with `read` every few milliseconds; returns
/// the work's result and every reading taken while it ran (at least one).
pub fn sample_during<T>(
    read: impl Fn() -> crate::telemetry::record::Readings + Sync,
    work: impl FnOnce() -> T,
) -> (T, Vec<crate::telemetry::record::Readings>) {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = AtomicBool::new(false);
    let (out, mut samples) = std::thread::scope(|s| {
        let sampler = s.spawn(|| {
            let mut taken = Vec::new();
            while !done.load(Ordering::Relaxed) {
                taken.push(read());
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            taken
        });
        let out = work();
        done.store(true, Ordering::Relaxed);
        (out, sampler.join().unwrap_or_default())
    });
    if samples.is_empty() {
        samples.push(read());
    }
    (out, samples)
}

/// The upstream port's maximum link (generation, width): the bridge the card hangs from,
/// whose `max_link_speed` is what the slot can do (REFERENCE.md, PCIe).
fn upstream_max(device_dir: &std::path::Path) -> (Option<u32>, Option<u32>) {
    let Some(bridge) = std::fs::canonicalize(device_dir)
        .ok()
        .and_then(|d| d.parent().map(std::path::Path::to_path_buf))
    else {
        return (None, None);
    };
    let r = sysfs::read_link(&bridge);
    let n = |k: &str| r.get(k).and_then(Reading::number).map(|v| v as u32);
    (
        n(signals::PCIE_GEN_MAX.name),
        n(signals::PCIE_WIDTH_MAX.name),
    )
}

/// The link while the largest transfers ran: the highest generation and width sampled,
/// against the lower of the card's and the upstream port's maximum.
pub fn link_under_load(
    samples: &[crate::telemetry::record::Readings],
    upstream: (Option<u32>, Option<u32>),
) -> LinkUnderLoad {
    let highest = |k: &str| {
        samples
            .iter()
            .filter_map(|r| r.get(k).and_then(Reading::number))
            .map(|v| v as u32)
            .max()
    };
    let (generation, width) = (
        highest(signals::PCIE_GEN.name),
        highest(signals::PCIE_WIDTH.name),
    );
    let (card_gen, card_width) = (
        highest(signals::PCIE_GEN_MAX.name),
        highest(signals::PCIE_WIDTH_MAX.name),
    );
    let lower = |card: Option<u32>, port: Option<u32>| match (card, port) {
        (Some(c), Some(p)) => Some(c.min(p)),
        (c, p) => c.or(p),
    };
    let (gen_max, width_max) = (lower(card_gen, upstream.0), lower(card_width, upstream.1));
    LinkUnderLoad {
        generation,
        generation_max: gen_max,
        width,
        width_max,
        theoretical_gbps: generation
            .zip(width)
            .and_then(|(g, w)| theoretical_gbps(g, w)),
        card_max: (gen_max != card_gen || width_max != card_width)
            .then_some((card_gen, card_width)),
        samples: samples.len(),
    }
}

/// Records a link below its maximum under load (REFERENCE.md §4). Rates against the
/// link's theory are the verdict's to judge, with the site's thresholds.
fn judge_link(report: &mut PcieReport) {
    let Some(link) = &report.link else {
        return;
    };
    if let (Some(g), Some(gm)) = (link.generation, link.generation_max)
        && g < gm
    {
        report.findings.push(PcieFinding::new(
            PcieFindingKind::LinkDegraded,
            format_args!("generation {g} of {gm} under load"),
        ));
    }
    if let (Some(w), Some(wm)) = (link.width, link.width_max)
        && w < wm
    {
        report.findings.push(PcieFinding::new(
            PcieFindingKind::LinkDegraded,
            format_args!("width x{w} of x{wm} under load"),
        ));
    }
}

/// The device's checksum of what arrived: its pipeline, bound to the staging buffers.
#[derive(Clone, Copy)]
struct Checksum {
    pipeline: crate::gpu::Pipeline,
    binding: crate::gpu::Binding,
}

/// Transfers of `size` bytes each way and both at once, verified; `largest` for the
/// largest size, the one a planted fault corrupts.
fn one_size(
    ctx: &mut DeviceContext,
    st: &mut Staging,
    on_device: Checksum,
    (size, largest): (u64, bool),
    cfg: &PcieConfig,
    report: &mut PcieReport,
    events: &mut DeviceEvents,
) -> GpuResult<SizeResult> {
    let not_mapped = || GpuError::Unsupported("a staging buffer is not mapped".into());
    let gbps = |bytes: u64, ns: u64| bytes as f64 / ns.max(1) as f64;
    let (mut best_h2d, mut best_d2h, mut best_bidir) = (u64::MAX, u64::MAX, u64::MAX);
    // What was sent stays in host memory: reading it back from the staging buffer would
    // read write-combined or BAR memory, slowly, and trust what the device may touch.
    let mut expected = vec![0u8; size as usize];
    for rep in 0..cfg.repeats.max(1) {
        let seed = size ^ (u64::from(rep) << 40) ^ 0x6B69_6C6E;
        fill(&mut expected, seed);
        st.up.bytes_mut().ok_or_else(not_mapped)?[..size as usize].copy_from_slice(&expected);
        let mut rec = ctx.record(format!("pcie upload of {size} bytes"))?;
        rec.copy(&st.up, 0, &st.dev, 0, size);
        best_h2d = best_h2d.min(rec.submit_and_wait()?.best_ns());
        let inject = cfg.inject_offset.filter(|_| largest && rep == 0);
        if let Some(offset) = inject {
            // Corrupt one byte on the device, as a faulty link would have.
            let word_at = offset & !3;
            let mut word = [0u8; 4];
            word.copy_from_slice(&expected[word_at as usize..word_at as usize + 4]);
            word[(offset - word_at) as usize] ^= 0x5A;
            let mut rec = ctx.record("planting a corrupted byte")?;
            rec.fill(&st.dev, word_at, 4, u32::from_le_bytes(word));
            rec.submit_and_wait()?;
        }
        // The device's own checksum says whether the data arrived intact.
        let words = (size / 4) as u32;
        let per_inv = 256u32;
        let mut rec = ctx.record(format!("pcie checksum of {size} bytes"))?;
        rec.fill(&st.sums, 0, 8, 0);
        rec.barrier();
        rec.dispatch(
            on_device.pipeline,
            on_device.binding,
            &[words, per_inv],
            words.div_ceil(per_inv).div_ceil(64),
        );
        rec.barrier();
        rec.copy(&st.sums, 0, &st.sums_out, 0, 8);
        rec.submit_and_wait()?;
        let device_sum = {
            let s = st.sums_out.words().ok_or_else(not_mapped)?;
            (s[0], s[1])
        };
        let host_sum = checksum(&expected);
        let mut rec = ctx.record(format!("pcie readback of {size} bytes"))?;
        rec.copy(&st.dev, 0, &st.down, 0, size);
        best_d2h = best_d2h.min(rec.submit_and_wait()?.best_ns());
        let up = &expected[..];
        let down = &st.down.bytes().ok_or_else(not_mapped)?[..size as usize];
        report.transfers_verified += 2;
        if device_sum != host_sum || up != down {
            let first = up.iter().zip(down).position(|(a, b)| a != b);
            let differing = up.iter().zip(down).filter(|(a, b)| a != b).count() as u64;
            let c = Corruption {
                direction: if device_sum != host_sum { "h2d" } else { "d2h" }.into(),
                bytes: size,
                offset: first.unwrap_or(0) as u64,
                differing_bytes: differing,
                expected: first.map_or(0, |i| up[i]),
                actual: first.map_or(0, |i| down[i]),
            };
            events.emit(Event::Note {
                message: format!(
                    "pcie corruption ({}): {size}-byte transfer, first wrong byte at {} (sent 0x{:02x}, got 0x{:02x}), {differing} bytes differ",
                    c.direction, c.offset, c.expected, c.actual
                ),
            });
            report.corruption.push(c);
        }
        // Both directions at once: an upload into a second buffer beside a readback.
        let mut rec = ctx.record(format!("pcie two-way transfer of {size} bytes"))?;
        rec.copy(&st.up, 0, &st.dev2, 0, size);
        rec.copy(&st.dev, 0, &st.down, 0, size);
        best_bidir = best_bidir.min(rec.submit_and_wait()?.best_ns());
    }
    Ok(SizeResult {
        bytes: size,
        h2d_gbps: gbps(size, best_h2d),
        d2h_gbps: gbps(size, best_d2h),
        bidir_gbps: gbps(2 * size, best_bidir),
        h2d_latency_us: best_h2d as f64 / 1e3,
        d2h_latency_us: best_d2h as f64 / 1e3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn link_theory_matches_the_reference_table() {
        assert!((theoretical_gbps(3, 16).unwrap() - 15.75).abs() < 0.01);
        assert!((theoretical_gbps(4, 16).unwrap() - 31.5).abs() < 0.05);
        assert!((theoretical_gbps(5, 16).unwrap() - 63.0).abs() < 0.1);
        assert_eq!(theoretical_gbps(9, 16), None);
    }

    #[test]
    fn a_degraded_link_is_evidence() {
        let mut r = PcieReport {
            largest_bytes: 0,
            upload_memory: vec![],
            readback_memory: vec![],
            staging_in_host_memory: true,
            sizes: vec![],
            peak_h2d_gbps: 10.0,
            peak_d2h_gbps: 12.0,
            peak_bidir_gbps: 20.0,
            transfers_verified: 2,
            corruption: vec![],
            link: Some(LinkUnderLoad {
                generation: Some(4),
                generation_max: Some(5),
                width: Some(16),
                width_max: Some(16),
                theoretical_gbps: theoretical_gbps(4, 16),
                card_max: None,
                samples: 4,
            }),
            sustained: None,
            findings: vec![],
            run: Envelope::default(),
        };
        judge_link(&mut r);
        assert!(r.findings.iter().any(|f| {
            f.message
                .starts_with("pcie_link_degraded: generation 4 of 5")
        }));
        assert_eq!(r.findings.len(), 1, "the rates are the verdict's to judge");
    }

    #[test]
    fn findings_of_older_runs_read_back_from_their_sentences() {
        // Before findings were typed, the evidence carried each one as its sentence alone;
        // only a degraded link was ever judged.
        let old = serde_json::json!([
            "pcie_link_degraded: width x8 of x16 under load",
            "pcie_bandwidth_low: H2D 3.1 GB/s is 20% of the link's 15.8 GB/s",
        ]);
        let findings: Vec<PcieFinding> = serde_json::from_value(old.clone()).unwrap();
        let kinds: Vec<PcieFindingKind> = findings.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [PcieFindingKind::LinkDegraded, PcieFindingKind::Other]
        );
        assert_eq!(
            serde_json::to_value(&findings).unwrap(),
            old,
            "written as read"
        );
    }

    /// A sysfs PCI tree where the card (`0000:05:00.0`) hangs from a bridge
    /// (`0000:00:01.0`) through the real layout: `bus/pci/devices/<bdf>` links into
    /// `devices/pci0000:00/<bridge>/<card>`.
    fn tree(card: &[(&str, &str)], bridge: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
        let root = tempfile::tempdir().unwrap();
        let bridge_dir = root.path().join("sys/devices/pci0000:00/0000:00:01.0");
        let card_dir = bridge_dir.join("0000:05:00.0");
        std::fs::create_dir_all(&card_dir).unwrap();
        for (f, t) in card {
            std::fs::write(card_dir.join(f), t).unwrap();
        }
        for (f, t) in bridge {
            std::fs::write(bridge_dir.join(f), t).unwrap();
        }
        let devices = root.path().join("sys/bus/pci/devices");
        std::fs::create_dir_all(&devices).unwrap();
        let link = devices.join("0000:05:00.0");
        std::os::unix::fs::symlink(&card_dir, &link).unwrap();
        (root, link)
    }

    #[test]
    fn the_link_is_read_from_sysfs_against_the_slot() {
        let gen5_card = [
            ("current_link_speed", "16.0 GT/s PCIe"),
            ("max_link_speed", "32.0 GT/s PCIe"),
            ("current_link_width", "16"),
            ("max_link_width", "16"),
        ];
        // A Gen5 card in a Gen4 slot running at Gen4: the slot's best, not degraded.
        let gen4_slot = [
            ("max_link_speed", "16.0 GT/s PCIe"),
            ("max_link_width", "16"),
        ];
        let (_root, dir) = tree(&gen5_card, &gen4_slot);
        let link = link_under_load(&[sysfs::read_link(&dir)], upstream_max(&dir));
        assert_eq!(
            (
                link.generation,
                link.generation_max,
                link.width,
                link.width_max
            ),
            (Some(4), Some(4), Some(16), Some(16))
        );
        assert_eq!(link.card_max, Some((Some(5), Some(16))));
        let mut r = PcieReport {
            largest_bytes: 0,
            upload_memory: vec![],
            readback_memory: vec![],
            staging_in_host_memory: true,
            sizes: vec![],
            peak_h2d_gbps: 20.0,
            peak_d2h_gbps: 25.0,
            peak_bidir_gbps: 40.0,
            transfers_verified: 2,
            corruption: vec![],
            link: Some(link),
            sustained: None,
            findings: vec![],
            run: Envelope::default(),
        };
        judge_link(&mut r);
        assert!(r.findings.is_empty(), "{:?}", r.findings);
        // The same card in a Gen5 slot, trained to Gen4 under load: degraded.
        let gen5_slot = [
            ("max_link_speed", "32.0 GT/s PCIe"),
            ("max_link_width", "16"),
        ];
        let (_root, dir) = tree(&gen5_card, &gen5_slot);
        let link = link_under_load(&[sysfs::read_link(&dir)], upstream_max(&dir));
        assert_eq!((link.generation, link.generation_max), (Some(4), Some(5)));
        assert!((link.theoretical_gbps.unwrap() - 31.5).abs() < 0.05);
    }

    #[test]
    fn the_link_is_sampled_while_the_transfers_run() {
        use std::sync::atomic::{AtomicBool, Ordering};
        // A link that trains to Gen5 only while the transfer runs and drops to Gen1 the
        // moment it ends, as real links do at idle.
        let busy = AtomicBool::new(false);
        let read = || {
            let generation = if busy.load(Ordering::Relaxed) {
                5.0
            } else {
                1.0
            };
            let mut r = crate::telemetry::record::Readings::new();
            r.insert("pcie_gen".into(), Reading::Number(generation));
            r.insert("pcie_gen_max".into(), Reading::Number(5.0));
            r.insert("pcie_width".into(), Reading::Number(16.0));
            r.insert("pcie_width_max".into(), Reading::Number(16.0));
            r
        };
        let (out, samples) = sample_during(read, || {
            busy.store(true, Ordering::Relaxed);
            std::thread::sleep(std::time::Duration::from_millis(60));
            busy.store(false, Ordering::Relaxed);
            7
        });
        assert_eq!(out, 7);
        assert!(samples.len() >= 3, "{} samples", samples.len());
        let link = link_under_load(&samples, (None, None));
        assert_eq!(
            link.generation,
            Some(5),
            "read during the load, not after it"
        );
        // Read after the transfer, as before, the link looks degraded.
        let after = link_under_load(&[read()], (None, None));
        assert_eq!(after.generation, Some(1));
    }

    #[test]
    fn the_host_checksum_changes_with_any_byte() {
        let mut data = vec![0u8; 4096];
        fill(&mut data, 7);
        let a = checksum(&data);
        data[1234] ^= 1;
        assert_ne!(checksum(&data), a);
    }
}
