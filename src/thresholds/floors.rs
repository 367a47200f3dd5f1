//! The site's own floors, as `kiln baseline` writes them into a thresholds file, and the
//! rules a file's floors are held to before any rate is judged by them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ABOVE_ZERO, AT_LEAST_ZERO, Invalid, Valid, figure};

/// The fewest healthy cards of a product a floor rests on: with fewer, one odd card
/// would be a quarter of the evidence, and the floor is said to be missing, not guessed.
/// A file's floor resting on fewer is refused for the same reason.
pub const MIN_CARDS: usize = 4;

/// Every rate a run measures, by the name its workload gives it: what a baseline's floors
/// may name. The rates with a product figure ([`crate::product::Rate`]) and those without
/// one (PCIe each way, each matrix kind on the path it has no figure for).
pub const MEASURED_RATES: [&str; 12] = [
    "vram_gib_per_s",
    "compute_fp32_gops",
    "compute_int32_gops",
    "compute_fp16_gops",
    "matrix_fp32_tflops",
    "matrix_fp32_units_tflops",
    "matrix_fp16_tflops",
    "matrix_fp16_units_tflops",
    "matrix_int8_tops",
    "matrix_int8_units_tops",
    "pcie_h2d_gbps",
    "pcie_d2h_gbps",
];

/// The floors of one product, as a thresholds file carries them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProductFloors {
    /// Where they come from, in words: `site baseline, 64 NVIDIA H200 cards, 2026-12-01`.
    pub source: String,
    /// The healthy cards the floors rest on.
    pub cards: usize,
    /// The driver versions those cards ran.
    pub drivers: Vec<String>,
    /// Per rate (its name, as `floors` names it), the floor and what it rests on.
    pub rates: BTreeMap<String, RateFloor>,
    /// The cards left out of a rate's floor for falling far behind it.
    #[serde(default)]
    pub left_out: Vec<Behind>,
}

/// One rate's floor, in the workload's unit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateFloor {
    /// Below this is slow.
    pub floor: f64,
    /// The healthy cards' median.
    pub median: f64,
    /// Their robust standard deviation (1.4826 MAD).
    pub sigma: f64,
    /// The cards it rests on.
    pub cards: usize,
}

/// A card behind its product's floor in one rate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Behind {
    /// The node.
    pub node: String,
    /// The run directory.
    pub run: String,
    /// Its index in its run.
    pub index: usize,
    /// Its UUID.
    pub uuid: String,
    /// The rate.
    pub rate: String,
    /// What it reached.
    pub value: f64,
    /// The floor it is below.
    pub floor: f64,
    /// Its product's median.
    pub median: f64,
    /// How far below the median, as a share of it.
    pub share_below_median: f64,
}

/// The rules of `floors`: each key a rate kiln judges in a single run (one with a product
/// figure), each floor a number above 0.
pub(super) struct EachRateFloor;

impl Valid<BTreeMap<String, f64>> for EachRateFloor {
    fn check(&self, floors: &BTreeMap<String, f64>) -> Result<(), Invalid> {
        let judged: Vec<&str> = crate::product::Rate::ALL.iter().map(|r| r.name()).collect();
        for (rate, floor) in floors {
            if !judged.contains(&rate.as_str()) {
                let why =
                    crate::text::not_one_of(rate, "a rate kiln judges", &judged, "docs/guide.md");
                return Err(Invalid::new(why).under(rate));
            }
            figure(&ABOVE_ZERO, *floor).map_err(|e| e.under(rate))?;
        }
        Ok(())
    }
}

/// The rules of `baseline`: each product's floors whole, as `kiln baseline` writes them.
pub(super) struct EachProduct;

impl Valid<BTreeMap<String, ProductFloors>> for EachProduct {
    fn check(&self, products: &BTreeMap<String, ProductFloors>) -> Result<(), Invalid> {
        for (product, floors) in products {
            if product.trim().is_empty() {
                return Err(Invalid::new("a product needs its name (the device's)").under(product));
            }
            floors.validate().map_err(|e| e.under(product))?;
        }
        Ok(())
    }
}

impl ProductFloors {
    /// Checks that these floors are what a baseline can write: each rate one kiln
    /// measures, each floor above 0 and at most its median, each resting on at least
    /// [`MIN_CARDS`] cards and on no more than the product's; the error names the key.
    pub fn validate(&self) -> Result<(), Invalid> {
        rests_on(self.cards).map_err(|e| e.under("cards"))?;
        for (rate, f) in &self.rates {
            let at = |e: Invalid| e.under(rate).under("rates");
            if !MEASURED_RATES.contains(&rate.as_str()) {
                let why = crate::text::not_one_of(
                    rate,
                    "a rate kiln measures",
                    &MEASURED_RATES,
                    "docs/fleet.md",
                );
                return Err(at(Invalid::new(why)));
            }
            figure(&ABOVE_ZERO, f.floor).map_err(|e| at(e.under("floor")))?;
            figure(&ABOVE_ZERO, f.median).map_err(|e| at(e.under("median")))?;
            if f.floor > f.median {
                return Err(at(Invalid::new(format!(
                    "{} is above the median {}: a floor lies below what the cards reach",
                    crate::text::number(f.floor),
                    crate::text::number(f.median)
                ))
                .under("floor")));
            }
            figure(&AT_LEAST_ZERO, f.sigma).map_err(|e| at(e.under("sigma")))?;
            rests_on(f.cards).map_err(|e| at(e.under("cards")))?;
            if f.cards > self.cards {
                return Err(at(Invalid::new(format!(
                    "{} cards is more than the product's {}",
                    f.cards, self.cards
                ))
                .under("cards")));
            }
        }
        Ok(())
    }
}

/// A floor's count of cards when it is enough to rest on.
fn rests_on(cards: usize) -> Result<(), Invalid> {
    if cards < MIN_CARDS {
        return Err(Invalid::new(format!(
            "{} is fewer than the {MIN_CARDS} healthy cards a floor rests on",
            crate::text::count(cards as u64, "card")
        )));
    }
    Ok(())
}
