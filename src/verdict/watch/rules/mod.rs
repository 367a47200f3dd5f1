//! The fingerprint rules of a watched application, one per cause, each a pure function of
//! the application's view ([`super::view::AppView`]) and its device's evidence: its memory
//! (a leak, a step over the limit, fragmentation, another process), its lost device (a
//! driver timeout, or a neighbour), the application's own error, and what could not be
//! seen. Which finding explains which (the card's fault, the application's error) is
//! [`crate::verdict::resolve`]'s.

mod failure;
mod trend;

pub use trend::{LEAK_MIN_SPAN_S, LEAK_MIN_WINDOWS, leaking, too_short};

use failure::{driver_timeout, fragmented, other_process, over_the_limit};
use trend::Trend;

use super::report::{Unseen, UnseenKind};
use super::view::{AppView, Failure};
use crate::finding::{
    Confidence, Finding, FindingCode, Millis, Seconds, Severity, evidence, finding,
};
use crate::thresholds::Thresholds;
use crate::verdict::evidence::DeviceEvidence;

/// A rule of a watched application: its view and its device's evidence in, its findings
/// out. It reads no other rule's findings.
pub type AppRule = fn(&AppView, &DeviceEvidence, &Thresholds) -> Vec<Finding>;

/// Every rule of a watched application, by name, in the order their findings are listed.
pub const RULES: &[(&str, AppRule)] = &[
    ("memory_unseen", memory_unseen),
    ("memory", memory),
    ("loss", loss),
    ("own_exit", exit),
    ("not_judged", what_was_unseen),
];

/// Every finding of the application on its device, as the rules give them (before
/// resolution).
pub fn judge(v: &AppView, d: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    RULES.iter().flat_map(|(_, rule)| rule(v, d, t)).collect()
}

/// Nothing of the application's memory was seen.
fn memory_unseen(v: &AppView, _: &DeviceEvidence, _: &Thresholds) -> Vec<Finding> {
    if v.memory.is_empty() {
        vec![unseen(v)]
    } else {
        Vec::new()
    }
}

/// What the application's memory did: why its first allocation failed (another process,
/// fragmentation or a limit, else a step over the limit unless it leaks), and how its
/// baseline moved (a leak, or a floor that creeps where no refusal said fragmentation
/// already).
fn memory(v: &AppView, _: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    let trend = Trend::of(v);
    let leaks = trend.as_ref().is_some_and(|tr| tr.leaks(t));
    let mut fragmentation = false;
    if let Some(failure) = first_memory_failure(v) {
        if let Some(f) = other_process(v, failure, t) {
            out.push(f);
        } else if let Some(f) = fragmented(v, failure) {
            fragmentation = true;
            out.push(f);
        } else if !leaks {
            out.push(over_the_limit(v, failure, t));
        }
    }
    if let Some(tr) = &trend {
        if leaks {
            out.push(trend::leak(v, tr, t));
        } else if tr.creeps(t) && !fragmentation {
            out.push(trend::creeping_floor(v, tr));
        }
    }
    out
}

/// Its first failure for memory.
fn first_memory_failure(v: &AppView) -> Option<&Failure> {
    v.failures
        .iter()
        .find(|f| matches!(f, Failure::Memory { .. }))
}

/// Why the application lost its device: another process's growth before it (said once,
/// where the memory's failure says it already), else a driver timeout or a fault of its
/// own work, unless a failure for memory came first and explains it.
fn loss(v: &AppView, d: &DeviceEvidence, t: &Thresholds) -> Vec<Finding> {
    let Some(lost) = v
        .failures
        .iter()
        .find(|f| matches!(f, Failure::Lost { .. }))
    else {
        return Vec::new();
    };
    let memory_failure = first_memory_failure(v);
    let mut found = if let Some(f) = other_process(v, lost, t) {
        if memory_failure.is_some_and(|m| other_process(v, m, t).is_some()) {
            return Vec::new();
        }
        f
    } else if memory_failure.is_none() {
        driver_timeout(v, d, lost, leaking(v, t), t)
    } else {
        return Vec::new();
    };
    found.facts.of_a_loss = true;
    vec![found]
}

/// The application crashed or exited with an error, and not because kiln stopped it at an
/// interrupt: its own failure, unless a cause the other rules find explains it (which
/// [`crate::verdict::resolve`] decides).
fn exit(v: &AppView, d: &DeviceEvidence, _: &Thresholds) -> Vec<Finding> {
    let Some((at, code, signal)) = v.end else {
        return Vec::new();
    };
    let failed = code.is_some_and(|c| c != 0) || signal.is_some();
    // kiln ends the application it started when a signal interrupts the watch.
    let stopped_by_kiln = v.interrupted_ms.is_some_and(|i| at >= i);
    if failed && !stopped_by_kiln {
        vec![own_exit(
            at,
            code,
            signal,
            v.last_error.as_deref(),
            card_watched(d),
        )]
    } else {
        Vec::new()
    }
}

/// What was not seen could hide a cause: the watch is not judged, unless a cause is found
/// (which [`crate::verdict::resolve`] decides).
fn what_was_unseen(v: &AppView, _: &DeviceEvidence, _: &Thresholds) -> Vec<Finding> {
    let could_hide: Vec<&Unseen> = v.unseen.iter().filter(|u| u.decisive).collect();
    if could_hide.is_empty() {
        Vec::new()
    } else {
        vec![not_judged(&could_hide)]
    }
}

/// Bytes for people, down to KiB.
fn bytes(b: u64) -> String {
    if b < crate::units::MIB {
        format!("{} KiB", b / crate::units::KIB)
    } else {
        crate::units::format_bytes(b)
    }
}

/// Seconds for people: `42 s`, `3.2 min`, `1.5 h`.
fn duration(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 3600.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

/// Which of the application's processes held its memory, where it has several with
/// memory: `; pid 4311 (python3) held the most of its processes: 61.2 GiB`.
fn held_by(v: &AppView) -> String {
    let holding: Vec<&(u32, Option<String>, u64)> = v.holders.iter().filter(|h| h.2 > 0).collect();
    match holding.as_slice() {
        [top, _, ..] => format!(
            "; of its {} processes holding GPU memory, pid {}{} held the most: {}",
            holding.len(),
            top.0,
            top.1
                .as_ref()
                .map(|n| format!(" ({n})"))
                .unwrap_or_default(),
            bytes(top.2)
        ),
        _ => String::new(),
    }
}

/// How a failure was said, for a summary.
pub fn failure_said(f: &Failure) -> String {
    match f {
        Failure::Memory {
            request,
            result,
            said,
            ..
        } => match (result, request) {
            // A line of its output says it in its own words.
            (None, _) => said.clone(),
            (Some(e), Some(r)) => format!("{said} of {} answered {}", bytes(*r), e.name()),
            (Some(e), None) => format!("{said}: {}", e.name()),
        },
        Failure::Lost { said, .. } => format!("{said}: the device was lost"),
    }
}

/// Nothing of the application's memory was seen: what rests on it cannot be judged.
fn unseen(v: &AppView) -> Finding {
    let why = match v.end {
        Some((at, ..)) if at < 2.0 * v.interval_ms => format!(
            "the application ended {:.1} s into the watch, before its memory could be read: nothing to judge",
            at / 1e3
        ),
        _ => format!(
            "none of the application's GPU memory could be read: nothing gave a per-process figure for it (no NVML, no DRM fdinfo, no Windows GPU counters), and {}",
            v.no_trace.as_deref().map_or_else(
                || "there is no allocation trace (--pid, or --no-trace)".to_owned(),
                |why| why.replacen("no allocation trace: ", "there is no allocation trace: ", 1)
            )
        ),
    };
    let action = if v.no_gpu_seen {
        "watch an application while it uses the GPU"
    } else if v.no_trace.is_some() {
        "let kiln's layer load as said above, or watch it where per-process memory is reported (NVIDIA's NVML, amdgpu or Intel's DRM fdinfo, Windows 10's GPU performance counters)"
    } else {
        "watch it where per-process memory is reported (NVIDIA's NVML, amdgpu or Intel's DRM fdinfo, Windows 10's GPU performance counters), or start it under kiln (kiln watch -- CMD) so that kiln's layer traces its allocations"
    };
    finding(
        FindingCode::AppMemoryUnseen,
        Severity::Major,
        Confidence::High,
        why,
        evidence(&MemoryUnseen {
            ended_at_ms: (v.end.map(|e| e.0)).map(Millis),
            processes: &v.pids,
        }),
        action,
    )
}

/// What the application's memory did could not be judged, for what was unseen: never a
/// pass.
fn not_judged(unseen: &[&Unseen]) -> Finding {
    let said: Vec<String> = unseen.iter().map(|u| u.words()).collect();
    let mut actions: Vec<&str> = unseen
        .iter()
        .map(|u| match u.what {
            UnseenKind::TooShort { .. } => "watch it longer, or with --iteration marking its steps",
            UnseenKind::TraceStopped { .. } => "watch it again, and report the trace's stop (a bug of kiln's) with this run directory",
            UnseenKind::SourcesDisagree { .. } => "watch it longer and compare the driver's own per-process figure (nvidia-smi --query-compute-apps, amdgpu's fdinfo); `--no-trace` judges by the driver's figure alone",
            UnseenKind::NoTrace { .. } => "let kiln's layer load into it",
        })
        .collect();
    actions.dedup();
    finding(
        FindingCode::AppNotJudged,
        Severity::Major,
        Confidence::High,
        format!(
            "what the application's memory did could not be judged: {}",
            said.join("; ")
        ),
        evidence(&NotJudged { unseen }),
        &actions.join("; "),
    )
}

/// A signal stopped the watch: what it saw stands, the application's end was not watched.
pub fn watch_interrupted(at_s: f64) -> Finding {
    finding(
        FindingCode::RunInterrupted,
        Severity::Major,
        Confidence::High,
        format!(
            "a signal interrupted the watch at {at_s:.1} s while the application ran: what was seen before it stands, the rest of the application's run was not watched"
        ),
        evidence(&Interrupted {
            at_s: Seconds((at_s * 10.0).round() / 10.0),
        }),
        "watch the application again to its end (a scheduler's time limit must cover the application's own)",
    )
}

/// Whether a GPU's own evidence was watched beside the application: a GPU (not the CPU's
/// Vulkan device) with telemetry samples read. Only then can its evidence be said to be
/// clean.
fn card_watched(d: &DeviceEvidence) -> bool {
    d.kind != crate::gpu::DeviceKind::Cpu && d.telemetry.iter().any(|p| p.samples > 0)
}

/// The application's own failure: it crashed or exited with an error and nothing on the
/// GPU explains it. Never "healthy": the card's evidence is said as clean where a GPU's
/// telemetry was watched (`card_watched`), else that nothing of the card was read; a test
/// of the card is the step if it comes back.
fn own_exit(
    at_ms: f64,
    code: Option<i32>,
    signal: Option<i32>,
    last_error: Option<&str>,
    card_watched: bool,
) -> Finding {
    let how = match (code, signal) {
        (_, Some(s)) => format!("was ended by signal {s}{}", signal_name(s)),
        (Some(c), None) => format!("exited with {c}"),
        (None, None) => "ended".into(),
    };
    let said = last_error
        .map(|l| format!("; its last error: `{}`", crate::text::cut(l.trim(), 160)))
        .unwrap_or_default();
    let card = if card_watched {
        "and the card's evidence is clean"
    } else {
        "though no GPU telemetry was watched, so the card itself is not vouched for"
    };
    finding(
        FindingCode::AppExit,
        Severity::Major,
        Confidence::High,
        format!(
            "the application {how} {:.1} s into the watch, and nothing on the GPU explains it (no failed allocation or lost device reached the driver, {card}): the application's own failure{said}",
            at_ms / 1e3
        ),
        evidence(&OwnExit {
            exit_code: code,
            signal,
            ended_at_ms: Millis(at_ms),
            last_error_line: last_error,
        }),
        "read the application's own output and logs for why it stopped; if it comes back, `kiln run` tests the card",
    )
}

/// A signal's name in brackets (` (SIGSEGV)`), for the signals an application dies of.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        4 => " (SIGILL)",
        6 => " (SIGABRT)",
        7 => " (SIGBUS)",
        8 => " (SIGFPE)",
        9 => " (SIGKILL, as the kernel's out-of-memory killer and schedulers send)",
        11 => " (SIGSEGV)",
        15 => " (SIGTERM)",
        _ => "",
    }
}

crate::evidence! {
    /// The evidence of `APP_MEMORY_UNSEEN`.
    struct MemoryUnseen<'a> {
        ended_at_ms: Option<Millis> => "Ended at",
        processes: &'a [u32] => "Processes",
    }
}

crate::evidence! {
    /// The evidence of `APP_NOT_JUDGED`: what was unseen.
    struct NotJudged<'a> {
        unseen: &'a [&'a Unseen] => "Not seen",
    }
}

crate::evidence! {
    /// The evidence of `RUN_INTERRUPTED` in a watch.
    struct Interrupted {
        at_s: Seconds => "At",
    }
}

crate::evidence! {
    /// The evidence of `APP_EXIT`.
    struct OwnExit<'a> {
        exit_code: Option<i32> => "Exit code",
        signal: Option<i32> => "Signal",
        ended_at_ms: Millis => "Ended at",
        #[serde(skip_serializing_if = "Option::is_none")]
        last_error_line: Option<&'a str> => "Last error line",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_times_read_as_people_say_them() {
        assert_eq!(bytes(64 << 10), "64 KiB");
        assert_eq!(bytes(8 << 20), "8 MiB");
        assert_eq!(duration(42.0), "42 s");
        assert_eq!(duration(192.0), "3.2 min");
        assert_eq!(duration(5400.0), "1.5 h");
    }

    #[test]
    fn the_card_s_evidence_is_said_clean_only_where_a_gpu_was_watched() {
        let watched = own_exit(1000.0, Some(1), None, None, true);
        assert!(watched.summary.contains("the card's evidence is clean"));
        // The near miss: no GPU telemetry was read, so nothing of the card is vouched for.
        let blind = own_exit(1000.0, Some(1), None, None, false);
        assert!(
            !blind.summary.contains("evidence is clean"),
            "{}",
            blind.summary
        );
        assert!(blind.summary.contains("no GPU telemetry was watched"));
    }
}
