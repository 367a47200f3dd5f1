//! Compiles `shaders/*.comp` to SPIR-V with `glslc` when it is installed; otherwise uses
//! the committed `.spv` in shaders/spirv/ for each source, so a machine without shader tools still builds.
//!
//! Shaders for the matrix units (`GL_KHR_cooperative_matrix`) need a newer compiler than
//! the glslc Debian and Ubuntu ship: they are compiled with the glslangValidator that
//! `KILN_GLSLANG` names (flags in `shaders/glslang.args`), and otherwise taken from the
//! committed `.spv`, which `tests/tools.rs` checks against its source with that compiler.
//!
//! It also names the commit kiln is built from (`KILN_COMMIT`, for `kiln --version`): the
//! environment's `KILN_COMMIT` where set (a build from a source archive, a container build
//! given it), else git's HEAD, else `unknown` (no git, or not a checkout).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    commit();
    let shader_dir = Path::new("shaders");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=shaders");
    println!("cargo:rerun-if-env-changed=KILN_GLSLANG");
    let glslang = std::env::var_os("KILN_GLSLANG").map(PathBuf::from);
    let glslang_args: Vec<String> = std::fs::read_to_string(shader_dir.join("glslang.args"))
        .expect("shaders/glslang.args is part of the source tree")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let args: Vec<String> = std::fs::read_to_string(shader_dir.join("glslc.args"))
        .expect("shaders/glslc.args is part of the source tree")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let mut sources: Vec<PathBuf> = std::fs::read_dir(shader_dir)
        .expect("shaders/ is part of the source tree")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "comp"))
        .collect();
    sources.sort();
    let have_glslc = Command::new("glslc").arg("--version").output().is_ok();
    if !have_glslc {
        println!(
            "cargo:warning=glslc not found: using the committed SPIR-V in shaders/spirv/ \
             (install glslc to rebuild shaders from source)"
        );
    }
    for source in &sources {
        let stem = source.file_stem().expect("a .comp file has a stem");
        let committed = shader_dir.join("spirv").join(stem).with_extension("spv");
        let built = out_dir.join(stem).with_extension("spv");
        let text = std::fs::read_to_string(source).expect("a shader source is readable");
        let (compiler, flags) = if text.contains("GL_KHR_cooperative_matrix") {
            (glslang.as_deref(), &glslang_args)
        } else {
            (have_glslc.then_some(Path::new("glslc")), &args)
        };
        if let Some(compiler) = compiler {
            let output = Command::new(compiler)
                .args(flags)
                .arg(source)
                .arg("-o")
                .arg(&built)
                .output()
                .unwrap_or_else(|e| panic!("{} does not run: {e}", compiler.display()));
            if !output.status.success() {
                panic!(
                    "{} failed on {}:\n{}{}",
                    compiler.display(),
                    source.display(),
                    String::from_utf8_lossy(&output.stdout),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        } else {
            std::fs::copy(&committed, &built).unwrap_or_else(|e| {
                panic!("no compiler and no committed {}: {e}", committed.display())
            });
        }
    }
}

/// Sets `KILN_COMMIT` for the crate: the commit the sources are checked out at.
fn commit() {
    println!("cargo:rerun-if-env-changed=KILN_COMMIT");
    let given = std::env::var("KILN_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty());
    let commit = given.or_else(|| {
        // Rebuilt when HEAD moves: HEAD itself (a checkout), the branch it names (a
        // commit), and the packed refs (where git may keep that branch instead).
        for path in ["HEAD", "packed-refs"] {
            watch(git(&["rev-parse", "--git-path", path]));
        }
        if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
            watch(git(&["rev-parse", "--git-path", &branch]));
        }
        git(&["rev-parse", "--short=12", "HEAD"])
    });
    println!(
        "cargo:rustc-env=KILN_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
}

/// What git answers, trimmed; None where git is missing, fails, or says nothing.
fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// Reruns the build script when this file changes; a path that does not exist is not
/// named (cargo would rerun the script on every build).
fn watch(path: Option<String>) {
    if let Some(path) = path.filter(|p| Path::new(p).exists()) {
        println!("cargo:rerun-if-changed={path}");
    }
}
