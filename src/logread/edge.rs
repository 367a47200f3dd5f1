//! The one reader at the edge of a run's and `kiln health`'s kernel-log source
//! (`telemetry::kmsg`, and the NVIDIA lines of Windows' System log): a kernel line read here, adapted to the evidence they judge, an
//! Xid as an [`XidEvent`] and a GPU driver's reset of a hung GPU as a reset of that driver.

use super::{Driver, FailureKind, Reading, Role, Source, prefix, read_kernel_line};
use crate::telemetry::record::{XidChannel, XidEvent};
use crate::telemetry::xid_line::{self, KernelLine};

/// Installs this reader as the kernel-log source's and the System log's
/// ([`xid_line::install_reader`]).
pub fn install_kernel_reader() {
    xid_line::install_reader(kernel_line);
}

/// What a kernel-log line is to a run and to `kiln health`: an Xid (or a GPU off the bus),
/// or an amdgpu, i915 or xe hang, reset or wedge; None for any other line.
pub fn kernel_line(line: &str) -> Option<KernelLine> {
    let Some((Role::Failure, reading)) = read_kernel_line(line) else {
        return None;
    };
    match reading.driver? {
        Driver::Nvidia => xid_of(&reading, line).map(KernelLine::Xid),
        Driver::Drm(driver)
            if matches!(
                reading.failure,
                Some(FailureKind::GpuHang | FailureKind::DeviceLost)
            ) =>
        {
            Some(KernelLine::Reset {
                driver: driver.name(),
                pci_address: reading.pci_address,
                evidence: prefix::strip(line).text.trim().to_owned(),
            })
        }
        Driver::Drm(_) | Driver::Pcie => None,
    }
}

/// The Xid evidence of an NVIDIA reading: its code, its device as `domain:bus:device`, its
/// process and its text; a line that says the GPU fell off the bus without a code is one
/// too (its code 79 comes from its text, [`crate::telemetry::record::xid_code`]). None for
/// the driver's other lines.
fn xid_of(reading: &Reading, line: &str) -> Option<XidEvent> {
    let fallen =
        reading.source == Some(Source::Kernel) && reading.failure == Some(FailureKind::DeviceLost);
    if reading.xid.is_none() && !fallen {
        return None;
    }
    let message = match (&reading.message, reading.xid) {
        (Some(m), Some(_)) => m.clone(),
        _ => prefix::strip(line).text.trim().to_owned(),
    };
    Some(XidEvent {
        bus_id: reading
            .pci_address
            .as_deref()
            .map(|a| xid_line::bus_of(a).to_owned()),
        code: reading.xid,
        pid: reading.pid,
        process: reading.process.clone(),
        message,
        kernel_us: None,
        before_run: false,
        t_ms: None,
        seen_by: vec![XidChannel::KernelLog],
    })
}
