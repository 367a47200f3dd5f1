//! The probe on the device: its staging buffers, each size each way and both at once,
//! verified, then the largest until the budget is spent.

use super::*;

/// Checksums a transferred buffer on the device.
const CHECKSUM: ShaderCode = embedded_shader!("pcie_checksum");

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
                    report.run.stopped_early = Some(crate::workload::STOPPED_ON_REQUEST.into());
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
                    report.run.stopped_early = Some(crate::workload::STOPPED_ON_REQUEST.into());
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

    #[test]
    fn the_host_checksum_changes_with_any_byte() {
        let mut data = vec![0u8; 4096];
        fill(&mut data, 7);
        let a = checksum(&data);
        data[1234] ^= 1;
        assert_ne!(checksum(&data), a);
    }
}
