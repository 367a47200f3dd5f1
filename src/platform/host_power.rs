//! The host's own power draw where the OS shows it: Linux's powercap (RAPL) energy
//! counters of each CPU package. Windows shows no such counter to a user process, and
//! says so.

use std::path::{Path, PathBuf};

/// Where Linux keeps the powercap zones.
pub const POWERCAP: &str = "/sys/class/powercap";

/// The host's energy counters: each CPU package's, read together.
#[derive(Debug, Clone)]
pub struct HostEnergy {
    zones: Vec<Zone>,
}

#[derive(Debug, Clone)]
struct Zone {
    energy: PathBuf,
    /// Where the counter wraps, µJ.
    max_uj: u64,
}

/// The counters' total at one moment, µJ per zone.
#[derive(Debug, Clone)]
pub struct EnergyReading {
    at: std::time::Instant,
    uj: Vec<u64>,
}

impl HostEnergy {
    /// The package zones under `root` (`intel-rapl:0`, `intel-rapl:1`: the top level of
    /// each package, not its subzones), or why none can be read: one sentence.
    pub fn open(root: &Path) -> Result<HostEnergy, String> {
        if !cfg!(target_os = "linux") {
            return Err("the OS shows no host energy counter to kiln".into());
        }
        let entries = std::fs::read_dir(root)
            .map_err(|e| format!("no powercap zones ({})", crate::text::io_error(root, &e)))?;
        let mut names: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            // A package zone has one colon (`intel-rapl:0`); its subzones two.
            .filter(|n| n.contains("rapl:") && n.matches(':').count() == 1)
            .collect();
        names.sort();
        if names.is_empty() {
            return Err(format!(
                "no RAPL package zone in {} (the CPU or the kernel does not show its power)",
                root.display()
            ));
        }
        let mut zones = Vec::new();
        for name in names {
            let dir = root.join(&name);
            let energy = dir.join("energy_uj");
            let read = std::fs::read_to_string(&energy);
            match read {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                    return Err(format!(
                        "{} is readable by root only (run kiln as root to record the host's power)",
                        energy.display()
                    ));
                }
                Err(e) => return Err(crate::text::io_error(&energy, &e)),
            }
            let max_uj = std::fs::read_to_string(dir.join("max_energy_range_uj"))
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or(u64::MAX);
            zones.push(Zone { energy, max_uj });
        }
        Ok(HostEnergy { zones })
    }

    /// How many packages it reads.
    pub fn packages(&self) -> usize {
        self.zones.len()
    }

    /// The counters now; None when one cannot be read.
    pub fn read(&self) -> Option<EnergyReading> {
        let uj = self
            .zones
            .iter()
            .map(|z| std::fs::read_to_string(&z.energy).ok()?.trim().parse().ok())
            .collect::<Option<Vec<u64>>>()?;
        Some(EnergyReading {
            at: std::time::Instant::now(),
            uj,
        })
    }

    /// The mean watts between two readings, every package together (a counter that
    /// wrapped counts from its maximum).
    pub fn watts(&self, from: &EnergyReading, to: &EnergyReading) -> Option<f64> {
        let seconds = to.at.duration_since(from.at).as_secs_f64();
        if seconds <= 0.0 || from.uj.len() != to.uj.len() {
            return None;
        }
        let uj: u64 = self
            .zones
            .iter()
            .zip(from.uj.iter().zip(&to.uj))
            .map(|(z, (a, b))| {
                if b >= a {
                    b - a
                } else {
                    z.max_uj.saturating_sub(*a) + b
                }
            })
            .sum();
        Some(uj as f64 / 1e6 / seconds)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zone(root: &Path, name: &str, uj: u64) {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("energy_uj"), format!("{uj}\n")).unwrap();
        std::fs::write(dir.join("max_energy_range_uj"), "262143328850\n").unwrap();
    }

    #[test]
    fn two_packages_are_read_together_and_their_watts_summed() {
        if !cfg!(target_os = "linux") {
            return;
        }
        let root = tempfile::tempdir().unwrap();
        zone(root.path(), "intel-rapl:0", 1_000_000);
        zone(root.path(), "intel-rapl:1", 262_143_000_000);
        // A subzone (the cores of package 0) is part of its package: not counted twice.
        zone(root.path(), "intel-rapl:0:0", 5);
        let host = HostEnergy::open(root.path()).unwrap();
        assert_eq!(host.packages(), 2);
        let from = host.read().unwrap();
        zone(root.path(), "intel-rapl:0", 101_000_000);
        // Package 1 wrapped: 328,850 µJ to the maximum, then 671,150 past zero.
        zone(root.path(), "intel-rapl:1", 671_150);
        let mut to = host.read().unwrap();
        to.at = from.at + std::time::Duration::from_secs(2);
        let w = host.watts(&from, &to).unwrap();
        assert!((w - 50.5).abs() < 1e-6, "{w}");
    }

    #[test]
    fn a_machine_without_rapl_says_so() {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(root.path().join("dtpm:0")).unwrap();
        let why = HostEnergy::open(root.path()).unwrap_err();
        assert!(
            why.contains("no RAPL package zone") || why.contains("no host energy counter"),
            "{why}"
        );
    }
}
