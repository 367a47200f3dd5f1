//! The run directory: manifest, append-only events and the final report. Everything a
//! run learns lands here as it happens, so the verdict can be rebuilt from it alone.

mod reader;
mod records;
mod rundir;
mod writer;

pub mod host;
pub mod vram;

use std::path::{Path, PathBuf};

pub use reader::{EventLog, read_events, read_jsonl, read_manifest};
pub use records::{
    DeviceErrorKind, EVENTS_SCHEMA, Event, EventRecord, MANIFEST_SCHEMA, REPORT_SCHEMA,
    WorkloadStatus,
};
pub use rundir::{
    EvidenceFile, Manifest, NotTested, RunDir, default_run_dir, hostname, parse_utc_timestamp,
    utc_timestamp,
};
pub use writer::{EventSink, EventWriter, JsonlWriter, MemorySink, write_json_atomic};

/// Failures reading or writing evidence.
#[derive(Debug, thiserror::Error)]
pub enum EvidenceError {
    /// A file could not be read or written.
    #[error("{}: {message}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        message: String,
    },
    /// A file is not what kiln wrote.
    #[error("{}, line {line}: {message}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
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

impl From<crate::fsutil::JsonlError> for EvidenceError {
    fn from(e: crate::fsutil::JsonlError) -> EvidenceError {
        match e {
            crate::fsutil::JsonlError::Io { path, message } => EvidenceError::Io { path, message },
            crate::fsutil::JsonlError::Corrupt {
                path,
                line,
                message,
            } => EvidenceError::Corrupt {
                path,
                line,
                message,
            },
        }
    }
}

impl EvidenceError {
    fn io(path: &Path, e: std::io::Error) -> EvidenceError {
        EvidenceError::Io {
            path: path.to_owned(),
            message: e.to_string(),
        }
    }
}

/// Result alias of the evidence module.
pub type EvidenceResult<T> = Result<T, EvidenceError>;
