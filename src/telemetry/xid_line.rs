//! The NVIDIA driver's Xid line read into an [`XidEvent`]: `NVRM: Xid (PCI:0000:05:00): 79,
//! pid=..., name=..., text` (older drivers leave out `PCI:`), and the "fallen off the bus"
//! line that carries no code. The kernel log writes it on Linux, and nvlddmkm's events in
//! Windows' System log carry the same text.

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
