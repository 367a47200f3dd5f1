//! Whether a shared library loads: how the inventory tells an installed Vulkan driver from
//! one whose library is missing, of the wrong architecture or missing its own dependencies.

use std::path::Path;

/// Tries to load the shared library at `path` (a bare name is searched the way the dynamic
/// loader searches); on failure returns the loader's own message.
pub fn library_loads(path: &Path) -> Result<(), String> {
    // SAFETY: loading runs the library's initialisers, which is the only hazard here. The
    // libraries checked are the Vulkan drivers named by ICD manifests, which the Vulkan loader
    // maps into this very process when it starts; no symbol is looked up or called.
    let library = unsafe { libloading::Library::new(path) };
    match library {
        Ok(library) => {
            // Kept mapped rather than closed: vendor drivers are least tested at unload time,
            // and the Vulkan loader maps the same library again anyway.
            std::mem::forget(library);
            Ok(())
        }
        Err(e) => Err(e.to_string()),
    }
}
