//! What the check reads: the machine's GPUs (its inventory, or those a recording names)
//! and what their telemetry sources say now.

use std::collections::BTreeMap;

use super::HealthOptions;
use crate::inventory::{InventoryGpu, System};
use crate::telemetry::record::{Readings, TelemetryData, XidEvent};
use crate::telemetry::{Source, cause, signals};

/// What the sources said, per device.
#[derive(Default)]
pub(super) struct Seen {
    pub(super) identity: BTreeMap<usize, Readings>,
    pub(super) gauges: BTreeMap<usize, Readings>,
    pub(super) counters: BTreeMap<usize, Readings>,
    pub(super) xids: Vec<(Option<usize>, XidEvent)>,
    pub(super) causes: Vec<String>,
    pub(super) notes: Vec<String>,
}

pub(super) fn read_sources(sources: &mut [Box<dyn Source>], replay: bool) -> Seen {
    let mut seen = Seen::default();
    let take = |seen: &mut Seen, records: Vec<(Option<usize>, TelemetryData)>| {
        for (device, data) in records {
            match (device, data) {
                (Some(d), TelemetryData::Identity { fields }) => {
                    seen.identity.entry(d).or_default().extend(fields);
                }
                (Some(d), TelemetryData::Sample { readings }) => {
                    seen.gauges.entry(d).or_default().extend(readings);
                }
                (d, TelemetryData::Xid { xid }) => seen.xids.push((d, xid)),
                (_, TelemetryData::Unavailable { message, cause, .. }) => {
                    seen.causes.extend(cause);
                    seen.notes.push(message);
                }
                _ => {}
            }
        }
    };
    for s in sources.iter_mut() {
        let start = s.start();
        take(&mut seen, start);
    }
    for s in sources.iter_mut() {
        // A recording is read to its end: all of it is "since the last check".
        let rounds = if replay { 100_000 } else { 1 };
        for _ in 0..rounds {
            let tick = s.sample();
            if tick.is_empty() && replay {
                break;
            }
            take(&mut seen, tick);
        }
        loop {
            let snap = s.snapshot();
            if snap.is_empty() {
                break;
            }
            for (d, counters) in snap {
                seen.counters.entry(d).or_default().extend(counters);
            }
            if !replay {
                break;
            }
        }
    }
    seen
}

pub(super) fn number(r: Option<&Readings>, key: &str) -> Option<f64> {
    r.and_then(|r| crate::telemetry::reading::number(r, key))
}

pub(super) fn text<'a>(r: Option<&'a Readings>, key: &str) -> Option<&'a str> {
    r.and_then(|r| crate::telemetry::reading::text(r, key))
}

/// One GPU as the check sees it.
#[derive(Debug, Clone, Default)]
pub(super) struct Gpu {
    pub(super) index: usize,
    pub(super) name: String,
    /// `GPU-...`, when known.
    pub(super) uuid: Option<String>,
    pub(super) pci_address: Option<String>,
    pub(super) vendor_id: Option<u32>,
    pub(super) nvml_index: Option<u32>,
}

impl Gpu {
    /// Its key in the state file.
    pub(super) fn key(&self) -> String {
        self.uuid
            .clone()
            .or_else(|| self.pci_address.clone())
            .unwrap_or_else(|| format!("gpu{}", self.index))
    }
}

/// The sources to read, the machine's GPUs, and what cannot be read.
pub(super) struct Opened {
    pub(super) sources: Vec<Box<dyn Source>>,
    pub(super) gpus: Vec<Gpu>,
    /// The inventory the GPUs come from (empty for a recording).
    pub(super) inventory: Vec<InventoryGpu>,
    pub(super) notes: Vec<String>,
}

pub(super) fn open(opts: &HealthOptions, system: &System) -> Opened {
    match &opts.replay {
        Some(path) => match crate::telemetry::replay::ReplaySource::open(path) {
            Ok(r) => Opened {
                sources: vec![Box::new(r)],
                gpus: Vec::new(),
                inventory: Vec::new(),
                notes: Vec::new(),
            },
            Err(e) => Opened {
                sources: Vec::new(),
                gpus: Vec::new(),
                inventory: Vec::new(),
                notes: vec![e.to_string()],
            },
        },
        None => {
            // The GPUs the machine has (NVML, sysfs), whether or not Vulkan can see them:
            // a node whose GPUs only Vulkan misses still has them, and still has counters.
            let inventory = crate::inventory::read(system);
            let gpus: Vec<Gpu> = inventory
                .gpus
                .iter()
                .enumerate()
                .map(|(index, g)| Gpu {
                    index,
                    name: g.name.clone(),
                    uuid: g.uuid.clone(),
                    pci_address: g.pci_address.clone(),
                    vendor_id: Some(g.vendor_id),
                    nvml_index: g.nvml_index,
                })
                .collect();
            let targets = crate::inventory::targets(&inventory.gpus);
            let (sources, mut notes) = crate::telemetry::live_sources_for(&targets);
            notes.extend(inventory.notes.iter().cloned());
            Opened {
                sources,
                gpus,
                inventory: inventory.gpus,
                notes,
            }
        }
    }
}

/// The inventory's NVIDIA GPUs that the nvidia driver holds on the PCI bus but a working
/// NVML does not list: fallen off the bus, or failed to initialise.
pub(super) fn unreachable(inventory: &[InventoryGpu], nvml_works: bool) -> Vec<usize> {
    if !nvml_works {
        return Vec::new();
    }
    inventory
        .iter()
        .enumerate()
        .filter(|(_, g)| {
            g.vendor_id == 0x10de
                && g.kernel_driver.as_deref() == Some("nvidia")
                && !g.seen_by.iter().any(|s| s == "nvml")
        })
        .map(|(i, _)| i)
        .collect()
}

/// Why a GPU has no counters at all, in words: NVML's own reason, a GPU NVML answers lost
/// for, or no NVML device for it.
pub(super) fn no_counters_why(seen: &Seen, gpu: usize) -> String {
    let lost = seen
        .xids
        .iter()
        .any(|(d, x)| *d == Some(gpu) && x.code == Some(79));
    if lost {
        return "the GPU is lost: NVML answers GPU_IS_LOST".into();
    }
    nvml_why(seen).unwrap_or("NVML read none").to_owned()
}

/// Why NVML read nothing, in words, from the cause the sources gave.
fn nvml_why(seen: &Seen) -> Option<&'static str> {
    let said = |c: &str| seen.causes.iter().any(|x| x == c);
    [
        (cause::NVML_MISSING, "NVML not available (no NVIDIA driver)"),
        (
            cause::DRIVER_NOT_LOADED,
            "the NVIDIA kernel driver is not loaded",
        ),
        (
            cause::VERSION_MISMATCH,
            "NVML and the kernel driver differ in version",
        ),
        (cause::NO_PERMISSION, "NVML refused access (no permission)"),
        (cause::NVML_FAILED, "NVML failed to start"),
        (
            cause::NO_NVML_DEVICE,
            "NVML has no device with this GPU's UUID or PCI address",
        ),
    ]
    .into_iter()
    .find(|(c, _)| said(c))
    .map(|(_, w)| w)
}

/// Why the check found no GPU: NVML's reason where the sources gave one, else what the
/// machine said first.
pub(super) fn no_gpu_why(seen: &Seen, notes: &[String]) -> String {
    match (nvml_why(seen), notes.first()) {
        (Some(why), _) => why.to_owned(),
        (None, Some(note)) => note.clone(),
        (None, None) => "no GPU found".to_owned(),
    }
}

/// The GPUs of the check: the machine's inventory, or in a recording those it names, with
/// the names, UUIDs and NVML indices their sources gave.
pub(super) fn gpus(listed: Vec<Gpu>, seen: &Seen) -> BTreeMap<usize, Gpu> {
    let mut gpus: BTreeMap<usize, Gpu> = listed.into_iter().map(|g| (g.index, g)).collect();
    for (d, fields) in &seen.identity {
        let g = gpus.entry(*d).or_insert_with(|| Gpu {
            index: *d,
            ..Gpu::default()
        });
        if let Some(u) = text(Some(fields), signals::UUID.name) {
            g.uuid = Some(u.to_owned());
        }
        if let Some(n) = text(Some(fields), signals::NAME.name) {
            g.name = n.to_owned();
        }
        if let Some(i) = number(Some(fields), signals::NVML_INDEX.name) {
            g.nvml_index = Some(i as u32);
        }
    }
    gpus
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(address: &str, driver: &str, seen_by: &[&str]) -> InventoryGpu {
        InventoryGpu {
            pci_address: Some(address.into()),
            vendor_id: 0x10de,
            device_id: Some(0x2335),
            name: "NVIDIA H200".into(),
            uuid: None,
            nvml_index: None,
            kernel_driver: Some(driver.into()),
            mig_enabled: None,
            seen_by: seen_by.iter().map(|s| (*s).to_owned()).collect(),
            problem: None,
            compute_only: false,
        }
    }

    /// The kernel log's source over lines given here, as health reads it.
    struct KernelLines(crate::telemetry::kmsg::KmsgSource, Vec<&'static str>);

    impl Source for KernelLines {
        fn name(&self) -> &'static str {
            "kmsg"
        }

        fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
            let entries = self
                .1
                .iter()
                .enumerate()
                .map(|(i, text)| crate::platform::kernel_log::Entry::Line {
                    since_boot_us: 1_000_000 * (i as u64 + 1),
                    text: (*text).to_owned(),
                })
                .collect();
            self.0.records(entries, true)
        }

        fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
            Vec::new()
        }
    }

    #[test]
    fn health_reads_the_kernel_log_through_the_one_log_reader() {
        crate::logread::install_kernel_reader();
        // The oldest Xid form (bus:device, no domain), quoted in
        // tests/fixtures/real/nvidia-xid.jsonl, and an Xid behind a `dmesg -T` stamp: the
        // shared reader ties both to the GPU on their bus, where the Xid parser alone tied
        // the first to none.
        let log = KernelLines(
            crate::telemetry::kmsg::KmsgSource::new(&[
                (0, "0000:03:00.0".into()),
                (1, "0000:3b:00.0".into()),
            ]),
            vec![
                "NVRM: Xid (0003:00): 8, Channel 00000001",
                "[Fri Aug 30 11:43:09 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
                // Its near miss: the driver's news at load is no Xid.
                "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.148.06",
            ],
        );
        let mut sources: Vec<Box<dyn Source>> = vec![Box::new(log)];
        let seen = read_sources(&mut sources, false);
        let got: Vec<(Option<usize>, Option<u32>)> =
            seen.xids.iter().map(|(d, x)| (*d, x.code)).collect();
        assert_eq!(got, [(Some(0), Some(8)), (Some(1), Some(79))]);
    }

    #[test]
    fn a_gpu_the_driver_holds_but_nvml_cannot_reach_is_named() {
        let node = vec![
            gpu("0000:19:00.0", "nvidia", &["sysfs", "nvml"]),
            gpu("0000:3b:00.0", "nvidia", &["sysfs"]),
            gpu("0000:4c:00.0", "vfio-pci", &["sysfs"]),
        ];
        assert_eq!(unreachable(&node, true), vec![1]);
        assert!(
            unreachable(&node, false).is_empty(),
            "without a working NVML nothing can be said"
        );
    }
}
