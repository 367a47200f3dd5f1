//! The operating system's log of driver and hardware errors, as entries for the telemetry
//! source that turns them into Xid and device-error records. Linux: the kernel log
//! (`/dev/kmsg`, or `journalctl -k` where that is not readable). Windows: the System event
//! log's display-driver, nvlddmkm and WHEA-Logger events, and the watchdog reports Windows
//! writes on a display-driver timeout (`LiveKernelReports\WATCHDOG`).
//!
//! The entries carry what the OS said, unparsed beyond its framing: what they mean is read
//! above (`telemetry::kmsg`, `telemetry::eventlog`), so that it is tested on any OS.

use std::path::PathBuf;

/// True where the log counts a device's PCIe errors (WHEA's events on Windows): its
/// source then gives them as the AER counters, which Linux reads from sysfs instead.
pub const COUNTS_PCIE_ERRORS: bool = cfg!(windows);

/// One entry of the OS's log.
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A kernel-log line: microseconds since boot, and the message after the kernel's
    /// prefix.
    Line {
        /// When, in microseconds since boot.
        since_boot_us: u64,
        /// The message.
        text: String,
    },
    /// An event of the System log, rendered as the event log's XML.
    Event {
        /// The event's XML (`<Event xmlns=...><System>...</System><EventData>...`).
        xml: String,
    },
    /// A report Windows wrote when it reset the display driver after a timeout.
    WatchdogReport {
        /// The report's file.
        path: PathBuf,
        /// When it was written, in seconds since the Unix epoch.
        written_unix_s: u64,
    },
}

/// The OS's log, open for reading what arrives after what [`open`] returned.
pub struct KernelLog {
    reader: os::Reader,
}

/// Opens the log: the reader, and the entries already in it (history, from before the
/// run). The error is one sentence: what could not be read, why, and the fix.
pub fn open() -> Result<(KernelLog, Vec<Entry>), String> {
    let (reader, history) = os::open()?;
    Ok((KernelLog { reader }, history))
}

impl KernelLog {
    /// The entries logged since the last read (or since [`open`]).
    pub fn read(&mut self) -> Vec<Entry> {
        self.reader.read()
    }
}

/// When the machine booted, in microseconds since the Unix epoch: to put an event the log
/// dates by the clock on the kernel's time since boot, as the Linux kernel log gives it.
pub fn boot_unix_us() -> Option<u64> {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    let up_us = os::uptime_us()?;
    u64::try_from(now.as_micros()).ok()?.checked_sub(up_us)
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

#[cfg(not(windows))]
mod os {
    use std::io::{BufRead, BufReader, Read};
    use std::process::{Child, Command, Stdio};
    use std::sync::mpsc::{Receiver, channel};

    use super::{Entry, parse_bracketed, parse_kmsg_record};

    pub enum Reader {
        Kmsg(std::fs::File),
        Journal {
            child: Child,
            lines: Receiver<String>,
        },
        /// The journal's history was read but it could not be followed.
        HistoryOnly,
    }

    /// `O_NONBLOCK`: a read of `/dev/kmsg` with nothing new returns at once.
    const O_NONBLOCK: i32 = 0o4000;

    fn line(since_boot_us: u64, text: &str) -> Entry {
        Entry::Line {
            since_boot_us,
            text: text.to_owned(),
        }
    }

    fn kmsg_entries(file: &mut std::fs::File) -> Vec<Entry> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 8192];
        loop {
            match file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let record = String::from_utf8_lossy(&buf[..n]);
                    if let Some((us, text)) = parse_kmsg_record(&record) {
                        out.push(line(us, text));
                    }
                }
                // Overwritten records: the next read resumes at the oldest still kept.
                Err(e) if e.raw_os_error() == Some(32) => continue,
                Err(_) => break,
            }
        }
        out
    }

    fn open_kmsg() -> std::io::Result<std::fs::File> {
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, O_NONBLOCK);
        options.open("/dev/kmsg")
    }

    pub fn open() -> Result<(Reader, Vec<Entry>), String> {
        match open_kmsg() {
            Ok(mut file) => {
                let history = kmsg_entries(&mut file);
                Ok((Reader::Kmsg(file), history))
            }
            Err(kmsg_error) => {
                let history = Command::new("journalctl")
                    .args(["-k", "-o", "short-monotonic", "--no-pager", "-q"])
                    .stderr(Stdio::null())
                    .output();
                let fail = || {
                    format!(
                        "kernel log not readable ({kmsg_error}; journalctl -k failed too): no Xid events; \
                         grant CAP_SYSLOG or set kernel.dmesg_restrict=0"
                    )
                };
                match history {
                    Ok(h) if h.status.success() => {
                        let entries = String::from_utf8_lossy(&h.stdout)
                            .lines()
                            .filter_map(|l| parse_bracketed(l).map(|(us, m)| line(us, m)))
                            .collect();
                        Ok((follow_journal().unwrap_or(Reader::HistoryOnly), entries))
                    }
                    _ => Err(fail()),
                }
            }
        }
    }

    impl Reader {
        pub fn read(&mut self) -> Vec<Entry> {
            match self {
                Reader::Kmsg(file) => kmsg_entries(file),
                Reader::Journal { lines, .. } => lines
                    .try_iter()
                    .filter_map(|l| parse_bracketed(&l).map(|(us, m)| line(us, m)))
                    .collect(),
                Reader::HistoryOnly => Vec::new(),
            }
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

    impl Drop for Reader {
        fn drop(&mut self) {
            if let Reader::Journal { child, .. } = self {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }

    pub fn uptime_us() -> Option<u64> {
        let text = std::fs::read_to_string("/proc/uptime").ok()?;
        let seconds: f64 = text.split_whitespace().next()?.parse().ok()?;
        Some((seconds * 1e6) as u64)
    }
}

#[cfg(windows)]
mod os {
    use std::path::PathBuf;

    use windows::Win32::Foundation::{ERROR_INSUFFICIENT_BUFFER, ERROR_NO_MORE_ITEMS};
    use windows::Win32::System::EventLog::{
        EVT_HANDLE, EvtClose, EvtNext, EvtQuery, EvtQueryChannelPath, EvtQueryForwardDirection,
        EvtRender, EvtRenderEventXml,
    };
    use windows::core::HSTRING;

    use super::Entry;

    /// The events kiln reads: display-driver timeouts, everything nvlddmkm logs, and the
    /// hardware errors WHEA logs (PCIe among them).
    const WANTED: &str = "(Provider[@Name='Display'] and EventID=4101) or Provider[@Name='nvlddmkm'] \
         or Provider[@Name='Microsoft-Windows-WHEA-Logger']";
    /// How far back the history goes: thirty days, in milliseconds.
    const HISTORY_MS: u64 = 30 * 24 * 3600 * 1000;

    pub struct Reader {
        /// The last event record read: the next read asks for those after it.
        last_record: u64,
        /// The watchdog reports already seen, by path.
        reports: Vec<PathBuf>,
    }

    /// Every event matching `filter`, rendered as XML, and the largest record id seen.
    fn query(filter: &str) -> Result<(Vec<String>, u64), String> {
        let xpath = HSTRING::from(format!("*[System[({WANTED}) and {filter}]]"));
        let channel = HSTRING::from("System");
        // SAFETY: both strings are NUL-terminated wide strings that outlive the call; the
        // handle it returns is closed below.
        let results = unsafe {
            EvtQuery(
                None,
                &channel,
                &xpath,
                EvtQueryChannelPath.0 | EvtQueryForwardDirection.0,
            )
        }
        .map_err(|e| said(&e))?;
        let mut out = Vec::new();
        let mut last = 0;
        loop {
            let mut handles = [0isize; 32];
            let mut returned = 0u32;
            // SAFETY: `handles` is a writable array of its stated length and `returned`
            // a valid out-pointer; each returned handle is closed after rendering.
            let next = unsafe { EvtNext(results, &mut handles, 1000, 0, &mut returned) };
            if let Err(e) = next {
                // SAFETY: the query's handle, closed once.
                let _ = unsafe { EvtClose(results) };
                if e.code() == ERROR_NO_MORE_ITEMS.to_hresult() {
                    return Ok((out, last));
                }
                return Err(said(&e));
            }
            for &h in handles.iter().take(returned as usize) {
                let event = EVT_HANDLE(h);
                if let Some(xml) = render(event) {
                    last = last.max(record_id(&xml));
                    out.push(xml);
                }
                // SAFETY: a handle EvtNext returned, closed once.
                let _ = unsafe { EvtClose(event) };
            }
        }
    }

    /// The service's refusal in words; a failure that gives no reason (Wine's event log
    /// has no service behind it) is said as that.
    fn said(e: &windows::core::Error) -> String {
        let message = e.message();
        if e.code().is_ok() || message.trim().is_empty() {
            "the event log service gave no answer".to_owned()
        } else {
            message.trim().trim_end_matches('.').to_owned()
        }
    }

    /// The event as XML: asked for its size, then rendered into a buffer of that size.
    fn render(event: EVT_HANDLE) -> Option<String> {
        let mut used = 0u32;
        let mut count = 0u32;
        // SAFETY: a size query with no buffer; the out-pointers are valid.
        let sized = unsafe {
            EvtRender(
                None,
                event,
                EvtRenderEventXml.0,
                0,
                None,
                &mut used,
                &mut count,
            )
        };
        if let Err(e) = sized
            && e.code() != ERROR_INSUFFICIENT_BUFFER.to_hresult()
        {
            return None;
        }
        let mut buffer = vec![0u16; (used as usize).div_ceil(2)];
        // SAFETY: the buffer holds `used` bytes, as the size query asked for.
        unsafe {
            EvtRender(
                None,
                event,
                EvtRenderEventXml.0,
                used,
                Some(buffer.as_mut_ptr().cast()),
                &mut used,
                &mut count,
            )
        }
        .ok()?;
        let end = buffer.iter().position(|&c| c == 0).unwrap_or(buffer.len());
        Some(String::from_utf16_lossy(&buffer[..end]))
    }

    /// The `<EventRecordID>` of a rendered event.
    fn record_id(xml: &str) -> u64 {
        xml.split_once("<EventRecordID>")
            .and_then(|(_, rest)| rest.split_once('<'))
            .and_then(|(n, _)| n.trim().parse().ok())
            .unwrap_or(0)
    }

    fn reports_dir() -> PathBuf {
        std::env::var_os("SystemRoot")
            .map_or_else(|| PathBuf::from(r"C:\Windows"), PathBuf::from)
            .join("LiveKernelReports")
            .join("WATCHDOG")
    }

    fn new_reports(seen: &mut Vec<PathBuf>) -> Vec<Entry> {
        let Ok(dir) = std::fs::read_dir(reports_dir()) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for entry in dir.flatten() {
            let path = entry.path();
            if seen.contains(&path) {
                continue;
            }
            let written_unix_s = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_secs());
            seen.push(path.clone());
            out.push(Entry::WatchdogReport {
                path,
                written_unix_s,
            });
        }
        out
    }

    pub fn open() -> Result<(Reader, Vec<Entry>), String> {
        let (events, last_record) = query(&format!("TimeCreated[timediff(@SystemTime) <= {HISTORY_MS}]"))
            .map_err(|why| {
                format!(
                    "the System event log could not be read ({why}): no display-driver timeouts, nvlddmkm Xids or WHEA errors; \
                     run kiln as an administrator or as a member of Event Log Readers"
                )
            })?;
        let mut reader = Reader {
            last_record,
            reports: Vec::new(),
        };
        let mut history: Vec<Entry> = events.into_iter().map(|xml| Entry::Event { xml }).collect();
        history.extend(new_reports(&mut reader.reports));
        Ok((reader, history))
    }

    impl Reader {
        pub fn read(&mut self) -> Vec<Entry> {
            let mut out = Vec::new();
            if let Ok((events, last)) = query(&format!("EventRecordID > {}", self.last_record)) {
                self.last_record = self.last_record.max(last);
                out.extend(events.into_iter().map(|xml| Entry::Event { xml }));
            }
            out.extend(new_reports(&mut self.reports));
            out
        }
    }

    pub fn uptime_us() -> Option<u64> {
        // SAFETY: GetTickCount64 takes nothing and touches no memory of ours.
        let ms = unsafe { windows::Win32::System::SystemInformation::GetTickCount64() };
        ms.checked_mul(1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
