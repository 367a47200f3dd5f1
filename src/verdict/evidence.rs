//! One device's evidence, folded from the run directory once ([`super::fold`]): what every
//! rule of the card and of a watched application reads, and what its report is built from.
//! It holds no finding, so that no rule can read another's: which finding explains which is
//! [`super::resolve`]'s alone.

use serde::{Deserialize, Serialize};

use crate::evidence::DeviceErrorKind;
use crate::gpu::{DeviceInfo, DeviceKind};
use crate::telemetry::record::{DriverReset, Reading, Readings};
use crate::telemetry::signals::Signal;
use crate::telemetry::summary::PhaseTelemetry;
use crate::workload::{WorkloadOutcome, WorkloadStatus};

/// What the rules read of one device, owned: its identity, how it is installed, its
/// workloads' outcomes, its telemetry per phase, the failures that ended its test and its
/// rates at moments of the run.
#[derive(Debug, Clone)]
pub struct DeviceEvidence {
    /// Vulkan index.
    pub index: usize,
    /// Device name, as Vulkan gives it.
    pub name: String,
    /// `deviceUUID`.
    pub uuid: String,
    /// PCI address, when known.
    pub pci_address: Option<String>,
    /// Device kind.
    pub kind: DeviceKind,
    /// Driver name and version.
    pub driver: String,
    /// How the device is installed: driver versions, the vendor's identity, other tenants.
    pub setup: Setup,
    /// Each workload's outcome, those cut short and never run among them.
    pub workloads: Vec<WorkloadOutcome>,
    /// Telemetry per phase.
    pub telemetry: Vec<PhaseTelemetry>,
    /// Failures of the device or its worker that ended its test.
    pub failures: Vec<DeviceFailure>,
    /// The rates its workloads measured at moments of the run (their `Rates` events and
    /// the VRAM test's steps), for what changed mid-run.
    pub rate_samples: Vec<RateSample>,
    /// What the device was there for, and where judging starts before any finding.
    pub role: Role,
}

/// What a device was there for: tested, watched while an application used it, or
/// observed without a test (`kiln health`).
#[derive(Debug, Clone, PartialEq)]
pub enum Role {
    /// Tested by a run; `cut_short` says, where it is so, what kept it from running its
    /// plan to the end (a failure, a stop, workloads that never ran).
    Tested {
        /// What cut the test short, in words.
        cut_short: Option<String>,
    },
    /// Watched while an application used it (`kiln watch`).
    Watched,
    /// Observed without a test (`kiln health`): one phase of telemetry.
    Observed,
}

/// A failure that ended (part of) a device's test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceFailure {
    /// What kind of failure (`device_lost`, `timeout`, `hang`, `crash`, ... on disk).
    pub error: DeviceErrorKind,
    /// In words.
    pub message: String,
}

/// One rate a workload measured at a moment of the run.
#[derive(Debug, Clone, PartialEq)]
pub struct RateSample {
    /// When, ms since the run started (the events' clock, which the telemetry shares).
    pub t_ms: f64,
    /// The rate's name, as the workload's result gives it (`compute_fp32_gops`).
    pub name: String,
    /// Its value, in its own unit.
    pub value: f64,
}

/// How a device is installed, as the Vulkan driver and the telemetry sources saw it at the
/// start: what the setup rules (driver mismatch, other tenants, a driver not loaded) read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Setup {
    /// PCI vendor id from Vulkan.
    #[serde(default)]
    pub vendor_id: u32,
    /// The Vulkan driver's version, decoded per vendor.
    #[serde(default)]
    pub vulkan_driver_version: String,
    /// The vendor source's identity fields (serial, VBIOS, driver version, other
    /// processes), when one was read.
    #[serde(default)]
    pub identity: Readings,
    /// Why a telemetry source could not be read here, as stable causes
    /// (`driver_not_loaded`, `version_mismatch`, `nvml_missing`, ...).
    #[serde(default)]
    pub source_problems: Vec<String>,
    /// The run's own worker processes, by pid: an Xid one of them raised is kiln's own,
    /// any other pid another process's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kiln_pids: Vec<u32>,
    /// A watch (`kiln watch`), not a test: `kiln_pids` are the watched application's
    /// processes, and the other processes on the GPU are its neighbours, judged by the
    /// application's own rule (`APP_OTHER_PROCESS`) rather than as tenants of a test.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub watching: bool,
}

/// A driver's words for "no value" in an identity field (nvidia-smi's `[N/A]`,
/// `[Not Supported]`).
fn is_placeholder(text: &str) -> bool {
    let t = text.trim().trim_start_matches('[').trim_end_matches(']');
    ["N/A", "Not Supported", "Not Available", "Unknown Error"]
        .iter()
        .any(|p| t.eq_ignore_ascii_case(p))
}

impl Setup {
    /// An identity field the vendor's source read as words, when it holds one (`serial`,
    /// `uuid`, `pci_bus_id`): not empty, and not the placeholder a driver gives for a
    /// field the board does not carry (`[N/A]`, as a GeForce answers for its serial),
    /// which is no serial a support desk could use.
    pub fn identity_text(&self, signal: Signal) -> Option<&str> {
        self.identity_of(signal)
            .and_then(Reading::text)
            .filter(|t| !t.is_empty() && !is_placeholder(t))
    }

    /// An identity field as the source read it.
    pub fn identity_of(&self, signal: Signal) -> Option<&Reading> {
        self.identity.get(signal.name)
    }
}

impl DeviceEvidence {
    /// A device a run tested, from its workloads' outcomes and what cut its test short,
    /// if anything did; its telemetry and failures are laid on after.
    pub fn tested(
        info: &DeviceInfo,
        workloads: Vec<WorkloadOutcome>,
        cut_short: Option<String>,
    ) -> DeviceEvidence {
        DeviceEvidence {
            index: info.index,
            name: info.name.clone(),
            uuid: info.device_uuid.clone(),
            pci_address: info.pci_address.clone(),
            kind: info.kind,
            driver: format!("{} {}", info.driver_name, info.driver_info)
                .trim()
                .to_owned(),
            setup: Setup {
                vendor_id: info.vendor_id,
                vulkan_driver_version: info.driver_version.clone(),
                ..Setup::default()
            },
            workloads,
            telemetry: Vec::new(),
            failures: Vec::new(),
            rate_samples: Vec::new(),
            role: Role::Tested { cut_short },
        }
    }

    /// A device a watch (`kiln watch`) looked at while an application used it.
    pub fn watched(info: &DeviceInfo) -> DeviceEvidence {
        let mut d = DeviceEvidence::tested(info, Vec::new(), None);
        d.setup.watching = true;
        d.role = Role::Watched;
        d
    }

    /// A device observed without a test (`kiln health`): its identity and one phase of
    /// telemetry (a sample, counters, new Xids), for the same rules as a run's verdict.
    pub fn observed(
        index: usize,
        name: &str,
        uuid: &str,
        pci_address: Option<String>,
        setup: Setup,
        phase: PhaseTelemetry,
    ) -> DeviceEvidence {
        DeviceEvidence {
            index,
            name: name.to_owned(),
            uuid: uuid.to_owned(),
            pci_address,
            kind: DeviceKind::DiscreteGpu,
            driver: String::new(),
            setup,
            workloads: Vec::new(),
            telemetry: vec![phase],
            failures: Vec::new(),
            rate_samples: Vec::new(),
            role: Role::Observed,
        }
    }

    /// A GPU a run could only observe (Vulkan cannot drive it): its identity, and the
    /// telemetry the run recorded of it, attached after.
    pub fn untestable(index: usize, gpu: &crate::inventory::InventoryGpu) -> DeviceEvidence {
        DeviceEvidence {
            index,
            name: gpu.name.clone(),
            uuid: gpu.uuid_body(),
            pci_address: gpu.pci_address.clone(),
            kind: DeviceKind::DiscreteGpu,
            driver: gpu.kernel_driver.clone().unwrap_or_default(),
            setup: Setup {
                vendor_id: gpu.vendor_id,
                ..Setup::default()
            },
            workloads: Vec::new(),
            telemetry: Vec::new(),
            failures: Vec::new(),
            rate_samples: Vec::new(),
            role: Role::Observed,
        }
    }

    /// Windows' resets of the display driver after a timeout (TDR) during the run, every
    /// phase's.
    pub fn driver_resets(&self) -> impl Iterator<Item = &DriverReset> {
        self.telemetry.iter().flat_map(|p| &p.driver_resets)
    }

    /// Whether every workload ran to its end (passed, or found what it found), with
    /// nothing cutting the test short: only such a device can pass.
    pub fn ran_to_end(&self) -> bool {
        let cut = matches!(self.role, Role::Tested { cut_short: Some(_) });
        !cut && !self.workloads.is_empty()
            && self.workloads.iter().all(|w| {
                matches!(
                    w.status,
                    WorkloadStatus::Passed | WorkloadStatus::Failed | WorkloadStatus::SoftwareFault
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::signals;

    #[test]
    fn a_driver_s_placeholder_is_no_serial() {
        let mut setup = Setup::default();
        setup
            .identity
            .insert("serial".into(), Reading::Text("[N/A]".into()));
        assert_eq!(setup.identity_text(signals::SERIAL), None);
        // The near miss: a serial that is one.
        setup
            .identity
            .insert("serial".into(), Reading::Text("1654923012345".into()));
        assert_eq!(setup.identity_text(signals::SERIAL), Some("1654923012345"));
    }
}
