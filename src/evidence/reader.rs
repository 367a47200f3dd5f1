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

/// Reads `events.jsonl`. A partial last line is tolerated and reported; a malformed
/// complete line or a missing or foreign header is an error naming the line.
pub fn read_events(path: &Path) -> EvidenceResult<EventLog> {
    let bytes = std::fs::read(path).map_err(|e| EvidenceError::io(path, e))?;
    let truncated_tail = !bytes.is_empty() && !bytes.ends_with(b"\n");
    let complete = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => &bytes[..end],
        None => &bytes[..0],
    };
    let mut records = Vec::new();
    if !complete.is_empty() {
        for (i, line) in complete.split(|&b| b == b'\n').enumerate() {
            let record: EventRecord =
                serde_json::from_slice(line).map_err(|e| EvidenceError::Corrupt {
                    path: path.to_owned(),
                    line: i + 1,
                    message: e.to_string(),
                })?;
            records.push(record);
        }
    }
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
