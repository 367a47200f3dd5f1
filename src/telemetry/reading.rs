//! One reading of a signal and a sample's readings by name: the values every telemetry
//! source gives and every record carries.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One reading: a number, a word, or why there is none. A signal the device does not
/// support is recorded as such, never as zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Reading {
    /// A number in the unit its name says.
    Number(f64),
    /// A word (`P0`, a list of throttle reasons).
    Text(String),
    /// A list of processes (the other processes on the GPU).
    Processes(Vec<super::process::Process>),
    /// No value: `not_supported`, `no_permission`, or an error in words.
    Unavailable {
        /// Why.
        unavailable: String,
    },
}

impl Reading {
    /// The reading for a signal the device does not support.
    pub fn not_supported() -> Reading {
        Reading::Unavailable {
            unavailable: "not_supported".into(),
        }
    }

    /// The number, if this is one.
    pub fn number(&self) -> Option<f64> {
        match self {
            Reading::Number(n) => Some(*n),
            _ => None,
        }
    }

    /// The word, if this is one.
    pub fn text(&self) -> Option<&str> {
        match self {
            Reading::Text(t) => Some(t),
            _ => None,
        }
    }

    /// The processes, if this is a list of them (as text, an older kiln's list).
    pub fn processes(&self) -> Option<Vec<super::process::Process>> {
        match self {
            Reading::Processes(list) => Some(list.clone()),
            Reading::Text(t) => Some(super::process::parse_list(t)),
            _ => None,
        }
    }
}

/// Readings by stable name (the unit is part of the name: `gpu_temp_c`, `power_w`).
pub type Readings = BTreeMap<String, Reading>;

/// A finite number under `key`: a missing, unavailable or non-numeric reading is none.
pub fn number(readings: &Readings, key: &str) -> Option<f64> {
    readings
        .get(key)
        .and_then(Reading::number)
        .filter(|n| n.is_finite())
}

/// A word under `key`, when there is one.
pub fn text<'a>(readings: &'a Readings, key: &str) -> Option<&'a str> {
    readings.get(key).and_then(Reading::text)
}
