//! Append-only evidence: every record is one complete line, written with a single
//! `write` and flushed before the call returns, so a crash loses at most that line.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::records::{EVENTS_SCHEMA, Event, EventRecord};
use super::{EvidenceError, EvidenceResult};

/// Where workloads send what they learn.
pub trait EventSink {
    /// Records one event about `device` (None for the run as a whole).
    fn emit(&mut self, device: Option<usize>, event: Event);
}

/// The run's sink as one device's workload sees it: every event it emits is about that
/// device, so the pair travels as one.
pub struct DeviceEvents<'a> {
    /// The run's sink.
    pub sink: &'a mut dyn EventSink,
    /// The device the events are about.
    pub device: Option<usize>,
}

impl<'a> DeviceEvents<'a> {
    /// The sink's events about `device`.
    pub fn new(sink: &'a mut dyn EventSink, device: Option<usize>) -> DeviceEvents<'a> {
        DeviceEvents { sink, device }
    }

    /// Records one event about the device.
    pub fn emit(&mut self, event: Event) {
        self.sink.emit(self.device, event);
    }
}

/// Collects events in memory (tests, and runs with no run directory).
#[derive(Debug, Default)]
pub struct MemorySink {
    /// Everything emitted, in order.
    pub events: Vec<EventRecord>,
    started: Option<Instant>,
}

impl EventSink for MemorySink {
    fn emit(&mut self, device: Option<usize>, event: Event) {
        let started = *self.started.get_or_insert_with(Instant::now);
        self.events.push(EventRecord {
            t_ms: started.elapsed().as_secs_f64() * 1e3,
            device,
            event,
        });
    }
}

/// An append-only JSON-lines file: each record one line, one `write`, flushed.
pub struct JsonlWriter {
    file: File,
    path: PathBuf,
    /// The first write failure; later writes are skipped and the run reports it.
    failed: Option<String>,
}

impl JsonlWriter {
    /// Creates `path`, which must not exist.
    pub fn create(path: &Path) -> EvidenceResult<JsonlWriter> {
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(path)
            .map_err(|e| EvidenceError::io(path, e))?;
        Ok(JsonlWriter {
            file,
            path: path.to_owned(),
            failed: None,
        })
    }

    /// Appends one record. A failure is kept for `check` and stops later writes.
    pub fn append<T: serde::Serialize>(&mut self, record: &T) {
        if self.failed.is_some() {
            return;
        }
        let mut line = match serde_json::to_vec(record) {
            Ok(l) => l,
            Err(e) => {
                self.failed = Some(format!("could not encode a record: {e}"));
                return;
            }
        };
        line.push(b'\n');
        // One write per record: a kill leaves whole lines plus at most one partial tail.
        if let Err(e) = self.file.write_all(&line).and_then(|()| self.file.flush()) {
            self.failed = Some(crate::text::io_words(&e));
        }
    }

    /// The first write error, if any write failed.
    pub fn check(&self) -> EvidenceResult<()> {
        match &self.failed {
            Some(e) => Err(EvidenceError::File(crate::fsutil::FileError::Io {
                path: self.path.clone(),
                message: e.clone(),
            })),
            None => Ok(()),
        }
    }
}

/// Writes `events.jsonl`.
pub struct EventWriter {
    out: JsonlWriter,
    started: Instant,
}

impl EventWriter {
    /// Creates `path` (which must not exist) and writes the header line.
    pub fn create(path: &Path, run_id: &str, started: Instant) -> EvidenceResult<EventWriter> {
        let mut writer = EventWriter {
            out: JsonlWriter::create(path)?,
            started,
        };
        writer.emit(
            None,
            Event::Header {
                schema: EVENTS_SCHEMA.into(),
                tool_version: env!("CARGO_PKG_VERSION").into(),
                run_id: run_id.into(),
            },
        );
        writer.check()?;
        Ok(writer)
    }

    /// The first write error, if any write failed.
    pub fn check(&self) -> EvidenceResult<()> {
        self.out.check()
    }
}

impl EventSink for EventWriter {
    fn emit(&mut self, device: Option<usize>, event: Event) {
        let record = EventRecord {
            t_ms: self.started.elapsed().as_secs_f64() * 1e3,
            device,
            event,
        };
        self.out.append(&record);
    }
}

/// Writes `value` as pretty JSON to `path` atomically (temporary file, then rename).
pub fn write_json_atomic<T: serde::Serialize>(path: &Path, value: &T) -> EvidenceResult<()> {
    let mut text = serde_json::to_vec_pretty(value).map_err(|e| {
        EvidenceError::File(crate::fsutil::FileError::Io {
            path: path.to_owned(),
            message: format!("could not encode: {e}"),
        })
    })?;
    text.push(b'\n');
    crate::fsutil::write_atomic(path, &text).map_err(|e| EvidenceError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_json_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // The rename cannot replace a directory holding files, as a full disk cannot
        // take the write: either way the temporary file must go.
        let target = dir.path().join("report.json");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        assert!(write_json_atomic(&target, &serde_json::json!({"a": 1})).is_err());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left, vec!["report.json".to_owned()], "no *.tmp is left");
    }
}
