//! The watch's live line on a terminal: the application's memory, its baseline's trend,
//! the device's free memory and temperature; the application's own output printed above
//! it. And `--on-alert`'s command.

use std::time::Duration;

use crate::gpu::DeviceInfo;
use crate::telemetry::reading::Reading;
use crate::telemetry::signals;

use super::trace::Tracer;

/// What the live line shows now.
#[derive(Debug, Clone, Default)]
pub struct Now {
    /// The application's memory (the driver's figure, else its live allocations).
    pub app_bytes: u64,
    /// The memory it could have.
    pub budget_bytes: Option<u64>,
    /// The device's free memory.
    pub free_bytes: Option<u64>,
    /// The device's temperature.
    pub temp_c: Option<f64>,
}

impl Now {
    /// Reads the latest telemetry and trace: the application's processes summed over the
    /// devices' process lists, else the trace's live bytes.
    pub fn read(
        latest: Option<&crate::cmd::run::Latest>,
        pids: &[u32],
        tracer: Option<&Tracer>,
        devices: &[DeviceInfo],
    ) -> Now {
        let mut now = Now::default();
        let mut listed = false;
        if let Some(map) = latest.and_then(|l| l.lock().ok()) {
            for d in devices {
                let Some((_, readings)) = map.get(&d.index) else {
                    continue;
                };
                let number = |k: &str| readings.get(k).and_then(Reading::number);
                if let Some(Reading::Processes(list)) =
                    readings.get(signals::OTHER_PROCESSES_NOW.name)
                {
                    let ours: u64 = list
                        .iter()
                        .filter(|p| pids.contains(&p.pid))
                        .filter_map(|p| p.used_bytes)
                        .sum();
                    if ours > 0 {
                        listed = true;
                        now.app_bytes += ours;
                    }
                }
                now.budget_bytes = now
                    .budget_bytes
                    .or(number(signals::MEM_TOTAL_BYTES.name).map(|v| v as u64));
                now.free_bytes = now
                    .free_bytes
                    .or(number(signals::MEM_FREE_BYTES.name).map(|v| v as u64));
                now.temp_c = now.temp_c.or(number(signals::GPU_TEMP_C.name));
            }
        }
        if let Some(t) = tracer {
            let (bytes, heap) = t.live_bytes();
            if !listed {
                now.app_bytes = bytes;
            }
            now.budget_bytes = now.budget_bytes.or(heap);
        }
        now
    }
}

/// The application's lowest memory over the iterations now and before, for the live line.
#[derive(Debug, Default)]
struct Lows {
    now: Option<u64>,
    now_from: u64,
    before: Option<u64>,
    before_from: u64,
}

/// The live line, when stderr is a terminal.
pub struct Live {
    bar: Option<indicatif::ProgressBar>,
    /// The application's lowest memory since the iteration count last changed, the same
    /// before that, and the iteration counts each began at: several iterations may pass
    /// between two readings, and the change is said per iteration all the same.
    lows: std::cell::RefCell<Lows>,
}

impl Live {
    /// A live line on stderr when `on`; the notes said first.
    pub fn new(on: bool, notes: &[String]) -> Live {
        let bar = on.then(|| {
            for note in notes {
                eprintln!("note: {note}");
            }
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        Live {
            bar,
            lows: std::cell::RefCell::new(Lows::default()),
        }
    }

    /// How the application's output is printed: above the live line when there is one.
    pub fn printer(&self) -> impl Fn(bool, &[u8]) + Clone + Send + 'static {
        let bar = self.bar.clone();
        move |is_err, line| match &bar {
            Some(b) => b.suspend(|| super::app::echo(is_err, line)),
            None => super::app::echo(is_err, line),
        }
    }

    /// Shows what the watch reads now.
    pub fn show(&self, now: &Now, iterations: u64, elapsed: Duration) {
        let Some(bar) = &self.bar else { return };
        let mut lows = self.lows.borrow_mut();
        if iterations != lows.now_from {
            *lows = Lows {
                now: Some(now.app_bytes),
                now_from: iterations,
                before: lows.now,
                before_from: lows.now_from,
            };
        } else {
            lows.now = Some(lows.now.map_or(now.app_bytes, |l| l.min(now.app_bytes)));
        }
        let mut parts = vec![format!(
            "application {}",
            crate::units::format_bytes(now.app_bytes)
        )];
        if let Some(b) = now.budget_bytes.filter(|b| *b > 0) {
            parts[0].push_str(&format!(
                " ({:.0}% of {})",
                100.0 * now.app_bytes as f64 / b as f64,
                crate::units::format_bytes(b)
            ));
        }
        let passed = i128::from(lows.now_from.saturating_sub(lows.before_from).max(1));
        if let (Some(this), Some(last)) = (lows.now, lows.before) {
            let delta = (this as i128 - last as i128) / passed;
            parts.push(format!(
                "baseline {}{} an iteration",
                if delta >= 0 { "+" } else { "-" },
                crate::units::format_bytes(delta.unsigned_abs() as u64)
            ));
        }
        if let Some(f) = now.free_bytes {
            parts.push(format!("free {}", crate::units::format_bytes(f)));
        }
        if let Some(t) = now.temp_c {
            parts.push(format!("{t:.0} °C"));
        }
        parts.push(format!("iteration {iterations}"));
        parts.push(format!("{:.0} s", elapsed.as_secs_f64()));
        bar.set_message(parts.join(" | "));
    }

    /// Takes the live line away.
    pub fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// Runs `--on-alert`'s command once, in the background (`sh -c`), told the application's
/// pid, memory, budget and the run directory in its environment.
pub fn run_alert(command: &str, pid: u32, bytes: u64, budget: u64, run_dir: &std::path::Path) {
    let spawned = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("KILN_WATCH_PID", pid.to_string())
        .env("KILN_WATCH_BYTES", bytes.to_string())
        .env("KILN_WATCH_BUDGET_BYTES", budget.to_string())
        .env("KILN_RUN_DIR", run_dir)
        .stdin(std::process::Stdio::null())
        .spawn();
    if let Ok(mut child) = spawned {
        // Reaped in the background: the watch never waits on it.
        let _ = std::thread::Builder::new()
            .name("kiln-on-alert".into())
            .spawn(move || child.wait());
    }
}
