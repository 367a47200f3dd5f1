//! `resident`: a share of VRAM written once with the own-address pattern at the start of
//! the device's test and verified at intervals all run long, while the other workloads
//! load the card and heat it; at half time the complement is written, so that a stuck bit
//! that agrees with the first pattern cannot hide. A word that read right at one check and
//! wrong at a later one is memory that does not hold its data as the card heats: each
//! wrong word says how long after writing it went wrong, and at what temperatures.
//!
//! It takes no share of the time budget: the run starts it first, on a context of its
//! own, and ends it when the device's other workloads have ended ([`RunControl::finish`]).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::cadence::LoadPhase;
use super::settings::{SettingError, SettingsTable};
use super::show::{Section, Table, TableRow};
use super::vram::engine::{Engine, EngineConfig};
use super::vram::layout::RawRecord;
use super::vram::pattern::Pattern;
use super::vram::{VramConfig, plan_size};
use super::{
    Envelope, Kind, KindTest, PlanDetail, Report, RunControl, Workload, WorkloadError,
    WorkloadStatus, record_device_error,
};
use crate::evidence::{Event, EventSink};
use crate::finding::Bytes;
use crate::finding::{Confidence, Finding, FindingCode, Severity, finding};
use crate::gpu::{DeviceContext, DeviceInfo};
use crate::limits::bounds;
use crate::telemetry::signals;
use crate::units::{MIB, format_bytes};

/// Settings of the resident region.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResidentConfig {
    /// Its size as a percentage of the memory the VRAM test would take on the device (the
    /// VRAM tests then take the rest).
    pub share_percent: f64,
    /// Exactly this many bytes instead (whole MiB; the command line's `--vram-bytes`
    /// times the share).
    #[serde(default)]
    pub bytes: Option<u64>,
    /// Time between two checks.
    pub interval: Duration,
    /// Seed of the own-address pattern.
    pub seed: u64,
    /// Wrong words kept with their history (the count is never capped).
    pub record_capacity: u32,
    /// Test hook: this word (absolute index) is flipped by this mask once this long after
    /// the first write, as a cell that loses its charge once the card is hot would be.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inject: Option<DelayedFault>,
}

/// A fault planted after a delay (detector tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayedFault {
    /// Absolute word index.
    pub word: u64,
    /// Bits flipped.
    pub xor_mask: u32,
    /// Time after the first write.
    pub after: Duration,
}

impl Default for ResidentConfig {
    fn default() -> Self {
        ResidentConfig {
            share_percent: 10.0,
            bytes: None,
            interval: Duration::from_secs(120),
            seed: 0x7265_7369,
            record_capacity: 1024,
            inject: None,
        }
    }
}

impl ResidentConfig {
    /// The bytes it holds on `device`: its share of what the VRAM test would take there,
    /// whole MiB, at least one.
    pub fn bytes_on(&self, device: &DeviceInfo) -> Result<u64, WorkloadError> {
        let bytes = match self.bytes {
            Some(b) => b,
            None => {
                let whole = plan_size(device, &VramConfig::default())?.sized_bytes;
                (whole as f64 * self.share_percent / 100.0) as u64
            }
        };
        Ok((bytes / MIB).max(1) * MIB)
    }
}

/// Which pattern the region held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Held {
    /// Each word's own address (hashed with the seed).
    OwnAddress,
    /// Its complement, from half time on.
    Complement,
}

impl Held {
    /// In words.
    pub fn word(self) -> &'static str {
        match self {
            Held::OwnAddress => "own-address pattern",
            Held::Complement => "complement pattern",
        }
    }
}

/// What the telemetry said at a moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Temperatures {
    /// The GPU's temperature, °C, where read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_c: Option<f64>,
    /// The memory's (HBM, or amdgpu's `mem` sensor), °C, where read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_c: Option<f64>,
}

impl Temperatures {
    /// The device's latest sample, as far as the run feeds it.
    pub fn now(control: &RunControl) -> Temperatures {
        let read = |key| control.power.as_ref().and_then(|f| f.number(key));
        Temperatures {
            gpu_c: read(signals::GPU_TEMP_C.name),
            memory_c: read(signals::HBM_TEMP_C.name),
        }
    }

    /// As a circumstance (`at GPU 84 °C, memory 91 °C`; `with no temperature read`).
    pub fn at_words(&self) -> String {
        if self.gpu_c.is_none() && self.memory_c.is_none() {
            "with no temperature read".into()
        } else {
            format!("at {}", self.words())
        }
    }

    /// In words (`GPU 84 °C, memory 91 °C`; `no temperature read`).
    pub fn words(&self) -> String {
        let parts: Vec<String> = [("GPU", self.gpu_c), ("memory", self.memory_c)]
            .iter()
            .filter_map(|(name, t)| t.map(|t| format!("{name} {t:.0} °C")))
            .collect();
        if parts.is_empty() {
            "no temperature read".into()
        } else {
            parts.join(", ")
        }
    }
}

/// One check of the whole region.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResidentCheck {
    /// Seconds since the region's test began.
    pub at_s: f64,
    /// Seconds since the pattern it checked was written.
    pub after_write_s: f64,
    /// The pattern it checked.
    pub held: Held,
    /// Wrong words found.
    pub errors: u64,
    /// Of those, words not wrong at an earlier check.
    pub new_errors: u64,
    /// The temperatures then.
    pub temperatures: Temperatures,
    /// Where the device's load stood: a check is made at each switch between load and
    /// idle of a load with pauses, as well as every interval.
    pub phase: LoadPhase,
}

/// A word of the region that read wrong, with when it was first seen.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResidentError {
    /// Byte offset in the region.
    pub offset_bytes: u64,
    /// What it should hold when first seen wrong.
    pub expected: u32,
    /// What was read.
    pub actual: u32,
    /// The pattern it held then.
    pub held: Held,
    /// Seconds after that pattern was written.
    pub after_write_s: f64,
    /// Clean checks of that pattern before it went wrong: above zero, the word held its
    /// data for a while and then lost it.
    pub clean_checks_before: u32,
    /// Checks that found it wrong.
    pub seen: u32,
    /// The temperatures when it was first seen.
    pub temperatures: Temperatures,
    /// Where the device's load stood when it was first seen.
    pub phase: LoadPhase,
}

impl ResidentError {
    /// True when the word read right at an earlier check of the same pattern.
    pub fn decayed(&self) -> bool {
        self.clean_checks_before > 0
    }
}

/// Everything the resident region found.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ResidentReport {
    /// Bytes held.
    pub bytes: u64,
    /// Time between checks.
    pub interval_s: f64,
    /// Every check, in order.
    pub checks: Vec<ResidentCheck>,
    /// Wrong words (each once, the count below is never capped).
    pub errors_total: u64,
    /// The first wrong words.
    pub records: Vec<ResidentError>,
    /// The hottest the card was at a check.
    pub hottest: Temperatures,
    /// How its run ended and how long it took.
    #[serde(flatten)]
    pub run: Envelope,
}

impl ResidentReport {
    /// The wrong words, each once however many checks read it wrong: for each pattern
    /// held, the most any of its checks counted, or the words named for it where more.
    fn wrong_words(&self) -> u64 {
        [Held::OwnAddress, Held::Complement]
            .iter()
            .map(|&held| {
                let counted = self
                    .checks
                    .iter()
                    .filter(|c| c.held == held)
                    .map(|c| c.errors)
                    .max()
                    .unwrap_or(0);
                let named = self.records.iter().filter(|r| r.held == held).count() as u64;
                counted.max(named)
            })
            .sum()
    }

    /// Takes one check's wrong reads of the pattern held: a word named before (`seen`:
    /// word to its record) is counted again, a new one named by `first_seen` while there
    /// is room. The records it named. Words past `capacity` are counted by the checks'
    /// totals, never named, so that a region full of wrong words does not name (and say
    /// in a note) the same ones again at every check.
    fn name_new_words(
        &mut self,
        read: &[RawRecord],
        seen: &mut HashMap<u64, usize>,
        capacity: usize,
        first_seen: impl Fn(&RawRecord) -> ResidentError,
    ) -> std::ops::Range<usize> {
        let start = self.records.len();
        for raw in read {
            if let Some(&record) = seen.get(&raw.word) {
                self.records[record].seen += 1;
            } else if self.records.len() < capacity {
                seen.insert(raw.word, self.records.len());
                self.records.push(first_seen(raw));
            }
        }
        start..self.records.len()
    }

    /// The patterns that were checked at least once after being written.
    fn patterns_checked(&self) -> Vec<Held> {
        let mut held: Vec<Held> = self.checks.iter().map(|c| c.held).collect();
        held.dedup();
        held
    }
}

impl Report for ResidentReport {
    crate::workload::envelope_in!(run);

    fn found(&self) -> Option<WorkloadStatus> {
        (self.errors_total > 0).then_some(WorkloadStatus::Failed)
    }

    fn began(&self) -> bool {
        !self.checks.is_empty()
    }

    fn headline(&self) -> String {
        let held = format!(
            "{} held for {:.0} s ({})",
            format_bytes(self.bytes),
            self.run.wall_s,
            crate::text::count(self.checks.len() as u64, "check")
        );
        match self.status() {
            WorkloadStatus::Failed | WorkloadStatus::SoftwareFault => {
                let decayed = self.records.iter().filter(|r| r.decayed()).count();
                format!(
                    "{} in {held}{}",
                    crate::text::count(self.errors_total, "wrong word"),
                    if decayed > 0 {
                        format!(", {decayed} of them right at an earlier check")
                    } else {
                        String::new()
                    }
                )
            }
            WorkloadStatus::NotRun => format!(
                "nothing ran: {}",
                self.run.why_cut_short().unwrap_or("no check completed")
            ),
            WorkloadStatus::Incomplete => format!(
                "no wrong word in {held}, but it stopped early: {}",
                self.run.why_cut_short().unwrap_or("unknown")
            ),
            WorkloadStatus::Passed => {
                let patterns: Vec<&str> =
                    self.patterns_checked().iter().map(|h| h.word()).collect();
                format!(
                    "no wrong word in {held}: the {} (hottest at a check: {})",
                    patterns.join(", then "),
                    self.hottest.words()
                )
            }
        }
    }
}

/// The `resident` workload.
pub struct Resident;

impl Kind for Resident {
    const NAME: &'static str = "resident";
    /// It runs beside the others, taking no share of the time.
    const DEFAULT_WEIGHT: u32 = 1;
    type Settings = ResidentConfig;
    type Result = ResidentReport;

    fn from_profile(table: &mut dyn SettingsTable) -> Result<ResidentConfig, SettingError> {
        let d = ResidentConfig::default();
        let share = match table.number("share")? {
            None => d.share_percent,
            Some(p) => bounds::RESIDENT_SHARE
                .check(p)
                .map_err(|e| SettingError::new("share", e))?,
        };
        let interval = table
            .duration("interval", &bounds::RESIDENT_INTERVAL)?
            .unwrap_or(d.interval);
        Ok(ResidentConfig {
            share_percent: share,
            interval,
            ..d
        })
    }

    fn build(settings: &ResidentConfig) -> Vec<Box<dyn Workload + Send>> {
        vec![Box::new(ResidentTest {
            config: settings.clone(),
        })]
    }

    fn describe(settings: &ResidentConfig, device: &DeviceInfo) -> Result<PlanDetail, String> {
        let bytes = match settings.bytes_on(device) {
            Ok(b) => b,
            Err(WorkloadError::Config(why)) => return Err(why),
            Err(e) => {
                return Ok(PlanDetail {
                    detail: format!("no memory ({e})"),
                    ..PlanDetail::default()
                });
            }
        };
        Ok(PlanDetail {
            detail: format!(
                "{} ({:.0}% of the memory tested) written once, verified every {} all run long beside the others, its complement from half time",
                format_bytes(bytes),
                settings.share_percent,
                crate::units::duration_rounded_up(settings.interval)
            ),
            vram_bytes: None,
            heap_bytes: None,
        })
    }

    fn judge(result: &ResidentReport) -> Vec<Finding> {
        found(result)
    }

    fn sections(r: &ResidentReport) -> Vec<Section> {
        let mut lines = vec![r.headline()];
        for c in &r.checks {
            let phase = match c.phase {
                LoadPhase::Load => String::new(),
                other => format!(" {}", other.word()),
            };
            lines.push(format!(
                "check at {:.0} s{phase}, {:.0} s after writing the {}: {} ({})",
                c.at_s,
                c.after_write_s,
                c.held.word(),
                match (c.errors, c.new_errors) {
                    (0, _) => "clean".to_owned(),
                    (e, 0) => crate::text::count(e, "wrong word"),
                    (e, n) => format!("{}, {n} new", crate::text::count(e, "wrong word")),
                },
                c.temperatures.words()
            ));
        }
        let mut out = vec![Section::Lines(lines)];
        if !r.records.is_empty() {
            out.push(Section::Table(Table {
                title: "Resident words that went wrong".into(),
                noun: crate::workload::fault_noun("resident"),
                place: "word",
                columns: vec![
                    "offset",
                    "expected",
                    "read",
                    "pattern",
                    "after writing",
                    "clean checks before",
                    "temperatures",
                ],
                rows: r
                    .records
                    .iter()
                    .map(|e| TableRow {
                        key: format!("{:#x}", e.offset_bytes),
                        cells: vec![
                            format!("{:#x}", e.offset_bytes),
                            format!("{:08x}", e.expected),
                            format!("{:08x}", e.actual),
                            e.held.word().into(),
                            format!("{:.0} s", e.after_write_s),
                            e.clean_checks_before.to_string(),
                            e.temperatures.words(),
                        ],
                        count: u64::from(e.seen),
                    })
                    .collect(),
                total: r.errors_total,
            }));
        }
        out
    }
}

/// What the region's wrong words prove.
fn found(r: &ResidentReport) -> Vec<Finding> {
    let mut out = Vec::new();
    if r.errors_total == 0 {
        return out;
    }
    let decayed: Vec<&ResidentError> = r.records.iter().filter(|e| e.decayed()).collect();
    let first = |records: &[&ResidentError]| {
        records
            .iter()
            .min_by(|a, b| a.after_write_s.total_cmp(&b.after_write_s))
            .map(|e| {
                format!(
                    "{:.0} s after the {} was written, {}",
                    e.after_write_s,
                    e.held.word(),
                    e.temperatures.at_words()
                )
            })
    };
    let all: Vec<&ResidentError> = r.records.iter().collect();
    // The hottest the card was at a check, where any temperature was read.
    let hottest = if r.hottest == Temperatures::default() {
        String::new()
    } else {
        format!("; hottest at a check {}", r.hottest.words())
    };
    let summary = match first(&decayed) {
        Some(when) => format!(
            "{} of the resident region lost {} data while held: {} read right at an earlier check and wrong later, the first {when}{hottest}",
            crate::text::count(r.errors_total, "word"),
            if r.errors_total == 1 { "its" } else { "their" },
            decayed.len(),
        ),
        None => format!(
            "{} of the resident region wrong at the first check after writing, {}{hottest}",
            crate::text::count(r.errors_total, "word"),
            first(&all).unwrap_or_else(|| "not recorded".into()),
        ),
    };
    out.push(finding(
        FindingCode::VramDecay,
        Severity::Critical,
        Confidence::High,
        summary,
        crate::finding::evidence(&Decayed {
            bytes: Bytes(r.bytes),
            errors_total: r.errors_total,
            decayed: decayed.len(),
            records: all.iter().take(16).copied().collect(),
            checks: r.checks.len(),
            hottest: &r.hottest,
        }),
        "memory that does not hold its data while the card is loaded and hot: a hardware fault of the card's memory; keep this report and contact the vendor (RMA)",
    ));
    out
}

crate::evidence! {
    /// The evidence of `VRAM_DECAY`.
    struct Decayed<'a> {
        bytes: Bytes<u64> => "Size",
        errors_total: u64 => "Wrong reads",
        decayed: usize => "Words that lost their value",
        records: Vec<&'a ResidentError> => "Record",
        checks: usize => "Checks",
        hottest: &'a Temperatures => "Hottest",
    }
}

/// The resident region as a workload.
pub struct ResidentTest {
    /// Its settings.
    pub config: ResidentConfig,
}

impl KindTest for ResidentTest {
    type Kind = Resident;

    /// Runs the region's test and returns its typed report.
    fn run_report(
        &mut self,
        ctx: &mut DeviceContext,
        control: &RunControl,
        events: &mut dyn EventSink,
    ) -> Result<ResidentReport, WorkloadError> {
        let started = Instant::now();
        let cfg = self.config.clone();
        let device = Some(ctx.info().index);
        let bytes = cfg.bytes_on(ctx.info())?;
        let engine_cfg = EngineConfig::for_device(ctx.info().kind.is_gpu());
        let max_buffer = ctx.info().limits.largest_storage_buffer_bytes();
        let stop = || control.stopped();
        let (mut engine, short) = Engine::allocate(ctx, engine_cfg, bytes, max_buffer, &stop)?;
        let mut report = ResidentReport {
            bytes: engine.tested_bytes(),
            interval_s: cfg.interval.as_secs_f64(),
            checks: Vec::new(),
            errors_total: 0,
            records: Vec::new(),
            hottest: Temperatures::default(),
            run: Envelope::default(),
        };
        events.emit(
            device,
            Event::WorkloadStart {
                workload: Resident::NAME.into(),
                settings: json!({ "config": &cfg, "bytes": report.bytes,
                                  "allocation_stopped_by": short.map(|e| e.to_string()) }),
            },
        );
        if let Err(e) = hold(&mut engine, &cfg, control, events, device, &mut report) {
            report.run.device_error = Some(record_device_error(events, device, &e));
        }
        report.run.wall_s = started.elapsed().as_secs_f64();
        Ok(report)
    }
}

/// Writes the region, checks it every interval until the run ends, and writes the
/// complement at half time.
fn hold(
    engine: &mut Engine,
    cfg: &ResidentConfig,
    control: &RunControl,
    events: &mut dyn EventSink,
    device: Option<usize>,
    report: &mut ResidentReport,
) -> crate::gpu::GpuResult<()> {
    let began = Instant::now();
    let stop = || control.stopped();
    let half_time = control
        .deadline
        .map(|d| began + d.saturating_duration_since(began) / 2);
    let mut held = Held::OwnAddress;
    let pattern_of = |held| match held {
        Held::OwnAddress => Pattern::address(cfg.seed),
        Held::Complement => Pattern::address(cfg.seed).inverted(),
    };
    engine.write(&pattern_of(held), &stop)?;
    let mut written = Instant::now();
    let mut checks_of_pattern = 0u32;
    let mut injected = false;
    // The words recorded for the pattern held, and where their records are.
    let mut seen: HashMap<u64, usize> = HashMap::new();
    loop {
        // Wait for the next check, a switch between load and idle, the end of the
        // others, or a stop.
        let next = Instant::now() + cfg.interval;
        let mut phase = control.phase.get();
        while Instant::now() < next
            && !control.finished()
            && !control.out_of_time()
            && !control.stop_requested()
        {
            std::thread::sleep(Duration::from_millis(50));
            let now = control.phase.get();
            if now != phase {
                phase = now;
                if now != LoadPhase::Load {
                    break;
                }
            }
        }
        if control.stop_requested() {
            report.run.stopped_early = Some(crate::workload::STOPPED_ON_REQUEST.into());
            return Ok(());
        }
        if let Some(fault) = cfg.inject
            && !injected
            && written.elapsed() >= fault.after
        {
            let value = pattern_of(held).word(fault.word) ^ fault.xor_mask;
            engine.write_words(&[fault.word], &[value])?;
            injected = true;
        }
        let temperatures = Temperatures::now(control);
        let after_write_s = written.elapsed().as_secs_f64();
        let sweep = engine.verify(&pattern_of(held), cfg.record_capacity, &stop)?;
        let named = report.name_new_words(
            &sweep.counters.records,
            &mut seen,
            cfg.record_capacity as usize,
            |raw| ResidentError {
                offset_bytes: raw.word * 4,
                expected: raw.expected,
                actual: raw.actual,
                held,
                after_write_s,
                clean_checks_before: checks_of_pattern,
                seen: 1,
                temperatures,
                phase,
            },
        );
        for record in &report.records[named.clone()] {
            events.emit(
                device,
                Event::Note {
                    message: format!(
                        "resident: word at {:#x} expected {:08x} read {:08x}, {:.0} s after writing the {} ({} clean checks before), {}",
                        record.offset_bytes,
                        record.expected,
                        record.actual,
                        after_write_s,
                        held.word(),
                        checks_of_pattern,
                        temperatures.at_words()
                    ),
                },
            );
        }
        for (mine, read) in [
            (&mut report.hottest.gpu_c, temperatures.gpu_c),
            (&mut report.hottest.memory_c, temperatures.memory_c),
        ] {
            if let Some(t) = read {
                *mine = Some(mine.map_or(t, |m: f64| m.max(t)));
            }
        }
        report.checks.push(ResidentCheck {
            at_s: began.elapsed().as_secs_f64(),
            after_write_s,
            held,
            errors: sweep.counters.errors,
            new_errors: named.len() as u64,
            temperatures,
            phase,
        });
        // Words past the records' capacity are counted, never named: how many more the
        // count says than were named is new only where it grew.
        let total = report.wrong_words();
        if let Some(check) = report.checks.last_mut() {
            check.new_errors = check
                .new_errors
                .max(total.saturating_sub(report.errors_total));
        }
        report.errors_total = total;
        checks_of_pattern += 1;
        control.still_alive();
        if control.finished() || control.out_of_time() {
            return Ok(());
        }
        // At half time, the complement: every cell holds the other value for the rest.
        if held == Held::OwnAddress && half_time.is_some_and(|h| Instant::now() >= h) {
            held = Held::Complement;
            engine.write(&pattern_of(held), &stop)?;
            written = Instant::now();
            checks_of_pattern = 0;
            seen.clear();
        }
    }
}

crate::said_by_name!(Held);

crate::said_record!(Temperatures {
    gpu_c => "GPU" in crate::finding::Unit::Celsius,
    memory_c => "Memory" in crate::finding::Unit::Celsius,
});

crate::said_record!(ResidentError {
    offset_bytes => "Offset" in crate::finding::Unit::Hex,
    expected => "Expected" in crate::finding::Unit::Hex,
    actual => "Read" in crate::finding::Unit::Hex,
    held => "Held",
    after_write_s => "After the write" in crate::finding::Unit::Seconds,
    clean_checks_before => "Clean checks before",
    seen => "Seen",
    temperatures => "Temperatures",
    phase => "Load phase",
});

#[cfg(test)]
mod tests {
    use super::*;

    fn check(held: Held, errors: u64) -> ResidentCheck {
        ResidentCheck {
            at_s: 0.0,
            after_write_s: 0.0,
            held,
            errors,
            new_errors: 0,
            temperatures: Temperatures::default(),
            phase: LoadPhase::Load,
        }
    }

    fn named(held: Held, word: u64) -> ResidentError {
        ResidentError {
            offset_bytes: word * 4,
            expected: 0,
            actual: 1,
            held,
            after_write_s: 0.0,
            clean_checks_before: 0,
            seen: 1,
            temperatures: Temperatures::default(),
            phase: LoadPhase::Load,
        }
    }

    fn raw(word: u64) -> RawRecord {
        RawRecord {
            word,
            expected: 0,
            actual: 1,
            buffer: 0,
            flags: 0,
            span_elements: 0,
            span_stride: 0,
        }
    }

    /// A word named once is counted again at each later check, never named again; words
    /// past the capacity are never named, at the first check or any later one.
    #[test]
    fn a_check_names_only_new_words_and_only_while_there_is_room() {
        let mut r = ResidentReport {
            bytes: 1 << 20,
            interval_s: 1.0,
            checks: Vec::new(),
            errors_total: 0,
            records: Vec::new(),
            hottest: Temperatures::default(),
            run: Envelope::default(),
        };
        let mut seen = HashMap::new();
        let reads: Vec<RawRecord> = [4, 8, 15].into_iter().map(raw).collect();
        let first = r.name_new_words(&reads, &mut seen, 2, |w| named(Held::OwnAddress, w.word));
        assert_eq!(first, 0..2);
        let words: Vec<u64> = r.records.iter().map(|e| e.offset_bytes / 4).collect();
        assert_eq!(words, [4, 8]);
        // The same three again, and a fourth: nothing new named, the two named seen twice.
        let reads: Vec<RawRecord> = [4, 8, 15, 16].into_iter().map(raw).collect();
        let second = r.name_new_words(&reads, &mut seen, 2, |w| named(Held::OwnAddress, w.word));
        assert!(second.is_empty(), "{second:?}");
        assert_eq!(r.records.len(), 2);
        assert!(r.records.iter().all(|e| e.seen == 2), "{:?}", r.records);
    }

    /// A word read wrong at every check is one wrong word, not one a check; words past the
    /// records' capacity count by the most any check of their pattern read.
    #[test]
    fn a_word_wrong_at_every_check_counts_once() {
        let mut r = ResidentReport {
            bytes: 1 << 20,
            interval_s: 1.0,
            checks: vec![check(Held::OwnAddress, 0), check(Held::OwnAddress, 1)],
            errors_total: 0,
            records: vec![named(Held::OwnAddress, 7)],
            hottest: Temperatures::default(),
            run: Envelope::default(),
        };
        r.checks.push(check(Held::OwnAddress, 1));
        r.checks.push(check(Held::OwnAddress, 1));
        assert_eq!(r.wrong_words(), 1);
        // Five wrong at a later check, one of them named: five, not 1 + 4 a check.
        r.checks.push(check(Held::OwnAddress, 5));
        r.checks.push(check(Held::OwnAddress, 5));
        assert_eq!(r.wrong_words(), 5);
        // The complement's words add to the first pattern's.
        r.checks.push(check(Held::Complement, 2));
        r.records.push(named(Held::Complement, 9));
        assert_eq!(r.wrong_words(), 7);
        // More named than one check counted (words that came and went): the named ones.
        r.records
            .extend((10..14).map(|w| named(Held::Complement, w)));
        assert_eq!(r.wrong_words(), 10);
    }
}
