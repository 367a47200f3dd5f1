//! Other processes on a GPU, as the evidence records them: a list of `{pid, used_bytes,
//! name}`. Runs of an older kiln wrote the list as text, `pid:bytes:name` entries joined by
//! commas (and before that `pid:bytes`); both read back here, so an old run directory is
//! judged as it was.

use serde::{Deserialize, Deserializer, Serialize};

/// Another process on the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Process {
    /// Its process id.
    pub pid: u32,
    /// The GPU memory it held, when the driver said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub used_bytes: Option<u64>,
    /// Its name (`python3`), when the system gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Process {
    /// One entry of an older kiln's text list (`4242:68719476736:python3`, the bytes
    /// `unknown` where not said); `None` for one that is not.
    pub fn parse(entry: &str) -> Option<Process> {
        let mut parts = entry.trim().splitn(3, ':');
        let pid = parts.next()?.parse().ok()?;
        let used_bytes = parts.next()?.parse().ok();
        let name = parts.next().filter(|n| !n.is_empty()).map(str::to_owned);
        Some(Process {
            pid,
            used_bytes,
            name,
        })
    }

    /// For people: `pid 4242 python3 (64.00 GiB)`.
    pub fn said(&self) -> String {
        let mut out = format!("pid {}", self.pid);
        if let Some(name) = &self.name {
            out.push(' ');
            out.push_str(name);
        }
        if let Some(bytes) = self.used_bytes {
            out.push_str(&format!(" ({})", crate::units::format_bytes(bytes)));
        }
        out
    }
}

/// An older kiln's text list, each entry parsed (those that are not processes left out).
pub fn parse_list(list: &str) -> Vec<Process> {
    list.split(',').filter_map(Process::parse).collect()
}

/// A process list for people: each process said, or `none`.
pub fn said(list: &[Process]) -> String {
    if list.is_empty() {
        return "none".into();
    }
    list.iter()
        .map(Process::said)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A list of processes as the evidence gives it: objects, or an older kiln's entries.
pub fn deserialize_list<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<Process>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Entry {
        Process(Process),
        Text(String),
    }
    let entries = Vec::<Entry>::deserialize(deserializer)?;
    Ok(entries
        .into_iter()
        .filter_map(|e| match e {
            Entry::Process(p) => Some(p),
            Entry::Text(t) => Process::parse(&t),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_kiln_s_entries_read_with_or_without_a_name_and_are_said_in_words() {
        let old = Process::parse("4242:68719476736").unwrap();
        assert_eq!(
            (old.pid, old.used_bytes, old.name.as_deref()),
            (4242, Some(64 << 30), None)
        );
        assert_eq!(old.said(), "pid 4242 (64.00 GiB)");
        let named = Process::parse("4243:unknown:python3").unwrap();
        assert_eq!(named.said(), "pid 4243 python3");
        assert_eq!(Process::parse("not a process"), None);
        assert_eq!(
            said(&parse_list("4242:68719476736:python3,4243:17179869184")),
            "pid 4242 python3 (64.00 GiB), pid 4243 (16.00 GiB)"
        );
        assert_eq!(said(&parse_list("")), "none");
    }

    #[test]
    fn a_list_reads_as_objects_or_as_an_older_kiln_s_entries() {
        #[derive(Deserialize)]
        struct Holder {
            #[serde(deserialize_with = "deserialize_list")]
            list: Vec<Process>,
        }
        let new: Holder = serde_json::from_value(serde_json::json!({"list": [
            {"pid": 4242, "used_bytes": 68719476736u64, "name": "python3"},
            {"pid": 4243}
        ]}))
        .unwrap();
        let old: Holder = serde_json::from_value(serde_json::json!({"list": [
            "4242:68719476736:python3", "4243:unknown"
        ]}))
        .unwrap();
        assert_eq!(new.list, old.list);
        assert_eq!(
            serde_json::to_value(&new.list[1]).unwrap(),
            serde_json::json!({"pid": 4243})
        );
    }
}
