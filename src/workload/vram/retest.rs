//! In-place retest of failing words: re-read them as found, then rewrite and re-read
//! them with several patterns, each read straight from memory, and classify.

use super::classify::{Trial, classify};
use super::engine::Engine;
use super::pattern::splitmix64;
use super::{RetestResult, WordRef};
use crate::gpu::GpuResult;

/// Retests `words`; each is left holding its `restore` value afterwards.
pub fn retest(
    engine: &mut Engine,
    words: &[WordRef],
    reads: u32,
    seed: u64,
) -> GpuResult<Vec<RetestResult>> {
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let indices: Vec<u64> = words.iter().map(|w| w.word).collect();
    let reads = reads.max(1) as usize;
    let mut rereads = vec![Vec::with_capacity(reads); words.len()];
    for _ in 0..reads {
        engine.evict()?;
        for (i, v) in engine.read_words(&indices)?.into_iter().enumerate() {
            rereads[i].push(v);
        }
    }
    let fixed = [0u32, u32::MAX, 0x5555_5555, 0xAAAA_AAAA];
    let mut trials: Vec<Vec<Trial>> = vec![Vec::new(); words.len()];
    for t in 0..fixed.len() + 2 {
        let values: Vec<u32> = words
            .iter()
            .map(|w| match t {
                t if t < fixed.len() => fixed[t],
                t if t == fixed.len() => w.expected,
                _ => splitmix64(seed ^ w.word) as u32,
            })
            .collect();
        engine.write_words(&indices, &values)?;
        let mut got = vec![Vec::with_capacity(reads); words.len()];
        for _ in 0..reads {
            engine.evict()?;
            for (i, v) in engine.read_words(&indices)?.into_iter().enumerate() {
                got[i].push(v);
            }
        }
        for (i, reads) in got.into_iter().enumerate() {
            trials[i].push(Trial {
                written: values[i],
                reads,
            });
        }
    }
    let restore: Vec<u32> = words.iter().map(|w| w.restore).collect();
    engine.write_words(&indices, &restore)?;
    Ok(words
        .iter()
        .zip(rereads)
        .zip(trials)
        .map(|((w, rereads), trials)| {
            let found_expected = (!w.overwritten).then_some(w.expected);
            let verdict = classify(found_expected, &rereads, &trials);
            RetestResult {
                offset_bytes: w.word * 4,
                expected: w.expected,
                actual: w.actual,
                class: verdict.class,
                stuck_at_0_mask: verdict.stuck_at_0_mask,
                stuck_at_1_mask: verdict.stuck_at_1_mask,
                rereads,
                trials,
            }
        })
        .collect())
}
