//! The link: its theory by generation and width, read from sysfs while the largest
//! transfers run, against what the card and the slot can do, and judged.

use super::*;

// The link's theory lives with the link's reading, below the workloads, so that the
// inventory can say what a narrow link costs without importing a workload.
pub use crate::telemetry::sysfs::{theoretical_gbps, transfer_rate_gts};

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
/// whose `max_link_speed` (its Link Capabilities, as Linux's sysfs gives them) is what the
/// slot can do.
pub(super) fn upstream_max(device_dir: &std::path::Path) -> (Option<u32>, Option<u32>) {
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

/// Records a link below its maximum under load (DCGM's PCIe plugin flags downtraining; links
/// drop their generation at idle by design). Rates against the
/// link's theory are the verdict's to judge, with the site's thresholds.
pub(super) fn judge_link(report: &mut PcieReport) {
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
}
