//! Reading a run directory back, also one cut short by a crash or a kill.

use std::path::Path;

use super::records::{EVENTS_SCHEMA, Event, EventRecord};
use super::{EvidenceError, EvidenceResult};

/// The events of a run, as far as they were written.
#[derive(Debug, Default)]
pub struct EventLog {
    /// Every complete, well-formed record.
    pub records: Vec<EventRecord>,
    /// True when the file ends in a partial line (the writer was killed mid-record).
    pub truncated_tail: bool,
}

/// Reads a JSON-lines file of `T`: every complete line must parse; a partial last line
/// (a writer killed mid-record) is skipped and reported as the second value. The reader
/// is [`crate::fsutil::read_jsonl`]; its failures become evidence errors, said the same.
pub fn read_jsonl<T: serde::de::DeserializeOwned>(path: &Path) -> EvidenceResult<(Vec<T>, bool)> {
    Ok(crate::fsutil::read_jsonl(path)?)
}

/// The version number of a schema name (`kiln.events/2` -> 2) when it is one of kiln's
/// schemas of the same family as `known`.
fn version_of(schema: &str, known: &str) -> Option<u64> {
    let (family, _) = known.split_once('/')?;
    schema.strip_prefix(family)?.strip_prefix('/')?.parse().ok()
}

/// Checks a file's declared schema: the known one and its earlier versions pass (every
/// earlier version is read, an older run directory judged as it was), a newer version is
/// refused with a sentence saying so, anything else is not a kiln file.
pub(super) fn check_schema(path: &Path, schema: &str, known: &'static str) -> EvidenceResult<()> {
    let (found, ours) = (version_of(schema, known), version_of(known, known));
    match (found, ours) {
        (Some(found), Some(ours)) if found >= 1 && found <= ours => Ok(()),
        (Some(found), Some(ours)) if found > ours => Err(EvidenceError::NewerSchema {
            path: path.to_owned(),
            found: schema.chars().take(64).collect(),
            known,
        }),
        _ => Err(EvidenceError::File(crate::fsutil::FileError::Corrupt {
            path: path.to_owned(),
            line: 1,
            message: format!("schema {} is not {known}", crate::text::quote(schema)),
        })),
    }
}

/// Reads `events.jsonl`. A partial last line is tolerated and reported; a malformed
/// complete line or a missing or foreign header is an error naming the line. A missing or
/// empty file (a run killed right after it started) is an empty log.
pub fn read_events(path: &Path) -> EvidenceResult<EventLog> {
    if std::fs::metadata(path).map_or(true, |m| m.len() == 0) && !path.is_dir() {
        return Ok(EventLog {
            records: Vec::new(),
            truncated_tail: false,
        });
    }
    let (records, truncated_tail) = read_jsonl::<EventRecord>(path)?;
    if records.is_empty() && truncated_tail {
        // Killed while writing the header itself.
        return Ok(EventLog {
            records,
            truncated_tail,
        });
    }
    match records.first().map(|r| &r.event) {
        Some(Event::Header { schema, .. }) => check_schema(path, schema, EVENTS_SCHEMA)?,
        _ => {
            return Err(EvidenceError::File(crate::fsutil::FileError::Corrupt {
                path: path.to_owned(),
                line: 1,
                message: "the first line is not a kiln events header".into(),
            }));
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
            matches!(
                err,
                EvidenceError::File(crate::fsutil::FileError::Corrupt { line: 2, .. })
            ),
            "{err}"
        );
    }

    #[test]
    fn a_jsonl_failure_reads_the_same_as_an_evidence_error() {
        let (_d, path) = write("{}\nnot json\n");
        let plain = crate::fsutil::read_jsonl::<serde_json::Value>(&path)
            .unwrap_err()
            .to_string();
        let evidence = read_jsonl::<serde_json::Value>(&path)
            .unwrap_err()
            .to_string();
        assert_eq!(plain, evidence);
        let missing = path.with_file_name("none.jsonl");
        let plain = crate::fsutil::read_jsonl::<serde_json::Value>(&missing).unwrap_err();
        let evidence = read_jsonl::<serde_json::Value>(&missing).unwrap_err();
        assert!(
            matches!(
                evidence,
                EvidenceError::File(crate::fsutil::FileError::Io { .. })
            ),
            "{evidence}"
        );
        assert_eq!(plain.to_string(), evidence.to_string());
    }

    #[test]
    fn a_foreign_file_is_refused() {
        let (_d, path) = write("{\"hello\":1}\n");
        let err = read_events(&path).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
        let (_d, path) = write(&format!(
            "{}\n",
            HEADER.replace("kiln.events/1", "kiln.events/99")
        ));
        let err = read_events(&path).unwrap_err().to_string();
        assert!(
            err.contains("newer kiln") && err.contains("kiln.events/99"),
            "{err}"
        );
        let (_d, path) = write(&format!("{}\n", HEADER.replace("kiln.events/1", "other/1")));
        assert!(matches!(
            read_events(&path),
            Err(EvidenceError::File(crate::fsutil::FileError::Corrupt {
                line: 1,
                ..
            }))
        ));
    }

    #[test]
    fn a_missing_or_empty_events_file_is_an_empty_log() {
        let dir = tempfile::tempdir().unwrap();
        let log = read_events(&dir.path().join("events.jsonl")).unwrap();
        assert!(log.records.is_empty());
        let (_d, path) = write("");
        assert!(read_events(&path).unwrap().records.is_empty());
        let (_d, path) = write(&HEADER[..20]);
        assert!(read_events(&path).unwrap().truncated_tail);
    }

    #[test]
    fn a_manifest_of_a_newer_kiln_is_refused_with_a_sentence() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("manifest.json");
        std::fs::write(&path, r#"{"schema": "kiln.manifest/3", "renamed": true}"#).unwrap();
        let err = super::super::read_manifest(&path).unwrap_err().to_string();
        assert!(err.contains("newer kiln (kiln.manifest/3)"), "{err}");
        assert!(err.contains("reads kiln.manifest/2"), "{err}");
    }
}
