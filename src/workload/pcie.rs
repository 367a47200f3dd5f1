//! The PCIe probe: host-to-device, device-to-host and both at once through host-visible
//! staging buffers, from 4 KiB to 256 MiB, every transfer verified (a device-side
//! checksum after upload, a byte comparison after the round trip), with bandwidth and
//! latency curves and the link's generation and width read while it is loaded.

use serde::{Deserialize, Serialize};

use super::{
    Report, RunControl, Workload, WorkloadError, WorkloadOutcome, WorkloadStatus,
    record_device_error,
};
use crate::evidence::{Event, EventSink};
use crate::gpu::{BufferKind, DeviceContext, GpuBuffer, GpuError, GpuResult, Shader};
use crate::telemetry::record::Reading;
use crate::telemetry::sysfs;

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
            min_bytes: 4 << 10,
            max_bytes: 256 << 20,
            repeats: 3,
            inject_offset: None,
            sysfs_root: "/".into(),
        }
    }
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
    /// Current generation.
    pub generation: Option<u32>,
    /// Maximum generation.
    pub generation_max: Option<u32>,
    /// Current width.
    pub width: Option<u32>,
    /// Maximum width.
    pub width_max: Option<u32>,
    /// Theoretical bandwidth per direction of the current link, GB/s.
    pub theoretical_gbps: Option<f64>,
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
    /// Evidence for the verdict: `pcie_link_degraded`.
    pub findings: Vec<String>,
    /// Why it stopped early, if it did.
    pub stopped_early: Option<String>,
    /// The device failure that ended it, if any.
    pub device_error: Option<String>,
}

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
    /// Failed on corruption; incomplete when cut short; else passed (bandwidth findings
    /// are evidence for the verdict, not failures of the card by themselves).
    fn status(&self) -> WorkloadStatus {
        WorkloadStatus::from_evidence(
            (!self.corruption.is_empty()).then_some(WorkloadStatus::Failed),
            !self.sizes.is_empty(),
            self.device_error.is_some() || self.stopped_early.is_some(),
        )
    }

    /// One sentence for people.
    fn headline(&self) -> String {
        let rates = format!(
            "H2D {:.1} GB/s, D2H {:.1} GB/s, both {:.1} GB/s",
            self.peak_h2d_gbps, self.peak_d2h_gbps, self.peak_bidir_gbps
        );
        match self.status() {
            WorkloadStatus::Failed => {
                format!("{} corrupted transfers ({rates})", self.corruption.len())
            }
            WorkloadStatus::NotRun => format!(
                "nothing ran: {}",
                self.device_error.as_deref().unwrap_or("no size completed")
            ),
            _ if !self.findings.is_empty() => format!("{rates}; {}", self.findings.join("; ")),
            _ => format!("{} transfers verified, {rates}", self.transfers_verified),
        }
    }
}

/// The probe as a workload.
pub struct PcieTest {
    /// Its settings.
    pub config: PcieConfig,
}

impl Workload for PcieTest {
    fn name(&self) -> &'static str {
        "pcie"
    }

    fn run(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<WorkloadOutcome, WorkloadError> {
        Ok(self.run_report(ctx, control, events)?.outcome(self.name()))
    }
}

struct Staging {
    up: GpuBuffer,
    down: GpuBuffer,
    dev: GpuBuffer,
    dev2: GpuBuffer,
    sums: GpuBuffer,
}

fn fill(bytes: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for chunk in bytes.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        chunk.copy_from_slice(&b[..chunk.len()]);
    }
}

/// The host side of the device checksum.
pub fn checksum(bytes: &[u8]) -> (u32, u32) {
    let mut sum = 0u32;
    let mut mixed = 0u32;
    for (i, w) in bytes.chunks_exact(4).enumerate() {
        let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let i = i as u32;
        sum = sum.wrapping_add(v.wrapping_mul(i.wrapping_mul(2).wrapping_add(1)));
        mixed ^= v.wrapping_add(i);
    }
    (sum, mixed)
}

impl PcieTest {
    /// Runs the probe and returns its typed report.
    pub fn run_report(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<PcieReport, WorkloadError> {
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
            sums: ctx.buffer(BufferKind::Readback, 64, "kiln pcie checksums")?,
        };
        let binding = ctx.bind([&mut st.dev, &mut st.sums, &mut st.down])?;
        let checksum_pipeline = ctx.pipeline(Shader::PcieChecksum, &[])?;
        events.emit(
            device,
            Event::WorkloadStart {
                workload: "pcie".into(),
                settings: serde_json::json!({ "config": &cfg }),
            },
        );
        let mut report = PcieReport {
            largest_bytes: max,
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
            findings: Vec::new(),
            stopped_early: None,
            device_error: None,
        };
        let mut size = cfg.min_bytes;
        let result: GpuResult<()> = (|| {
            while size <= max {
                if control.stop_requested() {
                    report.stopped_early = Some(super::STOPPED_ON_REQUEST.into());
                    break;
                }
                if control.out_of_time() && !report.sizes.is_empty() {
                    report.stopped_early =
                        Some(format!("time budget spent before {size}-byte transfers"));
                    break;
                }
                let largest = size.saturating_mul(4) > max;
                let r = one_size(
                    ctx,
                    &mut st,
                    binding,
                    checksum_pipeline,
                    size,
                    &cfg,
                    largest,
                    &mut report,
                    events,
                    device,
                )?;
                if largest && let Some(pci) = &pci {
                    report.link = Some(read_link_under_load(&cfg.sysfs_root, pci));
                }
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
            Ok(())
        })();
        if let Err(e) = result {
            report.device_error = Some(record_device_error(events, device, &e));
        }
        judge_link(&mut report);
        Ok(report)
    }
}

fn read_link_under_load(root: &std::path::Path, pci: &str) -> LinkUnderLoad {
    let r = sysfs::read_link(&root.join("sys/bus/pci/devices").join(pci));
    let n = |k: &str| r.get(k).and_then(Reading::number).map(|v| v as u32);
    let (generation, width) = (n("pcie_gen"), n("pcie_width"));
    LinkUnderLoad {
        generation,
        generation_max: n("pcie_gen_max"),
        width,
        width_max: n("pcie_width_max"),
        theoretical_gbps: generation
            .zip(width)
            .and_then(|(g, w)| theoretical_gbps(g, w)),
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
        report.findings.push(format!(
            "pcie_link_degraded: generation {g} of {gm} under load"
        ));
    }
    if let (Some(w), Some(wm)) = (link.width, link.width_max)
        && w < wm
    {
        report.findings.push(format!(
            "pcie_link_degraded: width x{w} of x{wm} under load"
        ));
    }
}

#[allow(clippy::too_many_arguments)]
fn one_size(
    ctx: &mut DeviceContext,
    st: &mut Staging,
    binding: crate::gpu::Binding,
    checksum_pipeline: crate::gpu::Pipeline,
    size: u64,
    cfg: &PcieConfig,
    largest: bool,
    report: &mut PcieReport,
    events: &mut dyn EventSink,
    device: Option<usize>,
) -> GpuResult<SizeResult> {
    let not_mapped = || GpuError::Unsupported("a staging buffer is not mapped".into());
    let gbps = |bytes: u64, ns: u64| bytes as f64 / ns.max(1) as f64;
    let (mut best_h2d, mut best_d2h, mut best_bidir) = (u64::MAX, u64::MAX, u64::MAX);
    for rep in 0..cfg.repeats.max(1) {
        let seed = size ^ (u64::from(rep) << 40) ^ 0x6B69_6C6E;
        fill(
            &mut st.up.bytes_mut().ok_or_else(not_mapped)?[..size as usize],
            seed,
        );
        let mut rec = ctx.record(format!("pcie upload of {size} bytes"))?;
        rec.copy(&st.up, 0, &st.dev, 0, size);
        best_h2d = best_h2d.min(rec.submit_and_wait()?.best_ns());
        let inject = cfg.inject_offset.filter(|_| largest && rep == 0);
        if let Some(offset) = inject {
            // Corrupt one byte on the device, as a faulty link would have.
            let word_at = offset & !3;
            let up = st.up.bytes().ok_or_else(not_mapped)?;
            let mut word = [0u8; 4];
            word.copy_from_slice(&up[word_at as usize..word_at as usize + 4]);
            word[(offset - word_at) as usize] ^= 0x5A;
            let mut rec = ctx.record("planting a corrupted byte")?;
            rec.fill(&st.dev, word_at, 4, u32::from_le_bytes(word));
            rec.submit_and_wait()?;
        }
        // The device's own checksum says whether the data arrived intact.
        st.sums.words_mut().ok_or_else(not_mapped)?[..2].fill(0);
        let words = (size / 4) as u32;
        let per_inv = 256u32;
        let mut rec = ctx.record(format!("pcie checksum of {size} bytes"))?;
        rec.dispatch(
            checksum_pipeline,
            binding,
            &[words, per_inv],
            words.div_ceil(per_inv).div_ceil(64),
        );
        rec.submit_and_wait()?;
        let device_sum = {
            let s = st.sums.words().ok_or_else(not_mapped)?;
            (s[0], s[1])
        };
        let host_sum = checksum(&st.up.bytes().ok_or_else(not_mapped)?[..size as usize]);
        let mut rec = ctx.record(format!("pcie readback of {size} bytes"))?;
        rec.copy(&st.dev, 0, &st.down, 0, size);
        best_d2h = best_d2h.min(rec.submit_and_wait()?.best_ns());
        let up = &st.up.bytes().ok_or_else(not_mapped)?[..size as usize];
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
            events.emit(
                device,
                Event::Note {
                    message: format!(
                        "pcie corruption ({}): {size}-byte transfer, first wrong byte at {} (sent 0x{:02x}, got 0x{:02x}), {differing} bytes differ",
                        c.direction, c.offset, c.expected, c.actual
                    ),
                },
            );
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
            }),
            findings: vec![],
            stopped_early: None,
            device_error: None,
        };
        judge_link(&mut r);
        assert!(
            r.findings
                .iter()
                .any(|f| f.starts_with("pcie_link_degraded: generation 4 of 5"))
        );
        assert_eq!(r.findings.len(), 1, "the rates are the verdict's to judge");
    }

    #[test]
    fn the_link_is_read_from_sysfs() {
        let root = tempfile::tempdir().unwrap();
        let dev = root.path().join("sys/bus/pci/devices/0000:05:00.0");
        std::fs::create_dir_all(&dev).unwrap();
        for (f, t) in [
            ("current_link_speed", "8.0 GT/s PCIe"),
            ("max_link_speed", "32.0 GT/s PCIe"),
            ("current_link_width", "8"),
            ("max_link_width", "16"),
        ] {
            std::fs::write(dev.join(f), t).unwrap();
        }
        let link = read_link_under_load(root.path(), "0000:05:00.0");
        assert_eq!(
            (
                link.generation,
                link.generation_max,
                link.width,
                link.width_max
            ),
            (Some(3), Some(5), Some(8), Some(16))
        );
        assert!((link.theoretical_gbps.unwrap() - 7.88).abs() < 0.01);
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
