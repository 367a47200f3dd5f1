//! Compiles `shaders/*.comp` to SPIR-V with `glslc` when it is installed; otherwise uses
//! the committed `.spv` beside each source, so a machine without shader tools still builds.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let shader_dir = Path::new("shaders");
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    println!("cargo:rerun-if-changed=shaders");
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
            "cargo:warning=glslc not found: using the committed SPIR-V in shaders/ \
             (install glslc to rebuild shaders from source)"
        );
    }
    for source in &sources {
        let stem = source.file_stem().expect("a .comp file has a stem");
        let committed = source.with_extension("spv");
        let built = out_dir.join(stem).with_extension("spv");
        if have_glslc {
            let output = Command::new("glslc")
                .args(&args)
                .arg(source)
                .arg("-o")
                .arg(&built)
                .output()
                .expect("glslc ran a moment ago");
            if !output.status.success() {
                panic!(
                    "glslc failed on {}:\n{}",
                    source.display(),
                    String::from_utf8_lossy(&output.stderr)
                );
            }
        } else {
            std::fs::copy(&committed, &built).unwrap_or_else(|e| {
                panic!("no glslc and no committed {}: {e}", committed.display())
            });
        }
    }
}
