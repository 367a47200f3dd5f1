//! The `kiln` binary: the whole of it is [`kiln::cmd::main`] (the command line parsed,
//! the library called, the outcome mapped to an exit code; see the README's table).

#![deny(unsafe_code)]

fn main() {
    std::process::exit(kiln::cmd::main());
}
