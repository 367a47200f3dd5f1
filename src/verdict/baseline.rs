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

/// Builds the floors from `devices`, dated `date` (`2026-12-01`).
pub fn build(devices: &[Measured], date: &str) -> Built {
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
        // The cards used, by run and index: one card per device of each run.
        let mut used: BTreeSet<(&str, usize)> = BTreeSet::new();
        for rate in names {
            let measured: Vec<(&Measured, f64)> = healthy
                .iter()
                .filter_map(|d| d.rates.get(rate).map(|v| (*d, *v)))
                .filter(|(_, v)| v.is_finite() && *v > 0.0)
                .collect();
            if measured.len() < MIN_CARDS {
                built.too_few.push(format!(
                    "{product} {rate}: {} of the {MIN_CARDS} healthy cards a floor needs",
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
                    "{product} {rate}: {} of the {MIN_CARDS} healthy cards a floor needs once the slow ones are left out",
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
                    "{product} {rate}: the cards are too far apart for a floor (median {}, spread {})",
                    crate::text::number(m),
                    crate::text::number(sigma)
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
            used.extend(kept.iter().map(|(d, _)| (d.run.as_str(), d.index)));
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

/// The devices among `devices` behind their product's floor in `floors`, each rate once.
pub fn behind(devices: &[Measured], floors: &BTreeMap<String, ProductFloors>) -> Vec<Behind> {
    let mut out = Vec::new();
    for d in devices {
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
        let built = build(&cards, "2026-12-01");
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
        let judged = behind(&cards, &built.products);
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
        let built = build(&cards, "2026-12-01");
        let f = &built.products["RTX 4090"].rates["compute_fp32_gops"];
        assert_eq!(f.cards, 8);
        assert!(f.floor < 88.0, "{f:?}");
        assert!(behind(&cards, &built.products).is_empty());
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
        let built = build(&cards, "2026-12-01");
        assert!(built.products.is_empty(), "{built:?}");
        assert_eq!(
            built.too_few,
            ["NVIDIA A100 vram_gib_per_s: 3 of the 4 healthy cards a floor needs"]
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
        let built = build(&cards, "2026-12-01");
        assert_eq!(built.products.len(), 2);
        // An H100's rate is no outlier against the H200s' floor.
        assert!(behind(&cards, &built.products).is_empty());
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
        let built = build(&cards, "2026-12-01");
        assert!(built.products.is_empty(), "{built:?}");
        assert_eq!(built.too_few.len(), 1, "{built:?}");
        assert!(
            built.too_few[0].contains("too far apart for a floor"),
            "{:?}",
            built.too_few
        );
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
        let built = build(&cards, "2026-12-01");
        built.products["NVIDIA H200"]
            .validate()
            .unwrap_or_else(|e| panic!("{e}"));
    }
}
