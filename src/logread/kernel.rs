//! The kernel's GPU lines (and Windows' display driver's): NVIDIA's Xid lines through the
//! one Xid parser ([`crate::telemetry::xid_line::parse_xid`]) and its other NVRM lines (an
//! API mismatch, a GPU fallen off the bus without an Xid, RmInitAdapter, a GSP timeout),
//! amdgpu's, i915's and xe's (ring timeouts, VM faults in their forms, RAS, resets, hangs)
//! by their one table of events ([`crate::verdict::xid::events`], which `kiln health` and a
//! run's kernel-log source read too), and PCIe Advanced Error Reporting.
//!
//! The kinds follow what the text states, as the kernel's documentation names them:
//! amdgpu's GPU recovery (docs.kernel.org/gpu/amdgpu/debugging.html), i915's and xe's
//! hang and reset (docs.kernel.org/gpu/i915.html, docs.kernel.org/gpu/xe/), AER
//! (docs.kernel.org/PCI/pcieaer-howto.html), NVIDIA's Xid catalog.

use std::sync::OnceLock;

use regex::Regex;

use super::{Driver, FailureKind, Reading, Role, Source, normalise_pci};
use crate::finding::FindingCode;
use crate::telemetry::xid_line::parse_xid;
use crate::verdict::xid::{self, events};

/// A compiled constant pattern (each is proved by this module's tests).
fn re(cell: &'static OnceLock<Option<Regex>>, pattern: &str) -> Option<&'static Regex> {
    cell.get_or_init(|| Regex::new(pattern).ok()).as_ref()
}

macro_rules! pattern {
    ($name:ident, $text:expr) => {
        fn $name() -> Option<&'static Regex> {
            static CELL: OnceLock<Option<Regex>> = OnceLock::new();
            re(&CELL, $text)
        }
    };
}

// A device's own prefix: `amdgpu 0000:03:00.0: `, `pcieport 0000:00:1c.5: `.
pattern!(
    device_prefix,
    r"(?:^|\s)(?P<drv>[\w-]+) (?P<addr>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]):"
);
pattern!(
    aer_failure,
    r"(?i)AER:.*(?:error|can't recover|recovery failed|link has been reset)|PCIe Bus Error|DPC: containment event"
);
pattern!(
    received_from,
    r"received from (?P<addr>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
);
pattern!(
    aer_detail,
    r"error status/mask=|:\s+\[\s*\d+\]\s+\w+|can't find device of ID"
);
// Another tool's report of an Xid: `XID 79(GPU has fallen off the bus) detected on PCI:0000:ae:00`.
pattern!(
    reported_xid,
    r"\bXID (?P<code>\d+)\s*\((?P<text>[^)]*)\) detected on (?:PCI:)?(?P<addr>[0-9a-fA-F:.]+)"
);
pattern!(
    nvidia_line,
    r"NVRM:|nvidia-modeset:|nvidia-uvm:|^nvidia \S+:|\(EE\) NVIDIA|nvlddmkm"
);
pattern!(
    nvrm_address,
    r"(?:GPU|NVIDIA GPU) (?:at )?(?:PCI:)?(?P<addr>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}(?:\.[0-7])?)"
);
// An Xid's text that states a memory error: "double bit error (DBE)", "ECC", "Uncorrectable".
pattern!(xid_ecc, r"(?i)double bit|\bDBE\b|\bECC\b|uncorrectable");
pattern!(xorg_address, r"PCI:(?P<bus>\d+):(?P<dev>\d+):(?P<fun>\d+)");
pattern!(
    api_client,
    r"the client '(?P<name>[^']+)' \(pid (?P<pid>\d+)\)"
);
pattern!(
    fault_words,
    r"(?i)\b(?:fail(?:s|ed|ure)?|error|halted|assert(?:ion)?|can't|cannot|timed out|timeout|fatal)\b"
);
pattern!(
    gsp_timeout,
    r"(?i)GSP.*time(?:d)? ?out|heartbeat timed out|Timeout waiting for RPC from GSP"
);
pattern!(
    windows_event,
    r#"Event ID (?P<id>\d+) from source nvlddmkm|nvlddmkm,(?P<csv>\d+),|Provider Name=['"]nvlddmkm['"].*?<EventID[^>]*>(?P<xml>\d+)</EventID>"#
);
pattern!(
    amd_process,
    r"(?i)(?:Process information: process|Process|for process)\s+(?P<name>.*?)\s*pid (?P<pid>\d+)(?:\s+thread|\)|$)"
);
pattern!(amd_fault_detail, r"in page starting at|at page 0x");
pattern!(
    intel_hang_proc,
    r"GPU HANG: ecode [^,]*, in (?P<name>.+?) \[(?P<pid>\d+)\]"
);

/// What a kernel line says (its prefixes taken off).
/// None for a line of no GPU driver or of no failure.
pub fn read(text: &str) -> Option<(Role, Reading)> {
    aer(text).or_else(|| nvidia(text)).or_else(|| drm(text))
}

fn failure(driver: Driver, source: Option<Source>) -> Reading {
    Reading {
        source,
        driver: Some(driver),
        ..Reading::default()
    }
}

fn prefix_address(text: &str) -> Option<(String, String)> {
    let c = device_prefix()?.captures(text)?;
    Some((c["drv"].to_owned(), normalise_pci(&c["addr"])?))
}

/// PCIe Advanced Error Reporting: an error of any severity, and the status lines after it.
fn aer(text: &str) -> Option<(Role, Reading)> {
    let (_, address) = prefix_address(text)?;
    let mut r = failure(Driver::Pcie, Some(Source::Kernel));
    if aer_failure()?.is_match(text) {
        r.failure = Some(FailureKind::Link);
        // A root port's notice names the device the error came from.
        match received_from()?.captures(text) {
            Some(c) => {
                r.pci_address = normalise_pci(&c["addr"]);
                r.pci_weak = true;
            }
            None => r.pci_address = Some(address),
        }
        return Some((Role::Failure, r));
    }
    if aer_detail()?.is_match(text) {
        r.pci_address = Some(address);
        return Some((Role::Detail, r));
    }
    None
}

/// The kind an Xid line states in its text.
fn xid_kind(code: u32, text: &str) -> Option<FailureKind> {
    let lower = text.to_ascii_lowercase();
    if lower.contains("fallen off the bus") {
        Some(FailureKind::DeviceLost)
    } else if lower.contains("mmu fault") || lower.contains("page fault") {
        Some(FailureKind::PageFault)
    } else if lower.contains("timeout") || lower.contains("timed out") {
        Some(FailureKind::GpuHang)
    } else if xid_ecc().is_some_and(|r| r.is_match(text)) {
        Some(FailureKind::Ecc)
    } else if xid::lookup(code).is_some_and(|x| x.finding == FindingCode::XidNvlink) {
        // The links' Xids (NVLink, NVLink5, chip-to-chip), as the one Xid catalogue
        // knows them.
        Some(FailureKind::Link)
    } else {
        None
    }
}

/// NVIDIA: an Xid, another tool's report of one, and the driver's other failures.
fn nvidia(text: &str) -> Option<(Role, Reading)> {
    if let Some(c) = reported_xid()?.captures(text) {
        let code: u32 = c["code"].parse().ok()?;
        let mut r = failure(Driver::Nvidia, None);
        r.xid = Some(code);
        r.pci_address = normalise_pci(&c["addr"]);
        r.failure = xid_kind(code, &c["text"]);
        r.message = Some(c["text"].to_owned());
        return Some((Role::Failure, r));
    }
    if !nvidia_line()?.is_match(text) {
        return None;
    }
    if text.contains("NVRM:")
        && let Some(event) = parse_xid(text)
    {
        let mut r = failure(Driver::Nvidia, Some(Source::Kernel));
        r.pci_address = event.bus_id.as_deref().and_then(normalise_pci);
        r.pid = event.pid;
        r.process = event.process;
        match event.code {
            Some(code) => {
                r.xid = Some(code);
                r.failure = xid_kind(code, &event.message);
            }
            None => r.failure = Some(FailureKind::DeviceLost),
        }
        r.message = Some(event.message);
        if r.pci_address.is_none() {
            r.pci_address = address_in(text);
        }
        return Some((Role::Failure, r));
    }
    let mut r = failure(Driver::Nvidia, Some(Source::Kernel));
    r.pci_address = address_in(text);
    if text.contains("(EE) NVIDIA") {
        // Xorg's log: a third party's report, neither the kernel's nor an application's.
        r.source = None;
        r.pci_address = xorg_address()?.captures(text).and_then(|c| {
            let n = |k: &str| c[k].parse::<u32>().ok();
            normalise_pci(&format!("{:x}:{:x}.{:x}", n("bus")?, n("dev")?, n("fun")?))
        });
    }
    let lower = text.to_ascii_lowercase();
    if let Some(c) = windows_event()?.captures(text) {
        // nvlddmkm's event 153: the display driver reset the GPU after a timeout (TDR).
        let id = c
            .name("id")
            .or_else(|| c.name("csv"))
            .or_else(|| c.name("xml"))
            .map(|m| m.as_str());
        r.failure = (id == Some("153")).then_some(FailureKind::GpuHang);
        return Some((Role::Failure, r));
    }
    r.failure = if lower.contains("api mismatch") {
        if let Some(c) = api_client()?.captures(text) {
            r.pid = c["pid"].parse().ok();
            r.process = Some(c["name"].to_owned());
        }
        Some(FailureKind::VersionMismatch)
    } else if lower.contains("no nvidia graphics adapter")
        || lower.contains("probe routine was not called")
        || lower.contains("is not supported by the")
    {
        Some(FailureKind::DriverMissing)
    } else if lower.contains("fallen off the bus") {
        Some(FailureKind::DeviceLost)
    } else if gsp_timeout()?.is_match(text) || lower.contains("stopped responding") {
        Some(FailureKind::GpuHang)
    } else if fault_words()?.is_match(text) {
        None
    } else if lower.contains("the nvidia gpu") && r.pci_address.is_some() {
        // "The NVIDIA GPU 0000:b3:00.0 ... has fallen off the bus": the device first.
        return Some((Role::Detail, r));
    } else {
        return None;
    };
    Some((Role::Failure, r))
}

fn address_in(text: &str) -> Option<String> {
    nvrm_address()?
        .captures(text)
        .and_then(|c| normalise_pci(&c["addr"]))
        .or_else(|| prefix_address(text).map(|(_, a)| a))
}

/// The process a line names: amdgpu's (`process yuzu pid 4828 thread ...`; an empty name
/// is none) and i915's error capture (`GPU HANG: ecode ..., in Xorg [1234]`).
fn process_of(text: &str, r: &mut Reading) -> bool {
    let Some(c) = amd_process()
        .and_then(|p| p.captures(text))
        .or_else(|| intel_hang_proc()?.captures(text))
    else {
        return false;
    };
    r.pid = c["pid"].parse().ok();
    let name = c["name"].trim();
    r.process = (!name.is_empty()).then(|| name.to_owned());
    true
}

/// amdgpu's, i915's and xe's lines, read by their one table of events
/// ([`events::classify`]): an event of weight is a failure, the process a hang or fault
/// names and a fault's address lines are its detail, and anything else is no failure.
fn drm(text: &str) -> Option<(Role, Reading)> {
    let classified = events::classify(text);
    let driver = classified
        .map(|(d, _)| d)
        .or_else(|| events::driver_of(text))?;
    let mut r = failure(Driver::Drm(driver), Some(Source::Kernel));
    r.pci_address = prefix_address(text)
        .filter(|(d, _)| d == driver.name())
        .map(|(_, a)| a);
    let named = process_of(text, &mut r);
    let detail = named || amd_fault_detail().is_some_and(|p| p.is_match(text));
    // A line that says no more than `*ERROR*` beside a process or a fault's address is
    // that failure's detail, not an error of its own.
    let row = classified
        .map(|(_, row)| row)
        .filter(|row| !(row.kind == events::EventKind::DriverError && detail));
    match row {
        Some(row) if is_failure(row.kind) => {
            r.event = Some(row);
            r.failure = failure_of(row.kind);
            Some((Role::Failure, r))
        }
        // News of no weight: a corrected error, a wedge recovered.
        Some(_) => None,
        None if detail => Some((Role::Detail, r)),
        None => None,
    }
}

/// Whether an event of the table is a failure to explain (a corrected error or a
/// recovered wedge is not).
fn is_failure(kind: events::EventKind) -> bool {
    !matches!(
        kind,
        events::EventKind::RasCorrectable | events::EventKind::WedgedRecovered
    )
}

/// The failure an event of the table is, where it is one of the kinds `--json` names.
fn failure_of(kind: events::EventKind) -> Option<FailureKind> {
    use events::EventKind as E;
    match kind {
        E::Hang
        | E::HangSoftRecovered
        | E::EngineReset
        | E::EngineResetFailed
        | E::GpuResetBegin
        | E::GpuResetSucceeded
        | E::GpuResetFailed
        | E::VramLost => Some(FailureKind::GpuHang),
        E::PageFault => Some(FailureKind::PageFault),
        E::RasUncorrectable | E::RasPoison | E::RasBadPageThreshold => Some(FailureKind::Ecc),
        E::Wedged => Some(FailureKind::DeviceLost),
        E::Thermal => Some(FailureKind::Thermal),
        E::FirmwareFailed => Some(FailureKind::Other),
        E::InitFailed
        | E::DisplayError
        | E::DriverError
        | E::RasCorrectable
        | E::WedgedRecovered => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read1(text: &str) -> Option<(Role, Reading)> {
        read(text)
    }

    #[test]
    fn every_pattern_compiles() {
        for p in [
            device_prefix(),
            aer_failure(),
            received_from(),
            aer_detail(),
            reported_xid(),
            xid_ecc(),
            nvidia_line(),
            nvrm_address(),
            xorg_address(),
            api_client(),
            fault_words(),
            gsp_timeout(),
            windows_event(),
            amd_process(),
            amd_fault_detail(),
            intel_hang_proc(),
        ] {
            assert!(p.is_some());
        }
    }

    #[test]
    fn an_xid_is_read_through_the_one_parser_and_a_gpu_at_line_is_not_one() {
        let (role, r) = read1(
            "NVRM: Xid (PCI:0018:01:00): 145, RLW_RXPIPE Nonfatal XC0 i0 Link 13 (0x0409a0c2)",
        )
        .unwrap();
        assert_eq!(role, Role::Failure);
        assert_eq!(
            (r.xid, r.pci_address.as_deref(), r.failure),
            (Some(145), Some("0018:01:00.0"), Some(FailureKind::Link))
        );
        let (_, r) = read1("NVRM: Xid (PCI:0000:81:00): 48, pid=4242, name=python3, An uncorrectable double bit error (DBE) has been detected").unwrap();
        assert_eq!(r.failure, Some(FailureKind::Ecc));
        // The near miss: hex that spells "dbe" in an exception's registers is no ECC error.
        let (_, r) = read1(
            "NVRM: Xid (PCI:0000:41:00): 13, Graphics Exception: ESR 0x5067b0=0xdbe9 0x5067b4=0x24",
        )
        .unwrap();
        assert_eq!(r.failure, None);
        assert_eq!(
            read1("NVRM: GPU at PCI:0000:01:00: GPU-8a47641b-dff6-f09f-618c-c3eb58fb430d"),
            None
        );
        assert_eq!(
            read1("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  570.148.06"),
            None
        );
    }

    #[test]
    fn amdgpu_s_timeout_fault_and_ras_are_read_and_its_news_is_not() {
        let (_, r) = read1(
            "amdgpu 0000:03:00.0: amdgpu: ring comp_1.1.0 timeout, signaled seq=7, emitted seq=9",
        )
        .unwrap();
        assert_eq!(r.failure, Some(FailureKind::GpuHang));
        let (_, r) = read1("amdgpu 0000:88:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:8 pasid:32772, for process python3 pid 856757 thread python3 pid 856757)").unwrap();
        assert_eq!(
            (r.failure, r.pid, r.process.as_deref()),
            (Some(FailureKind::PageFault), Some(856757), Some("python3"))
        );
        let (_, r) = read1("amdgpu 0000:e3:00.0: amdgpu: uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!").unwrap();
        assert_eq!(r.failure, Some(FailureKind::Ecc));
        for quiet in [
            "amdgpu 0000:03:00.0: amdgpu: RAS: optional ras ta ucode is not available",
            "amdgpu 0000:e3:00.0: amdgpu: MEM ECC is active.",
            "amdgpu 0000:0c:00.0: amdgpu: ring gfx_0.0.0 uses VM inv eng 0 on hub 0",
            "amdgpu 0000:0c:00.0: amdgpu: SMU driver if version not matched",
        ] {
            assert_eq!(read1(quiet), None, "{quiet}");
        }
    }

    #[test]
    fn an_aer_error_is_read_and_aer_being_enabled_is_not() {
        let (_, r) = read1("pcieport 0000:80:1b.4: AER: Uncorrectable (Non-Fatal) error message received from 0000:80:1b.4").unwrap();
        assert_eq!(
            (r.driver, r.failure),
            (Some(Driver::Pcie), Some(FailureKind::Link))
        );
        assert_eq!(
            read1("pcieport 0000:00:1c.6: AER: enabled with IRQ 124"),
            None
        );
    }

    #[test]
    fn a_windows_tdr_is_read_from_the_event_s_text_csv_and_xml_and_another_event_is_no_hang() {
        for line in [
            "The description for Event ID 153 from source nvlddmkm cannot be found.",
            "Error,12/6/2026 10:00:00 AM,nvlddmkm,153,None,\"Reset TDR occurred on GPUID:100\"",
            "<Event><System><Provider Name='nvlddmkm'/><EventID Qualifiers='49322'>153</EventID></System></Event>",
        ] {
            let (_, r) = read1(line).unwrap();
            assert_eq!(
                (r.driver, r.failure),
                (Some(Driver::Nvidia), Some(FailureKind::GpuHang)),
                "{line}"
            );
        }
        let (_, r) = read1("<Event><System><Provider Name='nvlddmkm'/><EventID Qualifiers='49322'>0</EventID></System></Event>").unwrap();
        assert_eq!(r.failure, None);
    }

    #[test]
    fn an_intel_hang_names_its_process_and_its_firmware_news_is_quiet() {
        let (_, r) = read1(
            "i915 0000:00:02.0: [drm] GPU HANG: ecode 12:1:0020fffe, in xdg-desktop-por [1676]",
        )
        .unwrap();
        assert_eq!(
            (r.pid, r.process.as_deref()),
            (Some(1676), Some("xdg-desktop-por"))
        );
        assert_eq!(
            read1("i915 0000:00:02.0: [drm] GT0: GUC: submission enabled"),
            None
        );
    }
}
