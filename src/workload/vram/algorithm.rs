//! The VRAM test algorithms, each a sequence of whole-memory steps. Algorithms are data:
//! the runner executes steps, so adding an algorithm never touches the GPU code.

use std::time::Duration;

use super::pattern::{Pattern, splitmix64};

// The algorithm's name is part of the evidence (each error record says which algorithm
// found it), so the enum is defined with the records; what each one does is here.
pub use crate::evidence::vram::Algorithm;

/// Every algorithm, in the order a full run takes them.
pub const ALL: [Algorithm; 6] = [
    Algorithm::OwnAddress,
    Algorithm::MovingInversions,
    Algorithm::Modulo20,
    Algorithm::Random,
    Algorithm::Backgrounds,
    Algorithm::Retention,
];

/// What `kiln run` tests by default: everything that does not idle.
pub const DEFAULT: [Algorithm; 5] = [
    Algorithm::OwnAddress,
    Algorithm::MovingInversions,
    Algorithm::Modulo20,
    Algorithm::Random,
    Algorithm::Backgrounds,
];

/// One whole-memory step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// Write the pattern everywhere.
    Write(Pattern),
    /// Verify the pattern everywhere.
    Verify(Pattern),
    /// Verify the pattern and write its inversion, sweeping up or down.
    Rewrite {
        /// What memory should hold now.
        expect: Pattern,
        /// Sweep from the top of memory down.
        descending: bool,
    },
    /// Leave memory untouched for a while (retention).
    Idle(Duration),
}

impl Step {
    /// What memory holds at `word` once this step is done, when the step defines it.
    pub fn leaves(&self, word: u64) -> Option<u32> {
        match self {
            Step::Write(p) | Step::Verify(p) => Some(p.word(word)),
            Step::Rewrite { expect, .. } => Some(!expect.word(word)),
            Step::Idle(_) => None,
        }
    }

    /// The pattern a verifying step checks.
    pub fn checks(&self) -> Option<Pattern> {
        match self {
            Step::Verify(p) => Some(*p),
            Step::Rewrite { expect, .. } => Some(*expect),
            _ => None,
        }
    }
}

// Its name (`Algorithm::name`, as the evidence spells it) is defined with the enum.
impl Algorithm {
    /// Parses a name or a common alias.
    pub fn parse(name: &str) -> Option<Algorithm> {
        Some(match name.trim().to_ascii_lowercase().as_str() {
            "own-address" | "address" | "own_address" => Algorithm::OwnAddress,
            "moving-inversions" | "mi" | "moving_inversions" => Algorithm::MovingInversions,
            "modulo-20" | "mod20" | "modulo20" | "modulo_20" => Algorithm::Modulo20,
            "random" | "random-sequence" | "random_sequence" => Algorithm::Random,
            "backgrounds" | "data-backgrounds" | "checkerboard" => Algorithm::Backgrounds,
            "retention" | "bit-fade" | "bitfade" => Algorithm::Retention,
            _ => return None,
        })
    }

    /// Parses a comma-separated list, or `all` / `default`.
    pub fn parse_list(list: &str) -> Result<Vec<Algorithm>, String> {
        let mut out = Vec::new();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "all" => out.extend(ALL),
                "default" => out.extend(DEFAULT),
                _ => out.push(Algorithm::parse(name).ok_or_else(|| {
                    crate::text::unknown(
                        "VRAM algorithm",
                        name,
                        &ALL.map(Algorithm::name),
                        &["all", "default"],
                    )
                })?),
            }
        }
        if out.is_empty() {
            return Err("no VRAM algorithm named".into());
        }
        let mut seen = std::collections::HashSet::new();
        out.retain(|a| seen.insert(*a));
        Ok(out)
    }

    /// The steps of pass `pass`; `seed` makes every pass's patterns differ.
    pub fn steps(self, pass: u32, seed: u64, retention_delay: Duration) -> Vec<Step> {
        let pass_seed = splitmix64(seed ^ (u64::from(pass) << 32) ^ self as u64);
        let random_word = splitmix64(pass_seed) as u32;
        match self {
            Algorithm::OwnAddress => {
                let p = Pattern::address(pass_seed);
                vec![Step::Write(p), Step::Verify(p)]
            }
            Algorithm::MovingInversions => [0u32, random_word]
                .iter()
                .flat_map(|&background| {
                    let p = Pattern::constant(background);
                    [
                        Step::Write(p),
                        Step::Rewrite {
                            expect: p,
                            descending: false,
                        },
                        Step::Rewrite {
                            expect: p.inverted(),
                            descending: true,
                        },
                        Step::Verify(p),
                    ]
                })
                .collect(),
            Algorithm::Modulo20 => (0..20)
                .flat_map(|offset| {
                    let p = Pattern::mod20(random_word, offset);
                    [Step::Write(p), Step::Verify(p)]
                })
                .collect(),
            Algorithm::Random => {
                let p = Pattern::random(pass_seed);
                vec![
                    Step::Write(p),
                    Step::Verify(p),
                    Step::Write(p.inverted()),
                    Step::Verify(p.inverted()),
                ]
            }
            Algorithm::Backgrounds => [
                0x5555_5555u32,
                0x3333_3333,
                0x0F0F_0F0F,
                0x00FF_00FF,
                0x0000_FFFF,
            ]
            .iter()
            .flat_map(|&word| {
                let p = Pattern::constant(word);
                [
                    Step::Write(p),
                    Step::Verify(p),
                    Step::Write(p.inverted()),
                    Step::Verify(p.inverted()),
                ]
            })
            .collect(),
            Algorithm::Retention => {
                let p = Pattern::address(pass_seed);
                vec![
                    Step::Write(p),
                    Step::Idle(retention_delay),
                    Step::Verify(p),
                    Step::Write(p.inverted()),
                    Step::Idle(retention_delay),
                    Step::Verify(p.inverted()),
                ]
            }
        }
    }

    /// How many sweeps over the memory one pass makes, and how long it idles.
    pub fn sweeps_and_idle(
        self,
        pass: u32,
        seed: u64,
        retention_delay: Duration,
    ) -> (u32, Duration) {
        let steps = self.steps(pass, seed, retention_delay);
        let idle = steps
            .iter()
            .map(|s| match s {
                Step::Idle(d) => *d,
                _ => Duration::ZERO,
            })
            .sum();
        let sweeps = steps.iter().filter(|s| !matches!(s, Step::Idle(_))).count();
        (u32::try_from(sweeps).unwrap_or(u32::MAX), idle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_algorithm_verifies_what_it_writes() {
        for a in ALL {
            let steps = a.steps(0, 1, Duration::ZERO);
            let mut holds: Option<Step> = None;
            for s in &steps {
                if let Some(p) = s.checks() {
                    let before = holds.expect("a step verifies before anything was written");
                    for w in [0u64, 1, 19, 20, 12345] {
                        assert_eq!(before.leaves(w), Some(p.word(w)), "{a:?} {s:?}");
                    }
                }
                if s.leaves(0).is_some() {
                    holds = Some(*s);
                }
            }
            assert!(
                matches!(steps.last(), Some(Step::Verify(_))),
                "{a:?} ends verified"
            );
        }
    }

    #[test]
    fn seeds_change_every_pass() {
        let a = Algorithm::OwnAddress.steps(0, 1, Duration::ZERO);
        let b = Algorithm::OwnAddress.steps(1, 1, Duration::ZERO);
        assert_ne!(a[0], b[0]);
    }

    #[test]
    fn lists_parse_and_reject() {
        assert_eq!(
            Algorithm::parse_list("mi, own-address,mi").unwrap(),
            vec![Algorithm::MovingInversions, Algorithm::OwnAddress]
        );
        assert_eq!(Algorithm::parse_list("all").unwrap().len(), ALL.len());
        assert!(
            Algorithm::parse_list("marchx")
                .unwrap_err()
                .contains("marchx")
        );
        assert!(Algorithm::parse_list(",").is_err());
    }
}
