//! The run directory: manifest, append-only events and the final report. Everything a
//! run learns lands here as it happens, so the verdict can be rebuilt from it alone.

mod reader;
mod records;
mod rundir;
mod writer;

pub mod gpu_apis;
pub mod host;
pub mod ring;
pub mod trace;
pub mod vram;

use std::path::{Path, PathBuf};

pub use reader::{EventLog, read_events, read_jsonl};
pub use records::{
    AppFailure, DeviceErrorKind, EVENTS_SCHEMA, Event, EventRecord, Killed, MANIFEST_SCHEMA,
    REPORT_SCHEMA, WorkloadStatus,
};
pub use rundir::{
    EvidenceFile, Manifest, NotTested, RunDir, RunSettings, WatchSettings, default_run_dir,
    hostname, parse_utc_timestamp, read_manifest, utc_timestamp,
};
pub use writer::{
    DeviceEvents, EventSink, EventWriter, JsonlWriter, MemorySink, write_json_atomic,
};

/// Failures reading or writing evidence.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// A file could not be read or written, or is not what kiln wrote.
    #[error(transparent)]
    File(#[from] crate::fsutil::FileError),
    /// The run directory holds another run's files, or another run claimed it first.
    #[error("{}: {reason}; choose a new --out", path.display())]
    RunDirTaken {
        /// The directory.
        path: PathBuf,
        /// Why it cannot be this run's, in words.
        reason: &'static str,
    },
    /// A file was written by a newer kiln, in a schema this one does not know.
    #[error(
        "{}: written by a newer kiln ({found}); this kiln ({}) reads {known}: judge it with the kiln that wrote it",
        path.display(),
        env!("CARGO_PKG_VERSION")
    )]
    NewerSchema {
        /// The file.
        path: PathBuf,
        /// The schema it declares.
        found: String,
        /// The schema this kiln reads.
        known: &'static str,
    },
}

impl EvidenceError {
    fn io(path: &Path, e: std::io::Error) -> EvidenceError {
        EvidenceError::File(crate::fsutil::FileError::Io {
            path: path.to_owned(),
            message: crate::text::io_words(&e),
        })
    }
}

/// Result alias of the evidence module.
pub type EvidenceResult<T> = Result<T, EvidenceError>;
