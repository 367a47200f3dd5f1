//! A thresholds file (`--thresholds FILE`, `kiln baseline --out`): JSON, read strictly, and
//! every refusal one sentence naming the file, the line and the key. serde_json gives the
//! line of what it could not read; a value read but impossible ([`super::Invalid`]) is
//! found by its keys in the text.

use std::ops::Range;
use std::path::Path;

use serde::Deserialize;

use super::{ALIASES, Invalid, Overrides};

/// Why a thresholds file was refused: one sentence naming the file, the line and the key.
pub type FileError = crate::text::FileRefusal;

/// A refusal of the file at `path` with no line or key to name.
fn of(path: &Path, message: impl Into<String>) -> FileError {
    FileError {
        file: path.display().to_string(),
        line: None,
        key: None,
        message: message.into(),
    }
}

/// The text of the thresholds file at `path`.
/// A regular file only: a FIFO would hold kiln before its run began, and a device such as
/// `/dev/zero` never ends.
pub(super) fn read(path: &Path) -> Result<String, FileError> {
    if let Err(crate::fsutil::FileError::NotAFile { what, .. }) = crate::fsutil::check_regular(path)
    {
        return Err(of(path, format!("{what}, not a thresholds file")));
    }
    std::fs::read_to_string(path).map_err(|e| {
        of(
            path,
            match e.kind() {
                std::io::ErrorKind::NotFound => "no such thresholds file".to_owned(),
                std::io::ErrorKind::PermissionDenied => {
                    "the thresholds file cannot be read (no permission)".to_owned()
                }
                std::io::ErrorKind::IsADirectory => "a directory, not a thresholds file".to_owned(),
                _ => e.to_string(),
            },
        )
    })
}

/// The overrides `text` (the file at `path`) gives: a JSON object of known keys, each
/// once at every depth (an array would fill the fields by position, and a key given twice
/// would silently keep one of its values).
pub(super) fn parse(path: &Path, text: &str) -> Result<Overrides, FileError> {
    serde_json::from_str::<TopObject>(text).map_err(|e| refused(path, text, &e))?;
    serde_json::from_str::<Overrides>(text).map_err(|e| refused(path, text, &e))
}

/// A value read but impossible, as a sentence naming the line of its key in `text`.
pub(super) fn invalid(path: &Path, text: &str, e: Invalid) -> FileError {
    let keys = keys(text);
    let find = |wanted: &[String]| keys.iter().find(|k| k.path == wanted);
    // A field given by its older name is found by that name.
    let older = e.path.split_first().and_then(|(first, rest)| {
        let (alias, _) = ALIASES.iter().find(|(_, name)| name == first)?;
        Some([vec![(*alias).to_owned()], rest.to_vec()].concat())
    });
    let found = find(&e.path).or_else(|| older.as_deref().and_then(find));
    FileError {
        file: path.display().to_string(),
        line: found.map(|k| line_of(text, k.key_at)),
        key: Some(found.map_or_else(|| e.key(), |k| super::dotted(&k.path))),
        message: e.message,
    }
}

/// serde_json's refusal as a sentence: its line, the innermost key around where it
/// stopped, its words without the position it appends.
fn refused(path: &Path, text: &str, e: &serde_json::Error) -> FileError {
    let words = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = words.strip_suffix(&suffix).unwrap_or(&words).to_owned();
    if e.line() == 0 {
        return of(path, message);
    }
    let at = offset_of(text, e.line(), e.column());
    let key = keys(text)
        .into_iter()
        .filter(|k| k.key_at <= at && at <= k.value.end)
        .max_by_key(|k| k.path.len())
        .map(|k| super::dotted(&k.path));
    FileError {
        file: path.display().to_string(),
        line: Some(e.line()),
        key,
        message,
    }
}

/// The byte offset of serde_json's 1-based line and column (a column counts bytes).
fn offset_of(text: &str, line: usize, column: usize) -> usize {
    let start: usize = text
        .split_inclusive('\n')
        .take(line.saturating_sub(1))
        .map(str::len)
        .sum();
    (start + column.saturating_sub(1)).min(text.len())
}

/// The 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// A key of a JSON text: its path from the top (an array's items by their index), where
/// the key starts and the bytes of its value.
#[derive(Debug, PartialEq)]
struct Key {
    path: Vec<String>,
    key_at: usize,
    value: Range<usize>,
}

/// Every key of `text`, in order. Read after serde_json accepted the text (or up to where
/// it stopped), so that a scanner this small is enough: on anything it does not expect it
/// stops with the keys it found.
fn keys(text: &str) -> Vec<Key> {
    let mut scan = Scan {
        bytes: text.as_bytes(),
        at: 0,
        keys: Vec::new(),
    };
    let _ = scan.value(&mut Vec::new());
    scan.keys
}

struct Scan<'a> {
    bytes: &'a [u8],
    at: usize,
    keys: Vec<Key>,
}

impl Scan<'_> {
    fn skip_space(&mut self) {
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_whitespace) {
            self.at += 1;
        }
    }

    /// The byte at the position, past any space.
    fn next(&mut self) -> Option<u8> {
        self.skip_space();
        self.bytes.get(self.at).copied()
    }

    /// A string at the position (its opening quote), decoded.
    fn string(&mut self) -> Option<String> {
        let start = self.at;
        self.at += 1;
        loop {
            match self.bytes.get(self.at)? {
                b'\\' => self.at += 2,
                b'"' => {
                    self.at += 1;
                    return serde_json::from_slice(self.bytes.get(start..self.at)?).ok();
                }
                _ => self.at += 1,
            }
        }
    }

    /// One value at the position, its keys recorded under `path`.
    fn value(&mut self, path: &mut Vec<String>) -> Option<()> {
        match self.next()? {
            b'{' => {
                self.at += 1;
                loop {
                    match self.next()? {
                        b'}' => break,
                        b',' => self.at += 1,
                        b'"' => {
                            let key_at = self.at;
                            let key = self.string()?;
                            if self.next()? != b':' {
                                return None;
                            }
                            self.at += 1;
                            self.skip_space();
                            path.push(key);
                            let i = self.keys.len();
                            self.keys.push(Key {
                                path: path.clone(),
                                key_at,
                                value: self.at..self.at,
                            });
                            let read = self.value(path);
                            self.keys[i].value.end = self.at;
                            path.pop();
                            read?;
                        }
                        _ => return None,
                    }
                }
                self.at += 1;
            }
            b'[' => {
                self.at += 1;
                let mut index = 0;
                loop {
                    match self.next()? {
                        b']' => break,
                        b',' => self.at += 1,
                        _ => {
                            path.push(index.to_string());
                            let read = self.value(path);
                            path.pop();
                            read?;
                            index += 1;
                        }
                    }
                }
                self.at += 1;
            }
            b'"' => {
                self.string()?;
            }
            _ => {
                while self
                    .bytes
                    .get(self.at)
                    .is_some_and(|b| !b.is_ascii_whitespace() && !b",}]".contains(b))
                {
                    self.at += 1;
                }
            }
        }
        Some(())
    }
}

/// The file's top: a JSON object whose keys, at every depth, each appear once.
struct TopObject;

impl<'de> Deserialize<'de> for TopObject {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = TopObject;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object of thresholds, e.g. {\"throttle_share\": 0.2}")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<TopObject, A::Error> {
                unique_keys(map).map(|()| TopObject)
            }
        }
        d.deserialize_map(Visitor)
    }
}

/// Any JSON value whose objects' keys each appear once.
struct Unique;

impl<'de> Deserialize<'de> for Unique {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Unique;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }

            fn visit_bool<E>(self, _: bool) -> Result<Unique, E> {
                Ok(Unique)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Unique, E> {
                Ok(Unique)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Unique, E> {
                Ok(Unique)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Unique, E> {
                Ok(Unique)
            }
            fn visit_str<E>(self, _: &str) -> Result<Unique, E> {
                Ok(Unique)
            }
            fn visit_unit<E>(self) -> Result<Unique, E> {
                Ok(Unique)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Unique, A::Error> {
                while seq.next_element::<Unique>()?.is_some() {}
                Ok(Unique)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<Unique, A::Error> {
                unique_keys(map).map(|()| Unique)
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Reads an object, refusing a key it has read already.
fn unique_keys<'de, A: serde::de::MapAccess<'de>>(mut map: A) -> Result<(), A::Error> {
    let mut seen: Vec<String> = Vec::new();
    while let Some(key) = map.next_key::<String>()? {
        if seen.contains(&key) {
            return Err(serde::de::Error::custom(format!("`{key}` is given twice")));
        }
        map.next_value::<Unique>()?;
        seen.push(key);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_key_is_found_with_its_path_and_line() {
        let text =
            "{\n  \"a\": 1,\n  \"b\": {\"c d\": [1, {\"e\": \"x\\\"}\"}],\n    \"f\": true}\n}";
        let found: Vec<(String, usize)> = keys(text)
            .iter()
            .map(|k| (super::super::dotted(&k.path), line_of(text, k.key_at)))
            .collect();
        assert_eq!(
            found,
            [
                ("a".to_owned(), 2),
                ("b".to_owned(), 3),
                ("b.\"c d\"".to_owned(), 3),
                ("b.\"c d\".1.e".to_owned(), 3),
                ("b.f".to_owned(), 4),
            ]
        );
        // A damaged text gives the keys before the damage, and never panics.
        assert_eq!(keys("{\"a\": 1, \"b\"").len(), 1);
        assert!(keys("").is_empty());
        assert!(keys("{\"\\").is_empty());
    }
}
