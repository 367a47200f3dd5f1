//! Exit codes: the contract fleets build on (the README's table). A leaf, so that the
//! command line, the run directory and the verdict all say them without reaching up.

/// Every tested GPU healthy.
pub const HEALTHY: i32 = 0;
/// Hardware fault on at least one GPU.
pub const HARDWARE: i32 = 1;
/// Environment or configuration problem.
pub const ENVIRONMENT: i32 = 2;
/// Software problem (driver, timeouts, fragmentation, leaks; a failed self-test).
pub const SOFTWARE: i32 = 3;
/// Could not test enough to judge.
pub const INCONCLUSIVE: i32 = 4;
/// `kiln compare` only: a rate drifted beyond the tolerance and the runs' own noise,
/// with no new fault and no error counter grown: worth a look, not a fault.
pub const DRIFT: i32 = 5;
/// `kiln health` only: not yet tested. The runs directory holds no full run yet (a fresh
/// node), so `--max-age` has nothing to judge: start a run (the Slurm recipe submits its
/// burn-in), not a fault and not a drain by default.
pub const NOT_TESTED: i32 = 6;
/// Usage error: bad flags or input.
pub const USAGE: i32 = 64;

/// Every code with its meaning in a few words, for the man page and help texts.
pub const MEANINGS: [(i32, &str); 8] = [
    (HEALTHY, "every tested GPU healthy"),
    (HARDWARE, "a hardware fault on at least one GPU"),
    (
        ENVIRONMENT,
        "an environment or configuration problem (cooling, power delivery, the PCIe link, other tenants)",
    ),
    (
        SOFTWARE,
        "a software problem (driver, fragmentation, leaks, a device lost without hardware evidence); a failed self-test",
    ),
    (
        INCONCLUSIVE,
        "could not test enough to judge (no GPU tested, a run cut short, only low-confidence findings)",
    ),
    (
        DRIFT,
        "kiln compare only: a rate drifted beyond the tolerance and the runs' own noise, with no new fault",
    ),
    (
        NOT_TESTED,
        "kiln health only: not yet tested (no full run in the runs directory yet): start one; not a fault",
    ),
    (
        USAGE,
        "usage error: bad flags, values, profiles or run directories",
    ),
];
