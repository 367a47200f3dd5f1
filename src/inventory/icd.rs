//! The Vulkan drivers the loader would find: the ICD manifests in its search paths (or
//! those Windows' registry registers), whose driver each is, and whether its library loads.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{System, VENDOR_AMD, VENDOR_INTEL, VENDOR_NVIDIA};
use crate::gpu;

/// A Vulkan ICD manifest found in the loader's search paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Icd {
    /// The manifest, as the machine names it (`/usr/share/vulkan/icd.d/nvidia_icd.json`).
    pub json_path: PathBuf,
    /// The manifest's `ICD.library_path`, as written.
    pub library_path: String,
    /// Whose driver it is, from the file and library names.
    pub vendor: IcdVendor,
    /// Whether the library loads; the loader's message when it does not.
    pub loads: Result<(), String>,
}

/// Whose Vulkan driver an ICD is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IcdVendor {
    /// NVIDIA's driver (`nvidia_icd.json`, `libGLX_nvidia.so.0`).
    Nvidia,
    /// Mesa's RADV or AMDVLK.
    Amd,
    /// Mesa's ANV or HASVK.
    Intel,
    /// A CPU device (lavapipe, SwiftShader): proves the tool, tests no GPU.
    Cpu,
    /// Any other driver.
    Other,
}

impl IcdVendor {
    /// The driver vendor a GPU of PCI vendor `vendor_id` needs.
    pub(super) fn of_gpu(vendor_id: u32) -> IcdVendor {
        match vendor_id {
            VENDOR_NVIDIA => IcdVendor::Nvidia,
            VENDOR_AMD => IcdVendor::Amd,
            VENDOR_INTEL => IcdVendor::Intel,
            _ => IcdVendor::Other,
        }
    }

    /// Classifies a file name, or None when it says nothing of the vendor.
    fn of_name(name: &str) -> Option<IcdVendor> {
        let name = name.to_ascii_lowercase();
        let tokens: Vec<&str> = name.split(|c: char| !c.is_ascii_alphanumeric()).collect();
        let token = |t: &str| tokens.contains(&t);
        if token("lvp") || name.contains("lavapipe") || name.contains("swiftshader") {
            Some(IcdVendor::Cpu)
        } else if name.contains("nvidia") {
            Some(IcdVendor::Nvidia)
        } else if name.contains("radeon") || name.contains("amdvlk") || token("amd") {
            Some(IcdVendor::Amd)
        } else if name.contains("intel") || token("anv") {
            Some(IcdVendor::Intel)
        } else {
            None
        }
    }

    /// The library is what runs, so its name decides; the manifest's name is the fallback.
    fn classify(json_path: &Path, library_path: &str) -> IcdVendor {
        let base = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        IcdVendor::of_name(&base(Path::new(library_path)))
            .or_else(|| IcdVendor::of_name(&base(json_path)))
            .unwrap_or(IcdVendor::Other)
    }
}

/// The places the Linux Vulkan loader searches for ICD manifests, as the machine names them.
fn search_paths(system: &System) -> Vec<PathBuf> {
    fn split(list: &str) -> impl Iterator<Item = PathBuf> + '_ {
        list.split(':').filter(|s| !s.is_empty()).map(PathBuf::from)
    }
    let mut paths: Vec<PathBuf> = Vec::new();
    if let Some(add) = system.var("VK_ADD_DRIVER_FILES") {
        paths.extend(split(add));
    }
    if let Some(files) = system
        .var("VK_DRIVER_FILES")
        .or_else(|| system.var("VK_ICD_FILENAMES"))
    {
        paths.extend(split(files));
    } else {
        let home = system.var("HOME").map(PathBuf::from);
        let icd_d = |base: PathBuf| base.join("vulkan/icd.d");
        let config_home = system
            .var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".config")));
        paths.extend(config_home.map(icd_d));
        paths.extend(split(system.var("XDG_CONFIG_DIRS").unwrap_or("/etc/xdg")).map(icd_d));
        paths.push(PathBuf::from("/etc/vulkan/icd.d"));
        let data_home = system
            .var("XDG_DATA_HOME")
            .map(PathBuf::from)
            .or_else(|| home.as_ref().map(|h| h.join(".local/share")));
        paths.extend(data_home.map(icd_d));
        paths.extend(
            split(
                system
                    .var("XDG_DATA_DIRS")
                    .unwrap_or("/usr/local/share:/usr/share"),
            )
            .map(icd_d),
        );
    }
    let mut unique = Vec::with_capacity(paths.len());
    for p in paths {
        if !unique.contains(&p) {
            unique.push(p);
        }
    }
    unique
}

/// Finds the ICD manifests the Vulkan loader would find, and says whether each one's library
/// loads. Also returns the directories or files searched.
pub fn icds(system: &System) -> (Vec<Icd>, Vec<PathBuf>) {
    // Where the OS registers its drivers (Windows' registry), those manifests are the
    // places; elsewhere the loader's search paths.
    let searched =
        crate::platform::vulkan::registered_manifests().unwrap_or_else(|| search_paths(system));
    let mut found: Vec<Icd> = Vec::new();
    for place in &searched {
        let host = system.path(place);
        let manifests: Vec<PathBuf> = if host.is_dir() {
            let mut files: Vec<PathBuf> = fs::read_dir(&host)
                .into_iter()
                .flatten()
                .flatten()
                .map(|e| e.file_name())
                .filter(|n| Path::new(n).extension().is_some_and(|x| x == "json"))
                .map(|n| place.join(n))
                .collect();
            files.sort();
            files
        } else if host.is_file() {
            vec![place.clone()]
        } else {
            Vec::new()
        };
        for manifest in manifests {
            if found.iter().any(|i| i.json_path == manifest) {
                continue;
            }
            if let Some(icd) = read_icd(system, &manifest) {
                found.push(icd);
            }
        }
    }
    (found, searched)
}

/// Reads one manifest; an unreadable or malformed one is skipped, as the loader skips it.
fn read_icd(system: &System, json_path: &Path) -> Option<Icd> {
    let text = fs::read_to_string(system.path(json_path)).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let library_path = value.get("ICD")?.get("library_path")?.as_str()?;
    if library_path.is_empty() {
        return None;
    }
    Some(Icd {
        json_path: json_path.to_path_buf(),
        library_path: library_path.to_owned(),
        vendor: IcdVendor::classify(json_path, library_path),
        loads: library_check(system, json_path, library_path),
    })
}

fn library_check(system: &System, json_path: &Path, library_path: &str) -> Result<(), String> {
    let library = Path::new(library_path);
    if library.is_absolute() || library.components().count() > 1 {
        // The loader reads a relative path with a slash as relative to the manifest.
        let logical = if library.is_absolute() {
            library.to_path_buf()
        } else {
            json_path.parent().unwrap_or(Path::new("/")).join(library)
        };
        let host = system.path(&logical);
        if !host.exists() {
            return Err(format!("{} does not exist", logical.display()));
        }
        if system.is_fixture() {
            return Ok(());
        }
        return gpu::library_loads(&host);
    }
    if !system.is_fixture() {
        return gpu::library_loads(library);
    }
    // A fixture cannot load libraries: it lists the bare names that would not load.
    let missing = fs::read_to_string(system.root.join("LIBRARIES_MISSING")).unwrap_or_default();
    if missing.lines().any(|l| l.trim() == library_path) {
        Err(format!(
            "{library_path}: cannot open shared object file: No such file or directory"
        ))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inventory::fixture::*;

    fn json_names(icds: &[Icd]) -> Vec<String> {
        icds.iter()
            .map(|i| i.json_path.display().to_string())
            .collect()
    }

    #[test]
    fn icd_search_follows_the_loaders_default_places() {
        let mut f = Fixture::new();
        f.set("HOME", "/home/me");
        f.icd(
            "/usr/share/vulkan/icd.d/radeon_icd.x86_64.json",
            "/usr/lib/libvulkan_radeon.so",
        );
        f.icd(
            "/usr/local/share/vulkan/icd.d/lvp_icd.x86_64.json",
            "libvulkan_lvp.so",
        );
        f.icd("/etc/vulkan/icd.d/nvidia_icd.json", "libGLX_nvidia.so.0");
        f.icd(
            "/home/me/.local/share/vulkan/icd.d/intel_icd.x86_64.json",
            "libvulkan_intel.so",
        );
        f.icd("/opt/elsewhere/vulkan/icd.d/other_icd.json", "libother.so");
        f.write("/usr/share/vulkan/icd.d/broken.json", "{ not json");
        f.write("/usr/share/vulkan/icd.d/no_library.json", r#"{"ICD": {}}"#);
        f.write("/usr/share/vulkan/icd.d/readme.txt", "not a manifest");
        let (icds, searched) = icds(&f.system());
        let searched: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            searched,
            [
                "/home/me/.config/vulkan/icd.d",
                "/etc/xdg/vulkan/icd.d",
                "/etc/vulkan/icd.d",
                "/home/me/.local/share/vulkan/icd.d",
                "/usr/local/share/vulkan/icd.d",
                "/usr/share/vulkan/icd.d",
            ]
        );
        assert_eq!(
            json_names(&icds),
            [
                "/etc/vulkan/icd.d/nvidia_icd.json",
                "/home/me/.local/share/vulkan/icd.d/intel_icd.x86_64.json",
                "/usr/local/share/vulkan/icd.d/lvp_icd.x86_64.json",
                "/usr/share/vulkan/icd.d/radeon_icd.x86_64.json",
            ]
        );
        let vendors: Vec<IcdVendor> = icds.iter().map(|i| i.vendor).collect();
        assert_eq!(
            vendors,
            [
                IcdVendor::Nvidia,
                IcdVendor::Intel,
                IcdVendor::Cpu,
                IcdVendor::Amd
            ]
        );
        // The radeon library does not exist in the fixture.
        assert!(
            icds[3]
                .loads
                .as_ref()
                .unwrap_err()
                .contains("does not exist")
        );
        assert!(icds[0].loads.is_ok());
    }

    #[test]
    fn icd_search_honours_xdg_dirs() {
        let mut f = Fixture::new();
        f.set("XDG_CONFIG_HOME", "/cfg");
        f.set("XDG_CONFIG_DIRS", "/xdg1:/xdg2");
        f.set("XDG_DATA_HOME", "/data");
        f.set("XDG_DATA_DIRS", "/share1::/share2");
        f.icd("/xdg2/vulkan/icd.d/nvidia_icd.json", "libGLX_nvidia.so.0");
        f.icd("/share2/vulkan/icd.d/amd_icd64.json", "/opt/amdvlk64.so");
        f.icd(
            "/usr/share/vulkan/icd.d/intel_icd.x86_64.json",
            "libvulkan_intel.so",
        );
        let (icds, searched) = icds(&f.system());
        let searched: Vec<String> = searched.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(
            searched,
            [
                "/cfg/vulkan/icd.d",
                "/xdg1/vulkan/icd.d",
                "/xdg2/vulkan/icd.d",
                "/etc/vulkan/icd.d",
                "/data/vulkan/icd.d",
                "/share1/vulkan/icd.d",
                "/share2/vulkan/icd.d",
            ]
        );
        assert_eq!(
            json_names(&icds),
            [
                "/xdg2/vulkan/icd.d/nvidia_icd.json",
                "/share2/vulkan/icd.d/amd_icd64.json",
            ]
        );
        assert_eq!(icds[1].vendor, IcdVendor::Amd);
    }

    #[test]
    fn vk_driver_files_replaces_the_search() {
        let mut f = Fixture::new();
        f.icd(
            "/usr/share/vulkan/icd.d/nvidia_icd.json",
            "libGLX_nvidia.so.0",
        );
        f.icd("/custom/lvp.json", "libvulkan_lvp.so");
        f.icd("/more/icd.d/swiftshader.json", "./libvk_swiftshader.so");
        f.write("/more/icd.d/libvk_swiftshader.so", "");
        f.icd("/added/intel.json", "libvulkan_intel.so");
        f.set("VK_DRIVER_FILES", "/custom/lvp.json:/more/icd.d");
        f.set("VK_ADD_DRIVER_FILES", "/added/intel.json");
        let (icds, searched) = icds(&f.system());
        assert_eq!(
            searched,
            [
                PathBuf::from("/added/intel.json"),
                PathBuf::from("/custom/lvp.json"),
                PathBuf::from("/more/icd.d"),
            ]
        );
        assert_eq!(
            json_names(&icds),
            [
                "/added/intel.json",
                "/custom/lvp.json",
                "/more/icd.d/swiftshader.json",
            ]
        );
        // A relative library path is relative to its manifest, and there it exists.
        assert_eq!(icds[2].vendor, IcdVendor::Cpu);
        assert!(icds[2].loads.is_ok());

        // The older variable does the same when the newer one is unset.
        f.env.remove("VK_DRIVER_FILES");
        f.env.remove("VK_ADD_DRIVER_FILES");
        f.set("VK_ICD_FILENAMES", "/custom/lvp.json");
        let (icds, _) = super::icds(&f.system());
        assert_eq!(json_names(&icds), ["/custom/lvp.json"]);
    }

    #[test]
    fn bare_library_names_load_unless_listed_missing() {
        let f = Fixture::new();
        with_nvidia_icd(&f);
        f.icd(
            "/usr/share/vulkan/icd.d/intel_icd.x86_64.json",
            "libvulkan_intel.so",
        );
        f.write("/LIBRARIES_MISSING", "libGLX_nvidia.so.0\n");
        let (icds, _) = icds(&f.system());
        assert!(icds[0].loads.is_ok());
        assert!(
            icds[1]
                .loads
                .as_ref()
                .unwrap_err()
                .contains("libGLX_nvidia.so.0")
        );
    }

    #[test]
    fn icd_vendors_come_from_library_then_file_names() {
        let classify = |json: &str, library: &str| IcdVendor::classify(Path::new(json), library);
        assert_eq!(
            classify("nvidia_icd.json", "libGLX_nvidia.so.0"),
            IcdVendor::Nvidia
        );
        assert_eq!(
            classify("radeon_icd.i686.json", "/usr/lib/i386/libvulkan_radeon.so"),
            IcdVendor::Amd
        );
        assert_eq!(
            classify("amd_icd64.json", "/opt/amdgpu-pro/lib/x86_64/amdvlk64.so"),
            IcdVendor::Amd
        );
        assert_eq!(
            classify("intel_hasvk_icd.x86_64.json", "libvulkan_intel_hasvk.so"),
            IcdVendor::Intel
        );
        assert_eq!(
            classify("lvp_icd.x86_64.json", "libvulkan_lvp.so"),
            IcdVendor::Cpu
        );
        assert_eq!(
            classify("vk_swiftshader_icd.json", "./libvk_swiftshader.so"),
            IcdVendor::Cpu
        );
        assert_eq!(
            classify("nouveau_icd.x86_64.json", "libvulkan_nouveau.so"),
            IcdVendor::Other
        );
        assert_eq!(
            classify("virtio_icd.x86_64.json", "libvulkan_virtio.so"),
            IcdVendor::Other
        );
    }
    #[test]
    fn library_loading_reports_the_loaders_message() {
        assert!(gpu::library_loads(Path::new("libc.so.6")).is_ok());
        let error = gpu::library_loads(Path::new("libkiln_no_such_library.so.0")).unwrap_err();
        assert!(error.contains("libkiln_no_such_library.so.0"), "{error}");
    }
}
