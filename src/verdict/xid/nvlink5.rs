//! The NVLink5 errors of Blackwell (Xid 144 to 150), decoded. NVIDIA's catalog gives them
//! one resolution, `WORKFLOW_NVLINK5_ERR`: read the unit the line names and its error
//! status (the second register in the parentheses) in its "XID 144-150 Decode" table,
//! which says whether it was fatal and what to do at once. This module is that table, for
//! the rows whose action the line alone decides.
//!
//! A line reads `Xid (PCI:0000:BB:DF): <code>, <unit> <Fatal|Nonfatal> <cross-contain>
//! <injected> Link <n> (<intrInfo> <errorStatus> <debug data>...)`; drivers before R575
//! print the registers in brackets, `[0x0000000a]`.

use super::{NV, Resolution};

/// How far an NVLink5 error reaches, by NVIDIA's decode table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Corrected or harmless: nothing was lost.
    NonFatal,
    /// The link went down: the GPU is to be drained, then reset.
    LinkFatal,
    /// The GPU: every link down, every application's channels torn down.
    GpuFatal,
}

/// What NVIDIA's decode table says about one NVLink5 error line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nvlink5Error {
    /// The unit the line names, as NVIDIA spells it (`NETIR_LINK_EVT`, `RLW_REMAP`).
    pub unit: &'static str,
    /// The error status register, where the line has one.
    pub error_status: Option<u32>,
    /// How far it reaches.
    pub reach: Reach,
    /// What to do at once.
    pub resolution: Resolution,
    /// Where the decode comes from.
    pub source: &'static str,
}

use Reach::{GpuFatal, LinkFatal, NonFatal};
use Resolution::{Ignore, RecoveryActionElseRestartApp as Xid154Eval, ResetGpu};

/// Every error status of a unit: status, reach, action. `None` matches any status (the
/// units whose rows do not depend on it).
type Statuses = &'static [(Option<u32>, Reach, Resolution)];

/// The software-only status every unit may report (bit 31): no action.
const SW: (Option<u32>, Reach, Resolution) = (Some(0x8000_0000), NonFatal, Ignore);

const SAW_MVB: Statuses = &[
    (Some(0x1), NonFatal, Ignore),
    (Some(0x2), GpuFatal, ResetGpu),
    (Some(0x4), NonFatal, Ignore),
    (Some(0x8), NonFatal, Ignore),
    (Some(0x10), GpuFatal, ResetGpu),
    (Some(0x20), NonFatal, Ignore),
];
const RLW_CTRL: Statuses = &[SW];
const RLW_REMAP: Statuses = &[
    (Some(0x1), NonFatal, Xid154Eval),
    (Some(0x2), NonFatal, Xid154Eval),
    (Some(0x4), NonFatal, Xid154Eval),
    (Some(0x8), NonFatal, Xid154Eval),
    (Some(0x10), NonFatal, Xid154Eval),
    (Some(0x20), NonFatal, Xid154Eval),
    (Some(0x40), GpuFatal, ResetGpu),
    (Some(0x80), GpuFatal, ResetGpu),
    (Some(0x100), NonFatal, Ignore),
    (Some(0x200), NonFatal, Ignore),
    SW,
];
const RLW_RSPCOL: Statuses = &[
    (Some(0x1), NonFatal, Ignore),
    (Some(0x2), GpuFatal, ResetGpu),
    SW,
];
/// 0x1, 0x2 and 0x4 may be promoted to fatal (a bit of intrInfo NVIDIA's table gives):
/// the line's own `Fatal` says so, and then the action is a reset.
const RLW_RXPIPE: Statuses = &[
    (Some(0x1), NonFatal, Ignore),
    (Some(0x2), NonFatal, Ignore),
    (Some(0x4), NonFatal, Ignore),
    (Some(0x8), NonFatal, Ignore),
    SW,
];
const RLW_SRC_TRACK: Statuses = &[
    (Some(0x1), GpuFatal, ResetGpu),
    (Some(0x2), NonFatal, Ignore),
    (Some(0x4), NonFatal, Xid154Eval),
    (Some(0x8), NonFatal, Xid154Eval),
    (Some(0x10), GpuFatal, ResetGpu),
    (Some(0x20), GpuFatal, ResetGpu),
    SW,
];
const RLW_TAGSTATE: Statuses = &[
    (Some(0x1), NonFatal, Ignore),
    (Some(0x2), GpuFatal, ResetGpu),
    (Some(0x1_0000), NonFatal, Ignore),
    (Some(0x2_0000), GpuFatal, ResetGpu),
    (Some(0x10_0000), GpuFatal, ResetGpu),
    SW,
];
/// The transaction layer's control, receive and transmit pipes share one table.
const TLW: Statuses = &[
    (Some(0x1), NonFatal, Ignore),
    (Some(0x2), NonFatal, Ignore),
    (Some(0x4), GpuFatal, ResetGpu),
    SW,
];
const TREX: Statuses = &[(Some(0x1), NonFatal, Ignore), SW];
const NVLPW: Statuses = &[SW];
/// A link down: NVIDIA's table resets the GPU for every reason but two (a peer's own
/// intentional ones, decoded from intrInfo's reason bits, which this reading leaves to
/// the Xid 154 beside it).
const NETIR_LINK: Statuses = &[(None, LinkFatal, ResetGpu)];
const NETIR_BER: Statuses = &[
    (Some(0x0), NonFatal, Ignore),
    (Some(0x1), NonFatal, Ignore),
    (Some(0x2), NonFatal, Ignore),
    (Some(0x3), NonFatal, Ignore),
];
const NETIR_MFDE: Statuses = &[
    (Some(0x1), GpuFatal, ResetGpu),
    (Some(0x3), NonFatal, Ignore),
    (Some(0x4), GpuFatal, ResetGpu),
    (Some(0x5), GpuFatal, ResetGpu),
    (Some(0x7), GpuFatal, ResetGpu),
];
const MSE: Statuses = &[(None, GpuFatal, ResetGpu)];

/// The units, as the line spells them (both the names before R575 and after).
const UNITS: &[(&str, Statuses)] = &[
    ("SAW_MVB", SAW_MVB),
    ("RLW_CTRL", RLW_CTRL),
    ("RLW_REMAP", RLW_REMAP),
    ("RLW_RSPCOL", RLW_RSPCOL),
    ("RLW_RXPIPE", RLW_RXPIPE),
    ("RLW_SRC_TRACK", RLW_SRC_TRACK),
    ("RLW_TAGSTATE", RLW_TAGSTATE),
    ("TLW_CTRL", TLW),
    ("TLW_RX", TLW),
    ("TLW_RX_PIPE0", TLW),
    ("TLW_RX_PIPE1", TLW),
    ("TLW_TX", TLW),
    ("TLW_TX_PIPE0", TLW),
    ("TLW_TX_PIPE1", TLW),
    ("TREX", TREX),
    ("NVLPW_CTRL", NVLPW),
    ("NVLPW", NVLPW),
    ("NETIR", NETIR_LINK),
    ("NETIR_INT", NETIR_LINK),
    ("NETIR_LINK_EVT", NETIR_LINK),
    ("NETIR_LINK_DOWN", NETIR_LINK),
    ("NETIR_BER_EVENT", NETIR_BER),
    ("NETIR_MFDE_EVENT", NETIR_MFDE),
    ("MSE_WATCHDOG", MSE),
    ("MSE_DEGRADED", MSE),
];

/// The registers in the line's parentheses (or brackets, before R575), in order.
fn registers(text: &str) -> Vec<u32> {
    let open = text.find(['(', '[']).map_or(text.len(), |i| i + 1);
    let close = text[open..]
        .find([')', ']'])
        .map_or(text.len(), |i| open + i);
    text[open..close]
        .split_whitespace()
        .filter_map(|word| {
            let hex = word
                .strip_prefix("0x")
                .or_else(|| word.strip_prefix("0X"))?;
            u32::from_str_radix(hex, 16).ok()
        })
        .collect()
}

/// What NVIDIA's decode table says about the text of an NVLink5 Xid line (the part after
/// the code, or the whole line): None where it names no unit the table knows, or a status
/// the table has no row for, and the Xid's own row is all there is to go on.
pub fn decode(text: &str) -> Option<Nvlink5Error> {
    // The unit: the first word the table knows ("MSE Degraded" is two).
    let normal = text.replace("MSE Degraded", "MSE_DEGRADED");
    let after_code = normal
        .split_once("):")
        .map_or(normal.as_str(), |(_, rest)| rest);
    let (unit, statuses) = after_code
        .split(|c: char| c.is_whitespace() || c == ',' || c == '/')
        .find_map(|word| UNITS.iter().find(|(name, _)| *name == word))?;
    // The registers after the unit, not a PCI address's parentheses before it.
    let from_unit = after_code
        .find(unit)
        .map_or(after_code, |i| &after_code[i..]);
    let error_status = registers(from_unit).get(1).copied();
    let said_fatal = from_unit
        .split_whitespace()
        .nth(1)
        .is_some_and(|word| word.eq_ignore_ascii_case("fatal"));
    let &(_, reach, resolution) = statuses
        .iter()
        .find(|(status, _, _)| status.is_none() || *status == error_status)?;
    // RLW_RXPIPE's first three statuses are promoted to fatal by a bit the line reports as
    // `Fatal`: then a reset, as NVIDIA's "Action 2" says.
    let promoted =
        *unit == "RLW_RXPIPE" && said_fatal && matches!(error_status, Some(0x1 | 0x2 | 0x4));
    let (reach, resolution) = if promoted {
        (GpuFatal, ResetGpu)
    } else {
        (reach, resolution)
    };
    Some(Nvlink5Error {
        unit,
        error_status,
        reach,
        resolution,
        source: NV,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_netir_link_down_asks_a_reset_whatever_its_status() {
        let line = "NVRM: Xid (PCI:0009:01:00): 149, NETIR_LINK_EVT  Fatal   XC0 i0 Link 01 (0x021425c6 0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)";
        let e = decode(line).unwrap();
        assert_eq!(e.unit, "NETIR_LINK_EVT");
        assert_eq!(e.reach, Reach::LinkFatal);
        assert_eq!(e.resolution, Resolution::ResetGpu);
        assert_eq!(e.error_status, Some(0));
        // The format before R575, one register in brackets.
        let old =
            "NVRM: Xid (PCI:0000:00:1e): 149, NETIR_LINK_EVT Fatal XC 1 i 2 Link 01 [0x0000000a]";
        assert_eq!(decode(old).unwrap().resolution, Resolution::ResetGpu);
    }

    #[test]
    fn the_status_decides_not_the_word_the_line_prints() {
        // SAW_MVB status 0x2 is GPU-fatal in NVIDIA's table though the line says Nonfatal.
        let fatal = "149, SAW_MVB Nonfatal XC0 i0 Link 03 (0x00000021 0x00000002 0x0 0x0 0x0 0x0)";
        let e = decode(fatal).unwrap();
        assert_eq!(
            (e.reach, e.resolution),
            (Reach::GpuFatal, Resolution::ResetGpu)
        );
        // Its neighbour 0x4 is harmless.
        let benign = "144, SAW_MVB Nonfatal XC0 i0 Link 03 (0x00000021 0x00000004 0x0 0x0 0x0 0x0)";
        let e = decode(benign).unwrap();
        assert_eq!(
            (e.reach, e.resolution),
            (Reach::NonFatal, Resolution::Ignore)
        );
    }

    #[test]
    fn a_remap_error_follows_xid_154_and_a_promoted_rxpipe_resets() {
        let remap =
            "145, RLW_REMAP Nonfatal XC0 i0 Link 02 (0x00000004 0x00000004 0x0 0x0 0x0 0x0)";
        assert_eq!(
            decode(remap).unwrap().resolution,
            Resolution::RecoveryActionElseRestartApp
        );
        let promoted =
            "145, RLW_RXPIPE Fatal XC0 i0 Link 02 (0x00000086 0x00000002 0x0 0x0 0x0 0x0)";
        assert_eq!(decode(promoted).unwrap().resolution, Resolution::ResetGpu);
        let quiet =
            "145, RLW_RXPIPE Nonfatal XC0 i0 Link 02 (0x00000006 0x00000002 0x0 0x0 0x0 0x0)";
        assert_eq!(decode(quiet).unwrap().resolution, Resolution::Ignore);
    }

    #[test]
    fn mse_and_ber_events_and_what_the_table_lacks() {
        assert_eq!(
            decode("150, MSE Degraded Fatal (0x0 0xffffffff)")
                .unwrap()
                .reach,
            Reach::GpuFatal
        );
        let ber =
            "149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 07 (0x00000113 0x00000002 0x0 0x0 0x0 0x0)";
        assert_eq!(decode(ber).unwrap().resolution, Resolution::Ignore);
        // A status the table has no row for, and a unit it does not know: nothing decoded.
        assert!(decode("146, TLW_CTRL Nonfatal (0x00000009 0x00000040 0x0)").is_none());
        assert!(decode("149, SOMETHING_NEW Fatal (0x1 0x2)").is_none());
        assert!(
            decode(
                "74, NVLink: fatal error detected on link 3(0x0, 0x0, 0x10000, 0x0, 0x0, 0x0, 0x0)"
            )
            .is_none()
        );
    }
}
