//! `kiln monitor`: every device's live telemetry, as a refreshing table or as JSON lines
//! for piping, until Ctrl+C or the given duration.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::error::AppError;
use crate::gpu::Vulkan;
use crate::select::select_devices;
use crate::telemetry::live_sources;
use crate::telemetry::record::{Reading, Readings, TelemetryData, TelemetryRecord};
use crate::telemetry::sidecar::{RealClock, Sidecar};
use crate::telemetry::signals;

/// What `kiln monitor` was asked to do.
#[derive(Debug, Clone)]
pub struct MonitorOptions {
    /// Device selectors; empty: every GPU (or the CPU device).
    pub devices: Vec<String>,
    /// Sampling interval.
    pub interval: Duration,
    /// Stop after this long (None: until Ctrl+C).
    pub duration: Option<Duration>,
    /// JSON lines instead of a table.
    pub json: bool,
    /// Redraw the table in place (stdout is a terminal).
    pub redraw: bool,
}

/// The columns of the table: (reading, header, decimals).
const COLUMNS: [(&str, &str, usize); 9] = [
    (signals::GPU_TEMP_C.name, "temp C", 0),
    (signals::HBM_TEMP_C.name, "HBM C", 0),
    (signals::POWER_W.name, "power W", 0),
    (signals::CLOCK_SM_MHZ.name, "SM MHz", 0),
    (signals::CLOCK_MEM_MHZ.name, "mem MHz", 0),
    (signals::UTIL_GPU_PCT.name, "util %", 0),
    (signals::PCIE_GEN.name, "PCIe gen", 0),
    (signals::PCIE_WIDTH.name, "width", 0),
    (signals::THROTTLE_REASONS.name, "throttle", 0),
];

fn cell(readings: &Readings, key: &str, decimals: usize) -> String {
    match readings.get(key) {
        Some(Reading::Number(n)) => format!("{n:.decimals$}"),
        Some(Reading::Text(t)) if t.is_empty() => "-".into(),
        Some(Reading::Text(t)) => t.clone(),
        Some(Reading::Processes(list)) => list.len().to_string(),
        Some(Reading::Unavailable { unavailable }) if unavailable == "not_supported" => {
            "n/s".into()
        }
        Some(Reading::Unavailable { .. }) => "err".into(),
        None => "".into(),
    }
}

/// Renders the latest readings of every device as a table.
pub fn table(latest: &BTreeMap<usize, Readings>, notes: &[String]) -> String {
    let mut out = String::new();
    let _ = write!(out, "{:<5}", "GPU");
    for (_, header, _) in COLUMNS {
        let _ = write!(out, " {header:>9}");
    }
    out.push('\n');
    for (device, readings) in latest {
        let _ = write!(out, "{:<5}", format!("GPU{device}"));
        for (key, _, decimals) in COLUMNS {
            let _ = write!(out, " {:>9}", cell(readings, key, decimals));
        }
        out.push('\n');
    }
    if latest.is_empty() {
        out.push_str("(no readings: see the notes below)\n");
    }
    for n in notes {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// Monitors until Ctrl+C or the duration; returns the exit code.
pub fn monitor(opts: &MonitorOptions) -> Result<i32, AppError> {
    let vulkan = Vulkan::new()?;
    let (devices, mut notes) = select_devices(&vulkan, &opts.devices)?;
    let (sources, telemetry_notes) = live_sources(&devices);
    notes.extend(telemetry_notes);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    // A second Ctrl+C while stopping falls through to the default (immediate) exit.
    let _ = ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            std::process::exit(130);
        }
    });
    let latest: Arc<Mutex<BTreeMap<usize, Readings>>> = Arc::new(Mutex::new(BTreeMap::new()));
    let json = opts.json;
    let sink_latest = latest.clone();
    // A reader that has gone away (`kiln monitor --json | head`) ends the watch quietly.
    let closed = Arc::new(AtomicBool::new(false));
    let reader_gone = Arc::clone(&closed);
    let out = move |record: TelemetryRecord| {
        if json {
            if let Ok(line) = serde_json::to_string(&record) {
                let mut stdout = std::io::stdout().lock();
                if writeln!(stdout, "{line}")
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    reader_gone.store(true, Ordering::SeqCst);
                }
            }
        } else if let (Some(device), TelemetryData::Sample { readings }) =
            (record.device, record.data)
            && let Ok(mut l) = sink_latest.lock()
        {
            l.entry(device).or_default().extend(readings);
        }
    };
    // Facts are said once; a redrawn screen repeats them under the table.
    if !opts.redraw {
        for n in &notes {
            let _ = writeln!(std::io::stderr(), "note: {n}");
        }
    }
    let sidecar = Sidecar::spawn(
        sources,
        opts.interval,
        Arc::new(RealClock::new(Instant::now())),
        Box::new(out),
    )
    .map_err(|e| AppError::Usage(format!("could not start the telemetry thread: {e}")))?;
    let started = Instant::now();
    let mut next_draw = Instant::now();
    while !stop.load(Ordering::SeqCst)
        && !closed.load(Ordering::SeqCst)
        && opts.duration.is_none_or(|d| started.elapsed() < d)
    {
        if !json && Instant::now() >= next_draw {
            let shown: &[String] = if opts.redraw { &notes } else { &[] };
            let text = latest.lock().map(|l| table(&l, shown)).unwrap_or_default();
            let screen = if opts.redraw {
                format!("\x1b[2J\x1b[H{text}")
            } else {
                text
            };
            let mut stdout = std::io::stdout().lock();
            if stdout
                .write_all(screen.as_bytes())
                .and_then(|()| stdout.flush())
                .is_err()
            {
                break;
            }
            next_draw += opts.interval.max(Duration::from_millis(250));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    sidecar.stop();
    Ok(crate::exit_code::HEALTHY)
}

/// `kiln monitor`.
pub fn command(args: crate::cmd::cli::MonitorArgs) -> Result<i32, AppError> {
    use std::io::IsTerminal;
    monitor(&MonitorOptions {
        devices: args.devices,
        interval: args.interval,
        duration: args.duration,
        json: args.json,
        redraw: std::io::stdout().is_terminal(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_shows_numbers_words_and_unsupported_signals() {
        let mut r = Readings::new();
        r.insert("gpu_temp_c".into(), Reading::Number(61.4));
        r.insert("hbm_temp_c".into(), Reading::not_supported());
        r.insert(
            "throttle_reasons".into(),
            Reading::Text("sw_power_cap".into()),
        );
        let mut latest = BTreeMap::new();
        latest.insert(0, r);
        let t = table(&latest, &["a fact".into()]);
        assert!(
            t.contains("GPU0")
                && t.contains("61")
                && t.contains("n/s")
                && t.contains("sw_power_cap")
        );
        assert!(t.contains("note: a fact"));
    }
}
