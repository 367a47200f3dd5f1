//! Any vendor's PCIe link from sysfs: its speed and width, the maxima of the port above
//! it (the slot, or a switch's port), and its AER counters.

use std::path::Path;

use super::read;
use crate::telemetry::record::{Reading, Readings};
use crate::telemetry::signals;

/// `16.0 GT/s PCIe`, `8.0 GT/s`, `2.5 GT/s` -> GT/s; `Unknown` -> None.
pub fn parse_link_speed(text: &str) -> Option<f64> {
    let t = text.trim();
    let number = t.split_whitespace().next()?;
    if !t.contains("GT/s") {
        return None;
    }
    number.parse().ok()
}

/// The PCIe generation for a per-lane speed in GT/s.
pub fn generation(gts: f64) -> Option<u32> {
    [
        (2.5, 1),
        (5.0, 2),
        (8.0, 3),
        (16.0, 4),
        (32.0, 5),
        (64.0, 6),
    ]
    .iter()
    .find(|(speed, _)| (gts - speed).abs() < 0.01)
    .map(|(_, g)| *g)
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

/// `16` -> 16; `Unknown` or garbage -> None.
pub fn parse_width(text: &str) -> Option<u32> {
    text.trim().parse().ok()
}

/// The total of an AER counter file: its `TOTAL_ERR_*` line, else the sum of its lines.
pub fn parse_aer(text: &str) -> Option<u64> {
    let mut sum = 0u64;
    let mut seen = false;
    for line in text.lines() {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(value)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Ok(value) = value.parse::<u64>() else {
            continue;
        };
        if name.starts_with("TOTAL_ERR") {
            return Some(value);
        }
        sum += value;
        seen = true;
    }
    seen.then_some(sum)
}

/// PCIe link state of one device directory, and the maxima of the port above it (the slot,
/// or a switch's port) where sysfs has them: a card can only be as fast as its slot, and
/// which of the two limits the link is a different answer.
pub fn read_link(device_dir: &Path) -> Readings {
    let mut out = Readings::new();
    // The device's directory lies under its upstream port's in the device tree.
    let port = std::fs::canonicalize(device_dir)
        .ok()
        .and_then(|d| d.parent().map(Path::to_path_buf))
        .filter(|p| p.join("max_link_speed").is_file());
    if let Some(port) = port {
        let slot_speed = read(&port.join("max_link_speed")).and_then(|t| parse_link_speed(&t));
        if let Some(g) = slot_speed.and_then(generation) {
            out.insert(
                signals::PCIE_SLOT_GEN_MAX.name.into(),
                Reading::Number(f64::from(g)),
            );
        }
        if let Some(w) = read(&port.join("max_link_width")).and_then(|t| parse_width(&t)) {
            out.insert(
                signals::PCIE_SLOT_WIDTH_MAX.name.into(),
                Reading::Number(f64::from(w)),
            );
        }
    }
    let speed = |file: &str| read(&device_dir.join(file)).and_then(|t| parse_link_speed(&t));
    let width = |file: &str| read(&device_dir.join(file)).and_then(|t| parse_width(&t));
    for (key, gen_key, value) in [
        (
            signals::PCIE_SPEED_GTS,
            signals::PCIE_GEN,
            speed("current_link_speed"),
        ),
        (
            signals::PCIE_SPEED_MAX_GTS,
            signals::PCIE_GEN_MAX,
            speed("max_link_speed"),
        ),
    ] {
        out.insert(
            key.name.into(),
            value.map_or_else(Reading::not_supported, Reading::Number),
        );
        let generation = value.and_then(generation);
        out.insert(
            gen_key.name.into(),
            generation.map_or_else(Reading::not_supported, |g| Reading::Number(f64::from(g))),
        );
    }
    for (key, value) in [
        (signals::PCIE_WIDTH.name, width("current_link_width")),
        (signals::PCIE_WIDTH_MAX.name, width("max_link_width")),
    ] {
        out.insert(
            key.into(),
            value.map_or_else(Reading::not_supported, |w| Reading::Number(f64::from(w))),
        );
    }
    out
}

/// AER counters of one device directory (absent files: not supported), and the corrected
/// errors of the port above it: the link has two ends, and the errors the port corrects
/// are the half of its story the device's own counters never see.
pub fn read_aer(device_dir: &Path) -> Readings {
    let port = std::fs::canonicalize(device_dir)
        .ok()
        .and_then(|d| d.parent().map(Path::to_path_buf));
    [
        (
            signals::AER_CORRECTABLE.name,
            Some(device_dir.to_path_buf()),
            "aer_dev_correctable",
        ),
        (
            signals::AER_NONFATAL.name,
            Some(device_dir.to_path_buf()),
            "aer_dev_nonfatal",
        ),
        (
            signals::AER_FATAL.name,
            Some(device_dir.to_path_buf()),
            "aer_dev_fatal",
        ),
        (
            signals::AER_PORT_CORRECTABLE.name,
            port,
            "aer_dev_correctable",
        ),
    ]
    .into_iter()
    .map(|(key, dir, file)| {
        let value = dir
            .and_then(|d| read(&d.join(file)))
            .and_then(|t| parse_aer(&t));
        (
            key.to_owned(),
            value.map_or_else(Reading::not_supported, |v| Reading::Number(v as f64)),
        )
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::sysfs::tests::fake_tree;

    #[test]
    fn link_speeds_and_widths_parse() {
        assert_eq!(parse_link_speed("16.0 GT/s PCIe\n"), Some(16.0));
        assert_eq!(parse_link_speed("8.0 GT/s"), Some(8.0));
        assert_eq!(parse_link_speed("2.5 GT/s PCIe"), Some(2.5));
        assert_eq!(parse_link_speed("Unknown"), None);
        assert_eq!(parse_link_speed("Unknown speed"), None);
        assert_eq!(generation(16.0), Some(4));
        assert_eq!(generation(32.0), Some(5));
        assert_eq!(generation(3.0), None);
        assert_eq!(parse_width("16\n"), Some(16));
        assert_eq!(parse_width("Unknown"), None);
    }

    #[test]
    fn aer_counters_parse() {
        assert_eq!(parse_aer("RxErr 1\nBadTLP 2\nTOTAL_ERR_COR 3\n"), Some(3));
        assert_eq!(parse_aer("Undefined 0\nDLP 4\n"), Some(4));
        assert_eq!(parse_aer(""), None);
    }

    #[test]
    fn the_slot_s_maxima_are_read_apart_from_the_card_s() {
        // A Gen5 x16 card below a Gen4 x16 root port, as the device tree nests them.
        let root = tempfile::tempdir().unwrap();
        let port = root.path().join("sys/devices/pci0000:00/0000:00:01.0");
        let card = port.join("0000:01:00.0");
        std::fs::create_dir_all(&card).unwrap();
        for (dir, speed, width) in [
            (&port, "16.0 GT/s PCIe\n", "16\n"),
            (&card, "32.0 GT/s PCIe\n", "16\n"),
        ] {
            std::fs::write(dir.join("max_link_speed"), speed).unwrap();
            std::fs::write(dir.join("max_link_width"), width).unwrap();
        }
        std::fs::write(card.join("current_link_speed"), "16.0 GT/s PCIe\n").unwrap();
        std::fs::write(card.join("current_link_width"), "16\n").unwrap();
        let bus = root.path().join("sys/bus/pci/devices");
        std::fs::create_dir_all(&bus).unwrap();
        std::os::unix::fs::symlink(&card, bus.join("0000:01:00.0")).unwrap();
        let link = read_link(&bus.join("0000:01:00.0"));
        let n = |k: &str| link.get(k).and_then(Reading::number);
        assert_eq!(n(signals::PCIE_GEN_MAX.name), Some(5.0));
        assert_eq!(n(signals::PCIE_SLOT_GEN_MAX.name), Some(4.0));
        assert_eq!(n(signals::PCIE_SLOT_WIDTH_MAX.name), Some(16.0));
        assert_eq!(n(signals::PCIE_GEN.name), Some(4.0));
        // The port's corrected AER errors are read beside the card's own.
        std::fs::write(
            port.join("aer_dev_correctable"),
            "RxErr 4000\nTOTAL_ERR_COR 4200\n",
        )
        .unwrap();
        std::fs::write(card.join("aer_dev_correctable"), "TOTAL_ERR_COR 3\n").unwrap();
        let aer = read_aer(&bus.join("0000:01:00.0"));
        let n = |k: &str| aer.get(k).and_then(Reading::number);
        assert_eq!(n(signals::AER_PORT_CORRECTABLE.name), Some(4200.0));
        assert_eq!(n(signals::AER_CORRECTABLE.name), Some(3.0));
        // A device with no port above it in the tree says nothing of a slot.
        let flat = read_link(&fake_tree().path().join("sys/bus/pci/devices/0000:05:00.0"));
        assert!(!flat.contains_key(signals::PCIE_SLOT_GEN_MAX.name));
    }
}
