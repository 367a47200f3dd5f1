//! Reading a run directory back, also one cut short by a crash or a kill.

use std::path::Path;

use super::records::{EVENTS_SCHEMA, Event, EventRecord};
use super::{EvidenceError, EvidenceResult};

/// The events of a run, as far as they were written.
#[derive(Debug)]
pub struct EventLog {
    /// Every complete, well-formed record.
    pub records: Vec<EventRecord>,
    /// True when the file ends in a partial line (the writer was killed mid-record).
    pub truncated_tail: bool,
}

/// Reads a JSON-lines file of `T`: every complete line must parse; a partial last line
/// (a writer killed mid-record) is skipped and reported as the second value.
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> EvidenceResult<(Vec<T>, bool)> {
    let bytes = std::fs::read(path).map_err(|e| EvidenceError::io(path, e))?;
    let truncated_tail = !bytes.is_empty() && !bytes.ends_with(b"\n");
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..end],
        None => &bytes[..0],
    };
    let mut records = Vec::new();
    if !complete.is_empty() {
        for (i, line) in complete.split(|&b| b == b'\n').enumerate() {
            let record: T = serde_json::from_slice(line).map_err(|e| EvidenceError::Corrupt {
                path: path.to_owned(),
                line: i + 1,
                message: e.to_string(),
            })?;
            records.push(record);
        }
    }
    Ok((records, truncated_tail))
}

/// Reads `events.jsonl`. A partial last line is tolerated and reported; a malformed
/// complete line or a missing or foreign header is an error naming the line.
pub fn read_events(path: &Path) -> EvidenceResult<EventLog> {
    let (records, truncated_tail) = read_jsonl::<EventRecord>(path)?;
    match records.first().map(|r| &r.event) {
        Some(Event::Header { schema, .. }) if schema == EVENTS_SCHEMA => {}
        Some(Event::Header { schema, .. }) => {
            return Err(EvidenceError::Corrupt {
                path: path.to_owned(),
                line: 1,
                message: format!("schema `{schema}` is not {EVENTS_SCHEMA}"),
            });
        }
        _ => {
            return Err(EvidenceError::Corrupt {
                path: path.to_owned(),
                line: 1,
                message: "the first line is not a kiln events header".into(),
            });
        }
    }
    Ok(EventLog {
        records,
        truncated_tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("events.jsonl");
        std::fs::write(&path, text).unwrap();
        (dir, path)
    }

    const HEADER: &str =
        r#"{"t_ms":0.1,"kind":"header","schema":"kiln.events/1","tool_version":"0","run_id":"r"}"#;

    #[test]
    fn a_partial_last_line_is_tolerated_and_reported() {
        let (_d, path) = write(&format!(
            "{HEADER}\n{{\"t_ms\":1.0,\"kind\":\"note\",\"mess"
        ));
        let log = read_events(&path).unwrap();
        assert_eq!(log.records.len(), 1);
        assert!(log.truncated_tail);
    }

    #[test]
    fn a_corrupt_complete_line_is_named() {
        let (_d, path) = write(&format!("{HEADER}\n{{\"t_ms\":1.0,\"kind\":\"note\"}}\n"));
        let err = read_events(&path).unwrap_err();
        assert!(
            matches!(err, EvidenceError::Corrupt { line: 2, .. }),
            "{err}"
        );
    }

    #[test]
    fn a_foreign_file_is_refused() {
        let (_d, path) = write("{\"hello\":1}\n");
        let err = read_events(&path).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
        let (_d, path) = write(&HEADER.replace("kiln.events/1", "kiln.events/99"));
        assert!(read_events(&path).is_err());
    }
}
