//! The allocation trace's watch side: finding kiln's layer, making the ring it writes and
//! the manifest the Vulkan loader reads it by, the application's environment that loads
//! it, and draining the ring into `trace.jsonl` as the application runs.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::AppError;
use crate::evidence::trace::{Drainer, RING_FILE, TRACE_FILE, TraceEvent, create_ring};
use crate::evidence::{Event, EventSink, JsonlWriter};

/// The layer's name, as the loader and `VK_INSTANCE_LAYERS` know it.
pub const LAYER_NAME: &str = "VK_LAYER_KILN_trace";

/// The layer's library file (`libkiln_trace_layer.so`, `kiln_trace_layer.dll`).
fn library() -> String {
    use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
    format!("{DLL_PREFIX}kiln_trace_layer{DLL_SUFFIX}")
}

/// Slots of the ring: 16 MiB of (sparse) file, tens of seconds of the busiest
/// application's allocations between two drains.
const RING_SLOTS: u64 = crate::evidence::ring::DEFAULT_SLOTS;

/// kiln's layer: `KILN_TRACE_LAYER`, else beside the kiln binary (where `cargo build`
/// puts it), else in `../lib/kiln/` of it (an installed layout). Why not, in a sentence.
pub fn layer_library() -> Result<PathBuf, String> {
    if let Some(why) = crate::platform::vulkan::NO_TRACE_LAYER {
        return Err(why.to_owned());
    }
    if let Some(p) = std::env::var_os("KILN_TRACE_LAYER").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(format!(
                "no allocation trace: KILN_TRACE_LAYER names {}, which is not a file",
                p.display()
            ))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("no allocation trace: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let library = library();
    [dir.join(&library), dir.join("../lib/kiln").join(&library)]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "no allocation trace: kiln's Vulkan layer ({library}) is not beside kiln (`cargo build --release` builds it there; KILN_TRACE_LAYER may name it)"
            )
        })
}

/// The layer's manifest, naming its library.
fn manifest(library: &Path) -> String {
    serde_json::json!({
        "file_format_version": "1.2.0",
        "layer": {
            "name": LAYER_NAME,
            "type": "GLOBAL",
            "library_path": library,
            "api_version": "1.3.0",
            "implementation_version": "1",
            "description": "kiln watch: records the application's Vulkan allocations and failures",
        }
    })
    .to_string()
}

/// The trace of one watch: its ring, its manifest and its drained records.
pub struct Tracer {
    ring: PathBuf,
    layer_dir: PathBuf,
    drainer: Drainer,
    out: JsonlWriter,
    /// The application's live bytes per device and heap, as drained so far.
    live: BTreeMap<(String, u16), i128>,
    /// Heap sizes per device and heap, and whether each is device-local.
    heaps: BTreeMap<(String, u16), (u64, bool)>,
    /// Processes attached, at the last drain.
    attached: u64,
    /// The ring's counts as last written.
    counts: Option<TraceEvent>,
    /// The last drain failed: said once at the end.
    failed: Option<String>,
    /// Every writer is known to have ended and the ring was drained to its end.
    drained: bool,
}

impl Tracer {
    /// Makes the ring and the layer's manifest in the run directory and opens
    /// `trace.jsonl`.
    pub fn start(run_dir: &Path, library: &Path, started_unix_ns: u64) -> Result<Tracer, AppError> {
        let ring = run_dir.join(RING_FILE);
        create_ring(&ring, RING_SLOTS, started_unix_ns)?;
        let layer_dir = run_dir.join("layer");
        let library = library
            .canonicalize()
            .unwrap_or_else(|_| library.to_owned());
        std::fs::create_dir_all(&layer_dir)
            .and_then(|()| {
                std::fs::write(
                    layer_dir.join("VkLayer_kiln_trace.json"),
                    manifest(&library),
                )
            })
            .map_err(|e| {
                AppError::Start(format!(
                    "could not write the trace layer's manifest in {}: {e}",
                    layer_dir.display()
                ))
            })?;
        Ok(Tracer {
            drainer: Drainer::new(&ring),
            ring,
            layer_dir,
            out: JsonlWriter::create(&run_dir.join(TRACE_FILE))?,
            live: BTreeMap::new(),
            heaps: BTreeMap::new(),
            attached: 0,
            counts: None,
            failed: None,
            drained: false,
        })
    }

    /// What the application's environment needs for the loader to load the layer and the
    /// layer to find the ring: added to what is there, never replacing it.
    pub fn env(&self) -> Vec<(String, OsString)> {
        // Joined as the OS joins a path list (`:` or `;`).
        let joined = |name: &str, ours: OsString| {
            let mut parts = vec![ours.clone()];
            if let Some(theirs) = std::env::var_os(name).filter(|v| !v.is_empty()) {
                parts.push(theirs);
            }
            let value = std::env::join_paths(&parts).unwrap_or(ours);
            (name.to_owned(), value)
        };
        // A loader told where its layers are (VK_LAYER_PATH) searches there alone.
        let path_variable = if std::env::var_os("VK_LAYER_PATH").is_some_and(|v| !v.is_empty()) {
            "VK_LAYER_PATH"
        } else {
            "VK_ADD_LAYER_PATH"
        };
        vec![
            joined("VK_INSTANCE_LAYERS", LAYER_NAME.into()),
            joined(path_variable, self.layer_dir.clone().into_os_string()),
            ("KILN_TRACE_RING".into(), self.ring.clone().into_os_string()),
        ]
    }

    /// Drains what the layer wrote since the last drain into `trace.jsonl`; `last` when
    /// the application has ended. A failure is kept and said once at the end.
    pub fn drain(&mut self, last: bool, now_ms: f64) {
        match self.drainer.drain(last, now_ms) {
            Ok(records) => {
                for r in &records {
                    // The ring's counts, when they changed since they were last written.
                    if matches!(r.event, TraceEvent::Counts { .. }) {
                        if self.counts.as_ref() == Some(&r.event) {
                            continue;
                        }
                        self.counts = Some(r.event.clone());
                    }
                    self.learn(&r.event);
                    self.out.append(r);
                }
                self.drained = last;
            }
            Err(e) => self.failed = Some(e.to_string()),
        }
    }

    /// Drains now if the application has written a quarter of the ring since the last
    /// drain: an application allocating hundreds of thousands of times a second would
    /// otherwise lap the ring between two ticks and its records be lost.
    pub fn drain_if_behind(&mut self, now_ms: f64) {
        if let Some((behind, slots)) = self.drainer.behind()
            && behind > slots / 4
        {
            self.drain(false, now_ms);
        }
    }

    fn learn(&mut self, event: &TraceEvent) {
        match event {
            TraceEvent::Alloc {
                device,
                bytes,
                heap,
                ..
            } => *self.live.entry((device.clone(), *heap)).or_default() += i128::from(*bytes),
            TraceEvent::Free {
                device,
                bytes,
                heap,
                ..
            } => *self.live.entry((device.clone(), *heap)).or_default() -= i128::from(*bytes),
            TraceEvent::Heap {
                device,
                heap,
                bytes,
                device_local,
            } => {
                self.heaps
                    .insert((device.clone(), *heap), (*bytes, *device_local));
            }
            TraceEvent::Counts { attached, .. } => self.attached = *attached,
            _ => {}
        }
    }

    /// The application's live device-local allocations, and the largest device-local
    /// heap they are in (its budget, where telemetry says none).
    pub fn live_bytes(&self) -> (u64, Option<u64>) {
        let local = |key: &(String, u16)| self.heaps.get(key).is_none_or(|h| h.1);
        let bytes: i128 = self
            .live
            .iter()
            .filter(|(k, _)| local(k))
            .map(|(_, b)| *b)
            .sum();
        let budget = self.heaps.values().filter(|h| h.1).map(|h| h.0).max();
        (bytes.max(0) as u64, budget)
    }

    /// Says what the trace could not do, and removes the ring once everything in it is in
    /// `trace.jsonl` (a ring an application may still write to is kept for the verdict).
    pub fn finish(&mut self, events: &mut dyn EventSink) {
        if let Some(e) = &self.failed {
            events.emit(
                None,
                Event::Note {
                    message: format!("the allocation trace could not be drained: {e}"),
                },
            );
        }
        if self.drained && self.failed.is_none() && self.out.check().is_ok() {
            let _ = std::fs::remove_file(&self.ring);
        }
    }
}
