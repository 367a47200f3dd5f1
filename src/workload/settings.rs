//! How a workload reads its settings from a profile's `[[workload]]` table, without
//! knowing the profile's format: it takes each key it knows through [`SettingsTable`],
//! and says what is wrong with a value in one sentence. The profile places that sentence
//! at the key's line, and refuses any key no getter took.

use std::time::Duration;

use crate::limits::{Bounds, SizeBounds};
use crate::units::{parse_duration, parse_size};

/// A value of a `[[workload]]` table that cannot be used, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingError {
    /// The key.
    pub key: String,
    /// What is wrong, in one sentence.
    pub message: String,
}

impl SettingError {
    /// `message` about `key`.
    pub fn new(key: &str, message: impl Into<String>) -> SettingError {
        SettingError {
            key: key.to_owned(),
            message: message.into(),
        }
    }
}

/// One `[[workload]]` table. Each getter takes its key (what no getter takes is a
/// mistake the profile reports), gives None when the key is absent, and refuses a value
/// of the wrong type with the format's own sentence.
pub trait SettingsTable {
    /// A list of strings.
    fn strings(&mut self, key: &str) -> Result<Option<Vec<String>>, SettingError>;
    /// A string.
    fn text(&mut self, key: &str) -> Result<Option<String>, SettingError>;
    /// An integer.
    fn integer(&mut self, key: &str) -> Result<Option<i64>, SettingError>;
    /// A number (an integer reads as one too).
    fn number(&mut self, key: &str) -> Result<Option<f64>, SettingError>;
}

impl dyn SettingsTable + '_ {
    /// A count within `range` (`passes = 3`).
    pub fn count(&mut self, key: &str, range: &Bounds<u64>) -> Result<Option<u32>, SettingError> {
        let Some(v) = self.integer(key)? else {
            return Ok(None);
        };
        range
            .check_count(v)
            .map(Some)
            .map_err(|e| SettingError::new(key, e))
    }

    /// A duration within `range` (`retention_delay = "30s"`).
    pub fn duration(
        &mut self,
        key: &str,
        range: &Bounds<Duration>,
    ) -> Result<Option<Duration>, SettingError> {
        let Some(text) = self.text(key)? else {
            return Ok(None);
        };
        parse_duration(&text)
            .and_then(|d| range.check(d, &text))
            .map(Some)
            .map_err(|e| SettingError::new(key, e))
    }

    /// A size in bytes within `range` (`max_bytes = "256MiB"`).
    pub fn size(&mut self, key: &str, range: &SizeBounds) -> Result<Option<u64>, SettingError> {
        let Some(text) = self.text(key)? else {
            return Ok(None);
        };
        parse_size(&text)
            .and_then(|b| range.check(b, &text))
            .map(Some)
            .map_err(|e| SettingError::new(key, e))
    }
}

/// A table with no keys that records the keys a workload asks for: the keys its
/// `[[workload]]` table takes, read from the workload itself.
#[derive(Debug, Default)]
pub struct KeysAsked {
    /// The keys asked for, in order.
    pub asked: Vec<String>,
}

impl KeysAsked {
    fn ask(&mut self, key: &str) {
        if !self.asked.iter().any(|k| k == key) {
            self.asked.push(key.to_owned());
        }
    }
}

impl SettingsTable for KeysAsked {
    fn strings(&mut self, key: &str) -> Result<Option<Vec<String>>, SettingError> {
        self.ask(key);
        Ok(None)
    }
    fn text(&mut self, key: &str) -> Result<Option<String>, SettingError> {
        self.ask(key);
        Ok(None)
    }
    fn integer(&mut self, key: &str) -> Result<Option<i64>, SettingError> {
        self.ask(key);
        Ok(None)
    }
    fn number(&mut self, key: &str) -> Result<Option<f64>, SettingError> {
        self.ask(key);
        Ok(None)
    }
}

/// A table with some of its keys hidden, for a workload made of two that share a key's
/// name: the part a key does not belong to reads it as absent.
pub struct Without<'t> {
    /// The table.
    pub table: &'t mut dyn SettingsTable,
    /// The keys hidden.
    pub hidden: &'t [&'t str],
}

impl Without<'_> {
    /// `get` of the table, or absent for a hidden key.
    fn read<T>(
        &mut self,
        key: &str,
        get: impl FnOnce(&mut dyn SettingsTable, &str) -> Result<Option<T>, SettingError>,
    ) -> Result<Option<T>, SettingError> {
        if self.hidden.contains(&key) {
            Ok(None)
        } else {
            get(&mut *self.table, key)
        }
    }
}

impl SettingsTable for Without<'_> {
    fn strings(&mut self, key: &str) -> Result<Option<Vec<String>>, SettingError> {
        self.read(key, |t, k| t.strings(k))
    }
    fn text(&mut self, key: &str) -> Result<Option<String>, SettingError> {
        self.read(key, |t, k| t.text(k))
    }
    fn integer(&mut self, key: &str) -> Result<Option<i64>, SettingError> {
        self.read(key, |t, k| t.integer(k))
    }
    fn number(&mut self, key: &str) -> Result<Option<f64>, SettingError> {
        self.read(key, |t, k| t.number(k))
    }
}

/// The `power_target` key of a `[[workload]]` table: percent of the enforced power limit.
pub fn power_target_setting(table: &mut dyn SettingsTable) -> Result<Option<u32>, SettingError> {
    table.count("power_target", &crate::power::POWER_TARGET)
}
