//! amdgpu's `gpu_metrics`: the binary table the SMU firmware keeps (temperatures, clocks,
//! power and why the clocks are held), decoded without the kernel's headers. Every layout
//! starts with the same header (`u16` size, `u8` format, `u8` content revision); the fields
//! sit at natural alignment, little-endian, and a field the firmware does not fill is all
//! ones. Offsets are those of the kernel's `gpu_metrics_v1_0` .. `v1_8` structs
//! (`drivers/gpu/drm/amd/include/kgd_pp_interface.h`); throttler bits are
//! `SMU_THROTTLER_*_BIT` of `amdgpu_smu.h`.

use super::throttle::ThrottleReason;

/// Why a table could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetricsError {
    /// Fewer bytes than its header, or than its own layout.
    #[error("gpu_metrics is {got} bytes, too short for its {what}")]
    Short {
        /// Bytes read.
        got: usize,
        /// What did not fit.
        what: &'static str,
    },
    /// A layout kiln does not decode (an APU's, or MI300's self-describing v1.9).
    #[error("gpu_metrics revision {format}.{content} ({size} bytes) is not a layout kiln decodes")]
    Unknown {
        /// `format_revision`.
        format: u8,
        /// `content_revision`.
        content: u8,
        /// `structure_size`.
        size: u16,
    },
}

/// The firmware's throttle residency counters (MI300, layouts 1.6 final to 1.8): each grows
/// while its limiter holds the clocks, against `accumulation_counter`; their growth between
/// two tables is the share of the time each held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Residency {
    /// Ticks the firmware counted.
    pub accumulation: u32,
    /// PROCHOT asserted (the platform's thermal or power signal).
    pub prochot: u32,
    /// The package power limit (PPT).
    pub ppt: u32,
    /// The socket's thermal limit.
    pub socket_thermal: u32,
    /// A voltage regulator's thermal limit.
    pub vr_thermal: u32,
    /// The HBM's thermal limit.
    pub hbm_thermal: u32,
}

impl Residency {
    /// The reasons that held the clocks between `before` and `self`, each with its share of
    /// the time (0..1]; None when the counters did not advance (or went back: a reset).
    pub fn since(&self, before: &Residency) -> Option<Vec<(ThrottleReason, f64)>> {
        let ticks = self.accumulation.checked_sub(before.accumulation)?;
        if ticks == 0 {
            return None;
        }
        let share = |now: u32, then: u32| f64::from(now.saturating_sub(then)) / f64::from(ticks);
        let mut out: Vec<(ThrottleReason, f64)> = Vec::new();
        for (reason, now, then) in [
            (ThrottleReason::SwPowerCap, self.ppt, before.ppt),
            (
                ThrottleReason::SwThermalSlowdown,
                self.socket_thermal,
                before.socket_thermal,
            ),
            (
                ThrottleReason::SwThermalSlowdown,
                self.hbm_thermal,
                before.hbm_thermal,
            ),
            (
                ThrottleReason::HwSlowdown,
                self.vr_thermal,
                before.vr_thermal,
            ),
            (ThrottleReason::HwSlowdown, self.prochot, before.prochot),
        ] {
            let s = share(now, then);
            if s <= 0.0 {
                continue;
            }
            match out.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, held)) => *held = held.max(s),
                None => out.push((reason, s.min(1.0))),
            }
        }
        Some(out)
    }
}

/// What kiln reads of one table.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GpuMetrics {
    /// `format_revision.content_revision`.
    pub revision: (u8, u8),
    /// Edge temperature, °C.
    pub temp_edge_c: Option<f64>,
    /// Junction (hotspot) temperature, °C.
    pub temp_hotspot_c: Option<f64>,
    /// Memory (HBM) temperature, °C.
    pub temp_mem_c: Option<f64>,
    /// Socket power, W.
    pub power_w: Option<f64>,
    /// The graphics clock now, MHz (the mean of the compute dies' on MI300).
    pub gfxclk_mhz: Option<f64>,
    /// The memory clock now, MHz.
    pub uclk_mhz: Option<f64>,
    /// The ASIC-independent throttler bits (layout 1.3), where given.
    pub throttlers: Option<u64>,
    /// The throttle residency counters (MI300, layouts 1.6 to 1.8), where given.
    pub residency: Option<Residency>,
}

/// `SMU_THROTTLER_*_BIT`s as the reason NVML's names give them: power and current limits
/// hold the clocks as a power cap does, the die's and memory's temperature limits as the
/// driver's thermal slowdown, a hot voltage regulator or an asserted PROCHOT as hardware
/// slowdown. PPM and FIT (bits 56, 57) are the firmware's own policies, not held limits.
const THROTTLER_BITS: &[(u32, ThrottleReason)] = &[
    // PPT0-3, SPL, FPPT, SPPT, SPPT_APU.
    (0, ThrottleReason::SwPowerCap),
    (1, ThrottleReason::SwPowerCap),
    (2, ThrottleReason::SwPowerCap),
    (3, ThrottleReason::SwPowerCap),
    (4, ThrottleReason::SwPowerCap),
    (5, ThrottleReason::SwPowerCap),
    (6, ThrottleReason::SwPowerCap),
    (7, ThrottleReason::SwPowerCap),
    // TDC_GFX, TDC_SOC, TDC_MEM, TDC_VDD, TDC_CVIP, EDC_CPU, EDC_GFX, APCC.
    (16, ThrottleReason::SwPowerCap),
    (17, ThrottleReason::SwPowerCap),
    (18, ThrottleReason::SwPowerCap),
    (19, ThrottleReason::SwPowerCap),
    (20, ThrottleReason::SwPowerCap),
    (21, ThrottleReason::SwPowerCap),
    (22, ThrottleReason::SwPowerCap),
    (23, ThrottleReason::SwPowerCap),
    // TEMP_GPU, TEMP_CORE, TEMP_MEM, TEMP_EDGE, TEMP_HOTSPOT, TEMP_SOC.
    (32, ThrottleReason::SwThermalSlowdown),
    (33, ThrottleReason::SwThermalSlowdown),
    (34, ThrottleReason::SwThermalSlowdown),
    (35, ThrottleReason::SwThermalSlowdown),
    (36, ThrottleReason::SwThermalSlowdown),
    (37, ThrottleReason::SwThermalSlowdown),
    // TEMP_VR_GFX, TEMP_VR_SOC, TEMP_VR_MEM0, TEMP_VR_MEM1.
    (38, ThrottleReason::HwSlowdown),
    (39, ThrottleReason::HwSlowdown),
    (40, ThrottleReason::HwSlowdown),
    (41, ThrottleReason::HwSlowdown),
    // TEMP_LIQUID0, TEMP_LIQUID1: the coolant's temperature.
    (42, ThrottleReason::SwThermalSlowdown),
    (43, ThrottleReason::SwThermalSlowdown),
    // VRHOT0, VRHOT1, PROCHOT_CPU, PROCHOT_GFX.
    (44, ThrottleReason::HwSlowdown),
    (45, ThrottleReason::HwSlowdown),
    (46, ThrottleReason::HwSlowdown),
    (47, ThrottleReason::HwSlowdown),
];

/// The reasons the ASIC-independent throttler bits name, each once, in NVML's bit order.
pub fn reasons_of(throttlers: u64) -> Vec<ThrottleReason> {
    let mut out: Vec<ThrottleReason> = THROTTLER_BITS
        .iter()
        .filter(|(bit, _)| throttlers & (1u64 << bit) != 0)
        .map(|(_, r)| *r)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Where one layout keeps the fields kiln reads (byte offsets; None where it has none).
struct Layout {
    size: u16,
    edge: Option<usize>,
    hotspot: usize,
    mem: usize,
    power: usize,
    /// The first of `count` graphics clocks.
    gfxclk: (usize, usize),
    uclk: usize,
    throttlers: Option<usize>,
    residency: Option<usize>,
}

/// The dGPU layouts (format revision 1) by content revision. 1.6 had two sizes: the final
/// 1664-byte one and an interim 384-byte one that was reverted.
fn layout(content: u8, size: u16) -> Option<Layout> {
    let plain = |size, edge, power, throttlers| Layout {
        size,
        edge: Some(edge),
        hotspot: edge + 2,
        mem: edge + 4,
        power,
        gfxclk: (54, 1),
        uclk: 58,
        throttlers,
        residency: None,
    };
    let mi300 = |size, gfxclk, uclk, residency| Layout {
        size,
        edge: None,
        hotspot: 4,
        mem: 6,
        power: 10,
        gfxclk: (gfxclk, 8),
        uclk,
        throttlers: None,
        residency,
    };
    Some(match (content, size) {
        (0, _) => plain(80, 16, 34, None),
        (1, _) => plain(96, 4, 22, None),
        (2, _) => plain(104, 4, 22, None),
        (3, _) => plain(120, 4, 22, Some(112)),
        (4, _) => mi300(288, 240, 280, None),
        (5, _) => mi300(360, 312, 352, None),
        (6, 384) => mi300(384, 336, 376, Some(104)),
        (6, _) => mi300(1664, 264, 304, Some(32)),
        (7, _) => mi300(2208, 296, 336, Some(40)),
        (8, _) => mi300(3872, 296, 336, Some(40)),
        _ => return None,
    })
}

/// Decodes a `gpu_metrics` table.
pub fn decode(bytes: &[u8]) -> Result<GpuMetrics, MetricsError> {
    let short = |what| MetricsError::Short {
        got: bytes.len(),
        what,
    };
    let header = bytes.get(..4).ok_or_else(|| short("header"))?;
    let size = u16::from_le_bytes([header[0], header[1]]);
    let (format, content) = (header[2], header[3]);
    let unknown = MetricsError::Unknown {
        format,
        content,
        size,
    };
    let l = match format {
        1 => layout(content, size).ok_or(unknown)?,
        _ => return Err(unknown),
    };
    if bytes.len() < usize::from(l.size) {
        return Err(short("layout"));
    }
    // All ones is the firmware's "not filled".
    let u16_at = |at: usize| {
        let v = u16::from_le_bytes([bytes[at], bytes[at + 1]]);
        (v != u16::MAX).then_some(f64::from(v))
    };
    let u32_at =
        |at: usize| u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let u64_at = |at: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[at..at + 8]);
        let v = u64::from_le_bytes(b);
        (v != u64::MAX).then_some(v)
    };
    let (first, count) = l.gfxclk;
    let clocks: Vec<f64> = (0..count)
        .filter_map(|i| u16_at(first + 2 * i))
        .filter(|mhz| *mhz > 0.0)
        .collect();
    let residency = l.residency.and_then(|at| {
        let r = Residency {
            accumulation: u32_at(at),
            prochot: u32_at(at + 4),
            ppt: u32_at(at + 8),
            socket_thermal: u32_at(at + 12),
            vr_thermal: u32_at(at + 16),
            hbm_thermal: u32_at(at + 20),
        };
        (r.accumulation != u32::MAX).then_some(r)
    });
    Ok(GpuMetrics {
        revision: (format, content),
        temp_edge_c: l.edge.and_then(u16_at),
        temp_hotspot_c: u16_at(l.hotspot),
        temp_mem_c: u16_at(l.mem),
        power_w: u16_at(l.power),
        gfxclk_mhz: (!clocks.is_empty()).then(|| clocks.iter().sum::<f64>() / clocks.len() as f64),
        uclk_mhz: u16_at(l.uclk).filter(|mhz| *mhz > 0.0),
        throttlers: l.throttlers.and_then(u64_at),
        residency,
    })
}

/// Builds a table of a layout for tests: all ones (as the firmware leaves what it does not
/// fill), the header, then `fields` as `(offset, bytes)`.
#[cfg(test)]
pub fn table_for_tests(content: u8, size: u16, fields: &[(usize, &[u8])]) -> Vec<u8> {
    let mut t = vec![0xFFu8; usize::from(size)];
    t[..2].copy_from_slice(&size.to_le_bytes());
    t[2] = 1;
    t[3] = content;
    for (at, bytes) in fields {
        t[*at..*at + bytes.len()].copy_from_slice(bytes);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_rdna3_table_reads_its_temperatures_clocks_and_throttlers() {
        // Layout 1.3: hot junction, the power limit and the hotspot limit holding it.
        let bits: u64 = (1 << 0) | (1 << 36);
        let t = table_for_tests(
            3,
            120,
            &[
                (4, &71u16.to_le_bytes()),
                (6, &104u16.to_le_bytes()),
                (8, &88u16.to_le_bytes()),
                (22, &348u16.to_le_bytes()),
                (54, &2210u16.to_le_bytes()),
                (58, &1249u16.to_le_bytes()),
                (112, &bits.to_le_bytes()),
            ],
        );
        let m = decode(&t).unwrap();
        assert_eq!(m.revision, (1, 3));
        assert_eq!(
            (m.temp_edge_c, m.temp_hotspot_c, m.temp_mem_c),
            (Some(71.0), Some(104.0), Some(88.0))
        );
        assert_eq!(
            (m.power_w, m.gfxclk_mhz, m.uclk_mhz),
            (Some(348.0), Some(2210.0), Some(1249.0))
        );
        assert_eq!(
            reasons_of(m.throttlers.unwrap()),
            vec![
                ThrottleReason::SwPowerCap,
                ThrottleReason::SwThermalSlowdown
            ]
        );
    }

    #[test]
    fn an_mi300_table_reads_its_dies_clocks_and_residencies() {
        // Final layout 1.6: eight compute dies, two not reporting (all ones).
        let mut fields: Vec<(usize, Vec<u8>)> = vec![
            (4, 107u16.to_le_bytes().to_vec()),
            (6, 84u16.to_le_bytes().to_vec()),
            (10, 742u16.to_le_bytes().to_vec()),
            (304, 1300u16.to_le_bytes().to_vec()),
        ];
        for (i, at) in [32usize, 36, 40, 44, 48, 52].iter().enumerate() {
            fields.push((*at, (1000u32 * (i as u32 + 1)).to_le_bytes().to_vec()));
        }
        for die in 0..6 {
            fields.push((264 + 2 * die, 1550u16.to_le_bytes().to_vec()));
        }
        let refs: Vec<(usize, &[u8])> = fields.iter().map(|(a, b)| (*a, b.as_slice())).collect();
        let m = decode(&table_for_tests(6, 1664, &refs)).unwrap();
        assert_eq!(m.temp_edge_c, None, "MI300 gives no edge temperature");
        assert_eq!((m.temp_hotspot_c, m.temp_mem_c), (Some(107.0), Some(84.0)));
        assert_eq!(
            (m.power_w, m.gfxclk_mhz, m.uclk_mhz),
            (Some(742.0), Some(1550.0), Some(1300.0))
        );
        let r = m.residency.unwrap();
        assert_eq!((r.accumulation, r.ppt, r.hbm_thermal), (1000, 3000, 6000));
        // 100 ticks later: the socket's thermal limit held 80 of them, the power limit 10.
        let later = Residency {
            accumulation: r.accumulation + 100,
            ppt: r.ppt + 10,
            socket_thermal: r.socket_thermal + 80,
            ..r
        };
        assert_eq!(
            later.since(&r).unwrap(),
            vec![
                (ThrottleReason::SwPowerCap, 0.1),
                (ThrottleReason::SwThermalSlowdown, 0.8)
            ]
        );
        assert_eq!(r.since(&later), None, "counters that went back: no share");
    }

    #[test]
    fn every_fixed_layout_decodes_and_the_rest_are_refused() {
        for (content, size) in [
            (0u8, 80u16),
            (1, 96),
            (2, 104),
            (3, 120),
            (4, 288),
            (5, 360),
            (6, 384),
            (6, 1664),
            (7, 2208),
            (8, 3872),
        ] {
            let m = decode(&table_for_tests(content, size, &[])).unwrap();
            assert_eq!(
                m.temp_hotspot_c, None,
                "1.{content}: all ones is nothing read"
            );
            assert_eq!(m.gfxclk_mhz, None);
        }
        let mut v19 = table_for_tests(9, 1150, &[]);
        assert!(matches!(
            decode(&v19),
            Err(MetricsError::Unknown { content: 9, .. })
        ));
        v19[2] = 2;
        assert!(
            matches!(decode(&v19), Err(MetricsError::Unknown { format: 2, .. })),
            "an APU's"
        );
        assert!(matches!(decode(&[120, 0]), Err(MetricsError::Short { .. })));
        let cut = table_for_tests(3, 120, &[]);
        assert!(matches!(
            decode(&cut[..100]),
            Err(MetricsError::Short { got: 100, .. })
        ));
    }
}
