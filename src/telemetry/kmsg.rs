//! Xid lines from the kernel log: `/dev/kmsg`, or `journalctl -k` where that is not
//! readable. Lines from before the run are history, kept apart from Xids during it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, channel};

use regex::Regex;

use super::record::{TelemetryData, XidChannel, XidEvent};
use super::{Gap, Source, cause, signals};

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
        Regex::new(r"^pid='?(\d+|<unknown>)'?,\s*name=([^,]*),\s*(.*)$").expect("a valid pattern")
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
                let name = p[2].trim();
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

/// Splits a `/dev/kmsg` record (`pri,seq,usec,flags;message`) into time and message.
pub fn parse_kmsg_record(record: &str) -> Option<(u64, &str)> {
    let (head, message) = record.split_once(';')?;
    let usec = head.split(',').nth(2)?.parse().ok()?;
    // Continuation lines (" KEY=value") follow the first line; the message is the first.
    Some((usec, message.lines().next().unwrap_or("")))
}

/// Splits a `journalctl -k -o short-monotonic` or `dmesg` line (`[  12.345678] ...`).
pub fn parse_bracketed(line: &str) -> Option<(u64, &str)> {
    let start = line.find('[')?;
    let end = start + line[start..].find(']')?;
    let seconds: f64 = line[start + 1..end].trim().parse().ok()?;
    Some(((seconds * 1e6) as u64, line[end + 1..].trim_start()))
}

/// The kernel log as a telemetry source.
pub struct KmsgSource {
    /// Vulkan device index by PCI bus id prefix (`0000:05:00`).
    buses: BTreeMap<String, usize>,
    reader: Option<Reader>,
    /// Why the kernel log cannot be read, once `start` has tried.
    unreadable: Option<Gap>,
}

enum Reader {
    Kmsg(std::fs::File),
    Journal {
        child: Child,
        lines: Receiver<String>,
    },
}

const O_NONBLOCK: i32 = 0o4000;

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
            reader: None,
            unreadable: None,
        }
    }

    /// A source for the targets that have a PCI address.
    pub fn for_targets(devices: &[super::Target]) -> KmsgSource {
        KmsgSource::new(&super::with_pci(devices))
    }

    fn device_of(&self, event: &XidEvent) -> Option<usize> {
        let bus = event.bus_id.as_deref()?;
        self.buses
            .iter()
            .find(|(known, _)| known.ends_with(bus) || bus.ends_with(known.as_str()))
            .map(|(_, &i)| i)
    }

    fn event(
        &self,
        usec: u64,
        message: &str,
        before_run: bool,
    ) -> Option<(Option<usize>, TelemetryData)> {
        let mut xid = parse_xid(message)?;
        xid.kernel_us = Some(usec);
        xid.before_run = before_run;
        Some((self.device_of(&xid), TelemetryData::Xid { xid }))
    }

    fn read_kmsg(file: &mut std::fs::File) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 8192];
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => out.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
                // Overwritten records: the next read resumes at the oldest still kept.
                Err(e) if e.raw_os_error() == Some(32) => continue,
                Err(_) => break,
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
        let mut out = Vec::new();
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(O_NONBLOCK)
            .open("/dev/kmsg")
        {
            Ok(mut file) => {
                for record in Self::read_kmsg(&mut file) {
                    if let Some((usec, message)) = parse_kmsg_record(&record)
                        && let Some(e) = self.event(usec, message, true)
                    {
                        out.push(e);
                    }
                }
                self.reader = Some(Reader::Kmsg(file));
            }
            Err(kmsg_error) => {
                let history = Command::new("journalctl")
                    .args(["-k", "-o", "short-monotonic", "--no-pager", "-q"])
                    .stderr(Stdio::null())
                    .output();
                match history {
                    Ok(h) if h.status.success() => {
                        for line in String::from_utf8_lossy(&h.stdout).lines() {
                            if let Some((usec, message)) = parse_bracketed(line)
                                && let Some(e) = self.event(usec, message, true)
                            {
                                out.push(e);
                            }
                        }
                        self.reader = follow_journal();
                    }
                    _ => {
                        let gap = Gap {
                            device: None,
                            message: format!(
                                "kernel log not readable ({kmsg_error}; journalctl -k failed too): no Xid events; \
                                 grant CAP_SYSLOG or set kernel.dmesg_restrict=0"
                            ),
                            missing: vec![signals::XID.name.into()],
                            cause: Some(cause::KERNEL_LOG_UNREADABLE.into()),
                        };
                        self.unreadable = Some(gap.clone());
                        out.push(gap.record());
                    }
                }
            }
        }
        out
    }

    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        let lines: Vec<(u64, String)> = match &mut self.reader {
            Some(Reader::Kmsg(file)) => Self::read_kmsg(file)
                .iter()
                .filter_map(|r| parse_kmsg_record(r).map(|(u, m)| (u, m.to_owned())))
                .collect(),
            Some(Reader::Journal { lines, .. }) => lines
                .try_iter()
                .filter_map(|l| parse_bracketed(&l).map(|(u, m)| (u, m.to_owned())))
                .collect(),
            None => Vec::new(),
        };
        lines
            .iter()
            .filter_map(|(usec, message)| self.event(*usec, message, false))
            .collect()
    }
}

fn follow_journal() -> Option<Reader> {
    let mut child = Command::new("journalctl")
        .args([
            "-k",
            "-f",
            "-n",
            "0",
            "-o",
            "short-monotonic",
            "--no-pager",
            "-q",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let stdout = child.stdout.take()?;
    let (tx, lines) = channel();
    std::thread::Builder::new()
        .name("kiln-journal".into())
        .spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        })
        .ok()?;
    Some(Reader::Journal { child, lines })
}

impl Drop for KmsgSource {
    fn drop(&mut self) {
        if let Some(Reader::Journal { child, .. }) = &mut self.reader {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
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
    }

    #[test]
    fn kernel_log_framings_parse() {
        assert_eq!(
            parse_kmsg_record(
                "4,1234,5678901,-;NVRM: Xid (PCI:0000:05:00): 79, GPU has fallen off the bus.\n SUBSYSTEM=pci"
            ),
            Some((
                5_678_901,
                "NVRM: Xid (PCI:0000:05:00): 79, GPU has fallen off the bus."
            ))
        );
        assert_eq!(parse_kmsg_record("garbage"), None);
        assert_eq!(
            parse_bracketed("[  123.456789] host kernel: NVRM: Xid (PCI:0000:05:00): 13, x"),
            Some((
                123_456_789,
                "host kernel: NVRM: Xid (PCI:0000:05:00): 13, x"
            ))
        );
    }

    #[test]
    fn events_map_to_the_device_on_that_bus() {
        let source = KmsgSource::new(&[(2, "0000:05:00.0".into()), (3, "0000:81:00.0".into())]);
        let (device, _) = source
            .event(1, "NVRM: Xid (PCI:0000:81:00): 48, pid=1, name=x, y", false)
            .unwrap();
        assert_eq!(device, Some(3));
        let (device, _) = source
            .event(
                1,
                "NVRM: Xid (05:00): 79, GPU has fallen off the bus.",
                false,
            )
            .unwrap();
        assert_eq!(device, Some(2), "older drivers omit the domain");
        let (device, _) = source
            .event(1, "NVRM: Xid (PCI:0000:99:00): 79, z", true)
            .unwrap();
        assert_eq!(device, None);
    }
}
