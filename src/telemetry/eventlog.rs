//! What the Windows System log says about a GPU, read from the event log's XML: the
//! display driver reset after a timeout (TDR: `Display` event 4101), nvlddmkm's errors with
//! the Xid in their text, and the PCIe errors WHEA logs. Pure text in, records out, so it
//! is tested on any OS from recorded events (`tests/fixtures/eventlog/`).

use super::record::{XidChannel, XidEvent};
use super::xid_line::{KernelLine, read_kernel_line};

/// One event of the log, as far as kiln reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct LogEvent {
    /// The provider (`Display`, `nvlddmkm`, `Microsoft-Windows-WHEA-Logger`).
    pub provider: String,
    /// The event id.
    pub id: u32,
    /// The level: 1 critical, 2 error, 3 warning, 4 information.
    pub level: u32,
    /// When it was logged, in microseconds since the Unix epoch.
    pub logged_unix_us: Option<u64>,
    /// The event's data, in order, with their names where the provider gives them.
    pub data: Vec<(Option<String>, String)>,
    /// The message as the event log rendered it, where the XML carries one.
    pub message: Option<String>,
}

/// What an event means for a GPU.
#[derive(Debug, Clone, PartialEq)]
pub enum GpuEvent {
    /// An Xid the driver logged (nvlddmkm's text carries it as on Linux).
    Xid(XidEvent),
    /// Windows reset the display driver after a timeout (TDR).
    DriverReset {
        /// The driver it reset (`nvlddmkm`, `amdkmdag`, `igfx`), as the log names it.
        driver: String,
    },
    /// A PCIe error WHEA logged, with the addresses it names.
    PcieError {
        /// True for an uncorrected (fatal) error, false for a corrected one.
        fatal: bool,
        /// The `bus:device.function` addresses the event names (the port and the device
        /// below it), lower-case hex without the domain: `01:00.0`.
        addresses: Vec<String>,
    },
}

/// Reads an event from the event log's XML; None for text that is not one.
pub fn parse_event(xml: &str) -> Option<LogEvent> {
    let doc = roxmltree::Document::parse(xml).ok()?;
    let root = doc.root_element();
    let system = child(root, "System")?;
    let provider = child(system, "Provider")?;
    let provider = provider
        .attribute("Name")
        .or_else(|| provider.attribute("EventSourceName"))?
        .to_owned();
    let id = child(system, "EventID")?.text()?.trim().parse().ok()?;
    let level = child(system, "Level")
        .and_then(|n| n.text())
        .and_then(|t| t.trim().parse().ok())
        .unwrap_or(0);
    let logged_unix_us = child(system, "TimeCreated")
        .and_then(|n| n.attribute("SystemTime"))
        .and_then(parse_system_time);
    let data = ["EventData", "UserData"]
        .iter()
        .filter_map(|name| child(root, name))
        .flat_map(|section| section.descendants())
        .filter(|n| n.is_element() && n.tag_name().name() == "Data")
        .map(|n| {
            (
                n.attribute("Name").map(str::to_owned),
                n.text().unwrap_or("").trim().to_owned(),
            )
        })
        .collect();
    let message = child(root, "RenderingInfo")
        .and_then(|r| child(r, "Message"))
        .and_then(|m| m.text())
        .map(|t| t.trim().to_owned());
    Some(LogEvent {
        provider,
        id,
        level,
        logged_unix_us,
        data,
        message,
    })
}

/// The first child element of `parent` named `name`.
fn child<'a, 'input>(
    parent: roxmltree::Node<'a, 'input>,
    name: &str,
) -> Option<roxmltree::Node<'a, 'input>> {
    parent
        .children()
        .find(|n| n.is_element() && n.tag_name().name() == name)
}

/// What the event means for a GPU; None for an event that concerns none.
pub fn classify(event: &LogEvent) -> Option<GpuEvent> {
    let text = || {
        let mut all: Vec<&str> = event.data.iter().map(|(_, v)| v.as_str()).collect();
        all.extend(event.message.as_deref());
        all.join(" ")
    };
    match event.provider.as_str() {
        "Display" if event.id == 4101 => Some(GpuEvent::DriverReset {
            driver: event
                .data
                .iter()
                .map(|(_, v)| v.trim())
                .find(|v| !v.is_empty())
                .unwrap_or("the display driver")
                .to_owned(),
        }),
        "nvlddmkm" => {
            let text = text();
            let at = text.find("Xid (")?;
            let Some(KernelLine::Xid(mut xid)) =
                read_kernel_line(&format!("NVRM: {}", &text[at..]))
            else {
                return None;
            };
            xid.seen_by = vec![XidChannel::EventLog];
            Some(GpuEvent::Xid(xid))
        }
        "Microsoft-Windows-WHEA-Logger" => {
            let text = text();
            let pcie = text.contains("PCI Express")
                || event
                    .data
                    .iter()
                    .any(|(name, _)| name.as_deref().is_some_and(|n| n.contains("BusNumber")));
            if !pcie {
                return None;
            }
            Some(GpuEvent::PcieError {
                // WHEA logs a corrected error as a warning, an uncorrected one as an
                // error or worse.
                fatal: matches!(event.level, 1 | 2),
                addresses: whea_addresses(event, &text),
            })
        }
        _ => None,
    }
}

/// The `bus:device.function` addresses a WHEA PCIe event names: from its named fields
/// (`PrimaryBusNumber`, `PrimaryDeviceNumber`, `PrimaryFunctionNumber`, and the
/// secondary's), else from its message (`Primary Bus:Device:Function: 0x0:0x1:0x0`).
fn whea_addresses(event: &LogEvent, text: &str) -> Vec<String> {
    let number = |v: &str| {
        let v = v.trim();
        match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => v.parse().ok(),
        }
    };
    let address = |bus: u32, dev: u32, func: u32| format!("{bus:02x}:{dev:02x}.{func:x}");
    let mut out = Vec::new();
    for side in ["Primary", "Secondary"] {
        let field = |what: &str| {
            event
                .data
                .iter()
                .find(|(name, _)| name.as_deref() == Some(&format!("{side}{what}Number")))
                .and_then(|(_, v)| number(v))
        };
        if let (Some(b), Some(d), Some(f)) = (field("Bus"), field("Device"), field("Function")) {
            out.push(address(b, d, f));
        }
    }
    if out.is_empty() {
        const LABEL: &str = "Bus:Device:Function:";
        for (at, _) in text.match_indices(LABEL) {
            let after = &text[at + LABEL.len()..];
            let parts: Vec<Option<u32>> = after
                .split_whitespace()
                .next()
                .unwrap_or("")
                .split(':')
                .map(number)
                .collect();
            if let [Some(b), Some(d), Some(f)] = parts[..] {
                out.push(address(b, d, f));
            }
        }
    }
    // WHEA writes 0:0:0 for a side it does not know: the host bridge, never a GPU.
    out.retain(|a| a != "00:00.0");
    out.dedup();
    out
}

/// `2026-12-03T09:10:11.1234567Z` (the event log's `SystemTime`, UTC) in microseconds
/// since the Unix epoch.
pub fn parse_system_time(text: &str) -> Option<u64> {
    let text = text.trim().trim_end_matches('Z');
    let (date, time) = text.split_once('T')?;
    let mut ymd = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (ymd.next()??, ymd.next()??, ymd.next()??);
    let (hms, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut hms = hms.split(':').map(|p| p.parse::<i64>().ok());
    let (hh, mm, ss) = (hms.next()??, hms.next()??, hms.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let micros: i64 = format!("{:0<6}", &fraction[..fraction.len().min(6)])
        .parse()
        .ok()?;
    let days = days_from_civil(y, m, d);
    let seconds = days * 86_400 + hh * 3600 + mm * 60 + ss;
    u64::try_from(seconds * 1_000_000 + micros).ok()
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm, the inverse of the
/// one the run directory's name is made with).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> LogEvent {
        let path = format!(
            "{}/tests/fixtures/eventlog/{name}.xml",
            env!("CARGO_MANIFEST_DIR")
        );
        let xml = std::fs::read_to_string(&path).unwrap();
        parse_event(&xml).unwrap_or_else(|| panic!("{path} reads as an event"))
    }

    #[test]
    fn a_display_driver_timeout_is_a_reset_of_the_driver_it_names() {
        let e = fixture("display_4101_nvlddmkm");
        assert_eq!((e.provider.as_str(), e.id, e.level), ("Display", 4101, 3));
        assert_eq!(
            e.logged_unix_us,
            parse_system_time("2026-11-28T21:14:03.5821734Z")
        );
        assert_eq!(
            classify(&e),
            Some(GpuEvent::DriverReset {
                driver: "nvlddmkm".into()
            })
        );
    }

    #[test]
    fn nvlddmkm_errors_give_the_xid_their_text_carries_and_no_other() {
        let Some(GpuEvent::Xid(x)) = classify(&fixture("nvlddmkm_13_xid79")) else {
            panic!("an Xid 79");
        };
        assert_eq!(x.code, Some(79));
        assert_eq!(x.bus_id.as_deref(), Some("0000:01:00"));
        assert_eq!(x.seen_by, [XidChannel::EventLog]);
        assert_eq!(x.message, "GPU has fallen off the bus.");
        // Without the kernel's `NVRM:` prefix, with the application that raised it.
        let Some(GpuEvent::Xid(x)) = classify(&fixture("nvlddmkm_13_xid13_no_prefix")) else {
            panic!("an Xid 13");
        };
        assert_eq!(
            (x.code, x.pid, x.process.as_deref()),
            (Some(13), Some(9120), Some("Cyberpunk2077.exe"))
        );
        // nvlddmkm's other events carry no Xid: nothing is made up for them.
        assert_eq!(classify(&fixture("nvlddmkm_153_no_xid")), None);
    }

    #[test]
    fn whea_pcie_errors_name_the_addresses_and_whether_they_were_corrected() {
        assert_eq!(
            classify(&fixture("whea_17_pcie_corrected")),
            Some(GpuEvent::PcieError {
                fatal: false,
                addresses: vec!["00:01.0".into(), "01:00.0".into()],
            })
        );
        // Only the rendered message names the addresses; its 0:0:0 is no device.
        assert_eq!(
            classify(&fixture("whea_20_pcie_fatal_rendered")),
            Some(GpuEvent::PcieError {
                fatal: true,
                addresses: vec!["01:00.0".into()],
            })
        );
        // A machine check is the CPU's, not the GPU's link.
        assert_eq!(classify(&fixture("whea_19_machine_check")), None);
    }

    #[test]
    fn what_is_not_an_event_reads_as_none() {
        assert_eq!(parse_event("not xml"), None);
        assert_eq!(parse_event("<Event><System/></Event>"), None);
        assert_eq!(
            parse_event(
                "<Event><System><Provider Name='x'/><EventID>nine</EventID></System></Event>"
            ),
            None
        );
    }

    #[test]
    fn the_event_logs_time_reads_as_microseconds_since_the_epoch() {
        assert_eq!(parse_system_time("1970-01-01T00:00:00.0000000Z"), Some(0));
        assert_eq!(
            parse_system_time("2026-12-03T09:10:11.1234567Z"),
            Some(1_796_289_011_123_456)
        );
        assert_eq!(
            parse_system_time("2024-02-29T23:59:59Z"),
            Some(1_709_251_199_000_000)
        );
        assert_eq!(parse_system_time("yesterday"), None);
        assert_eq!(parse_system_time("2024-13-01T00:00:00Z"), None);
    }
}
