//! The one reader of the logs people already have: a kernel log (`dmesg`, `journalctl -k`,
//! an `nvidia-bug-report.log`), an application's output, a Windows event's text. Each line
//! is read, with the prefixes the world prints taken off ([`prefix`]), into a typed
//! failure: the kernel's (NVIDIA Xid and other NVRM lines, amdgpu, i915 and xe, PCIe AER:
//! [`kernel`]) or an application's (the frameworks' words of `kiln watch`, CUDA runtime
//! errors, NVML and nvidia-smi: [`app`]). The lines a failure spans (a ring timeout and
//! the process it names, an AER error and its status lines) are joined into one
//! [`Found`]. `kiln explain` judges what was found ([`judge`]); `kiln health` and `kiln
//! run`'s kernel-log source read each line with [`kernel_line`] (installed in
//! `telemetry::kmsg` by the command line),
//! and the frameworks' words are the ones `kiln watch` uses (`verdict::watch::words`).

pub mod app;
mod edge;
pub mod judge;
pub mod kernel;
pub mod prefix;

use serde::Serialize;

pub use edge::{install_kernel_reader, kernel_line};

/// Who wrote the line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// The kernel (or Windows' display driver), in its log.
    Kernel,
    /// An application, in its own output.
    Application,
}

/// The kernel driver a kernel line comes from: NVIDIA's, one of the DRM drivers kiln reads
/// elsewhere too (amdgpu, i915, xe: [`crate::telemetry::sysfs::Driver`], the one enum of
/// them), or the PCIe port driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Driver {
    /// NVIDIA's (`NVRM`, `nvidia-modeset`, nvlddmkm on Windows).
    Nvidia,
    /// amdgpu, i915 or xe.
    Drm(crate::telemetry::sysfs::Driver),
    /// The PCIe port driver's Advanced Error Reporting.
    Pcie,
}

impl Driver {
    /// The name `--json` gives it (a DRM driver's is its kernel module's).
    pub fn name(self) -> &'static str {
        match self {
            Driver::Nvidia => "nvidia",
            Driver::Drm(d) => d.name(),
            Driver::Pcie => "pcie",
        }
    }
}

impl Serialize for Driver {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// What kind of failure a line says, where it says one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// An allocation failed for memory.
    OutOfMemory,
    /// The device was lost, removed or fell off the bus.
    DeviceLost,
    /// A kernel touched memory it may not (CUDA's illegal address).
    IllegalAddress,
    /// An API's own validation refused a call.
    Validation,
    /// No driver answers: not loaded, not installed, no device.
    DriverMissing,
    /// Two parts of the driver stack are different versions.
    VersionMismatch,
    /// The GPU stopped answering: a ring, job, context-switch or firmware timeout, a reset.
    GpuHang,
    /// A GPU virtual-memory (MMU) fault.
    PageFault,
    /// An uncorrectable memory or RAS error.
    Ecc,
    /// A link error (PCIe AER, NVLink).
    Link,
    /// A thermal event.
    Thermal,
    /// A failure of no kind above.
    Other,
}

impl FailureKind {
    /// The name `--json` gives it.
    pub fn name(self) -> &'static str {
        match self {
            FailureKind::OutOfMemory => "out_of_memory",
            FailureKind::DeviceLost => "device_lost",
            FailureKind::IllegalAddress => "illegal_address",
            FailureKind::Validation => "validation",
            FailureKind::DriverMissing => "driver_missing",
            FailureKind::VersionMismatch => "version_mismatch",
            FailureKind::GpuHang => "gpu_hang",
            FailureKind::PageFault => "page_fault",
            FailureKind::Ecc => "ecc",
            FailureKind::Link => "link",
            FailureKind::Thermal => "thermal",
            FailureKind::Other => "other",
        }
    }

    /// A kind a later line of the same failure may say more precisely (`other`, and a
    /// validation error whose cause is a lost device).
    fn weak(self) -> bool {
        matches!(self, FailureKind::Other | FailureKind::Validation)
    }
}

/// What one line says: each field None where the text does not say it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Reading {
    /// Who wrote it (None for a third party's report of another's line: Xorg, a monitor).
    pub source: Option<Source>,
    /// The kernel driver.
    pub driver: Option<Driver>,
    /// The NVIDIA Xid code.
    pub xid: Option<u32>,
    /// The device, `dddd:bb:dd.f`.
    pub pci_address: Option<String>,
    /// Whether `pci_address` is only where a report came from (an AER root port's
    /// notice), which the erring device's own line replaces.
    pub pci_weak: bool,
    /// The process the driver names.
    pub pid: Option<u32>,
    /// Its name (as the driver gives it: cut at 15 characters by Linux).
    pub process: Option<String>,
    /// The framework the text names (`pytorch`, `llama.cpp`, `nvidia-smi`...).
    pub framework: Option<&'static str>,
    /// What failed.
    pub failure: Option<FailureKind>,
    /// The size asked for, bytes.
    pub requested_bytes: Option<u64>,
    /// Whether `requested_bytes` is an exact count the text gives (ggml's `buffer of size
    /// N`), which wins over a figure rounded to a unit (`allocating 144817.04 MiB`).
    pub requested_exact: bool,
    /// The device's total as the framework gives it, bytes.
    pub total_bytes: Option<u64>,
    /// Free on the device, bytes.
    pub free_bytes: Option<u64>,
    /// Reserved by the framework's allocator as the text says it (PyTorch 2.x: reserved
    /// but unallocated), bytes.
    pub reserved_bytes: Option<u64>,
    /// Allocated by the framework, bytes.
    pub allocated_bytes: Option<u64>,
    /// The Xid's own text (for Xid 154's recovery action and Xid 45's earlier Xid).
    pub message: Option<String>,
    /// The kernel event an amdgpu, i915 or xe line is, from the one table of those
    /// drivers' events ([`crate::verdict::xid::events`]): what it means, whose it is and
    /// what to do come from there.
    pub event: Option<&'static crate::verdict::xid::events::EventRow>,
}

impl Reading {
    /// Fills what this reading does not say from `other`.
    fn fill(&mut self, other: &Reading) {
        self.source = self.source.or(other.source);
        self.driver = self.driver.or(other.driver);
        self.xid = self.xid.or(other.xid);
        self.event = self.event.or(other.event);
        // A device's own line names it over a root port's notice of where an error came from.
        if other.pci_address.is_some()
            && (self.pci_address.is_none() || (self.pci_weak && !other.pci_weak))
        {
            self.pci_address.clone_from(&other.pci_address);
            self.pci_weak = other.pci_weak;
        }
        self.pid = self.pid.or(other.pid);
        if self.process.is_none() {
            self.process.clone_from(&other.process);
        }
        self.framework = self.framework.or(other.framework);
        self.failure = match (self.failure, other.failure) {
            (Some(a), Some(b)) if a.weak() && !b.weak() => Some(b),
            (a, b) => a.or(b),
        };
        if (self.requested_bytes.is_none() || (other.requested_exact && !self.requested_exact))
            && other.requested_bytes.is_some()
        {
            self.requested_bytes = other.requested_bytes;
            self.requested_exact = other.requested_exact;
        }
        self.total_bytes = self.total_bytes.or(other.total_bytes);
        self.free_bytes = self.free_bytes.or(other.free_bytes);
        self.reserved_bytes = self.reserved_bytes.or(other.reserved_bytes);
        self.allocated_bytes = self.allocated_bytes.or(other.allocated_bytes);
        if self.message.is_none() {
            self.message.clone_from(&other.message);
        }
    }

    /// Whether `later` can be a line of the same failure as this one.
    fn joins(&self, later: &Reading) -> bool {
        let same_side =
            self.source == later.source || self.source.is_none() || later.source.is_none();
        let same_driver = match (self.driver, later.driver) {
            (Some(a), Some(b)) => a == b,
            (None, None) => true,
            // A detail without a driver (a framework's name) joins an application's line.
            (Some(_), None) | (None, Some(_)) => {
                self.source != Some(Source::Kernel) && later.source != Some(Source::Kernel)
            }
        };
        let same_device = match (&self.pci_address, &later.pci_address) {
            (Some(a), Some(b)) => a == b || self.pci_weak || later.pci_weak,
            _ => true,
        };
        let kinds_agree = match (self.failure, later.failure) {
            // A reset after a kernel fault is the fault's recovery, not a failure of its
            // own; other kinds side by side are two failures.
            (Some(a), Some(b)) => {
                a == b
                    || a.weak()
                    || b.weak()
                    || (self.source == Some(Source::Kernel) && b == FailureKind::GpuHang)
            }
            _ => true,
        };
        // Each Xid line is its own event.
        let one_xid = later.xid.is_none();
        let same_framework = match (self.framework, later.framework) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        };
        same_side && same_driver && same_device && kinds_agree && one_xid && same_framework
    }
}

/// What a line is to the reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It says a failure.
    Failure,
    /// It says more of a failure next to it (the process of a ring timeout, an AER
    /// error's status, the framework a traceback names) and nothing alone.
    Detail,
}

/// A failure found: its lines and what they say.
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// Its first line's number, from 1.
    pub line: usize,
    /// Its last line's number.
    pub last_line: usize,
    /// Its lines, prefixes and all, as the log has them.
    pub lines: Vec<String>,
    /// What they say.
    pub reading: Reading,
    /// The earlier failure (its index among those found) that this one names or follows:
    /// Xid 45's "caused by previous Xid 149", Xid 154's recovery action.
    pub follows: Option<usize>,
}

/// How far apart, in lines, the lines of one failure may be.
const SPAN_LINES: usize = 4;

/// What one line (prefixes and all) says, and what it is to the reader; None for a line
/// that says no failure.
pub fn read_line(line: &str) -> Option<(Role, Reading)> {
    let stripped = prefix::strip(line);
    kernel::read(stripped.text).or_else(|| {
        (!stripped.kernel)
            .then(|| app::read(stripped.text))
            .flatten()
    })
}

/// What one kernel-log line says (prefixes and all), read as the kernel's alone: the
/// reader a run's kernel-log source and `kiln health` share with `kiln explain`.
pub fn read_kernel_line(line: &str) -> Option<(Role, Reading)> {
    kernel::read(prefix::strip(line).text)
}

/// Every failure in `text` (a log, an excerpt), in the order of their first lines.
pub fn read_text(text: &str) -> Vec<Found> {
    let mut found: Vec<Found> = Vec::new();
    // Where the last failure's last line is among the logical lines: how far apart the
    // lines of one failure are is counted in those (a pretty-printed event is one).
    let mut last_at = 0;
    // A detail that came before its failure, waiting for it: where, its number, its line.
    let mut pending: Option<(usize, usize, String, Reading)> = None;
    for (at, (number, raw)) in logical_lines(text).into_iter().enumerate() {
        let raw = raw.as_str();
        let Some((role, reading)) = read_line(event_text(raw).as_deref().unwrap_or(raw)) else {
            continue;
        };
        let joins_last = found
            .last()
            .is_some_and(|last| at - last_at <= SPAN_LINES && last.reading.joins(&reading));
        if joins_last {
            if let Some(last) = found.last_mut() {
                last.reading.fill(&reading);
                last.last_line = number;
                last.lines.push(raw.to_owned());
                last_at = at;
            }
            continue;
        }
        match role {
            Role::Detail => pending = Some((at, number, raw.to_owned(), reading)),
            Role::Failure => {
                let mut f = Found {
                    line: number,
                    last_line: number,
                    lines: vec![raw.to_owned()],
                    reading,
                    follows: None,
                };
                if let Some((detail_at, detail_number, line, detail)) = pending.take()
                    && at - detail_at <= SPAN_LINES
                    && detail.joins(&f.reading)
                {
                    f.reading.fill(&detail);
                    f.line = detail_number;
                    f.lines.insert(0, line);
                }
                f.follows = follows(&found, &f.reading);
                found.push(f);
                last_at = at;
            }
        }
    }
    found
}

/// The lines of a text, numbered from 1: rsyslog's `#012` (a message's line break) splits
/// one; Windows events exported as XML (`wevtutil qe System /f:xml`) are one line each,
/// whether the export ran them together on one line or pretty-printed each over many
/// (numbered by its first).
fn logical_lines(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    // An event whose `</Event>` is still to come: its first line's number, and it so far.
    let mut open: Option<(usize, String)> = None;
    let lines = text.lines().flat_map(|l| l.split("#012")).enumerate();
    for (number, piece) in
        lines.flat_map(|(i, l)| l.split_inclusive("</Event>").map(move |p| (i + 1, p)))
    {
        let trimmed = piece.trim();
        if let Some((_, event)) = &mut open {
            // Pretty-printing puts only whitespace between the tags; text broken over
            // lines keeps a space.
            if !(event.ends_with('>') || trimmed.starts_with('<')) {
                event.push(' ');
            }
            event.push_str(trimmed);
            if trimmed.ends_with("</Event>")
                && let Some(done) = open.take()
            {
                out.push(done);
            }
            continue;
        }
        let opens = trimmed.contains("<Event ") || trimmed.contains("<Event>");
        if opens && !trimmed.ends_with("</Event>") {
            open = Some((number, trimmed.to_owned()));
        } else {
            out.push((number, piece.to_owned()));
        }
    }
    // An event cut before its end is read as far as it goes.
    out.extend(open);
    out
}

/// What a Windows event's XML says in words: the NVIDIA driver's own line it carries (an
/// Xid, as the kernel log prints it on Linux), its entities decoded. None for a line that
/// is no event, or an event that carries no such line (its provider and ID are read from
/// the XML itself).
fn event_text(line: &str) -> Option<String> {
    if !line.contains("</Event>") {
        return None;
    }
    let start = line.find("<Event ").or_else(|| line.find("<Event>"))?;
    let end = line.find("</Event>")? + "</Event>".len();
    let event = crate::telemetry::eventlog::parse_event(line.get(start..end)?)?;
    event
        .data
        .into_iter()
        .map(|(_, text)| text)
        .find(|text| text.contains("NVRM:"))
}

/// The earlier failure a new Xid names or follows: Xid 45's "caused by previous Xid N",
/// Xid 154's recovery action (the latest Xid before it on its device).
fn follows(earlier: &[Found], reading: &Reading) -> Option<usize> {
    let xid = reading.xid?;
    let named = reading.message.as_deref().and_then(|m| {
        let at = m.find("previous Xid")?;
        m[at + "previous Xid".len()..]
            .split(|c: char| !c.is_ascii_digit())
            .find(|s| !s.is_empty())?
            .parse::<u32>()
            .ok()
    });
    if named.is_none() && xid != 154 {
        return None;
    }
    earlier.iter().rposition(|f| {
        f.reading.pci_address == reading.pci_address
            && f.reading
                .xid
                .is_some_and(|x| x != 154 && named.is_none_or(|n| n == x))
    })
}

/// A PCI address as the world writes it (`0000:3b:00`, `0000:3B:00.0`, `0003:00` of
/// old Xid lines, bus:device without a domain) in `dddd:bb:dd.f`.
pub fn normalise_pci(address: &str) -> Option<String> {
    let address = address
        .trim()
        .trim_start_matches("PCI:")
        .trim_end_matches(':');
    let (head, function) = match address.rsplit_once('.') {
        Some((h, f)) => (h, u32::from_str_radix(f, 16).ok()?),
        None => (address, 0),
    };
    let parts: Vec<u32> = head
        .split(':')
        .map(|p| u32::from_str_radix(p, 16).ok())
        .collect::<Option<_>>()?;
    let (domain, bus, device) = match parts[..] {
        [d, b, dev] => (d, b, dev),
        [b, dev] => (0, b, dev),
        _ => return None,
    };
    (bus <= 0xff && device <= 0x1f && function <= 7)
        .then(|| format!("{domain:04x}:{bus:02x}:{device:02x}.{function}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_are_written_one_way() {
        for (given, want) in [
            ("0000:3B:00", Some("0000:3b:00.0")),
            ("PCI:0000:05:00", Some("0000:05:00.0")),
            ("0018:01:00", Some("0018:01:00.0")),
            ("0003:00", Some("0000:03:00.0")),
            ("0000:00:1c.5", Some("0000:00:1c.5")),
            ("0000:00:1c", Some("0000:00:1c.0")),
            ("zz:00", None),
            ("0000:300:00", None),
        ] {
            assert_eq!(normalise_pci(given).as_deref(), want, "{given}");
        }
    }

    #[test]
    fn the_lines_of_one_failure_are_one_and_a_later_xid_is_linked() {
        let text = "[  312.522692] amdgpu 0000:28:00.0: ring gfx_0.0.0 timeout, signaled seq=57638, emitted seq=57641\n\
                    [  312.522700] amdgpu 0000:28:00.0:  Process cosmic-comp pid 2288 thread cosmic-com:cs0 pid 2316\n\
                    NVRM: Xid (PCI:0000:dc:00): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406)\n\
                    unrelated line\n\
                    NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149\n\
                    NVRM: Xid (PCI:0000:dc:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)";
        let found = read_text(text);
        assert_eq!(found.len(), 4, "{found:#?}");
        assert_eq!((found[0].line, found[0].last_line), (1, 2));
        assert_eq!(found[0].reading.pid, Some(2288));
        assert_eq!(found[0].reading.process.as_deref(), Some("cosmic-comp"));
        assert_eq!(found[2].reading.xid, Some(45));
        assert_eq!(found[2].follows, Some(1));
        assert_eq!(found[3].follows, Some(2), "154 follows the Xid before it");
        // The near miss: an Xid of another device is not what 45 follows.
        let other = read_text(
            "NVRM: Xid (PCI:0000:01:00): 149, NETIR Fatal\nNVRM: Xid (PCI:0000:dc:00): 45, Ch 00000001 caused by previous Xid 149",
        );
        assert_eq!(other[1].follows, None);
    }

    #[test]
    fn a_reset_after_a_fault_is_the_fault_s_and_two_faults_are_two() {
        let found = read_text(
            "amdgpu 0000:e3:00.0: amdgpu: uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!\n\
             amdgpu 0000:e3:00.0: amdgpu: GPU reset begin!",
        );
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].reading.failure, Some(FailureKind::Ecc));
        let found = read_text(
            "amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:7 pasid:32771)\n\
             amdgpu 0000:03:00.0: amdgpu: uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!",
        );
        assert_eq!(found.len(), 2, "{found:#?}");
    }
}

/// One failure as `kiln explain --json` gives it: exactly these fields, each null where
/// the text does not say it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explained {
    /// Its first line's number, from 1.
    pub line: usize,
    /// `kernel` or `application`.
    pub source: Option<Source>,
    /// `nvidia`, `amdgpu`, `i915`, `xe`, `pcie`.
    pub driver: Option<Driver>,
    /// The Xid code.
    pub xid: Option<u32>,
    /// `dddd:bb:dd.f`.
    pub pci_address: Option<String>,
    /// The process id the driver names.
    pub pid: Option<u32>,
    /// The process name the driver gives.
    pub process: Option<String>,
    /// The framework the text names.
    pub framework: Option<&'static str>,
    /// What failed.
    pub failure: Option<FailureKind>,
    /// Bytes asked for.
    pub requested_bytes: Option<u64>,
    /// The device's total bytes.
    pub total_bytes: Option<u64>,
    /// Free bytes.
    pub free_bytes: Option<u64>,
    /// Reserved bytes, as the text gives them.
    pub reserved_bytes: Option<u64>,
    /// Allocated bytes.
    pub allocated_bytes: Option<u64>,
    /// Whose fault.
    pub class: judge::Whose,
    /// What it means.
    pub meaning: String,
    /// What to do.
    pub action: String,
}

impl Explained {
    /// A failure found, judged.
    pub fn of(found: &Found) -> Explained {
        let r = &found.reading;
        let j = judge::judge(r);
        Explained {
            line: found.line,
            source: r.source,
            driver: r.driver,
            xid: r.xid,
            pci_address: r.pci_address.clone(),
            pid: r.pid,
            process: r.process.clone(),
            framework: r.framework,
            failure: r.failure,
            requested_bytes: r.requested_bytes,
            total_bytes: r.total_bytes,
            free_bytes: r.free_bytes,
            reserved_bytes: r.reserved_bytes,
            allocated_bytes: r.allocated_bytes,
            class: j.class,
            meaning: j.meaning,
            action: j.action,
        }
    }
}

/// Every failure of `text`, judged.
pub fn explain(text: &str) -> Vec<Explained> {
    read_text(text).iter().map(Explained::of).collect()
}
