//! The NVIDIA driver's Xid line read into an [`XidEvent`]: `NVRM: Xid (PCI:0000:05:00): 79,
//! pid=..., name=..., text` (older drivers leave out `PCI:`), and the "fallen off the bus"
//! line that carries no code. The kernel log writes it on Linux, and nvlddmkm's events in
//! Windows' System log carry the same text. Both are read by the reader installed here
//! ([`install_reader`]: the one log reader `kiln explain` uses), and by this parser alone
//! until one is.

use std::sync::OnceLock;

use regex::Regex;

use super::record::{XidChannel, XidEvent};

fn xid_pattern() -> &'static Regex {
    static XID: OnceLock<Regex> = OnceLock::new();
    XID.get_or_init(|| {
        Regex::new(r"NVRM: Xid \(((?:PCI:)?[0-9a-fA-F:.]+)\)[^:]*: (\d+),\s*(.*)$")
            .expect("a valid pattern")
    })
}

fn bus_pattern() -> &'static Regex {
    static BUS: OnceLock<Regex> = OnceLock::new();
    BUS.get_or_init(|| {
        Regex::new(r"NVRM: GPU at (?:PCI:)?([0-9a-fA-F:.]+)").expect("a valid pattern")
    })
}

fn pid_pattern() -> &'static Regex {
    static PID: OnceLock<Regex> = OnceLock::new();
    PID.get_or_init(|| {
        Regex::new(r"^pid='?(\d+|<unknown>)'?,\s*(?:name=([^,]*),\s*)?(.*)$")
            .expect("a valid pattern")
    })
}

/// What one kernel-log line is to a run and to `kiln health`.
#[derive(Debug, Clone, PartialEq)]
pub enum KernelLine {
    /// An Xid, or a GPU fallen off the bus.
    Xid(XidEvent),
    /// A GPU's driver (amdgpu, i915, xe) reset it, or declared it wedged, after a hang.
    Reset {
        /// The driver, by its kernel module's name.
        driver: &'static str,
        /// The device the line names, `dddd:bb:dd.f`.
        pci_address: Option<String>,
        /// The line, its prefixes taken off.
        evidence: String,
    },
}

/// A reader of kernel-log lines.
pub type LineReader = fn(&str) -> Option<KernelLine>;

static READER: OnceLock<LineReader> = OnceLock::new();

/// Installs the reader of the kernel log's lines: the one log reader `kiln explain` uses
/// (its `kernel_line`), installed by the command line before any source runs.
/// It is installed rather than named because it sits above telemetry (it reads telemetry's
/// own types); until it is, the Xid parser alone reads the lines.
pub fn install_reader(reader: LineReader) {
    // Installed once; a second install is the same reader.
    let _ = READER.set(reader);
}

/// What a kernel-log line (or the NVIDIA line a Windows event carries) is, by the installed
/// reader.
pub fn read_kernel_line(line: &str) -> Option<KernelLine> {
    match READER.get() {
        Some(read) => read(line),
        None => parse_xid(line).map(KernelLine::Xid),
    }
}

/// `domain:bus:device` of a `domain:bus:device.function` address, as the driver prints it
/// in an Xid line and kiln keys its devices.
pub fn bus_of(address: &str) -> &str {
    address.rsplit_once('.').map_or(address, |(bus, _)| bus)
}

/// Parses an Xid or "fallen off the bus" message (the text after the kernel's prefix).
pub fn parse_xid(message: &str) -> Option<XidEvent> {
    if let Some(c) = xid_pattern().captures(message) {
        let bus = c[1].trim_start_matches("PCI:").to_ascii_lowercase();
        let code = c[2].parse().ok();
        let rest = c[3].trim();
        let (pid, process, text) = match pid_pattern().captures(rest) {
            Some(p) => {
                // Some drivers give the pid without a name (`pid=2628, CMDre ...`).
                let name = p.get(2).map_or("", |m| m.as_str().trim());
                (
                    p[1].parse().ok(),
                    (name != "<unknown>" && !name.is_empty()).then(|| name.to_owned()),
                    p[3].trim().to_owned(),
                )
            }
            None => (None, None, rest.to_owned()),
        };
        return Some(XidEvent {
            bus_id: Some(bus),
            code,
            pid,
            process,
            message: text,
            kernel_us: None,
            before_run: false,
            t_ms: None,
            seen_by: vec![XidChannel::KernelLog],
        });
    }
    if message.contains("fallen off the bus") {
        return Some(XidEvent {
            bus_id: bus_pattern()
                .captures(message)
                .map(|c| c[1].trim_end_matches(':').to_ascii_lowercase()),
            code: None,
            pid: None,
            process: None,
            message: message.trim().to_owned(),
            kernel_us: None,
            before_run: false,
            t_ms: None,
            seen_by: vec![XidChannel::KernelLog],
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xid_lines_of_every_shape_parse() {
        let x = parse_xid("NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.").unwrap();
        assert_eq!(x.bus_id.as_deref(), Some("0000:05:00"));
        assert_eq!(x.code, Some(79));
        assert_eq!((x.pid, x.process.as_deref()), (None, None));
        assert_eq!(x.message, "GPU has fallen off the bus.");

        let x =
            parse_xid("NVRM: Xid (0000:3B:00): 13, Graphics SM Warp Exception on (GPC 0, TPC 1)")
                .unwrap();
        assert_eq!(
            (x.bus_id.as_deref(), x.code),
            (Some("0000:3b:00"), Some(13))
        );
        assert!(x.message.starts_with("Graphics SM Warp Exception"));

        let x = parse_xid("NVRM: Xid (PCI:0000:81:00): 48, pid=4242, name=python3, An uncorrectable double bit error").unwrap();
        assert_eq!(
            (x.code, x.pid, x.process.as_deref()),
            (Some(48), Some(4242), Some("python3"))
        );
        assert_eq!(x.message, "An uncorrectable double bit error");

        let x = parse_xid("NVRM: Xid (PCI:0000:81:00): 109, pid='1234', name=kiln, Ch 00000010, errorString CTX SWITCH TIMEOUT").unwrap();
        assert_eq!(
            (x.code, x.pid, x.process.as_deref()),
            (Some(109), Some(1234), Some("kiln"))
        );

        let x = parse_xid("NVRM: GPU at PCI:0000:05:00: GPU-6c4f3a5e-0000-0000-0000-000000000000")
            .map(|x| x.code);
        assert_eq!(x, None, "a GPU-at line is not an Xid");
        let x = parse_xid("NVRM: GPU at PCI:0000:05:00: GPU has fallen off the bus.").unwrap();
        assert_eq!((x.bus_id.as_deref(), x.code), (Some("0000:05:00"), None));
        assert!(parse_xid("usb 1-1: new high-speed USB device").is_none());

        // A pid without a name.
        let x =
            parse_xid("NVRM: Xid (PCI:0000:01:00): 56, pid=2628, CMDre 0000000b 00000ffc").unwrap();
        assert_eq!(
            (x.code, x.pid, x.process.as_deref()),
            (Some(56), Some(2628), None)
        );
        assert_eq!(x.message, "CMDre 0000000b 00000ffc");
    }
}
