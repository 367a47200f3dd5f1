//! A fixture machine for the inventory's tests: a temporary root with PCI devices, ICD
//! manifests and files.

#![cfg(test)]

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use super::*;

/// A fixture machine: a temporary root with PCI devices, ICD manifests and files.
pub(crate) struct Fixture {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) env: BTreeMap<String, String>,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        Fixture {
            dir: tempfile::tempdir().unwrap(),
            env: BTreeMap::new(),
        }
    }

    pub(crate) fn host(&self, path: &str) -> PathBuf {
        self.dir.path().join(path.trim_start_matches('/'))
    }

    pub(crate) fn write(&self, path: &str, text: &str) {
        let host = self.host(path);
        fs::create_dir_all(host.parent().unwrap()).unwrap();
        fs::write(host, text).unwrap();
    }

    pub(crate) fn pci(
        &self,
        address: &str,
        class: u32,
        vendor: u32,
        device: u32,
        driver: Option<&str>,
    ) {
        let dir = format!("/sys/bus/pci/devices/{address}");
        self.write(&format!("{dir}/class"), &format!("0x{class:06x}\n"));
        self.write(&format!("{dir}/vendor"), &format!("0x{vendor:04x}\n"));
        self.write(&format!("{dir}/device"), &format!("0x{device:04x}\n"));
        if let Some(driver) = driver {
            let target = self.host(&format!("/sys/bus/pci/drivers/{driver}"));
            fs::create_dir_all(&target).unwrap();
            std::os::unix::fs::symlink(target, self.host(&format!("{dir}/driver"))).unwrap();
        }
    }

    pub(crate) fn icd(&self, path: &str, library: &str) {
        self.write(
                path,
                &format!(
                    r#"{{"file_format_version": "1.0.0", "ICD": {{"library_path": "{library}", "api_version": "1.3.0"}}}}"#
                ),
            );
    }

    pub(crate) fn set(&mut self, key: &str, value: &str) {
        self.env.insert(key.into(), value.into());
    }

    pub(crate) fn system(&self) -> System {
        System {
            root: self.dir.path().to_path_buf(),
            env: self.env.clone(),
            nvml: false,
        }
    }

    /// Diagnoses the first GPU of the inventory, after `adjust` has changed it.
    pub(crate) fn diagnose_with(
        &self,
        vulkan: VulkanState,
        adjust: impl Fn(&mut InventoryGpu),
    ) -> Cause {
        let system = self.system();
        let mut gpu = read(&system).gpus.remove(0);
        adjust(&mut gpu);
        let (icds, searched) = icds(&system);
        diagnose(&system, &gpu, &icds, &searched, &vulkan)
    }

    pub(crate) fn diagnose(&self, vulkan: VulkanState) -> Cause {
        self.diagnose_with(vulkan, |_| {})
    }
}

pub(crate) const HGX_ADDRESSES: [&str; 8] = [
    "0000:18:00.0",
    "0000:2a:00.0",
    "0000:3a:00.0",
    "0000:5d:00.0",
    "0000:9a:00.0",
    "0000:ab:00.0",
    "0000:ba:00.0",
    "0000:db:00.0",
];

pub(crate) fn nvidia_gpu(driver: Option<&str>) -> Fixture {
    let f = Fixture::new();
    f.pci("0000:05:00.0", 0x030200, 0x10de, 0x2335, driver);
    f
}

pub(crate) fn with_nvidia_icd(f: &Fixture) {
    f.icd(
        "/usr/share/vulkan/icd.d/nvidia_icd.json",
        "libGLX_nvidia.so.0",
    );
}

pub(crate) fn inventory_gpu(
    address: Option<&str>,
    vendor_id: u32,
    device_id: u32,
    uuid: Option<&str>,
) -> InventoryGpu {
    InventoryGpu {
        pci_address: address.map(str::to_owned),
        vendor_id,
        device_id: Some(device_id),
        name: String::new(),
        uuid: uuid.map(str::to_owned),
        nvml_index: None,
        kernel_driver: None,
        mig_enabled: None,
        seen_by: vec!["sysfs".into()],
        problem: None,
        compute_only: false,
    }
}

pub(crate) fn inventory_of(gpus: Vec<InventoryGpu>) -> Inventory {
    Inventory {
        gpus,
        ..Inventory::default()
    }
}
