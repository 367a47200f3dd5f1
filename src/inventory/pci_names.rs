//! Names of PCI vendors and devices from the PCI database (`pci.ids`), read only when a name
//! is needed and cached per id.

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::{System, short_vendor};

/// Where the PCI name database may live, in the order it is looked for.
const PCI_IDS: &[&str] = &["/usr/share/misc/pci.ids", "/usr/share/hwdata/pci.ids"];
/// A vendor's and a device's name from the PCI database, each when listed.
type DbNames = (Option<String>, Option<String>);

/// Names from the PCI database, read only when a name is needed and cached per id.
pub(super) struct PciNames<'a> {
    system: &'a System,
    cache: HashMap<(u32, Option<u32>), DbNames>,
}

impl<'a> PciNames<'a> {
    pub(super) fn new(system: &'a System) -> PciNames<'a> {
        PciNames {
            system,
            cache: HashMap::new(),
        }
    }

    /// "NVIDIA GH100 [H200 SXM 141GB]", else e.g. "NVIDIA GPU 10de:2335" with `what` = "GPU".
    pub(super) fn name(&mut self, vendor_id: u32, device_id: Option<u32>, what: &str) -> String {
        let (db_vendor, db_device) = self.lookup(vendor_id, device_id);
        let vendor = short_vendor(vendor_id)
            .map(str::to_owned)
            .or(db_vendor)
            .unwrap_or_else(|| format!("vendor 0x{vendor_id:04x}"));
        match (db_device, device_id) {
            // The database often repeats the vendor ("ASPEED Graphics Family").
            (Some(device), _) if device.starts_with(&vendor) => device,
            (Some(device), _) => format!("{vendor} {device}"),
            (None, Some(id)) => format!("{vendor} {what} {vendor_id:04x}:{id:04x}"),
            (None, None) => format!("{vendor} {what}"),
        }
    }

    fn lookup(&mut self, vendor_id: u32, device_id: Option<u32>) -> DbNames {
        let system = self.system;
        self.cache
            .entry((vendor_id, device_id))
            .or_insert_with(|| {
                PCI_IDS
                    .iter()
                    .find_map(|p| scan_pci_ids(&system.path(Path::new(p)), vendor_id, device_id))
                    .map_or((None, None), |(v, d)| (Some(v), d))
            })
            .clone()
    }
}

/// Finds a vendor's name and, within its block, a device's name; reading stops at the end of
/// the vendor's block, since the file is large and ordered by vendor.
fn scan_pci_ids(
    path: &Path,
    vendor_id: u32,
    device_id: Option<u32>,
) -> Option<(String, Option<String>)> {
    let reader = BufReader::new(fs::File::open(path).ok()?);
    let vendor_key = format!("{vendor_id:04x}");
    let device_key = device_id.map(|d| format!("{d:04x}"));
    let mut vendor: Option<String> = None;
    for line in reader.split(b'\n') {
        let Ok(line) = line else {
            break;
        };
        let line = String::from_utf8_lossy(&line);
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        match &vendor {
            None => {
                if !line.starts_with('\t')
                    && let Some((id, name)) = line.split_once("  ")
                    && id.eq_ignore_ascii_case(&vendor_key)
                {
                    if device_key.is_none() {
                        return Some((name.trim().to_owned(), None));
                    }
                    vendor = Some(name.trim().to_owned());
                }
            }
            Some(name) => {
                if !line.starts_with('\t') {
                    return Some((name.clone(), None));
                }
                // Two tabs: a subsystem line, never the device itself.
                if line.starts_with("\t\t") {
                    continue;
                }
                if let Some((id, device)) = line[1..].split_once("  ")
                    && device_key
                        .as_deref()
                        .is_some_and(|k| id.eq_ignore_ascii_case(k))
                {
                    return Some((name.clone(), Some(device.trim().to_owned())));
                }
            }
        }
    }
    vendor.map(|v| (v, None))
}
