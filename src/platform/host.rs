//! The machine a run tested on, as a support desk asks for it: OS and kernel, CPU and
//! memory, the system, board and BIOS, and its name. Linux reads os-release, `/proc` and
//! DMI (`/sys/class/dmi/id`); Windows reads the registry (the OS's version and build, the
//! processor, and the BIOS's copy of the SMBIOS tables) and the memory the kernel reports.
//! Both readers are plain functions of their inputs, tested on any OS from fixtures.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::windows_registry::Registry;

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
    /// Windows' display-driver watchdog (TDR): how long GPU work may run before Windows
    /// resets the driver. None where the OS has none (Linux).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_watchdog: Option<DisplayWatchdog>,
}

/// Windows' timeout detection and recovery of the display driver, as the registry sets it
/// (`GraphicsDrivers`: `TdrDelay`, `TdrLevel`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DisplayWatchdog {
    /// Seconds GPU work may hold the GPU before Windows resets the driver (2 by default).
    pub delay_s: f64,
    /// False when detection is off (`TdrLevel` 0): a hung GPU then hangs the desktop.
    pub enabled: bool,
}

impl DisplayWatchdog {
    /// In words: `2 s`, `60 s (raised from the default 2 s)`, `off`.
    pub fn words(&self) -> String {
        if !self.enabled {
            return "off (TdrLevel 0): a hung GPU is never reset".into();
        }
        if (self.delay_s - DEFAULT_TDR_DELAY_S).abs() < f64::EPSILON {
            format!("{} s (Windows' default)", self.delay_s)
        } else {
            format!(
                "{} s (TdrDelay; Windows' default is {DEFAULT_TDR_DELAY_S} s)",
                self.delay_s
            )
        }
    }
}

/// Windows' display-driver timeout when the registry does not set one.
pub const DEFAULT_TDR_DELAY_S: f64 = 2.0;

/// This machine's facts (the Vulkan loader's version is the GPU layer's to add).
pub fn read() -> HostInfo {
    os::read()
}

/// This machine's name, as the OS gives it.
pub fn computer_name() -> Option<String> {
    os::computer_name()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The registry keys the Windows facts come from.
pub const REGISTRY_KEYS: [&str; 4] = [
    r"SOFTWARE\Microsoft\Windows NT\CurrentVersion",
    r"HARDWARE\DESCRIPTION\System\CentralProcessor\0",
    r"HARDWARE\DESCRIPTION\System\BIOS",
    r"SYSTEM\CurrentControlSet\Control\GraphicsDrivers",
];

impl HostInfo {
    /// A Linux machine read from its files under `root` (`/`, or a fixture tree):
    /// os-release, `/proc`, and DMI in `/sys/class/dmi/id`.
    pub fn from_files(root: &Path) -> HostInfo {
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
            display_watchdog: None,
        }
    }

    /// A Windows machine read from its registry ([`REGISTRY_KEYS`]) and what the kernel
    /// says of its processors and memory. Windows 11 still calls itself "Windows 10" in
    /// `ProductName`: its build (22000 and later) says which it is.
    pub fn from_registry(
        registry: &Registry,
        cpu_threads: Option<u32>,
        memory_bytes: Option<u64>,
    ) -> HostInfo {
        let [version, cpu, bios, graphics] = REGISTRY_KEYS;
        let text = |key: &str, name: &str| {
            registry
                .text(key, name)
                .filter(|v| !is_placeholder(v))
                .map(str::to_owned)
        };
        let joined = |key: &str, names: &[&str]| {
            let parts: Vec<String> = names.iter().filter_map(|n| text(key, n)).collect();
            (!parts.is_empty()).then(|| parts.join(" "))
        };
        let build: Option<u64> = text(version, "CurrentBuildNumber").and_then(|b| b.parse().ok());
        let os = text(version, "ProductName").map(|name| {
            let name = match build {
                Some(b) if b >= 22_000 => name.replace("Windows 10", "Windows 11"),
                _ => name,
            };
            let release = text(version, "DisplayVersion").or_else(|| text(version, "ReleaseId"));
            let build = build.map(|b| match registry.number(version, "UBR") {
                Some(ubr) => format!("build {b}.{ubr}"),
                None => format!("build {b}"),
            });
            let mut words = name;
            if let Some(r) = release {
                words.push(' ');
                words.push_str(&r);
            }
            if let Some(b) = build {
                words.push_str(&format!(" ({b})"));
            }
            words
        });
        let kernel = match (
            registry.number(version, "CurrentMajorVersionNumber"),
            registry.number(version, "CurrentMinorVersionNumber"),
        ) {
            (Some(major), Some(minor)) => Some(format!("Windows NT {major}.{minor}")),
            _ => text(version, "CurrentVersion").map(|v| format!("Windows NT {v}")),
        }
        .map(|k| match build {
            Some(b) => format!("{k}.{b}"),
            None => k,
        });
        // Only a Windows registry has the OS's version; what it leaves unset of the
        // watchdog is the default.
        let watchdog = os.is_some().then(|| DisplayWatchdog {
            delay_s: registry
                .number(graphics, "TdrDelay")
                .filter(|&d| d > 0)
                .map_or(DEFAULT_TDR_DELAY_S, |d| d as f64),
            enabled: registry.number(graphics, "TdrLevel") != Some(0),
        });
        HostInfo {
            os,
            kernel,
            cpu: text(cpu, "ProcessorNameString"),
            cpu_threads,
            memory_bytes,
            system: joined(bios, &["SystemManufacturer", "SystemProductName"]),
            board: joined(
                bios,
                &[
                    "BaseBoardManufacturer",
                    "BaseBoardProduct",
                    "BaseBoardVersion",
                ],
            ),
            bios: joined(bios, &["BIOSVendor", "BIOSVersion", "BIOSReleaseDate"]),
            vulkan_loader: None,
            display_watchdog: watchdog,
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

#[cfg(not(windows))]
mod os {
    use super::HostInfo;

    pub fn read() -> HostInfo {
        HostInfo::from_files(std::path::Path::new("/"))
    }

    pub fn computer_name() -> Option<String> {
        std::fs::read_to_string("/proc/sys/kernel/hostname").ok()
    }
}

#[cfg(windows)]
mod os {
    use windows::Win32::System::SystemInformation::{GlobalMemoryStatusEx, MEMORYSTATUSEX};

    use super::{HostInfo, REGISTRY_KEYS, Registry};

    pub fn read() -> HostInfo {
        let threads = std::thread::available_parallelism()
            .ok()
            .and_then(|n| u32::try_from(n.get()).ok());
        let mut memory = MEMORYSTATUSEX {
            dwLength: std::mem::size_of::<MEMORYSTATUSEX>() as u32,
            ..Default::default()
        };
        // SAFETY: a MEMORYSTATUSEX with its length set, as the call requires.
        let memory_bytes = unsafe { GlobalMemoryStatusEx(&mut memory) }
            .ok()
            .map(|()| memory.ullTotalPhys);
        HostInfo::from_registry(&Registry::read(&REGISTRY_KEYS, 0), threads, memory_bytes)
    }

    pub fn computer_name() -> Option<String> {
        std::env::var("COMPUTERNAME").ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::platform::windows_registry::Value;

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
        let host = HostInfo::from_files(root.path());
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
        let empty = HostInfo::from_files(&root.path().join("nowhere"));
        assert_eq!(empty, HostInfo::default());
    }

    fn registry(name: &str) -> Registry {
        let path = format!(
            "{}/tests/fixtures/registry/{name}.reg",
            env!("CARGO_MANIFEST_DIR")
        );
        Registry::from_export(&std::fs::read_to_string(path).unwrap())
    }

    #[test]
    fn a_windows_machine_is_read_from_its_registry() {
        let host = HostInfo::from_registry(
            &registry("windows11_gaming_desktop"),
            Some(32),
            Some(64 << 30),
        );
        // Windows 11 by its build, whatever ProductName says.
        assert_eq!(
            host.os.as_deref(),
            Some("Windows 11 Pro 23H2 (build 22631.3431)")
        );
        assert_eq!(host.kernel.as_deref(), Some("Windows NT 10.0.22631"));
        assert_eq!(
            host.cpu.as_deref(),
            Some("AMD Ryzen 9 7950X3D 16-Core Processor")
        );
        assert_eq!(
            (host.cpu_threads, host.memory_bytes),
            (Some(32), Some(64 << 30))
        );
        assert_eq!(
            host.system.as_deref(),
            Some("Micro-Star International Co., Ltd. MS-7E12")
        );
        assert_eq!(
            host.board.as_deref(),
            Some("Micro-Star International Co., Ltd. MAG X670E TOMAHAWK WIFI (MS-7E12) 1.0")
        );
        assert_eq!(
            host.bios.as_deref(),
            Some("American Megatrends International, LLC. 2.10 08/22/2024")
        );
        // A registry that sets no TdrDelay has Windows' default watchdog.
        let watchdog = host.display_watchdog.unwrap();
        assert_eq!((watchdog.delay_s, watchdog.enabled), (2.0, true));
        assert_eq!(watchdog.words(), "2 s (Windows' default)");
        // One a machine-learning guide told to raise it, and one with detection off.
        let mut raised = registry("windows11_gaming_desktop");
        let key = r"SYSTEM\CurrentControlSet\Control\GraphicsDrivers";
        raised.set(key, "TdrDelay", Value::Number(60));
        let watchdog = HostInfo::from_registry(&raised, None, None)
            .display_watchdog
            .unwrap();
        assert_eq!(watchdog.words(), "60 s (TdrDelay; Windows' default is 2 s)");
        raised.set(key, "TdrLevel", Value::Number(0));
        let watchdog = HostInfo::from_registry(&raised, None, None)
            .display_watchdog
            .unwrap();
        assert!(!watchdog.enabled);
        assert!(watchdog.words().starts_with("off"));
    }

    #[test]
    fn an_oem_board_that_left_its_fields_blank_says_nothing_of_them() {
        let host =
            HostInfo::from_registry(&registry("windows10_home_oem_placeholders"), None, None);
        assert_eq!(
            host.os.as_deref(),
            Some("Windows 10 Home 2009 (build 19045)")
        );
        assert_eq!(host.kernel.as_deref(), Some("Windows NT 6.3.19045"));
        assert_eq!(host.system, None, "\"To Be Filled By O.E.M.\" is no maker");
        assert_eq!(
            host.board.as_deref(),
            Some("Gigabyte Technology Co., Ltd. B460M DS3H")
        );
        // An empty registry (not Windows) gives nothing, never a guess.
        assert_eq!(
            HostInfo::from_registry(&Registry::default(), None, None),
            HostInfo::default()
        );
    }
}
