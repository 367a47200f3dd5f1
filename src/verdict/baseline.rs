//! Floors from a site's own healthy cards: per product and rate, what kiln's kernels reach
//! on that fleet (its drivers, clocks and cooling), and the cards across nodes that fall
//! behind them.
//!
//! The statistic is the median and the median absolute deviation (MAD), robust to the slow
//! cards the floors exist to find: a handful of them moves neither. A floor sits below the
//! median by the larger of three robust standard deviations (1.4826 MAD each) and
//! [`TOLERANCE_SHARE`] of the median, so that a fleet whose cards agree to the percent is
//! not given a floor tighter than the run-to-run noise of one card (boost clocks,
//! temperature), and a fleet with a wider spread (mixed cooling) gets a wider one. A card
//! below that line is left out of its product's floor and named: it never lowers the floor
//! it fails.
//!
//! A card counts once ([`Fleet`]): by its UUID, else its serial, else its slot on its node,
//! so that a run directory given twice, copied, or reached by two paths, and a card
//! measured in several runs, is one card of the floor, never a fleet.
//!
//! The floors are written as a thresholds file (`--thresholds`): the rates rule takes a
//! baseline floor for the device's product before the product's published reference, and a
//! rate below it is a high-confidence finding, since it rests on this fleet's own cards.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

pub use crate::thresholds::{Behind, MIN_CARDS, ProductFloors, RateFloor};

/// The least distance of a floor below its median, as a share of the median: gpu-fryer
/// fails a GPU more than 10% behind the best in its box, and a healthy card's own rates
/// move a few percent between runs.
pub const TOLERANCE_SHARE: f64 = 0.10;

/// How many robust standard deviations below the median a floor sits, where the fleet's
/// spread is wider than [`TOLERANCE_SHARE`].
pub const SIGMAS: f64 = 3.0;

/// A MAD times this is a standard deviation, for normally distributed values.
const MAD_TO_SIGMA: f64 = 1.4826;

/// The PCI vendor id of NVIDIA, whose Vulkan deviceUUID is NVML's UUID: the card's own.
const NVIDIA: u32 = 0x10de;

/// Who a card is across runs and nodes: what counts it once however many runs measured it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CardId {
    /// The card's UUID (NVML's, without its `GPU-`, lower case), the same in whichever
    /// node the card sits.
    Uuid(String),
    /// The board's serial number, where no UUID names the card.
    Serial(String),
    /// Vulkan's deviceUUID of a vendor other than NVIDIA, on its node: Mesa's drivers
    /// make it from the PCI address, so it names a slot of one machine, not a card across
    /// machines (two nodes' cards in the same slot share it).
    Slot {
        /// The node.
        node: String,
        /// Vulkan's deviceUUID.
        device_uuid: String,
    },
}

impl CardId {
    /// The card a device is: NVML's UUID where the run read it (or NVIDIA's Vulkan
    /// deviceUUID, which is the same), else the board's serial, else Vulkan's deviceUUID
    /// on `node`.
    pub fn of(
        node: &str,
        nvml_uuid: Option<&str>,
        vendor_id: u32,
        device_uuid: &str,
        serial: Option<&str>,
    ) -> CardId {
        let uuid = |u: &str| CardId::Uuid(u.trim().trim_start_matches("GPU-").to_ascii_lowercase());
        if let Some(u) = given(nvml_uuid) {
            uuid(u)
        } else if vendor_id == NVIDIA && !device_uuid.trim().is_empty() {
            uuid(device_uuid)
        } else if let Some(s) = given(serial) {
            CardId::Serial(s.to_owned())
        } else {
            CardId::Slot {
                node: node.to_owned(),
                device_uuid: device_uuid.to_owned(),
            }
        }
    }
}

/// An identity field the run read, where it says something.
fn given(text: Option<&str>) -> Option<&str> {
    text.map(str::trim).filter(|t| !t.is_empty())
}

/// One device of one run, as a baseline reads it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measured {
    /// The node (host) it ran on.
    pub node: String,
    /// The run directory.
    pub run: String,
    /// Its index in the run (`GPU3`).
    pub index: usize,
    /// Its UUID.
    pub uuid: String,
    /// Who the card is, across runs and nodes.
    pub card: CardId,
    /// When its run started (UTC, RFC 3339): the latest measurement of a card counts.
    pub started_utc: String,
    /// Its product, by the name the verdict knows it by (the key of its floors).
    pub product: String,
    /// Its driver's version.
    pub driver: String,
    /// Why it is not a healthy card to build floors from (a fault of its own, heat, a run
    /// cut short); None for a healthy one.
    pub unhealthy: Option<String>,
    /// Each rate it measured, in the workload's unit: the median of its runs.
    pub rates: BTreeMap<String, f64>,
}

/// The cards of a fleet, each once: a card measured in several runs (a run directory given
/// twice or copied, or the card tested again) is its latest measurement. The latest, not
/// its best nor a blend of its runs: a floor is for the fleet as it is (a baseline is
/// rebuilt after a driver upgrade or a cooling change), and the card's latest run is the
/// one taken on its present driver, cooling and seating, with the findings of that run;
/// one real measurement also keeps its rates, driver and health together.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Fleet {
    /// Each card's latest measurement, in the order the cards were first read.
    pub cards: Vec<Measured>,
    /// The other measurements of a card measured more than once, each with the run that
    /// counts.
    pub repeated: Vec<String>,
}

impl Fleet {
    /// The cards among `measured`, each once (a card by its [`CardId`] and product).
    pub fn of(measured: Vec<Measured>) -> Fleet {
        let mut fleet = Fleet::default();
        // Where each card is in `fleet.cards`, by who it is and its product.
        let mut at: BTreeMap<(CardId, String), usize> = BTreeMap::new();
        for m in measured {
            match at.get(&(m.card.clone(), m.product.clone())) {
                None => {
                    at.insert((m.card.clone(), m.product.clone()), fleet.cards.len());
                    fleet.cards.push(m);
                }
                Some(&i) => {
                    let kept = &mut fleet.cards[i];
                    // The later run counts; of two that started together (a copied run
                    // directory), the one read first.
                    let other = if m.started_utc > kept.started_utc {
                        std::mem::replace(kept, m)
                    } else {
                        m
                    };
                    fleet.repeated.push(format!(
                        "{} GPU{} in {} ({}): the same card as GPU{} in {}, which counts",
                        other.node, other.index, other.run, other.product, kept.index, kept.run
                    ));
                }
            }
        }
        fleet
    }
}

/// What a baseline found: the floors per product, and what it could not give a floor.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Built {
    /// The floors, by product.
    pub products: BTreeMap<String, ProductFloors>,
    /// Products or rates with too few healthy cards, or cards too far apart to draw a
    /// floor under, in words.
    pub too_few: Vec<String>,
    /// Devices not used, each with why.
    pub not_used: Vec<String>,
}

/// The median, the robust standard deviation and the floor of `values` (not empty).
fn floor_of(values: &[f64]) -> (f64, f64, f64) {
    let median = |v: Vec<f64>| crate::verdict::rules::rates::median(v).unwrap_or(0.0);
    let m = median(values.to_vec());
    let sigma = MAD_TO_SIGMA * median(values.iter().map(|x| (x - m).abs()).collect());
    let below = (SIGMAS * sigma).max(TOLERANCE_SHARE * m);
    (m, sigma, m - below)
}

/// Builds the floors from the cards of `fleet`, each counted once, dated `date`
/// (`2026-12-01`).
pub fn build(fleet: &Fleet, date: &str) -> Built {
    let devices = &fleet.cards;
    let mut built = Built::default();
    for d in devices {
        if let Some(why) = &d.unhealthy {
            built.not_used.push(format!(
                "{} GPU{} {} ({}): {why}",
                d.node, d.index, d.uuid, d.product
            ));
        }
    }
    let products: BTreeSet<&str> = devices
        .iter()
        .filter(|d| d.unhealthy.is_none())
        .map(|d| d.product.as_str())
        .collect();
    for product in products {
        let healthy: Vec<&Measured> = devices
            .iter()
            .filter(|d| d.unhealthy.is_none() && d.product == product)
            .collect();
        let names: BTreeSet<&str> = healthy
            .iter()
            .flat_map(|d| d.rates.keys().map(String::as_str))
            .collect();
        let mut rates = BTreeMap::new();
        let mut left_out = Vec::new();
        // The cards used: a fleet holds each once.
        let mut used: BTreeSet<&CardId> = BTreeSet::new();
        for rate in names {
            let measured: Vec<(&Measured, f64)> = healthy
                .iter()
                .filter_map(|d| d.rates.get(rate).map(|v| (*d, *v)))
                .filter(|(_, v)| v.is_finite() && *v > 0.0)
                .collect();
            if measured.len() < MIN_CARDS {
                built.too_few.push(format!(
                    "{product} {}: {} of the {MIN_CARDS} healthy cards a floor needs",
                    crate::units::rate_words(rate),
                    measured.len()
                ));
                continue;
            }
            // The cards far behind the rest are left out first, so that they never lower
            // the floor they fail; the floor is then drawn from the others.
            let all: Vec<f64> = measured.iter().map(|(_, v)| *v).collect();
            let (_, _, first_floor) = floor_of(&all);
            let (kept, behind): (Vec<_>, Vec<_>) =
                measured.into_iter().partition(|(_, v)| *v >= first_floor);
            let values: Vec<f64> = kept.iter().map(|(_, v)| *v).collect();
            if values.len() < MIN_CARDS {
                built.too_few.push(format!(
                    "{product} {}: {} of the {MIN_CARDS} healthy cards a floor needs once the slow ones are left out",
                    crate::units::rate_words(rate),
                    values.len()
                ));
                continue;
            }
            let (m, sigma, floor) = floor_of(&values);
            // Cards three robust deviations apart from their median reaching 0 (links of
            // several PCIe generations, say) have no floor in common: none is drawn, rather
            // than one no rate can fall below, which no thresholds file would take.
            if floor <= 0.0 {
                built.too_few.push(format!(
                    "{product} {}: the cards are too far apart for a floor (median {}, spread {})",
                    crate::units::rate_words(rate),
                    crate::units::rate_said(rate, m),
                    crate::units::rate_said(rate, sigma)
                ));
                continue;
            }
            for (d, v) in behind {
                left_out.push(Behind {
                    node: d.node.clone(),
                    run: d.run.clone(),
                    index: d.index,
                    uuid: d.uuid.clone(),
                    rate: rate.to_owned(),
                    value: v,
                    floor,
                    median: m,
                    share_below_median: 1.0 - v / m,
                });
            }
            used.extend(kept.iter().map(|(d, _)| &d.card));
            rates.insert(
                rate.to_owned(),
                RateFloor {
                    floor,
                    median: m,
                    sigma,
                    cards: values.len(),
                },
            );
        }
        if rates.is_empty() {
            continue;
        }
        let drivers: BTreeSet<String> = healthy.iter().map(|d| d.driver.clone()).collect();
        built.products.insert(
            product.to_owned(),
            ProductFloors {
                source: format!("site baseline, {} {product} cards, {date}", used.len()),
                cards: used.len(),
                drivers: drivers.into_iter().collect(),
                rates,
                left_out,
            },
        );
    }
    built
}

/// The cards of `fleet` behind their product's floor in `floors`, each card and rate once.
pub fn behind(fleet: &Fleet, floors: &BTreeMap<String, ProductFloors>) -> Vec<Behind> {
    let mut out = Vec::new();
    for d in &fleet.cards {
        let Some(p) = floors.get(&d.product) else {
            continue;
        };
        for (rate, value) in &d.rates {
            let Some(f) = p.rates.get(rate) else {
                continue;
            };
            if *value < f.floor {
                out.push(Behind {
                    node: d.node.clone(),
                    run: d.run.clone(),
                    index: d.index,
                    uuid: d.uuid.clone(),
                    rate: rate.clone(),
                    value: *value,
                    floor: f.floor,
                    median: f.median,
                    share_below_median: 1.0 - value / f.median,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(node: &str, product: &str, rates: &[(&str, f64)]) -> Measured {
        Measured {
            node: node.into(),
            run: format!("runs/{node}"),
            index: 0,
            uuid: format!("GPU-{node}"),
            card: CardId::Uuid(node.into()),
            started_utc: "2026-12-01T10:00:00Z".into(),
            product: product.into(),
            driver: "550.90.07".into(),
            unhealthy: None,
            rates: rates.iter().map(|(r, v)| ((*r).to_owned(), *v)).collect(),
        }
    }

    #[test]
    fn a_slow_card_is_left_out_of_the_floor_it_fails_and_named() {
        // Eight H200s within 2% of each other, one 25% behind.
        let mut cards: Vec<Measured> = [3920.0, 3950.0, 3990.0, 4000.0, 3975.0, 3940.0, 3960.0]
            .iter()
            .enumerate()
            .map(|(i, v)| card(&format!("n{i}"), "NVIDIA H200", &[("vram_gib_per_s", *v)]))
            .collect();
        cards.push(card("slow", "NVIDIA H200", &[("vram_gib_per_s", 2980.0)]));
        let built = build(&Fleet::of(cards.clone()), "2026-12-01");
        let h200 = &built.products["NVIDIA H200"];
        let f = &h200.rates["vram_gib_per_s"];
        assert_eq!(f.cards, 7, "the slow card is not in the floor");
        assert!((f.median - 3960.0).abs() < 1e-9, "{f:?}");
        // The agreeing fleet's spread is narrower than the share: the floor is 10% down.
        assert!((f.floor - 3564.0).abs() < 1e-6, "{f:?}");
        assert_eq!(h200.cards, 7);
        assert_eq!(
            h200.source,
            "site baseline, 7 NVIDIA H200 cards, 2026-12-01"
        );
        assert_eq!(h200.left_out.len(), 1);
        assert_eq!(h200.left_out[0].node, "slow");
        let judged = behind(&Fleet::of(cards.clone()), &built.products);
        assert_eq!(judged.len(), 1, "{judged:?}");
        assert_eq!(judged[0].node, "slow");
        assert!((judged[0].share_below_median - (1.0 - 2980.0 / 3960.0)).abs() < 1e-9);
    }

    #[test]
    fn a_card_within_the_fleet_s_spread_is_no_outlier() {
        // A fleet with a wide spread (mixed cooling): a card 10% below the median is
        // within three of its robust deviations, and stays.
        let values = [100.0, 92.0, 108.0, 95.0, 105.0, 90.0, 110.0, 88.0];
        let cards: Vec<Measured> = values
            .iter()
            .enumerate()
            .map(|(i, v)| card(&format!("n{i}"), "RTX 4090", &[("compute_fp32_gops", *v)]))
            .collect();
        let built = build(&Fleet::of(cards.clone()), "2026-12-01");
        let f = &built.products["RTX 4090"].rates["compute_fp32_gops"];
        assert_eq!(f.cards, 8);
        assert!(f.floor < 88.0, "{f:?}");
        assert!(behind(&Fleet::of(cards.clone()), &built.products).is_empty());
    }

    #[test]
    fn too_few_cards_or_an_unhealthy_one_give_no_floor() {
        let mut cards: Vec<Measured> = (0..3)
            .map(|i| {
                card(
                    &format!("n{i}"),
                    "NVIDIA A100",
                    &[("vram_gib_per_s", 1500.0)],
                )
            })
            .collect();
        let mut sick = card("sick", "NVIDIA A100", &[("vram_gib_per_s", 1500.0)]);
        sick.unhealthy = Some("VRAM_STUCK_BIT".into());
        cards.push(sick);
        let built = build(&Fleet::of(cards.clone()), "2026-12-01");
        assert!(built.products.is_empty(), "{built:?}");
        assert_eq!(
            built.too_few,
            ["NVIDIA A100 VRAM streaming rate: 3 of the 4 healthy cards a floor needs"]
        );
        assert_eq!(built.not_used.len(), 1);
        assert!(built.not_used[0].contains("VRAM_STUCK_BIT"));
    }

    #[test]
    fn products_get_floors_of_their_own() {
        let mut cards = Vec::new();
        for i in 0..4 {
            cards.push(card(
                &format!("a{i}"),
                "NVIDIA H100",
                &[("vram_gib_per_s", 2500.0)],
            ));
            cards.push(card(
                &format!("b{i}"),
                "NVIDIA H200",
                &[("vram_gib_per_s", 3900.0)],
            ));
        }
        let built = build(&Fleet::of(cards.clone()), "2026-12-01");
        assert_eq!(built.products.len(), 2);
        // An H100's rate is no outlier against the H200s' floor.
        assert!(behind(&Fleet::of(cards.clone()), &built.products).is_empty());
    }

    #[test]
    fn a_card_counts_by_its_uuid_else_its_serial_else_its_slot_on_its_node() {
        let nvml = CardId::of("n1", Some("GPU-6C4F"), 0x1002, "ffff", Some("123"));
        assert_eq!(nvml, CardId::Uuid("6c4f".into()));
        // NVIDIA's Vulkan deviceUUID is NVML's UUID: the same card without telemetry.
        assert_eq!(CardId::of("n2", None, 0x10de, "6c4f", None), nvml);
        assert_eq!(
            CardId::of("n1", Some(""), 0x1002, "ffff", Some(" 692412 ")),
            CardId::Serial("692412".into())
        );
        // Mesa's deviceUUID is the slot's: the same on two nodes, two cards.
        let slot = |node: &str| CardId::of(node, None, 0x1002, "0000-0300", None);
        assert_ne!(slot("n1"), slot("n2"));
        assert_eq!(slot("n1"), slot("n1"));
    }

    #[test]
    fn one_card_given_four_times_is_no_fleet_and_gives_no_floor() {
        // The same run directory read four times (given twice, copied, reached through a
        // link): one card, not the four a floor needs.
        let one = card("n0", "NVIDIA H200", &[("vram_gib_per_s", 3960.0)]);
        let copies: Vec<Measured> = (0..4)
            .map(|i| Measured {
                run: format!("runs/copy{i}"),
                ..one.clone()
            })
            .collect();
        let fleet = Fleet::of(copies);
        assert_eq!(fleet.cards.len(), 1, "{fleet:?}");
        assert_eq!(fleet.repeated.len(), 3, "{fleet:?}");
        assert!(
            fleet.repeated[0].contains("the same card as GPU0 in runs/copy0, which counts"),
            "{:?}",
            fleet.repeated
        );
        let built = build(&fleet, "2026-12-01");
        assert!(built.products.is_empty(), "{built:?}");
        assert_eq!(
            built.too_few,
            ["NVIDIA H200 VRAM streaming rate: 1 of the 4 healthy cards a floor needs"]
        );
    }

    #[test]
    fn a_card_measured_again_counts_once_by_its_latest_run() {
        let mut cards: Vec<Measured> = (0..4)
            .map(|i| {
                card(
                    &format!("n{i}"),
                    "NVIDIA H200",
                    &[("vram_gib_per_s", 4000.0)],
                )
            })
            .collect();
        // n0's card measured again the next day, on another node, slower: its latest run
        // is the one that counts, and it is behind the others, once.
        let mut again = card("n9", "NVIDIA H200", &[("vram_gib_per_s", 2000.0)]);
        again.card = CardId::Uuid("n0".into());
        again.started_utc = "2026-12-02T10:00:00Z".into();
        cards.push(again);
        // An earlier run of n1's card with a fault: not the card as it is now.
        let mut earlier = card("n1", "NVIDIA H200", &[("vram_gib_per_s", 4000.0)]);
        earlier.run = "runs/n1-old".into();
        earlier.started_utc = "2026-11-01T10:00:00Z".into();
        earlier.unhealthy = Some("ECC_UNCORRECTABLE".into());
        cards.push(earlier);
        let fleet = Fleet::of(cards);
        assert_eq!(fleet.cards.len(), 4);
        assert_eq!(fleet.cards[0].node, "n9", "the later run counts");
        assert_eq!(fleet.repeated.len(), 2, "{:?}", fleet.repeated);
        let built = build(&fleet, "2026-12-01");
        assert!(built.not_used.is_empty(), "{:?}", built.not_used);
        // Four cards: the slow one is left out, and three are too few for a floor.
        assert!(built.products.is_empty(), "{built:?}");
        let judged = behind(
            &fleet,
            &build(
                &Fleet::of(
                    (0..4)
                        .map(|i| {
                            card(
                                &format!("m{i}"),
                                "NVIDIA H200",
                                &[("vram_gib_per_s", 4000.0)],
                            )
                        })
                        .collect(),
                ),
                "2026-12-01",
            )
            .products,
        );
        assert_eq!(judged.len(), 1, "{judged:?}");
        assert_eq!(judged[0].node, "n9");
    }

    #[test]
    fn what_a_baseline_writes_a_thresholds_file_reads() {
        let cards: Vec<Measured> = (0..5)
            .map(|i| {
                card(
                    &format!("n{i}"),
                    "NVIDIA H200",
                    &[("vram_gib_per_s", 4000.0 + f64::from(i))],
                )
            })
            .collect();
        let built = build(&Fleet::of(cards), "2026-12-01");
        built.products["NVIDIA H200"]
            .validate()
            .unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn a_fleet_of_distinct_cards_counts_each_and_gives_floors() {
        let cards: Vec<Measured> = (0..5)
            .map(|i| {
                card(
                    &format!("n{i}"),
                    "NVIDIA H200",
                    &[("vram_gib_per_s", 4000.0)],
                )
            })
            .collect();
        let built = build(&Fleet::of(cards), "2026-12-01");
        let h200 = &built.products["NVIDIA H200"];
        assert_eq!((h200.cards, h200.rates["vram_gib_per_s"].cards), (5, 5));
        h200.validate()
            .expect("what a baseline writes, a file reads");
    }

    #[test]
    fn cards_too_far_apart_give_no_floor_rather_than_one_below_zero() {
        // PCIe links of three generations: a median of 25 GB/s and a spread wider than a
        // third of it.
        let cards: Vec<Measured> = [3.0, 6.0, 25.0, 25.0, 50.0, 50.0]
            .iter()
            .enumerate()
            .map(|(i, v)| card(&format!("n{i}"), "NVIDIA H100", &[("pcie_h2d_gbps", *v)]))
            .collect();
        let built = build(&Fleet::of(cards), "2026-12-01");
        assert!(built.products.is_empty(), "{built:?}");
        assert_eq!(built.too_few.len(), 1, "{built:?}");
        assert!(
            built.too_few[0].contains("too far apart for a floor"),
            "{:?}",
            built.too_few
        );
    }
}
