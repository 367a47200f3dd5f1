//! `kiln bench telemetry`: what the live telemetry sidecar costs on this machine's GPUs
//! (every GPU the inventory lists, whether or not Vulkan sees it), read at the run's
//! interval: the time one tick's reads take, as a share of the interval, and the ticks it
//! could not keep. A sidecar that misses ticks leaves holes in the evidence exactly when a
//! node is busiest.

use std::sync::mpsc::channel;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::cmd::bench::median;
use crate::telemetry::record::{Readings, TelemetryData, TelemetryRecord};
use crate::telemetry::sidecar::{Command, RealClock, run_loop};
use crate::telemetry::{Source, live_sources_for};

/// What `kiln bench telemetry` was asked to do.
#[derive(Debug, Clone)]
pub struct TelemetryBenchOptions {
    /// How long to sample.
    pub duration: Duration,
    /// The sampling interval (a run's default unless given).
    pub interval: Duration,
}

/// What sampling cost.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TelemetryBenchReport {
    /// GPUs watched: the machine's inventory.
    pub gpus: usize,
    /// GPUs NVML answers for.
    pub nvml_gpus: usize,
    /// The sampling interval, ms.
    pub interval_ms: f64,
    /// How long it sampled, s.
    pub duration_s: f64,
    /// Ticks kept.
    pub ticks: u64,
    /// Ticks skipped because reading outlasted the interval.
    pub missed_ticks: u64,
    /// The median tick's reads (every source, every GPU), as a share of the interval.
    pub tick_share_median: f64,
    /// The slowest tick's reads, as a share of the interval (above 1.0 a tick is missed).
    pub tick_share_max: f64,
    /// The median tick's reads per GPU, as a share of the interval.
    pub tick_share_per_gpu: f64,
    /// The median share of the interval each source's reads took, by source.
    pub source_share: std::collections::BTreeMap<String, f64>,
    /// What could not be read, one sentence each.
    pub notes: Vec<String>,
}

/// How long each of a source's reads took, in order.
type Timings = Arc<Mutex<Vec<Duration>>>;

/// A source whose every tick is timed.
struct Stopwatch {
    inner: Box<dyn Source>,
    ticks: Timings,
}

impl Source for Stopwatch {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.inner.start()
    }
    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        let started = Instant::now();
        let out = self.inner.sample();
        if let Ok(mut t) = self.ticks.lock() {
            t.push(started.elapsed());
        }
        out
    }
    fn snapshot(&mut self) -> Vec<(usize, Readings)> {
        self.inner.snapshot()
    }
}

/// Samples every GPU of the machine for `opts.duration` at `opts.interval`, as a run's
/// sidecar does, and measures each tick.
pub fn bench_telemetry(opts: &TelemetryBenchOptions) -> TelemetryBenchReport {
    let inventory = crate::inventory::read(&crate::inventory::System::from_env());
    let targets = crate::inventory::targets(&inventory.gpus);
    let (sources, mut notes) = live_sources_for(&targets);
    notes.extend(inventory.notes.iter().cloned());
    let nvml_gpus = sources
        .iter()
        .filter(|s| s.name() == "nvml")
        .flat_map(|s| s.matches())
        .filter(|m| m.index.is_some())
        .count();
    let mut timings: Vec<(&'static str, Timings)> = Vec::new();
    let mut sources: Vec<Box<dyn Source>> = sources
        .into_iter()
        .map(|inner| {
            let ticks = Timings::default();
            timings.push((inner.name(), ticks.clone()));
            Box::new(Stopwatch { inner, ticks }) as Box<dyn Source>
        })
        .collect();
    let (commands, rx) = channel();
    let duration = opts.duration;
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(duration);
        let _ = commands.send(Command::Stop);
    });
    let mut missed = 0;
    let started = Instant::now();
    run_loop(
        &mut sources,
        opts.interval,
        &RealClock::new(started),
        &rx,
        &mut |r: TelemetryRecord| {
            if let TelemetryData::Missed { ticks } = r.data {
                missed += ticks;
            }
        },
    );
    let _ = stopper.join();
    let elapsed = started.elapsed();
    drop(sources);
    let interval_s = opts.interval.as_secs_f64().max(1e-9);
    let per_source: Vec<(&str, Vec<f64>)> = timings
        .iter()
        .map(|(name, t)| {
            let shares = t
                .lock()
                .map(|t| t.iter().map(|d| d.as_secs_f64() / interval_s).collect())
                .unwrap_or_default();
            (*name, shares)
        })
        .collect();
    let ticks = per_source.iter().map(|(_, t)| t.len()).min().unwrap_or(0);
    // A tick reads every source in turn: its cost is theirs together.
    let tick_shares: Vec<f64> = (0..ticks)
        .map(|i| per_source.iter().map(|(_, t)| t[i]).sum())
        .collect();
    let tick_share_median = median(&mut tick_shares.clone());
    TelemetryBenchReport {
        gpus: targets.len(),
        nvml_gpus,
        interval_ms: opts.interval.as_secs_f64() * 1e3,
        duration_s: elapsed.as_secs_f64(),
        ticks: ticks as u64,
        missed_ticks: missed,
        tick_share_median,
        tick_share_max: tick_shares.iter().copied().fold(0.0, f64::max),
        tick_share_per_gpu: tick_share_median / targets.len().max(1) as f64,
        source_share: per_source
            .into_iter()
            .map(|(name, mut t)| (name.to_owned(), median(&mut t)))
            .collect(),
        notes,
    }
}

/// The report for people.
pub fn summary(r: &TelemetryBenchReport) -> String {
    let mut out: String = r.notes.iter().map(|n| format!("note: {n}\n")).collect();
    out.push_str(&format!(
        "telemetry: {} GPUs ({} through NVML), every {:.0} ms for {:.1} s\n",
        r.gpus, r.nvml_gpus, r.interval_ms, r.duration_s
    ));
    out.push_str(&format!(
        "  ticks kept {}, missed {}\n",
        r.ticks, r.missed_ticks
    ));
    out.push_str(&format!(
        "  one tick's reads: {:.1}% of the interval (median), {:.1}% at most; {:.2}% per GPU\n",
        r.tick_share_median * 100.0,
        r.tick_share_max * 100.0,
        r.tick_share_per_gpu * 100.0
    ));
    for (source, share) in &r.source_share {
        out.push_str(&format!(
            "  {source}: {:.2}% of the interval (median)\n",
            share * 100.0
        ));
    }
    out
}
