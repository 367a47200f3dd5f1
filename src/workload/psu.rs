//! `psu`: the machine's whole power at once. The GPU's heaviest verified load (`heat`: the
//! VRAM test and the compute or matrix load, on two contexts) runs beside a verified CPU
//! load on every core, while the card's power (the telemetry) and the host's (RAPL, where
//! the OS shows it) are recorded. A card that is lost, falls off the bus or is reset only
//! under this load, after `heat` alone ran clean, points at the power supply (the verdict's
//! rule); a wrong result of the CPU load is the computer around the card, and says so.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::heat::{Heat, HeatConfig};
use super::settings::{SettingError, SettingsTable};
use super::show::Section;
use super::{
    Envelope, Kind, PlanDetail, Report, RunControl, Workload, WorkloadError, WorkloadOutcome,
    WorkloadStatus,
};
use crate::evidence::{Event, EventSink};
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::gpu::{DeviceContext, DeviceInfo};
use crate::limits::bounds;
use crate::platform::host_power::{HostEnergy, POWERCAP};
use crate::telemetry::signals;

/// Settings of the combined load.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct PsuConfig {
    /// The GPU's load: `heat`'s settings.
    pub heat: HeatConfig,
    /// CPU threads (default: one per logical core).
    #[serde(default)]
    pub threads: Option<u32>,
    /// Test hook: one CPU result is made wrong.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cpu_fault: bool,
}

/// Power drawn over the load: its mean and its highest reading, W.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Watts {
    /// Mean.
    pub mean_w: f64,
    /// Highest.
    pub max_w: f64,
}

/// A CPU result that was not what it must be.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuMismatch {
    /// The thread (from 0).
    pub thread: u32,
    /// The input's index.
    pub input: u32,
    /// What it must be.
    pub expected: u64,
    /// What the thread computed.
    pub actual: u64,
    /// Seconds into the load.
    pub at_s: f64,
}

/// What the combined load measured and found (the GPU's parts report their own outcomes).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PsuReport {
    /// CPU threads loaded.
    pub threads: u32,
    /// CPU results checked.
    pub cpu_checks: u64,
    /// Of those, wrong.
    pub cpu_wrong: u64,
    /// The first wrong ones.
    pub cpu_records: Vec<CpuMismatch>,
    /// The card's power over the load, from the telemetry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card_power: Option<Watts>,
    /// The host's CPU packages' power over the load, from RAPL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_power: Option<Watts>,
    /// Why the host's power was not read, where it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_power_unread: Option<String>,
    /// How its run ended and how long it took.
    #[serde(flatten)]
    pub run: Envelope,
}

impl PsuReport {
    /// The power figures in words (`card 402 W at most (mean 388 W), CPU packages 281 W at
    /// most (mean 270 W, RAPL)`).
    pub fn power_words(&self) -> String {
        let card = match self.card_power {
            Some(w) => format!("card {:.0} W at most (mean {:.0} W)", w.max_w, w.mean_w),
            None => "card power not read".into(),
        };
        let host = match (&self.host_power, &self.host_power_unread) {
            (Some(w), _) => format!(
                "CPU packages {:.0} W at most (mean {:.0} W, RAPL)",
                w.max_w, w.mean_w
            ),
            (None, Some(why)) => format!("host power not read: {why}"),
            (None, None) => "host power not read".into(),
        };
        format!("{card}, {host}")
    }
}

impl Report for PsuReport {
    crate::workload::envelope_in!(run);

    fn found(&self) -> Option<WorkloadStatus> {
        (self.cpu_wrong > 0).then_some(WorkloadStatus::Failed)
    }

    fn began(&self) -> bool {
        self.cpu_checks > 0
    }

    fn headline(&self) -> String {
        let load = format!(
            "{} CPU results checked on {} beside the GPU's load ({})",
            crate::units::large(self.cpu_checks as f64),
            crate::text::count(u64::from(self.threads), "thread"),
            self.power_words()
        );
        match self.status() {
            WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => format!(
                "{}: the CPU, not the GPU, computed wrong; {load}",
                crate::text::count(self.cpu_wrong, "wrong CPU result")
            ),
            WorkloadStatus::NotRun => format!(
                "nothing ran: {}",
                self.run
                    .why_cut_short()
                    .unwrap_or("no CPU result was checked")
            ),
            WorkloadStatus::Incomplete => format!(
                "{load}, but it stopped early: {}",
                self.run.why_cut_short().unwrap_or("unknown")
            ),
            WorkloadStatus::Passed => load,
        }
    }
}

/// The `psu` workload.
pub struct Psu;

crate::evidence! {
    /// The evidence of `HOST_COMPUTE_ERRORS`: the CPU's wrong results under the combined
    /// load, and the host's power.
    struct HostWrong<'a> {
        /// load, and the host's power.
        cpu_wrong: u64 => "Wrong CPU results",
        cpu_checks: u64 => "CPU checks",
        records: &'a [CpuMismatch] => "Record",
        host_power: Option<&'a Watts> => "Host power",
    }
}

impl Kind for Psu {
    const NAME: &'static str = "psu";
    const DEFAULT_WEIGHT: u32 = 2;
    type Settings = PsuConfig;
    type Result = PsuReport;

    fn from_profile(table: &mut dyn SettingsTable) -> Result<PsuConfig, SettingError> {
        let threads = table.count("threads", &bounds::CPU_THREADS)?;
        Ok(PsuConfig {
            heat: Heat::from_profile(table)?,
            threads,
            cpu_fault: false,
        })
    }

    fn build(settings: &PsuConfig) -> Vec<Box<dyn Workload + Send>> {
        let mut parts = Heat::build(&settings.heat);
        let gpu = parts.pop();
        if let Some(gpu) = gpu {
            parts.push(Box::new(CombinedLoad {
                gpu,
                config: settings.clone(),
                report: None,
            }));
        }
        parts
    }

    fn describe(settings: &PsuConfig, device: &DeviceInfo) -> Result<PlanDetail, String> {
        let heat = Heat::describe(&settings.heat, device)?;
        let threads = settings.threads.unwrap_or_else(cpu_threads);
        Ok(PlanDetail {
            detail: format!(
                "{}, with a verified CPU load on {} beside it: the power supply under the whole machine's load",
                heat.detail,
                crate::text::count(u64::from(threads), "thread")
            ),
            ..heat
        })
    }

    fn judge(result: &PsuReport) -> Vec<Finding> {
        if result.cpu_wrong == 0 {
            return Vec::new();
        }
        let first = result.cpu_records.first();
        vec![finding(
            FindingCode::CpuWrongResult,
            Severity::Critical,
            Confidence::High,
            format!(
                "the host's CPU computed {} under the combined load{}: not the GPU's fault; the computer around it (CPU, its memory, its power or its cooling)",
                crate::text::count(result.cpu_wrong, "wrong result"),
                first
                    .map(|m| format!(
                        " (thread {} input {}: {:016x} instead of {:016x}, {:.1} s in)",
                        m.thread, m.input, m.actual, m.expected, m.at_s
                    ))
                    .unwrap_or_default()
            ),
            crate::finding::evidence(&HostWrong {
                cpu_wrong: result.cpu_wrong,
                cpu_checks: result.cpu_checks,
                records: &result.cpu_records,
                host_power: result.host_power.as_ref(),
            }),
            "test the host: its CPU and memory (memtest86+, a CPU stress test), its cooling and power; the GPU's own results stand on their own",
        )]
    }

    fn sections(r: &PsuReport) -> Vec<Section> {
        vec![Section::Lines(vec![r.headline()])]
    }
}

/// The CPU threads a load uses by default: one per logical core.
fn cpu_threads() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as u32)
}

/// The GPU's load with the CPU load and the power readings beside it: runs the GPU's part
/// as itself, and reports the combined load's own result beside its outcome.
struct CombinedLoad {
    gpu: Box<dyn Workload + Send>,
    config: PsuConfig,
    report: Option<PsuReport>,
}

impl Workload for CombinedLoad {
    fn name(&self) -> &'static str {
        self.gpu.name()
    }

    fn run(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<WorkloadOutcome, WorkloadError> {
        let started = Instant::now();
        let threads = self.config.threads.unwrap_or_else(cpu_threads).max(1);
        let device = Some(ctx.info().index);
        events.emit(
            device,
            Event::WorkloadStart {
                workload: Psu::NAME.into(),
                settings: json!({ "threads": threads }),
            },
        );
        let host = HostEnergy::open(std::path::Path::new(POWERCAP));
        let cpu = CpuLoad::start(threads, self.config.cpu_fault);
        let meter = Meter::start(control.clone(), host.as_ref().ok().cloned());
        let outcome = self.gpu.run(ctx, control, events);
        let (checks, wrong, records) = cpu.stop();
        let (card_power, host_power) = meter.stop();
        let mut report = PsuReport {
            threads,
            cpu_checks: checks,
            cpu_wrong: wrong,
            cpu_records: records,
            card_power,
            host_power,
            host_power_unread: host.err(),
            run: Envelope {
                wall_s: started.elapsed().as_secs_f64(),
                ..Envelope::default()
            },
        };
        if let Ok(o) = &outcome {
            report.run.device_error = o.summary.envelope().device_error.clone();
            report.run.stopped_early = o.summary.envelope().stopped_early.clone();
        }
        self.report = Some(report);
        outcome
    }

    fn beside(&mut self) -> Vec<WorkloadOutcome> {
        self.report
            .take()
            .map(|r| r.outcome(Psu::NAME))
            .into_iter()
            .collect()
    }
}

/// Inputs each CPU thread cycles through; their results are computed once before the load.
const CPU_INPUTS: u32 = 64;
/// Steps of one CPU computation: about a millisecond on a current core.
const CPU_STEPS: u32 = 200_000;
/// Wrong CPU results kept.
const CPU_RECORDS: usize = 16;

/// One CPU computation: a chain of multiply-adds in double precision and integer mixing,
/// what a core's FPU and ALU do under a stress load, folded into one word.
fn cpu_work(input: u32) -> u64 {
    let mut x = f64::from(input) * 1e-3 + 0.5;
    let mut h = u64::from(input).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for _ in 0..CPU_STEPS {
        x = x.mul_add(0.999_999_9, 1e-7);
        h ^= h << 13;
        h ^= h >> 7;
        h ^= h << 17;
    }
    std::hint::black_box(x.to_bits() ^ h)
}

/// The CPU load: every thread recomputes the inputs and compares with the results computed
/// before the load.
struct CpuLoad {
    stop: Arc<AtomicBool>,
    checks: Arc<AtomicU64>,
    /// Every wrong result, however many (each thread records only the first few).
    wrong: Arc<AtomicU64>,
    threads: Vec<std::thread::JoinHandle<Vec<CpuMismatch>>>,
}

impl CpuLoad {
    fn start(threads: u32, fault: bool) -> CpuLoad {
        let expected: Arc<Vec<u64>> = Arc::new((0..CPU_INPUTS).map(cpu_work).collect());
        let stop = Arc::new(AtomicBool::new(false));
        let checks = Arc::new(AtomicU64::new(0));
        let wrong = Arc::new(AtomicU64::new(0));
        let started = Instant::now();
        let threads = (0..threads)
            .map(|thread| {
                let (stop, checks, wrong, expected) = (
                    Arc::clone(&stop),
                    Arc::clone(&checks),
                    Arc::clone(&wrong),
                    Arc::clone(&expected),
                );
                std::thread::spawn(move || {
                    let mut found = Vec::new();
                    let mut input = thread % CPU_INPUTS;
                    let mut done = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let mut actual = cpu_work(input);
                        if fault && thread == 0 && done == 2 {
                            actual ^= 1 << 12;
                        }
                        done += 1;
                        let want = expected[input as usize];
                        if actual != want {
                            wrong.fetch_add(1, Ordering::Relaxed);
                        }
                        if actual != want && found.len() < CPU_RECORDS {
                            found.push(CpuMismatch {
                                thread,
                                input,
                                expected: want,
                                actual,
                                at_s: started.elapsed().as_secs_f64(),
                            });
                        }
                        checks.fetch_add(1, Ordering::Relaxed);
                        input = (input + 1) % CPU_INPUTS;
                    }
                    found
                })
            })
            .collect();
        CpuLoad {
            stop,
            checks,
            wrong,
            threads,
        }
    }

    /// Stops the threads: the results checked, how many were wrong, the first ones.
    fn stop(self) -> (u64, u64, Vec<CpuMismatch>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut records: Vec<CpuMismatch> = self
            .threads
            .into_iter()
            .filter_map(|t| t.join().ok())
            .flatten()
            .collect();
        records.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        records.truncate(CPU_RECORDS);
        (
            self.checks.load(Ordering::Relaxed),
            self.wrong.load(Ordering::Relaxed),
            records,
        )
    }
}

/// Samples the card's power (the telemetry) and the host's (RAPL) while the load runs.
struct Meter {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<(Option<Watts>, Option<Watts>)>,
}

/// Time between two samples of the meter.
const METER_EVERY: Duration = Duration::from_millis(500);

impl Meter {
    fn start(control: RunControl, host: Option<HostEnergy>) -> Meter {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let (mut card, mut cpu) = (Vec::new(), Vec::new());
            let mut last = host.as_ref().and_then(HostEnergy::read);
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(METER_EVERY);
                if let Some(w) = control
                    .power
                    .as_ref()
                    .and_then(|f| f.number(signals::POWER_W.name))
                {
                    card.push(w);
                }
                if let (Some(h), Some(from)) = (&host, &last)
                    && let Some(to) = h.read()
                {
                    cpu.extend(h.watts(from, &to));
                    last = Some(to);
                }
            }
            (watts(&card), watts(&cpu))
        });
        Meter { stop, thread }
    }

    fn stop(self) -> (Option<Watts>, Option<Watts>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or((None, None))
    }
}

fn watts(samples: &[f64]) -> Option<Watts> {
    if samples.is_empty() {
        return None;
    }
    Some(Watts {
        mean_w: samples.iter().sum::<f64>() / samples.len() as f64,
        max_w: samples.iter().copied().fold(f64::MIN, f64::max),
    })
}

crate::said_record!(Watts {
    mean_w => "Mean" in crate::finding::Unit::Watts,
    max_w => "Highest" in crate::finding::Unit::Watts,
});

crate::said_record!(CpuMismatch {
    thread => "Thread",
    input => "Input",
    expected => "Expected" in crate::finding::Unit::Hex,
    actual => "Read" in crate::finding::Unit::Hex,
    at_s => "At" in crate::finding::Unit::Seconds,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_load_checks_its_results_and_finds_a_planted_wrong_one() {
        let clean = CpuLoad::start(2, false);
        std::thread::sleep(Duration::from_millis(300));
        let (checks, wrong, _) = clean.stop();
        assert!(checks > 4, "{checks}");
        assert_eq!(wrong, 0);
        let faulty = CpuLoad::start(2, true);
        while faulty.checks.load(Ordering::Relaxed) < 20 {
            std::thread::sleep(Duration::from_millis(20));
        }
        let (_, wrong, records) = faulty.stop();
        assert_eq!(wrong, 1, "{records:?}");
        assert_eq!(records[0].thread, 0);
        assert_eq!(records[0].expected ^ records[0].actual, 1 << 12);
    }
}
