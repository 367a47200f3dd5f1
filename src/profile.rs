//! Profiles: a job, not a list of flags. `profiles/*.toml` are bundled into the binary
//! (`quick`, `fleet`, `burn-in`, `rma`) and any file in the same format loads from a path.
//! Validation is strict: an unknown key, a wrong type or an impossible value is one
//! sentence naming the file, the line and the key.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;
use toml::Spanned;

use crate::units::{format_exact, parse_duration, parse_size};
use crate::verdict::thresholds::Thresholds;
use crate::workload::compute::{ComputeConfig, LoadShape};
use crate::workload::fragment::FragmentConfig;
use crate::workload::heat::HeatConfig;
use crate::workload::pcie::PcieConfig;
use crate::workload::registry::{PlannedWorkload, WorkloadConfig, WorkloadName};
use crate::workload::vram::VramConfig;
use crate::workload::vram::algorithm::Algorithm;

/// The profiles built into kiln: name and text.
pub const BUNDLED: [(&str, &str); 4] = [
    ("quick", include_str!("../profiles/quick.toml")),
    ("fleet", include_str!("../profiles/fleet.toml")),
    ("burn-in", include_str!("../profiles/burn-in.toml")),
    ("rma", include_str!("../profiles/rma.toml")),
];

/// The profile `kiln run` uses when none is named.
pub const DEFAULT_PROFILE: &str = "quick";

/// The allowed range of a setting. A profile key and the flag that overrides it share one
/// range and one message, so neither accepts what the other refuses.
#[derive(Debug, Clone, Copy)]
pub struct Bounds<T> {
    /// Smallest allowed value.
    pub min: T,
    /// Largest allowed value.
    pub max: T,
}

/// The value a user gave, cut to a sane length for a message.
fn cut(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= 48 {
        text.to_owned()
    } else {
        format!("{}...", text.chars().take(48).collect::<String>())
    }
}

impl Bounds<Duration> {
    /// `d` (parsed from `text`) when within the range, else why not.
    pub fn check(&self, d: Duration, text: &str) -> Result<Duration, String> {
        if d < self.min || d > self.max {
            return Err(format!(
                "{} is outside {}..{}",
                cut(text),
                show(self.min),
                show(self.max)
            ));
        }
        Ok(d)
    }
}

impl Bounds<u64> {
    /// `v` (parsed from `text`) when within the range, else why not.
    pub fn check(&self, v: u64, text: &str) -> Result<u64, String> {
        if v < self.min || v > self.max {
            return Err(format!(
                "{} is outside {}..={}",
                cut(text),
                self.min,
                self.max
            ));
        }
        Ok(v)
    }
}

/// The allowed range of a size in bytes.
#[derive(Debug, Clone, Copy)]
pub struct SizeBounds {
    /// Smallest allowed size.
    pub min_bytes: u64,
    /// Largest allowed size.
    pub max_bytes: u64,
}

impl SizeBounds {
    /// `bytes` (parsed from `text`) when within the range, else why not.
    pub fn check(&self, bytes: u64, text: &str) -> Result<u64, String> {
        if bytes < self.min_bytes || bytes > self.max_bytes {
            return Err(format!(
                "{} is outside {}..{}",
                cut(text),
                format_exact(self.min_bytes),
                format_exact(self.max_bytes)
            ));
        }
        Ok(bytes)
    }
}

/// The ranges of every setting, shared by profiles and flags.
pub mod bounds {
    use super::{Bounds, SizeBounds};
    use crate::units::{GIB, KIB, MIB, TIB};
    use std::time::Duration;

    /// Bytes of tested memory each planted self-test fault needs at least, so that faults
    /// (and the words address faults read from) stay sparse enough to be told apart.
    pub const SELFTEST_BYTES_PER_FAULT: u64 = 1024;

    /// `duration`, `--duration`: the budget per device, at most a week.
    pub const DURATION: Bounds<Duration> = Bounds {
        min: Duration::from_secs(1),
        max: Duration::from_secs(7 * 24 * 3600),
    };
    /// `telemetry_interval`, `--telemetry-interval` (the flag also takes 0: off).
    pub const TELEMETRY_INTERVAL: Bounds<Duration> = Bounds {
        min: Duration::from_millis(10),
        max: Duration::from_secs(60),
    };
    /// `fence_timeout`, `--fence-timeout`.
    pub const FENCE_TIMEOUT: Bounds<Duration> = Bounds {
        min: Duration::from_millis(100),
        max: Duration::from_secs(600),
    };
    /// `step_timeout`, `--step-timeout`: the watchdog.
    pub const STEP_TIMEOUT: Bounds<Duration> = Bounds {
        min: Duration::from_secs(1),
        max: Duration::from_secs(3600),
    };
    /// `retention_delay`, `--retention-delay`.
    pub const RETENTION_DELAY: Bounds<Duration> = Bounds {
        min: Duration::from_millis(1),
        max: Duration::from_secs(24 * 3600),
    };
    /// `kiln bench compute --duration`.
    pub const BENCH_DURATION: Bounds<Duration> = Bounds {
        min: Duration::from_secs(1),
        max: Duration::from_secs(3600),
    };
    /// `kiln monitor --duration`.
    pub const MONITOR_DURATION: Bounds<Duration> = Bounds {
        min: Duration::from_millis(100),
        max: Duration::from_secs(7 * 24 * 3600),
    };
    /// `kiln health --max-age`.
    pub const MAX_AGE: Bounds<Duration> = Bounds {
        min: Duration::from_secs(1),
        max: Duration::from_secs(3650 * 24 * 3600),
    };
    /// `passes`, `--passes`.
    pub const PASSES: Bounds<u64> = Bounds {
        min: 1,
        max: 100_000,
    };
    /// `--records`: error records kept per VRAM test.
    pub const RECORDS: Bounds<u64> = Bounds {
        min: 1,
        max: 1 << 20,
    };
    /// `confirm.retest_cap`, `--retest-cap`.
    pub const RETEST_CAP: Bounds<u64> = Bounds {
        min: 1,
        max: 1 << 20,
    };
    /// `confirm.repeat`.
    pub const CONFIRM_REPEAT: Bounds<u64> = Bounds { min: 1, max: 20 };
    /// `weight` of a workload.
    pub const WEIGHT: Bounds<u64> = Bounds { min: 1, max: 100 };
    /// `rounds` of a compute or fragment workload.
    pub const ROUNDS: Bounds<u64> = Bounds {
        min: 1,
        max: 1_000_000,
    };
    /// `on_ms`, `off_ms` of a pulsed load.
    pub const PULSE_MS: Bounds<u64> = Bounds {
        min: 1,
        max: 60_000,
    };
    /// `kiln bench --repeat`.
    pub const REPEAT: Bounds<u64> = Bounds { min: 1, max: 1000 };
    /// `kiln selftest --runs`.
    pub const RUNS: Bounds<u64> = Bounds { min: 1, max: 1000 };
    /// `kiln selftest --faults`.
    pub const FAULTS: Bounds<u64> = Bounds {
        min: 1,
        max: 16_384,
    };
    /// `kiln health --expect-gpus`.
    pub const GPU_COUNT: Bounds<u64> = Bounds { min: 1, max: 4096 };
    /// `max_bytes` of a PCIe workload, `--pcie-max-bytes`: from the smallest transfer
    /// (4 KiB) up.
    pub const PCIE_MAX_BYTES: SizeBounds = SizeBounds {
        min_bytes: 4 * KIB,
        max_bytes: 16 * GIB,
    };
    /// `--max-buffer`: test buffers are whole MiB.
    pub const MAX_BUFFER_BYTES: SizeBounds = SizeBounds {
        min_bytes: MIB,
        max_bytes: 16 * TIB,
    };
    /// `kiln bench vram --bytes`: at least eight buffers of a whole MiB (the copy moves
    /// halves); the device's memory bounds it from above.
    pub const BENCH_BYTES: SizeBounds = SizeBounds {
        min_bytes: 8 * MIB,
        max_bytes: 16 * TIB,
    };
    /// `kiln selftest --vram-bytes`: at least four buffers of a whole MiB (so offsets past
    /// the first buffer are checked); the faults and the device's memory bound it further.
    pub const SELFTEST_BYTES: SizeBounds = SizeBounds {
        min_bytes: 4 * MIB,
        max_bytes: 16 * TIB,
    };
}

/// What to do on a finding, to confirm it (the `rma` profile).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Confirm {
    /// Reruns of a workload that found something.
    pub repeat: u32,
    /// Failing words retested in place per VRAM run.
    pub retest_cap: u32,
}

/// A validated profile.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Bundled name, or the file's path.
    pub name: String,
    /// One sentence for people.
    pub description: String,
    /// Time budget per device for the workloads (None: each runs its own plan once).
    pub duration: Option<Duration>,
    /// Stop a device's remaining workloads after the first that fails.
    pub stop_on_first_failure: bool,
    /// Telemetry sampling interval, when the profile sets one.
    pub telemetry_interval: Option<Duration>,
    /// Bound on every wait for the device, when the profile sets one.
    pub fence_timeout: Option<Duration>,
    /// The watchdog: a device that reports no progress for this long is hung.
    pub step_timeout: Duration,
    /// Wait for an idle, cool GPU before starting and between workloads.
    pub wait_idle: bool,
    /// Verdict thresholds (the defaults with the profile's overrides).
    pub thresholds: Thresholds,
    /// Confirmation of findings by repetition.
    pub confirm: Option<Confirm>,
    /// The workloads, in order.
    pub workloads: Vec<PlannedWorkload>,
}

/// Why a profile could not be used: one sentence naming the file, line and key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", self.sentence())]
pub struct ProfileError {
    /// The file (or bundled name).
    pub file: String,
    /// 1-based line, when the problem has one.
    pub line: Option<usize>,
    /// The key at fault, when there is one.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl ProfileError {
    fn sentence(&self) -> String {
        let mut s = self.file.clone();
        if let Some(line) = self.line {
            s.push_str(&format!(":{line}"));
        }
        if let Some(key) = &self.key {
            s.push_str(&format!(": `{key}`"));
        }
        format!("{s}: {}", self.message)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    description: Spanned<String>,
    duration: Option<Spanned<String>>,
    #[serde(default)]
    stop_on_first_failure: bool,
    telemetry_interval: Option<Spanned<String>>,
    fence_timeout: Option<Spanned<String>>,
    step_timeout: Option<Spanned<String>>,
    #[serde(default)]
    wait_idle: bool,
    thresholds: Option<Spanned<Thresholds>>,
    confirm: Option<Spanned<RawConfirm>>,
    #[serde(default)]
    workload: Vec<Spanned<RawWorkload>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfirm {
    repeat: Spanned<i64>,
    retest_cap: Option<Spanned<i64>>,
}

/// One `[[workload]]` table; which keys apply depends on `kind`, checked after parsing
/// (serde's tagged enums would lose the line numbers).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    kind: Spanned<String>,
    weight: Option<Spanned<i64>>,
    algorithms: Option<Spanned<Vec<String>>>,
    passes: Option<Spanned<i64>>,
    percent: Option<Spanned<f64>>,
    retention_delay: Option<Spanned<String>>,
    shape: Option<Spanned<String>>,
    on_ms: Option<Spanned<i64>>,
    off_ms: Option<Spanned<i64>>,
    rounds: Option<Spanned<i64>>,
    max_bytes: Option<Spanned<String>>,
}

/// Keys each workload kind takes (besides `kind` and `weight`).
fn keys(kind: WorkloadName) -> &'static [&'static str] {
    match kind {
        WorkloadName::Vram => &["algorithms", "passes", "percent", "retention_delay"],
        WorkloadName::Compute => &["shape", "on_ms", "off_ms", "rounds"],
        WorkloadName::Heat => &[
            "algorithms",
            "passes",
            "percent",
            "retention_delay",
            "shape",
            "on_ms",
            "off_ms",
            "rounds",
        ],
        WorkloadName::Pcie => &["max_bytes"],
        WorkloadName::Fragment => &["rounds"],
    }
}

/// Reads profile text; `file` names it in errors.
struct Reader<'a> {
    file: &'a str,
    text: &'a str,
}

impl Reader<'_> {
    // Spans are byte offsets: count bytes, so that an offset inside a multi-byte
    // character (from a damaged file) cannot panic.
    fn line_of(&self, offset: usize) -> usize {
        self.text.as_bytes()[..offset.min(self.text.len())]
            .iter()
            .filter(|&&b| b == b'\n')
            .count()
            + 1
    }

    fn error(&self, offset: Option<usize>, key: &str, message: impl Into<String>) -> ProfileError {
        ProfileError {
            file: self.file.to_owned(),
            line: offset.map(|o| self.line_of(o)),
            key: (!key.is_empty()).then(|| key.to_owned()),
            message: message.into(),
        }
    }

    fn at<T>(&self, value: &Spanned<T>, key: &str, message: impl Into<String>) -> ProfileError {
        self.error(Some(value.span().start), key, message)
    }

    /// The key a parse error is about: the key on the error's line (`key = ...`), or the
    /// word the span covers (an unknown key's own name).
    fn key_of(&self, span: &std::ops::Range<usize>) -> String {
        let bytes = self.text.as_bytes();
        let start = span.start.min(bytes.len());
        let line_start = bytes[..start]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        let line = String::from_utf8_lossy(&bytes[line_start..]);
        let line = line.lines().next().unwrap_or("");
        match line.split_once('=') {
            Some((key, _)) => key.trim().trim_matches('"').to_owned(),
            None => String::from_utf8_lossy(&bytes[start..span.end.clamp(start, bytes.len())])
                .trim()
                .to_owned(),
        }
    }

    fn parse(&self) -> Result<RawProfile, ProfileError> {
        toml::from_str(self.text).map_err(|e| {
            let message = e.message().trim().replace('\n', " ");
            match e.span() {
                Some(span) => {
                    let key = self.key_of(&span);
                    self.error(Some(span.start), &key, message)
                }
                None => self.error(None, "", message),
            }
        })
    }

    fn duration(
        &self,
        value: &Spanned<String>,
        key: &str,
        range: &Bounds<Duration>,
    ) -> Result<Duration, ProfileError> {
        let d = parse_duration(value.get_ref()).map_err(|e| self.at(value, key, e))?;
        range
            .check(d, value.get_ref())
            .map_err(|e| self.at(value, key, e))
    }

    fn count(
        &self,
        value: &Spanned<i64>,
        key: &str,
        range: &Bounds<u64>,
    ) -> Result<u32, ProfileError> {
        let v = *value.get_ref();
        let out_of_range = || {
            self.at(
                value,
                key,
                format!("{v} is outside {}..={}", range.min, range.max),
            )
        };
        let unsigned = u64::try_from(v).map_err(|_| out_of_range())?;
        range
            .check(unsigned, &v.to_string())
            .map_err(|_| out_of_range())
            .and_then(|v| u32::try_from(v).map_err(|_| out_of_range()))
    }
}

fn show(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 3600.0 {
        format!("{}h", s / 3600.0)
    } else if s >= 1.0 {
        format!("{s}s")
    } else {
        format!("{}ms", s * 1e3)
    }
}

/// Parses and validates profile `text`; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Profile, ProfileError> {
    let r = Reader { file, text };
    let raw = r.parse()?;
    let description = raw.description.get_ref().trim().to_owned();
    if description.is_empty() {
        return Err(r.at(&raw.description, "description", "must not be empty"));
    }
    let duration = raw
        .duration
        .as_ref()
        .map(|d| r.duration(d, "duration", &bounds::DURATION))
        .transpose()?;
    let telemetry_interval = raw
        .telemetry_interval
        .as_ref()
        .map(|d| r.duration(d, "telemetry_interval", &bounds::TELEMETRY_INTERVAL))
        .transpose()?;
    let fence_timeout = raw
        .fence_timeout
        .as_ref()
        .map(|d| r.duration(d, "fence_timeout", &bounds::FENCE_TIMEOUT))
        .transpose()?;
    let step_timeout = raw
        .step_timeout
        .as_ref()
        .map(|d| r.duration(d, "step_timeout", &bounds::STEP_TIMEOUT))
        .transpose()?
        .unwrap_or(Duration::from_secs(120));
    let thresholds = match &raw.thresholds {
        Some(t) => {
            if let Err(e) = t.get_ref().validate() {
                // The message starts with the field's name: point at its line.
                let field = e.split_whitespace().next().unwrap_or_default();
                let start = t.span().start;
                let offset = r
                    .text
                    .get(start..)
                    .and_then(|rest| rest.find(field))
                    .map_or(start, |i| start + i);
                return Err(r.error(Some(offset), &format!("thresholds.{field}"), e));
            }
            t.get_ref().clone()
        }
        None => Thresholds::default(),
    };
    let confirm = raw
        .confirm
        .as_ref()
        .map(|c| -> Result<Confirm, ProfileError> {
            let c = c.get_ref();
            Ok(Confirm {
                repeat: r.count(&c.repeat, "confirm.repeat", &bounds::CONFIRM_REPEAT)?,
                retest_cap: c
                    .retest_cap
                    .as_ref()
                    .map(|v| r.count(v, "confirm.retest_cap", &bounds::RETEST_CAP))
                    .transpose()?
                    .unwrap_or(4096),
            })
        })
        .transpose()?;
    if raw.workload.is_empty() {
        return Err(r.error(
            None,
            "workload",
            "a profile needs at least one [[workload]] table",
        ));
    }
    let workloads = raw
        .workload
        .iter()
        .map(|w| workload(&r, w))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Profile {
        name: file.to_owned(),
        description,
        duration,
        stop_on_first_failure: raw.stop_on_first_failure,
        telemetry_interval,
        fence_timeout,
        step_timeout,
        wait_idle: raw.wait_idle,
        thresholds,
        confirm,
        workloads,
    })
}

fn workload(r: &Reader, spanned: &Spanned<RawWorkload>) -> Result<PlannedWorkload, ProfileError> {
    let w = spanned.get_ref();
    let name = WorkloadName::parse(w.kind.get_ref()).map_err(|e| r.at(&w.kind, "kind", e))?;
    let kind = name.as_str();
    let allowed = keys(name);
    // A key set for another kind is a mistake, not something to ignore.
    let given: [(&str, Option<usize>); 9] = [
        ("algorithms", w.algorithms.as_ref().map(|v| v.span().start)),
        ("passes", w.passes.as_ref().map(|v| v.span().start)),
        ("percent", w.percent.as_ref().map(|v| v.span().start)),
        (
            "retention_delay",
            w.retention_delay.as_ref().map(|v| v.span().start),
        ),
        ("shape", w.shape.as_ref().map(|v| v.span().start)),
        ("on_ms", w.on_ms.as_ref().map(|v| v.span().start)),
        ("off_ms", w.off_ms.as_ref().map(|v| v.span().start)),
        ("rounds", w.rounds.as_ref().map(|v| v.span().start)),
        ("max_bytes", w.max_bytes.as_ref().map(|v| v.span().start)),
    ];
    if let Some((key, offset)) = given
        .iter()
        .find(|(key, offset)| offset.is_some() && !allowed.contains(key))
    {
        return Err(r.error(*offset, key, format!("does not apply to a {kind} workload")));
    }
    let weight = w
        .weight
        .as_ref()
        .map(|v| r.count(v, "weight", &bounds::WEIGHT))
        .transpose()?
        .unwrap_or(name.default_weight());
    let rounds = w
        .rounds
        .as_ref()
        .map(|v| r.count(v, "rounds", &bounds::ROUNDS))
        .transpose()?;
    let config = match name {
        WorkloadName::Vram => WorkloadConfig::Vram(vram_config(r, w)?),
        WorkloadName::Compute => WorkloadConfig::Compute(compute_config(r, w, rounds)?),
        WorkloadName::Heat => WorkloadConfig::Heat(HeatConfig {
            vram: vram_config(r, w)?,
            compute: compute_config(r, w, rounds)?,
        }),
        WorkloadName::Pcie => {
            let mut c = PcieConfig::default();
            if let Some(m) = &w.max_bytes {
                let bytes = parse_size(m.get_ref())
                    .and_then(|b| bounds::PCIE_MAX_BYTES.check(b, m.get_ref()))
                    .map_err(|e| r.at(m, "max_bytes", e))?;
                c.max_bytes = bytes;
            }
            WorkloadConfig::Pcie(c)
        }
        WorkloadName::Fragment => WorkloadConfig::Fragment(FragmentConfig {
            rounds,
            ..FragmentConfig::default()
        }),
    };
    Ok(PlannedWorkload { weight, config })
}

fn vram_config(r: &Reader, w: &RawWorkload) -> Result<VramConfig, ProfileError> {
    let mut c = VramConfig::default();
    if let Some(list) = &w.algorithms {
        if list.get_ref().is_empty() {
            return Err(r.at(list, "algorithms", "must name at least one algorithm"));
        }
        c.algorithms = Algorithm::parse_list(&list.get_ref().join(","))
            .map_err(|e| r.at(list, "algorithms", e))?;
    }
    c.passes = w
        .passes
        .as_ref()
        .map(|v| r.count(v, "passes", &bounds::PASSES))
        .transpose()?;
    if let Some(p) = &w.percent {
        let v = *p.get_ref();
        if !(v > 0.0 && v <= 100.0) {
            return Err(r.at(p, "percent", format!("{v} is not between 0 and 100")));
        }
        c.percent = Some(v);
    }
    if let Some(d) = &w.retention_delay {
        c.retention_delay = r.duration(d, "retention_delay", &bounds::RETENTION_DELAY)?;
    }
    Ok(c)
}

fn compute_config(
    r: &Reader,
    w: &RawWorkload,
    rounds: Option<u32>,
) -> Result<ComputeConfig, ProfileError> {
    let shape = w.shape.as_ref().map(|s| s.get_ref().as_str());
    let pulse = |v: &Option<Spanned<i64>>, key: &str| {
        v.as_ref()
            .map(|v| r.count(v, key, &bounds::PULSE_MS).map(u64::from))
            .transpose()
    };
    let (on_ms, off_ms) = (pulse(&w.on_ms, "on_ms")?, pulse(&w.off_ms, "off_ms")?);
    if shape != Some("pulsed")
        && let Some((key, v)) = [("on_ms", &w.on_ms), ("off_ms", &w.off_ms)]
            .into_iter()
            .find_map(|(k, v)| v.as_ref().map(|v| (k, v)))
    {
        return Err(r.at(v, key, "applies only to shape = \"pulsed\""));
    }
    let shape = match shape {
        None | Some("steady") => LoadShape::Steady,
        Some("pulsed") => LoadShape::Pulsed {
            on_ms: on_ms.unwrap_or(100),
            off_ms: off_ms.unwrap_or(100),
        },
        Some("sweep") => LoadShape::Sweep,
        Some(other) => {
            return Err(r.at(
                w.shape.as_ref().unwrap_or(&w.kind),
                "shape",
                format!(
                    "unknown load shape {} (known: steady, pulsed, sweep)",
                    crate::text::quote(other)
                ),
            ));
        }
    };
    Ok(ComputeConfig {
        shape,
        rounds,
        ..ComputeConfig::default()
    })
}

/// Loads a profile by bundled name or from a path (anything with a `/` or ending in
/// `.toml`).
pub fn load(name_or_path: &str) -> Result<Profile, ProfileError> {
    if let Some((name, text)) = BUNDLED.iter().find(|(n, _)| *n == name_or_path) {
        return parse(name, text);
    }
    if !(name_or_path.contains('/') || name_or_path.ends_with(".toml")) {
        return Err(ProfileError {
            file: name_or_path.to_owned(),
            line: None,
            key: None,
            message: format!(
                "no such profile (bundled: {}; or a path to a .toml file)",
                BUNDLED.map(|(n, _)| n).join(", ")
            ),
        });
    }
    let text = std::fs::read_to_string(Path::new(name_or_path)).map_err(|e| ProfileError {
        file: name_or_path.to_owned(),
        line: None,
        key: None,
        message: format!("cannot be read ({e})"),
    })?;
    parse(name_or_path, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bundled_profile_parses() {
        for (name, text) in BUNDLED {
            let p = parse(name, text).unwrap_or_else(|e| panic!("{e}"));
            assert!(!p.workloads.is_empty(), "{name}");
        }
    }

    #[test]
    fn an_error_names_the_line_and_key() {
        let e = parse(
            "p.toml",
            "description = \"x\"\n\n[[workload]]\nkind = \"vram\"\npasses = 0\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.key.as_deref()), (Some(5), Some("passes")));
        assert_eq!(e.to_string(), "p.toml:5: `passes`: 0 is outside 1..=100000");
    }
}
