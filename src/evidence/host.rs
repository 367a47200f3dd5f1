//! The machine a run tested on, as a support desk asks for it: OS and kernel, CPU and
//! memory, the system, board and BIOS (from DMI where readable), and the Vulkan loader.
//! Read once at the start and kept in the manifest, so that a report rebuilt elsewhere
//! still describes the machine that ran the test.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// What the host is. Every field is absent where it could not be read (a container
/// without /sys/class/dmi, a kernel that hides the board).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    /// The OS's name and version (`PRETTY_NAME` of os-release).
    #[serde(default)]
    pub os: Option<String>,
    /// The kernel's release.
    #[serde(default)]
    pub kernel: Option<String>,
    /// The CPU's model name.
    #[serde(default)]
    pub cpu: Option<String>,
    /// Logical CPUs.
    #[serde(default)]
    pub cpu_threads: Option<u32>,
    /// Host memory.
    #[serde(default)]
    pub memory_bytes: Option<u64>,
    /// The system's maker and model (DMI).
    #[serde(default)]
    pub system: Option<String>,
    /// The motherboard's maker and name (DMI).
    #[serde(default)]
    pub board: Option<String>,
    /// The BIOS's vendor, version and date (DMI).
    #[serde(default)]
    pub bios: Option<String>,
    /// The Vulkan loader's version (the instance version it supports).
    #[serde(default)]
    pub vulkan_loader: Option<String>,
}

impl HostInfo {
    /// Reads this machine (under `root`, `/` but for tests).
    pub fn read(root: &Path) -> HostInfo {
        let file = |p: &str| {
            std::fs::read_to_string(root.join(p))
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        };
        let dmi = |keys: &[&str]| {
            let parts: Vec<String> = keys
                .iter()
                .filter_map(|k| file(&format!("sys/class/dmi/id/{k}")))
                // Boards that leave the fields to the integrator say so in words.
                .filter(|v| !is_placeholder(v))
                .collect();
            (!parts.is_empty()).then(|| parts.join(" "))
        };
        let cpuinfo = file("proc/cpuinfo").unwrap_or_default();
        let cpu = cpuinfo
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "model name").then(|| v.trim().to_owned())
            })
            .filter(|v| !v.is_empty());
        let threads = cpuinfo
            .lines()
            .filter(|l| l.split(':').next().is_some_and(|k| k.trim() == "processor"))
            .count();
        let memory_bytes = file("proc/meminfo").and_then(|m| {
            m.lines().find_map(|l| {
                let kib = l.strip_prefix("MemTotal:")?.trim().strip_suffix("kB")?;
                kib.trim().parse::<u64>().ok().map(|k| k * 1024)
            })
        });
        let os = file("etc/os-release").and_then(|text| {
            text.lines().find_map(|l| {
                l.strip_prefix("PRETTY_NAME=")
                    .map(|v| v.trim_matches('"').to_owned())
            })
        });
        HostInfo {
            os,
            kernel: file("proc/sys/kernel/osrelease"),
            cpu,
            cpu_threads: (threads > 0).then_some(threads as u32),
            memory_bytes,
            system: dmi(&["sys_vendor", "product_name"]),
            board: dmi(&["board_vendor", "board_name", "board_version"]),
            bios: dmi(&["bios_vendor", "bios_version", "bios_date"]),
            vulkan_loader: None,
        }
    }

    /// Reads this machine, the Vulkan loader included.
    pub fn collect() -> HostInfo {
        HostInfo {
            vulkan_loader: crate::gpu::loader_version(),
            ..HostInfo::read(Path::new("/"))
        }
    }
}

/// DMI's words for a field nobody filled in.
fn is_placeholder(value: &str) -> bool {
    let v = value.to_ascii_lowercase();
    [
        "to be filled by o.e.m.",
        "default string",
        "not specified",
        "system product name",
        "none",
    ]
    .contains(&v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_is_read_from_its_files_and_placeholders_are_left_out() {
        let root = tempfile::tempdir().unwrap();
        let put = |p: &str, text: &str| {
            let path = root.path().join(p);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        put(
            "etc/os-release",
            "NAME=\"Ubuntu\"\nPRETTY_NAME=\"Ubuntu 24.04.1 LTS\"\n",
        );
        put("proc/sys/kernel/osrelease", "6.8.0-45-generic\n");
        put(
            "proc/cpuinfo",
            "processor\t: 0\nmodel name\t: AMD EPYC 9654 96-Core Processor\n\nprocessor\t: 1\nmodel name\t: AMD EPYC 9654 96-Core Processor\n",
        );
        put(
            "proc/meminfo",
            "MemTotal:       2113929216 kB\nMemFree: 1 kB\n",
        );
        put("sys/class/dmi/id/sys_vendor", "Supermicro\n");
        put("sys/class/dmi/id/product_name", "AS -8125GS-TNHR\n");
        put("sys/class/dmi/id/board_vendor", "Supermicro\n");
        put("sys/class/dmi/id/board_name", "H13DSG-O-CPU\n");
        put("sys/class/dmi/id/board_version", "To be filled by O.E.M.\n");
        put(
            "sys/class/dmi/id/bios_vendor",
            "American Megatrends International, LLC.\n",
        );
        put("sys/class/dmi/id/bios_version", "1.7\n");
        put("sys/class/dmi/id/bios_date", "03/14/2024\n");
        let host = HostInfo::read(root.path());
        assert_eq!(host.os.as_deref(), Some("Ubuntu 24.04.1 LTS"));
        assert_eq!(host.kernel.as_deref(), Some("6.8.0-45-generic"));
        assert_eq!(host.cpu.as_deref(), Some("AMD EPYC 9654 96-Core Processor"));
        assert_eq!(host.cpu_threads, Some(2));
        assert_eq!(host.memory_bytes, Some(2_113_929_216 * 1024));
        assert_eq!(host.system.as_deref(), Some("Supermicro AS -8125GS-TNHR"));
        assert_eq!(host.board.as_deref(), Some("Supermicro H13DSG-O-CPU"));
        assert_eq!(
            host.bios.as_deref(),
            Some("American Megatrends International, LLC. 1.7 03/14/2024")
        );
        // A machine with nothing readable says nothing rather than guessing.
        let empty = HostInfo::read(&root.path().join("nowhere"));
        assert_eq!(empty, HostInfo::default());
    }
}
