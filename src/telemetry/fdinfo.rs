//! Every process's GPU memory on amdgpu, xe and i915 cards, from DRM fdinfo (the kernel's
//! `drm-usage-stats`): each process's open DRM files under `/proc/PID/fd` that point at
//! `/dev/dri/`, their `/proc/PID/fdinfo/FD` read for the device (`drm-pdev`), the client
//! (`drm-client-id`: files that share one are counted once) and the memory resident in
//! VRAM (`drm-resident-vram*` and `drm-resident-local*`, else amdgpu's `drm-memory-vram`,
//! else `drm-total-vram*` / `drm-total-local*`). Written as `other_processes_now`, the
//! signal NVML gives on NVIDIA, so that `kiln watch` and the tenant rules read one signal
//! whichever vendor's card it is.
//!
//! Read under the machine's root (a fixture tree in tests), at most once a second: a
//! scan reads every process's file table.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::process::Process;
use super::reading::{Reading, Readings};
use super::record::TelemetryData;
use super::sysfs::Driver;
use super::{Gap, Source, signals};

/// The shortest time between two scans: a little under a second, so that a tick a second
/// after the last scan is never skipped for being a hair early.
const SCAN_EVERY: Duration = Duration::from_millis(900);

/// DRM fdinfo as a telemetry source.
pub struct FdinfoSource {
    root: PathBuf,
    /// (index, PCI address) of the devices bound to a driver that reports fdinfo memory.
    devices: Vec<(usize, String)>,
    last_scan: Option<Instant>,
}

impl FdinfoSource {
    /// Reads under `root` (`/` in a run) for the targets bound to amdgpu, xe or i915.
    pub fn for_targets(root: &Path, targets: &[super::Target]) -> FdinfoSource {
        let devices = targets
            .iter()
            .filter_map(|t| Some((t.index, t.pci_address.clone()?)))
            .filter(|(_, pci)| Driver::of(&root.join("sys/bus/pci/devices").join(pci)).is_some())
            .collect();
        FdinfoSource {
            root: root.to_owned(),
            devices,
            last_scan: None,
        }
    }

    fn proc(&self) -> PathBuf {
        self.root.join("proc")
    }
}

impl Source for FdinfoSource {
    fn name(&self) -> &'static str {
        "fdinfo"
    }

    fn status(&self) -> Vec<Gap> {
        if self.devices.is_empty() {
            return Vec::new();
        }
        // Another user's file table is closed to an ordinary user: their memory unseen.
        let init = self.proc().join("1").join("fd");
        if std::fs::read_dir(&init).is_err() && self.proc().join("1").exists() {
            return vec![Gap {
                device: None,
                message: "DRM fdinfo: other users' processes cannot be read (kiln is not root): their GPU memory is not seen".into(),
                missing: vec![signals::OTHER_PROCESSES_NOW.name.into()],
                cause: None,
            }];
        }
        Vec::new()
    }

    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        if self.devices.is_empty() || self.last_scan.is_some_and(|t| t.elapsed() < SCAN_EVERY) {
            return Vec::new();
        }
        self.last_scan = Some(Instant::now());
        let by_device = scan(&self.proc());
        self.devices
            .iter()
            .map(|(index, pci)| {
                let mut list: Vec<Process> = by_device
                    .get(pci.as_str())
                    .map(|procs| procs.values().cloned().collect())
                    .unwrap_or_default();
                list.retain(|p| !super::is_own_process(p.pid));
                let mut readings = Readings::new();
                readings.insert(
                    signals::OTHER_PROCESSES_NOW.name.into(),
                    Reading::Processes(list),
                );
                (Some(*index), TelemetryData::Sample { readings })
            })
            .collect()
    }
}

/// One DRM file's figures.
#[derive(Debug, Default, Clone, PartialEq)]
struct DrmFile {
    pdev: String,
    client: Option<u64>,
    /// Resident in VRAM (or local memory), where said.
    resident: Option<u64>,
    /// amdgpu's older key.
    memory_vram: Option<u64>,
    /// Allocated in VRAM, resident or not.
    total: Option<u64>,
}

impl DrmFile {
    fn vram_bytes(&self) -> u64 {
        self.resident
            .or(self.memory_vram)
            .or(self.total)
            .unwrap_or(0)
    }
}

/// A size as fdinfo writes it: `123456 KiB`, `12 MiB`, or bytes.
fn size(text: &str) -> Option<u64> {
    let mut words = text.split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    let scale = match words.next() {
        None => 1,
        Some("KiB") => 1 << 10,
        Some("MiB") => 1 << 20,
        Some("GiB") => 1 << 30,
        Some(_) => return None,
    };
    n.checked_mul(scale)
}

/// The figures of one fdinfo file, if it is a DRM file.
fn parse(text: &str) -> Option<DrmFile> {
    let mut f = DrmFile::default();
    let add = |slot: &mut Option<u64>, v: Option<u64>| {
        if let Some(v) = v {
            *slot = Some(slot.unwrap_or(0) + v);
        }
    };
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        match key {
            "drm-pdev" => f.pdev = value.to_ascii_lowercase(),
            "drm-client-id" => f.client = value.parse().ok(),
            "drm-memory-vram" => add(&mut f.memory_vram, size(value)),
            _ if is_region(key, "drm-resident-") => add(&mut f.resident, size(value)),
            _ if is_region(key, "drm-total-") => add(&mut f.total, size(value)),
            _ => {}
        }
    }
    (!f.pdev.is_empty()).then_some(f)
}

/// A key of a device-memory region: `vram`, `vram0`, `local0` (not `system`, `gtt`, `cpu`).
fn is_region(key: &str, prefix: &str) -> bool {
    key.strip_prefix(prefix).is_some_and(|region| {
        let name = region.trim_end_matches(|c: char| c.is_ascii_digit());
        name == "vram" || name == "local"
    })
}

/// Every process's VRAM per device (PCI address), each DRM client counted once.
fn scan(proc: &Path) -> BTreeMap<String, BTreeMap<u32, Process>> {
    let mut out: BTreeMap<String, BTreeMap<u32, Process>> = BTreeMap::new();
    let Ok(entries) = std::fs::read_dir(proc) else {
        return out;
    };
    for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
        let dir = proc.join(pid.to_string());
        let Ok(fds) = std::fs::read_dir(dir.join("fd")) else {
            continue;
        };
        let mut seen: BTreeSet<(String, u64)> = BTreeSet::new();
        for fd in fds.filter_map(|e| e.ok()) {
            // Only DRM files: a process's sockets and pipes are never read.
            let is_drm =
                std::fs::read_link(fd.path()).is_ok_and(|target| target.starts_with("/dev/dri/"));
            if !is_drm {
                continue;
            }
            let Some(file) = std::fs::read_to_string(dir.join("fdinfo").join(fd.file_name()))
                .ok()
                .as_deref()
                .and_then(parse)
            else {
                continue;
            };
            if let Some(client) = file.client
                && !seen.insert((file.pdev.clone(), client))
            {
                continue;
            }
            let entry = out
                .entry(file.pdev.clone())
                .or_default()
                .entry(pid)
                .or_insert_with(|| Process {
                    pid,
                    used_bytes: Some(0),
                    name: std::fs::read_to_string(dir.join("comm"))
                        .ok()
                        .map(|n| n.trim().to_owned())
                        .filter(|n| !n.is_empty()),
                });
            entry.used_bytes = Some(entry.used_bytes.unwrap_or(0) + file.vram_bytes());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_driver_s_keys_read_as_vram_in_bytes() {
        let amdgpu = "pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t12\ndrm-memory-vram:\t1048576 KiB\ndrm-memory-gtt:\t2048 KiB\n";
        let f = parse(amdgpu).unwrap();
        assert_eq!(
            (f.pdev.as_str(), f.client, f.vram_bytes()),
            ("0000:03:00.0", Some(12), 1 << 30)
        );
        let xe = "drm-driver:\txe\ndrm-pdev:\t0000:00:02.0\ndrm-client-id:\t7\ndrm-total-system0:\t512 KiB\ndrm-total-vram0:\t4 MiB\ndrm-resident-vram0:\t3 MiB\ndrm-total-vram1:\t1 MiB\ndrm-resident-vram1:\t1 MiB\n";
        assert_eq!(parse(xe).unwrap().vram_bytes(), 4 << 20);
        let i915 = "drm-driver:\ti915\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t3\ndrm-total-local0:\t64 MiB\ndrm-total-system0:\t8 MiB\n";
        assert_eq!(parse(i915).unwrap().vram_bytes(), 64 << 20);
        assert_eq!(parse("pos:\t0\nflags:\t0\n"), None, "not a DRM file");
        assert_eq!(size("12"), Some(12));
        assert_eq!(size("3 TiB"), None);
    }

    #[test]
    fn a_fixture_machine_s_processes_are_read_per_device_each_client_once() {
        let dir = tempfile::tempdir().unwrap();
        let proc = dir.path().join("proc");
        let lay = |pid: u32, comm: &str, files: &[(u32, &str, &str)]| {
            let p = proc.join(pid.to_string());
            std::fs::create_dir_all(p.join("fd")).unwrap();
            std::fs::create_dir_all(p.join("fdinfo")).unwrap();
            std::fs::write(p.join("comm"), format!("{comm}\n")).unwrap();
            for (fd, target, info) in files {
                std::os::unix::fs::symlink(target, p.join("fd").join(fd.to_string())).unwrap();
                std::fs::write(p.join("fdinfo").join(fd.to_string()), info).unwrap();
            }
        };
        let vram = |client: u32, mib: u32| {
            format!(
                "drm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\ndrm-client-id:\t{client}\ndrm-memory-vram:\t{} KiB\n",
                mib * 1024
            )
        };
        // Two files of one client (a dup) count once; a socket is never read.
        lay(
            4242,
            "python3",
            &[
                (3, "/dev/dri/renderD128", &vram(40, 2048)),
                (4, "/dev/dri/renderD128", &vram(40, 2048)),
                (
                    5,
                    "socket:[1234]",
                    "drm-pdev: 0000:03:00.0\ndrm-memory-vram: 999 KiB\n",
                ),
            ],
        );
        lay(5151, "Xorg", &[(9, "/dev/dri/card0", &vram(41, 300))]);
        lay(6000, "bash", &[]);
        let found = scan(&proc);
        let on = &found["0000:03:00.0"];
        assert_eq!(on.len(), 2);
        assert_eq!(on[&4242].used_bytes, Some(2048 << 20));
        assert_eq!(on[&4242].name.as_deref(), Some("python3"));
        assert_eq!(on[&5151].used_bytes, Some(300 << 20));
    }
}
