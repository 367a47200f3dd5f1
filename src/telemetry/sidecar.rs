//! The sidecar: samples every source on a fixed schedule on its own thread, snapshots
//! counters when a phase starts or ends, and hands every record to the writer.
//!
//! The schedule is absolute (tick k is due at k x interval), so slow samples never make
//! it drift; ticks that cannot be kept are skipped and recorded as missed.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Source;
use super::record::{Boundary, Readings, TELEMETRY_SCHEMA, TelemetryData, TelemetryRecord};

/// Requests to the sidecar thread.
pub enum Command {
    /// Snapshot every source's counters now; reply when written.
    Snapshot {
        /// The device to snapshot; None for every device.
        device: Option<usize>,
        /// The phase.
        phase: String,
        /// `before` or `after`.
        when: String,
        /// Signalled once the snapshot is written.
        done: Sender<()>,
    },
    /// Finish.
    Stop,
}

/// Time as the sidecar sees it: real in a run, simulated in tests.
pub trait Clock: Send + Sync {
    /// Time since the run started.
    fn now(&self) -> Duration;
    /// Waits until `at` or until a command arrives, whichever is first.
    fn wait(&self, at: Duration, commands: &Receiver<Command>) -> Option<Command>;
}

/// The monotonic clock shared with `events.jsonl`.
pub struct RealClock {
    started: Instant,
}

impl RealClock {
    /// A clock counting from `started` (the run's start).
    pub fn new(started: Instant) -> RealClock {
        RealClock { started }
    }
}

impl Clock for RealClock {
    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    fn wait(&self, at: Duration, commands: &Receiver<Command>) -> Option<Command> {
        let now = self.now();
        let timeout = at.saturating_sub(now);
        match commands.recv_timeout(timeout) {
            Ok(c) => Some(c),
            Err(RecvTimeoutError::Timeout) => None,
            Err(RecvTimeoutError::Disconnected) => Some(Command::Stop),
        }
    }
}

/// Simulated time for replays and tests: waiting jumps straight to the due time, and
/// scripted commands arrive at their set times; at `end` the loop is told to stop.
pub struct ScriptedClock {
    now: std::sync::Mutex<Duration>,
    script: std::sync::Mutex<std::collections::VecDeque<(Duration, Command)>>,
    end: Duration,
}

impl ScriptedClock {
    /// A clock at zero that stops the loop at `end`, delivering `script` on the way.
    pub fn new(end: Duration, mut script: Vec<(Duration, Command)>) -> ScriptedClock {
        script.sort_by_key(|(t, _)| *t);
        ScriptedClock {
            now: std::sync::Mutex::new(Duration::ZERO),
            script: std::sync::Mutex::new(script.into()),
            end,
        }
    }

    /// Moves time forward (a source that takes time to read).
    pub fn advance(&self, by: Duration) {
        if let Ok(mut now) = self.now.lock() {
            *now += by;
        }
    }
}

impl Clock for ScriptedClock {
    fn now(&self) -> Duration {
        self.now.lock().map(|n| *n).unwrap_or_default()
    }

    fn wait(&self, at: Duration, commands: &Receiver<Command>) -> Option<Command> {
        if let Ok(c) = commands.try_recv() {
            return Some(c);
        }
        let (Ok(mut now), Ok(mut script)) = (self.now.lock(), self.script.lock()) else {
            return Some(Command::Stop);
        };
        if script.front().is_some_and(|(t, _)| *t <= at)
            && let Some((t, c)) = script.pop_front()
        {
            *now = (*now).max(t);
            return Some(c);
        }
        if at >= self.end {
            return Some(Command::Stop);
        }
        *now = (*now).max(at);
        None
    }
}

/// Runs the sampling loop until `Stop`: the sidecar thread's body, callable directly
/// (with a simulated clock) in tests.
pub fn run_loop(
    sources: &mut [Box<dyn Source>],
    interval: Duration,
    clock: &dyn Clock,
    commands: &Receiver<Command>,
    out: &mut dyn FnMut(TelemetryRecord),
) {
    let interval = interval.max(Duration::from_millis(1));
    let stamp = |clock: &dyn Clock| clock.now().as_secs_f64() * 1e3;
    out(TelemetryRecord {
        t_ms: stamp(clock),
        device: None,
        source: "sidecar".into(),
        data: TelemetryData::Header {
            schema: TELEMETRY_SCHEMA.into(),
            interval_ms: interval.as_secs_f64() * 1e3,
        },
    });
    read_all(sources, clock, out, |s| s.start());
    let origin = clock.now();
    let mut tick: u64 = 0;
    loop {
        read_all(sources, clock, out, |s| s.sample());
        tick += 1;
        let elapsed = clock.now().saturating_sub(origin);
        let due_now = (elapsed.as_nanos() / interval.as_nanos()) as u64;
        if due_now >= tick {
            // Sampling outlasted one or more intervals: skip to the next tick due.
            let skipped = due_now + 1 - tick;
            tick += skipped;
            out(TelemetryRecord {
                t_ms: stamp(clock),
                device: None,
                source: "sidecar".into(),
                data: TelemetryData::Missed { ticks: skipped },
            });
        }
        let due = origin + interval * tick as u32;
        loop {
            match clock.wait(due, commands) {
                None => break,
                Some(Command::Stop) => return,
                Some(Command::Snapshot {
                    device: only,
                    phase,
                    when,
                    done,
                }) => {
                    if let Some(device) = only {
                        // The boundary itself, even where no source has counters.
                        out(TelemetryRecord {
                            t_ms: stamp(clock),
                            device: Some(device),
                            source: "sidecar".into(),
                            data: TelemetryData::Snapshot {
                                phase: phase.clone(),
                                when: when.clone(),
                                counters: Readings::new(),
                            },
                        });
                    }
                    for source in sources.iter_mut() {
                        let t_ms = stamp(clock);
                        let snaps = source.snapshot();
                        for (device, counters) in snaps
                            .into_iter()
                            .filter(|(d, _)| only.is_none_or(|o| o == *d))
                        {
                            out(TelemetryRecord {
                                t_ms,
                                device: Some(device),
                                source: source.name().into(),
                                data: TelemetryData::Snapshot {
                                    phase: phase.clone(),
                                    when: when.clone(),
                                    counters,
                                },
                            });
                        }
                    }
                    let _ = done.send(());
                }
            }
        }
    }
}

/// Reads every source with `read`, stamping each source's records with the time its
/// read began.
fn read_all(
    sources: &mut [Box<dyn Source>],
    clock: &dyn Clock,
    out: &mut dyn FnMut(TelemetryRecord),
    read: impl Fn(&mut dyn Source) -> Vec<(Option<usize>, TelemetryData)>,
) {
    for source in sources.iter_mut() {
        let t_ms = clock.now().as_secs_f64() * 1e3;
        for (device, data) in read(source.as_mut()) {
            out(TelemetryRecord {
                t_ms,
                device,
                source: source.name().into(),
                data,
            });
        }
    }
}

/// A running sidecar thread.
pub struct Sidecar {
    commands: Sender<Command>,
    thread: Option<JoinHandle<()>>,
    busy_ns: Arc<AtomicU64>,
}

/// Measures the time a source spends reading, so the sidecar can report what it costs.
struct Timed {
    inner: Box<dyn Source>,
    busy_ns: Arc<AtomicU64>,
}

impl Timed {
    fn time<T>(&mut self, f: impl FnOnce(&mut dyn Source) -> T) -> T {
        let start = Instant::now();
        let out = f(self.inner.as_mut());
        self.busy_ns
            .fetch_add(start.elapsed().as_nanos() as u64, Ordering::Relaxed);
        out
    }
}

impl Source for Timed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn start(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.time(|s| s.start())
    }
    fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
        self.time(|s| s.sample())
    }
    fn snapshot(&mut self) -> Vec<(usize, Readings)> {
        self.time(|s| s.snapshot())
    }
}

impl Sidecar {
    /// Starts sampling `sources` every `interval`, handing records to `out`.
    pub fn spawn(
        sources: Vec<Box<dyn Source>>,
        interval: Duration,
        clock: Arc<dyn Clock>,
        mut out: Box<dyn FnMut(TelemetryRecord) + Send>,
    ) -> std::io::Result<Sidecar> {
        let busy_ns = Arc::new(AtomicU64::new(0));
        let mut sources: Vec<Box<dyn Source>> = sources
            .into_iter()
            .map(|inner| {
                Box::new(Timed {
                    inner,
                    busy_ns: busy_ns.clone(),
                }) as Box<dyn Source>
            })
            .collect();
        let (commands, rx) = channel();
        let thread = std::thread::Builder::new()
            .name("kiln-telemetry".into())
            .spawn(move || run_loop(&mut sources, interval, clock.as_ref(), &rx, &mut out))?;
        Ok(Sidecar {
            commands,
            thread: Some(thread),
            busy_ns,
        })
    }

    /// Time spent reading sources so far: what the sidecar takes from the machine.
    pub fn busy(&self) -> Duration {
        Duration::from_nanos(self.busy_ns.load(Ordering::Relaxed))
    }

    /// Snapshots every source's counters of `device` (None: every device) and waits (at
    /// most 10 s) until they are written.
    pub fn snapshot(&self, device: Option<usize>, phase: &str, when: Boundary) {
        let (done, wait) = channel();
        let sent = self.commands.send(Command::Snapshot {
            device,
            phase: phase.into(),
            when: when.as_str().into(),
            done,
        });
        if sent.is_ok() {
            let _ = wait.recv_timeout(Duration::from_secs(10));
        }
    }

    /// Stops the thread after its current sample.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        let _ = self.commands.send(Command::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Sidecar {
    fn drop(&mut self) {
        self.shutdown();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::record::Reading;
    use std::sync::Mutex;

    /// A source whose every sample costs `cost` of simulated time.
    struct Slow {
        clock: Arc<ScriptedClock>,
        cost: Duration,
    }

    impl Source for Slow {
        fn name(&self) -> &'static str {
            "test"
        }
        fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
            self.clock.advance(self.cost);
            let mut readings = Readings::new();
            readings.insert("x".into(), Reading::Number(1.0));
            vec![(Some(0), TelemetryData::Sample { readings })]
        }
    }

    fn simulate(cost_ms: u64) -> Vec<TelemetryRecord> {
        let clock = Arc::new(ScriptedClock::new(Duration::from_secs(60), Vec::new()));
        let mut sources: Vec<Box<dyn Source>> = vec![Box::new(Slow {
            clock: clock.clone(),
            cost: Duration::from_millis(cost_ms),
        })];
        let (_tx, rx) = channel();
        let mut records = Vec::new();
        run_loop(
            &mut sources,
            Duration::from_millis(200),
            clock.as_ref(),
            &rx,
            &mut |r| records.push(r),
        );
        records
    }

    fn sample_times(records: &[TelemetryRecord]) -> Vec<f64> {
        records
            .iter()
            .filter(|r| matches!(r.data, TelemetryData::Sample { .. }))
            .map(|r| r.t_ms)
            .collect()
    }

    #[test]
    fn the_schedule_does_not_drift_over_a_minute_of_simulated_time() {
        let times = sample_times(&simulate(37));
        assert_eq!(times.len(), 300, "one sample per 200 ms over 60 s");
        for (k, t) in times.iter().enumerate() {
            assert!((t - k as f64 * 200.0).abs() < 1e-6, "tick {k} at {t} ms");
        }
        assert!((times.last().unwrap() - 59_800.0).abs() < 200.0);
    }

    #[test]
    fn ticks_that_cannot_be_kept_are_skipped_and_recorded_not_drifted() {
        let records = simulate(450);
        let times = sample_times(&records);
        for t in &times {
            let phase = t % 200.0;
            assert!(
                phase.abs() < 1e-6,
                "every sample starts on the 200 ms grid, not at {t}"
            );
        }
        let missed: u64 = records
            .iter()
            .filter_map(|r| match r.data {
                TelemetryData::Missed { ticks } => Some(ticks),
                _ => None,
            })
            .sum();
        assert_eq!(
            times.len() as u64 + missed,
            300,
            "every tick is either sampled or counted missed"
        );
    }

    #[test]
    fn a_snapshot_request_is_served_between_ticks() {
        struct Counting;
        impl Source for Counting {
            fn name(&self) -> &'static str {
                "test"
            }
            fn sample(&mut self) -> Vec<(Option<usize>, TelemetryData)> {
                Vec::new()
            }
            fn snapshot(&mut self) -> Vec<(usize, Readings)> {
                let mut c = Readings::new();
                c.insert("ecc_uncorrected_volatile".into(), Reading::Number(0.0));
                vec![(3, c)]
            }
        }
        let records = Arc::new(Mutex::new(Vec::new()));
        let sink = records.clone();
        let sidecar = Sidecar::spawn(
            vec![Box::new(Counting)],
            Duration::from_millis(50),
            Arc::new(RealClock::new(Instant::now())),
            Box::new(move |r| sink.lock().unwrap().push(r)),
        )
        .unwrap();
        sidecar.snapshot(Some(3), "vram", Boundary::Before);
        sidecar.stop();
        let records = records.lock().unwrap();
        assert!(matches!(records[0].data, TelemetryData::Header { .. }));
        let snap = records
            .iter()
            .find(|r| matches!(&r.data, TelemetryData::Snapshot { phase, when, .. } if phase == "vram" && when == "before"))
            .expect("the snapshot was written before snapshot() returned");
        assert_eq!(snap.device, Some(3));
    }
}
