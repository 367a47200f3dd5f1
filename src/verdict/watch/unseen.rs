//! What kiln could not see of a watched application, each with why: a watch too short to
//! judge a leak, a trace that stopped or never began (why, as the libraries it loaded and
//! the loader's variables tell), and sources that tell different stories.

use super::events::AppEvents;
use super::report::{MemorySource, Unseen, UnseenKind};
use super::rules;
use super::series::{Series, judged_windows};
use super::view::AppView;
use crate::evidence::WatchSettings;
use crate::evidence::trace::{Trace, TraceEvent};
use crate::thresholds::Thresholds;

/// The two sources' stories in words, and which the verdict believed: the driver's
/// figure counts everything the card holds for the process, every API's and the driver's
/// own; the trace counts the Vulkan allocations kiln's layer saw, exactly, one by one.
fn disagreement(
    chosen: &AppView,
    chosen_source: MemorySource,
    other: &AppView,
    other_source: MemorySource,
    other_leaks: bool,
) -> String {
    let bytes = crate::units::format_bytes;
    let story = |v: &AppView, source: MemorySource, leaks: bool| {
        let (first, last) = (
            v.windows.get(1).map_or(0, |w| w.low),
            v.windows.last().map_or(0, |w| w.low),
        );
        let what = match source {
            MemorySource::Driver => "the driver's per-process figure",
            _ => "the trace's live allocations",
        };
        if leaks {
            format!(
                "{what} climbed from {} to {} between iterations, as a leak does",
                bytes(first),
                bytes(last)
            )
        } else if first == last {
            format!("{what} stayed at {}", bytes(last))
        } else {
            format!(
                "{what} went from {} to {} with no leak's climb",
                bytes(first),
                bytes(last)
            )
        }
    };
    let why = match chosen_source {
        MemorySource::Driver => {
            "the driver's figure, which counts everything the card holds for the process (every API's memory and the driver's own): the trace's climb may be memory the driver pools or never commits"
        }
        _ => {
            "the trace's, whose peak is more than twice the driver's figure: the driver did not count all of the application's memory"
        }
    };
    format!(
        "the sources disagree: {}, while {}; kiln judged by {why}",
        story(other, other_source, other_leaks),
        story(chosen, chosen_source, !other_leaks),
    )
}

/// What kiln could not see of the application, each marked where it could hide a cause:
/// a watch too short for a leak (always: memory the application took before kiln's first
/// reading, or a series too short to show a rise, hides a leak as well as a flat one
/// would, so what could not be judged is never healthy), a trace that stopped on the source
/// judged by, a trace that never began (not of weight: the driver's figure stands, or
/// nothing at all, which `APP_MEMORY_UNSEEN` says), and the other source's story where it
/// differs, judged over the same iterations.
pub fn unseen(
    trace: Option<&Trace>,
    view: &AppView,
    source: MemorySource,
    other: Option<(Series, MemorySource, bool)>,
    t: &Thresholds,
) -> Vec<Unseen> {
    let mut out: Vec<(UnseenKind, bool)> = Vec::new();
    if source != MemorySource::None
        && let Some(said) = rules::too_short(view)
    {
        out.push((UnseenKind::TooShort { said }, true));
    }
    if let Some(tr) = trace {
        out.extend(tr.records.iter().find_map(|r| match &r.event {
            TraceEvent::Stopped { call } => Some((
                UnseenKind::TraceStopped {
                    at_ms: r.t_ms,
                    call: call.clone(),
                },
                source == MemorySource::Trace,
            )),
            _ => None,
        }));
    }
    out.extend(
        view.no_trace
            .clone()
            .map(|said| (UnseenKind::NoTrace { said }, false)),
    );
    if let Some((memory, other_source, stepwise)) = other {
        let alt = AppView {
            windows: judged_windows(&memory, stepwise, &view.marks, view.end),
            memory,
            stepwise,
            ..view.clone()
        };
        let (chosen_leaks, other_leaks) = (rules::leaking(view, t), rules::leaking(&alt, t));
        if chosen_leaks != other_leaks {
            let said = disagreement(view, source, &alt, other_source, other_leaks);
            out.push((UnseenKind::SourcesDisagree { said }, true));
        }
    }
    out.into_iter()
        .map(|(what, decisive)| Unseen { what, decisive })
        .collect()
}

/// Why kiln's layer never loaded into the application, as its libraries and the
/// loader's variables tell, with what to do.
pub fn no_trace_why(events: &AppEvents, settings: &WatchSettings, view: &AppView) -> String {
    use crate::evidence::gpu_apis::{GpuLibrary, kind_of};
    let of = |kind: GpuLibrary| -> Vec<&str> {
        let mut names: Vec<&str> = events
            .libraries
            .iter()
            .filter(|(_, n)| kind_of(n) == Some(kind))
            .map(|(_, n)| n.as_str())
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    };
    let (loader, drivers) = (of(GpuLibrary::VulkanLoader), of(GpuLibrary::VulkanDriver));
    let others: Vec<(&str, Vec<&str>)> = [
        ("CUDA", GpuLibrary::Cuda),
        ("HIP", GpuLibrary::Hip),
        ("OpenCL", GpuLibrary::OpenCl),
        ("Level Zero", GpuLibrary::LevelZero),
        ("Direct3D", GpuLibrary::Direct3D),
    ]
    .into_iter()
    .map(|(name, kind)| (name, of(kind)))
    .filter(|(_, names)| !names.is_empty())
    .collect();
    let variables: Vec<String> = settings
        .loader_environment
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    if !drivers.is_empty() && loader.is_empty() {
        return format!(
            "no allocation trace: the application loaded the Vulkan driver ({}) without the Vulkan loader, where kiln's layer is loaded{}: watch it with those variables unset (the loader then finds the driver itself), or with the engine's option to go through the loader",
            drivers.join(", "),
            if variables.is_empty() {
                String::new()
            } else {
                format!(
                    " (an engine that reads {} opens the driver itself)",
                    crate::text::list(&variables)
                )
            }
        );
    }
    if !loader.is_empty() {
        return "no allocation trace: the application loaded the Vulkan loader but not kiln's layer (a loader setting such as VK_LOADER_LAYERS_DISABLE, or the application's own list of layers, kept it out)".into();
    }
    if !others.is_empty() {
        let apis: Vec<String> = others
            .iter()
            .map(|(api, names)| format!("{api} ({})", names.join(", ")))
            .collect();
        return format!(
            "no allocation trace: the application uses {}, not Vulkan; kiln's trace records Vulkan's allocations, so its memory comes from the driver's per-process figure alone",
            crate::text::list(&apis)
        );
    }
    match view.end {
        Some((at, ..)) if view.no_gpu_seen => format!(
            "no allocation trace: the application ended {:.1} s into the watch without loading any GPU library kiln saw: it did not use the GPU, or not long enough to be seen",
            at / 1e3
        ),
        _ => "no allocation trace: the application loaded no GPU library kiln knows (Vulkan, CUDA, HIP, OpenCL, Level Zero, Direct3D), or kiln could not read which it loaded".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verdict::watch::series::time_marks;

    const MIB: u64 = 1 << 20;

    /// The driver's readings of an application that held `held` from before the watch's
    /// first reading, every `interval_ms` for `readings`, then ended with 0.
    fn sampled(held: u64, readings: usize, interval_ms: f64) -> AppView {
        let memory: Series = (0..readings)
            .map(|i| (500.0 + i as f64 * interval_ms, held))
            .collect();
        let end = Some((500.0 + readings as f64 * interval_ms, Some(0), None));
        let marks = time_marks(&memory);
        AppView {
            windows: judged_windows(&memory, false, &marks, end),
            marks,
            memory,
            by_time: true,
            interval_ms,
            end,
            ..AppView::default()
        }
    }

    #[test]
    fn a_run_too_short_to_judge_is_never_healthy_however_early_its_memory_came() {
        let t = Thresholds::default();
        // Everything taken before kiln's first reading, and gone within two more: flat,
        // and too short to say whether it leaks.
        let short = sampled(128 * MIB, 2, 1000.0);
        let said = unseen(None, &short, MemorySource::Driver, None, &t);
        assert!(
            said.iter()
                .any(|u| matches!(u.what, UnseenKind::TooShort { .. }) && u.decisive),
            "{said:?}"
        );
        // The near miss: as flat, watched long enough to judge: nothing unseen.
        let long = sampled(128 * MIB, 30, 1000.0);
        assert!(
            unseen(None, &long, MemorySource::Driver, None, &t).is_empty(),
            "{:?}",
            long.windows
        );
    }
}
