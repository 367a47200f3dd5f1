//! Xids from the OS's log: the kernel log's `NVRM: Xid` lines on Linux, the System event
//! log on Windows. Entries from before the run are history, kept apart from Xids during it.

use super::eventlog::{self, GpuEvent};
use super::record::{DriverReset, Reading, Readings, TelemetryData, XidEvent};
use super::xid_line::{KernelLine, read_kernel_line};
use super::{Gap, Source, cause, signals};
use crate::platform::kernel_log::{self, Entry, KernelLog};
use std::collections::BTreeMap;

/// The OS's log of driver and hardware errors as a telemetry source: the kernel log on
/// Linux, the System event log on Windows ([`crate::platform::kernel_log`]).
pub struct KmsgSource {
    /// Vulkan device index by PCI bus id prefix (`0000:05:00`).
    buses: BTreeMap<String, usize>,
    /// Each device's name, to tie a driver reset to the devices of its vendor.
    names: BTreeMap<usize, String>,
    log: Option<KernelLog>,
    /// Why the log cannot be read, once `start` has tried.
    unreadable: Option<Gap>,
    /// When the machine booted (µs since the epoch): puts an event the log dates by the
    /// clock on the kernel's time since boot.
    boot_unix_us: Option<u64>,
    /// PCIe errors of the run the log counted per device (WHEA's, on Windows), as the AER
    /// counters: (correctable, fatal). Only where the log is the one that counts them.
    pcie_errors: Option<BTreeMap<usize, (u64, u64)>>,
}

impl KmsgSource {
    /// A source for devices at these PCI addresses (`domain:bus:device.function`).
    pub fn new(devices: &[(usize, String)]) -> KmsgSource {
        let buses = devices
            .iter()
            .map(|(i, pci)| {
                (
                    pci.rsplit_once('.')
                        .map_or(pci.as_str(), |(b, _)| b)
                        .to_ascii_lowercase(),
                    *i,
                )
            })
            .collect();
        KmsgSource {
            buses,
            names: BTreeMap::new(),
            log: None,
            unreadable: None,
            boot_unix_us: None,
            pcie_errors: kernel_log::COUNTS_PCIE_ERRORS.then(|| {
                devices
                    .iter()
                    .map(|(i, _)| (*i, (0, 0)))
                    .collect::<BTreeMap<_, _>>()
            }),
        }
    }

    /// A source for the targets that have a PCI address.
    pub fn for_targets(devices: &[super::Target]) -> KmsgSource {
        let mut source = KmsgSource::new(&super::with_pci(devices));
        source.names = devices.iter().map(|d| (d.index, d.name.clone())).collect();
        source
    }

    fn device_on_bus(&self, bus: &str) -> Option<usize> {
        self.buses
            .iter()
            .find(|(known, _)| known.ends_with(bus) || bus.ends_with(known.as_str()))
            .map(|(_, &i)| i)
    }

    fn device_of(&self, event: &XidEvent) -> Option<usize> {
        self.device_on_bus(event.bus_id.as_deref()?)
    }

    /// The records of one kernel-log line, read by the installed reader
    /// ([`super::xid_line::install_reader`],
    /// the one log reader): an Xid (or a GPU off the bus) as an [`XidEvent`], a GPU driver's
    /// reset of a hung GPU as a [`DriverReset`] of that driver.
    fn event(
        &self,
        usec: u64,
        message: &str,
        before_run: bool,
    ) -> Vec<(Option<usize>, TelemetryData)> {
        match read_kernel_line(message) {
            Some(KernelLine::Xid(mut xid)) => {
                xid.kernel_us = Some(usec);
                xid.before_run = before_run;
                vec![(self.device_of(&xid), TelemetryData::Xid { xid })]
            }
            Some(KernelLine::Reset {
                driver,
                pci_address,
                evidence,
            }) => {
                let logged = self.boot_unix_us.map(|boot| boot.saturating_add(usec));
                let on_bus = pci_address
                    .as_deref()
                    .and_then(|a| self.device_on_bus(super::xid_line::bus_of(a)));
                let mut records = self.reset(driver, logged, evidence, before_run);
                if let Some(device) = on_bus {
                    // The line names its device: the reset is that one's alone.
                    records.truncate(1);
                    records[0].0 = Some(device);
                }
                records
            }
            None => Vec::new(),
        }
    }

    /// The devices a reset of this driver concerns: those of its vendor, by name; every
    /// device (None) where none is recognisably its.
    fn devices_of_driver(&self, driver: &str) -> Vec<Option<usize>> {
        let driver = driver.to_ascii_lowercase();
        let words: &[&str] = if driver.starts_with("nvlddmkm") {
            &["nvidia"]
        } else if ["amdkmdag", "amdwddmg", "atikmdag", "atikmpag", "amdgpu"]
            .iter()
            .any(|d| driver.starts_with(d))
        {
            &["amd", "radeon"]
        } else if ["igfx", "igdkmd"].iter().any(|d| driver.starts_with(d))
            || ["i915", "xe"].contains(&driver.as_str())
        {
            &["intel"]
        } else {
            &[]
        };
        let mine: Vec<Option<usize>> = self
            .names
            .iter()
            .filter(|(_, name)| {
                let name = name.to_ascii_lowercase();
                words.iter().any(|w| name.contains(w))
            })
            .map(|(&i, _)| Some(i))
            .collect();
        if mine.is_empty() { vec![None] } else { mine }
    }

    fn reset(
        &self,
        driver: &str,
        logged_unix_us: Option<u64>,
        evidence: String,
        before_run: bool,
    ) -> Vec<(Option<usize>, TelemetryData)> {
        let reset = DriverReset {
            driver: driver.to_owned(),
            logged_unix_us,
            before_run,
            evidence: vec![evidence],
            t_ms: None,
        };
        self.devices_of_driver(driver)
            .into_iter()
            .map(|d| {
                (
                    d,
                    TelemetryData::DriverReset {
                        reset: reset.clone(),
                    },
                )
            })
            .collect()
    }

    /// The records of an event of Windows' System log.
    fn log_event(&mut self, xml: &str, before_run: bool) -> Vec<(Option<usize>, TelemetryData)> {
        let Some(event) = eventlog::parse_event(xml) else {
            return Vec::new();
        };
        match eventlog::classify(&event) {
            Some(GpuEvent::Xid(mut xid)) => {
                xid.before_run = before_run;
                xid.kernel_us = event
                    .logged_unix_us
                    .zip(self.boot_unix_us)
                    .and_then(|(at, boot)| at.checked_sub(boot));
                vec![(self.device_of(&xid), TelemetryData::Xid { xid })]
            }
            Some(GpuEvent::DriverReset { driver }) => self.reset(
                &driver,
                event.logged_unix_us,
                format!("System log: {} event {}", event.provider, event.id),
                before_run,
            ),
            Some(GpuEvent::PcieError { fatal, addresses }) => {
                // Counted as the AER counters of the device it names, for the run only:
                // history is the machine's past, not this test's.
                if !before_run {
                    let devices: Vec<usize> = addresses
                        .iter()
                        .filter_map(|a| self.device_on_bus(a.split('.').next().unwrap_or(a)))
                        .collect();
                    if let (Some(&device), Some(counts)) = (devices.first(), &mut self.pcie_errors)
                    {
                        let count = counts.entry(device).or_default();
                        if fatal {
                            count.1 += 1;
                        } else {
                            count.0 += 1;
                        }
                    }
                }
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    /// The records of the log's entries.
    pub(crate) fn records(
        &mut self,
        entries: Vec<Entry>,
        before_run: bool,
    ) -> Vec<(Option<usize>, TelemetryData)> {
        let mut out = Vec::new();
        for entry in entries {
            match entry {
                Entry::Line {
                    since_boot_us,
                    text,
                } => out.extend(self.event(since_boot_us, &text, before_run)),
                Entry::Event { xml } => out.extend(self.log_event(&xml, before_run)),
                Entry::WatchdogReport {
                    path,
                    written_unix_s,
                } => out.extend(self.reset(
                    "",
                    written_unix_s.checked_mul(1_000_000),
                    format!("watchdog report {}", path.display()),
                    before_run,
                )),
            }
        }
        out
    }
}

impl Source for KmsgSource {
    fn name(&self) -> &'static str {
        "kmsg"
    }

    fn status(&self) -> Vec<Gap> {
        self.unreadable.iter().cloned().collect()
    }

    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.boot_unix_us = kernel_log::boot_unix_us();
        match kernel_log::open() {
            Ok((log, history)) => {
                self.log = Some(log);
                self.records(history, true)
            }
            Err(message) => {
                // A log not read counts nothing: no counter may read as zero errors.
                self.pcie_errors = None;
                let gap = Gap {
                    device: None,
                    message,
                    missing: vec![signals::XID.name.into()],
                    cause: Some(cause::KERNEL_LOG_UNREADABLE.into()),
                };
                self.unreadable = Some(gap.clone());
                vec![gap.record()]
            }
        }
    }

    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        let entries = match &mut self.log {
            Some(log) => log.read(),
            None => return Vec::new(),
        };
        self.records(entries, false)
    }

    fn snapshot(&mut self) -> Vec<(usize, Readings)> {
        let Some(counts) = &self.pcie_errors else {
            return Vec::new();
        };
        counts
            .iter()
            .map(|(&device, &(correctable, fatal))| {
                (
                    device,
                    Readings::from([
                        (
                            signals::AER_CORRECTABLE.name.to_owned(),
                            Reading::Number(correctable as f64),
                        ),
                        (
                            signals::AER_FATAL.name.to_owned(),
                            Reading::Number(fatal as f64),
                        ),
                    ]),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event_xml(name: &str) -> Entry {
        let path = format!(
            "{}/tests/fixtures/eventlog/{name}.xml",
            env!("CARGO_MANIFEST_DIR")
        );
        Entry::Event {
            xml: std::fs::read_to_string(path).unwrap(),
        }
    }

    /// A source for an NVIDIA card at 0000:01:00.0 beside an Intel one at 0000:00:02.0,
    /// reading a log that counts PCIe errors (Windows').
    fn windows_source() -> KmsgSource {
        let mut source = KmsgSource::new(&[(0, "0000:01:00.0".into()), (1, "0000:00:02.0".into())]);
        source.names = BTreeMap::from([
            (0, "NVIDIA GeForce RTX 4090".to_owned()),
            (1, "Intel(R) UHD Graphics 770".to_owned()),
        ]);
        source.pcie_errors = Some(BTreeMap::from([(0, (0, 0)), (1, (0, 0))]));
        source.boot_unix_us = eventlog::parse_system_time("2026-11-28T20:00:00Z");
        source
    }

    #[test]
    fn windows_events_become_the_records_the_verdict_judges() {
        // The Xid an nvlddmkm event carries is read by the one log reader, as a kernel line is.
        crate::logread::install_kernel_reader();
        let mut source = windows_source();
        let records = source.records(
            vec![
                event_xml("nvlddmkm_13_xid79"),
                event_xml("display_4101_nvlddmkm"),
                event_xml("nvlddmkm_153_no_xid"),
                event_xml("whea_19_machine_check"),
            ],
            false,
        );
        assert_eq!(records.len(), 2, "{records:?}");
        let (device, TelemetryData::Xid { xid }) = &records[0] else {
            panic!("an Xid first: {records:?}");
        };
        assert_eq!((*device, xid.code), (Some(0), Some(79)));
        // Its time since boot, from the clock time the log gives.
        assert_eq!(xid.kernel_us, Some((74 * 60 + 1) * 1_000_000 + 4_211));
        // The TDR is the NVIDIA card's: nvlddmkm is its driver, not the Intel one's.
        let (device, TelemetryData::DriverReset { reset }) = &records[1] else {
            panic!("a reset second: {records:?}");
        };
        assert_eq!(*device, Some(0));
        assert_eq!(reset.driver, "nvlddmkm");
        assert_eq!(reset.evidence, ["System log: Display event 4101"]);
        assert!(!reset.before_run);
        // A reset of a driver no device is recognisably of concerns them all.
        let unknown = source.reset("vendorx", None, "e".into(), false);
        assert_eq!(unknown.len(), 1);
        assert_eq!(unknown[0].0, None);
    }

    #[test]
    fn whea_pcie_errors_count_as_the_aer_counters_of_the_device_they_name() {
        let mut source = windows_source();
        // History is the machine's past, not this run's: not counted.
        source.records(vec![event_xml("whea_17_pcie_corrected")], true);
        let zero = source.snapshot();
        assert_eq!(
            zero[0].1[signals::AER_CORRECTABLE.name],
            Reading::Number(0.0)
        );
        source.records(
            vec![
                event_xml("whea_17_pcie_corrected"),
                event_xml("whea_17_pcie_corrected"),
                event_xml("whea_20_pcie_fatal_rendered"),
            ],
            false,
        );
        let counts = source.snapshot();
        assert_eq!(counts[0].0, 0);
        assert_eq!(
            counts[0].1[signals::AER_CORRECTABLE.name],
            Reading::Number(2.0)
        );
        assert_eq!(counts[0].1[signals::AER_FATAL.name], Reading::Number(1.0));
        assert_eq!(counts[1].1[signals::AER_FATAL.name], Reading::Number(0.0));
    }

    #[test]
    fn events_map_to_the_device_on_that_bus() {
        let source = KmsgSource::new(&[(2, "0000:05:00.0".into()), (3, "0000:81:00.0".into())]);
        let device = |line: &str| source.event(1, line, false).first().map(|(d, _)| *d);
        assert_eq!(
            device("NVRM: Xid (PCI:0000:81:00): 48, pid=1, name=x, y"),
            Some(Some(3))
        );
        assert_eq!(
            device("NVRM: Xid (05:00): 79, GPU has fallen off the bus."),
            Some(Some(2)),
            "older drivers omit the domain"
        );
        assert_eq!(device("NVRM: Xid (PCI:0000:99:00): 79, z"), Some(None));
    }

    /// A source for an NVIDIA card at 0000:03:00.0 beside an AMD one at 0000:0c:00.0.
    fn linux_source() -> KmsgSource {
        let mut source = KmsgSource::new(&[(0, "0000:03:00.0".into()), (1, "0000:0c:00.0".into())]);
        source.names = BTreeMap::from([
            (0, "NVIDIA GeForce RTX 3090".to_owned()),
            (1, "AMD Radeon RX 6800 XT".to_owned()),
        ]);
        source
    }

    #[test]
    fn the_forms_only_the_shared_reader_knows_reach_the_run() {
        crate::logread::install_kernel_reader();
        let source = linux_source();
        // The oldest Xid form, bus:device without a domain (`0003:00`), quoted in
        // tests/fixtures/real/nvidia-xid.jsonl: the shared reader writes it `0000:03:00.0`,
        // so it is the card's on bus 03, where the Xid parser alone tied it to none.
        let records = source.event(7, "NVRM: Xid (0003:00): 8, Channel 00000001", false);
        let [(device, TelemetryData::Xid { xid })] = &records[..] else {
            panic!("one Xid: {records:?}");
        };
        assert_eq!(
            (*device, xid.code, xid.kernel_us),
            (Some(0), Some(8), Some(7))
        );
        // An amdgpu ring timeout behind a journal prefix (tests/fixtures/real/amdgpu.jsonl)
        // is a reset of the AMD card the line names, with the line as its evidence.
        let line = "maj 08 19:27:35 RX-78-FPC kernel: amdgpu 0000:0c:00.0: ring gfx_0.0.0 timeout, signaled seq=166926, emitted seq=166928";
        let records = source.event(9, line, false);
        let [(device, TelemetryData::DriverReset { reset })] = &records[..] else {
            panic!("one reset: {records:?}");
        };
        assert_eq!((*device, reset.driver.as_str()), (Some(1), "amdgpu"));
        assert!(reset.evidence[0].starts_with("amdgpu 0000:0c:00.0: ring gfx_0.0.0 timeout"));
        // Without an address, the reset is the AMD card's by its name.
        let records = source.event(
            9,
            "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring sdma0 timeout, signaled seq=185689, emitted seq=185689",
            false,
        );
        assert_eq!(records.len(), 1);
        assert_eq!(records[0].0, Some(1));
        // Near misses: a corrected RAS count, a page fault (no reset), an NVIDIA line
        // without an Xid, and the driver's news at load are no records.
        for quiet in [
            "amdgpu 0000:0c:00.0: amdgpu: 12 correctable hardware errors detected in gfx block",
            "amdgpu 0000:0c:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:8 pasid:32772, for process python3 pid 856757 thread python3 pid 856757)",
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.148.06",
            "NVRM: GPU at PCI:0000:03:00: GPU-8a47641b-dff6-f09f-618c-c3eb58fb430d",
            "amdgpu 0000:0c:00.0: amdgpu: ring gfx_0.0.0 uses VM inv eng 0 on hub 0",
        ] {
            assert!(source.event(1, quiet, false).is_empty(), "{quiet}");
        }
    }
}
