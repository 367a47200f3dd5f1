//! Which GEMM kernel a kind's products run on: the matrix units, in a shape the device
//! lists for the kind's types, or the shared-memory kernel every device runs, and why.

use super::*;

/// The kernel of one kind: its shader, specialized for the device.
#[derive(Clone, Copy)]
pub(super) struct Kernel {
    pub(super) kind: MatrixKind,
    pub(super) shader: ShaderCode,
    /// Specialization constants: workgroup size and the shape M, N, K (matrix units).
    spec: [u32; 4],
    /// The matrix units' shape (M, N, K), where they run the products.
    pub(super) shape: Option<[u32; 3]>,
}

impl Kernel {
    /// The shared-memory kernel of `kind`.
    pub(super) fn shared_memory(kind: MatrixKind) -> Kernel {
        Kernel {
            kind,
            shader: kind.shader(),
            spec: [0; 4],
            shape: None,
        }
    }

    /// The kernel of `kind` on `device`: the matrix units where `allow_units` and the
    /// device has them for the kind's types, else the shared-memory kernel with the
    /// reason the units do not run it.
    pub(super) fn choose(
        kind: MatrixKind,
        device: &DeviceInfo,
        allow_units: bool,
    ) -> (Kernel, Option<String>) {
        match units(kind, device, allow_units) {
            Ok(kernel) => (kernel, None),
            Err(why) => (Kernel::shared_memory(kind), Some(why)),
        }
    }

    /// The specialization constants its pipeline is built with (none for the
    /// shared-memory kernel, whose sizes are fixed).
    pub(super) fn spec(&self) -> &[u32] {
        if self.shape.is_some() {
            &self.spec
        } else {
            &[]
        }
    }

    /// Its path as the report names it.
    pub(super) fn path(&self) -> &'static str {
        if self.shape.is_some() {
            "matrix_units"
        } else {
            "shared_memory"
        }
    }
}

/// Elements of `kind` per 32-bit word of the input buffer.
fn per_word(kind: MatrixKind) -> u32 {
    4 / kind.words_per_source_word()
}

/// Whether the matrix-unit kernel can tile a product with `shape`: whole shapes in a
/// tile's rows and columns and in the smallest K, and whole input words at every block's
/// start and row stride (the kernel reads A and B as 32-bit words).
fn fits_kernel(kind: MatrixKind, shape: &MatrixUnitShape) -> bool {
    let word = per_word(kind);
    shape.m > 0
        && shape.n > 0
        && shape.k > 0
        && TILE.is_multiple_of(shape.m)
        && TILE.is_multiple_of(shape.n)
        && MIN_EDGE.is_multiple_of(shape.k)
        && shape.k.is_multiple_of(word)
        && shape.n.is_multiple_of(word)
}

/// The matrix-unit kernel of `kind` on `device`, or why there is none.
fn units(kind: MatrixKind, device: &DeviceInfo, allow_units: bool) -> Result<Kernel, String> {
    let name = kind.name();
    let Some((shader, [a, b, c, result])) = kind.unit_kernel() else {
        let listed = device.matrix_units.shapes.iter().any(|s| s.a == "f32");
        return Err(if listed {
            format!(
                "{name}: the matrix units list an f32 shape, but kiln has no {name} kernel for them; {name} runs on the ALUs"
            )
        } else {
            format!(
                "{name}: runs on the ALUs (matrix units take narrower types: kiln drives them in fp16 and int8)"
            )
        });
    };
    if !allow_units {
        return Err(format!(
            "{name}: the matrix units are not used (path = \"shared_memory\")"
        ));
    }
    let units = &device.matrix_units;
    if !device.cooperative_matrix {
        return Err(format!(
            "{name}: the device does not offer VK_KHR_cooperative_matrix"
        ));
    }
    if let Some(why) = &units.unusable {
        return Err(format!(
            "{name}: the device offers VK_KHR_cooperative_matrix, but {why}"
        ));
    }
    if kind == MatrixKind::Int8 && !units.int8 {
        return Err(format!(
            "{name}: the device has no 8-bit integer arithmetic in shaders (shaderInt8)"
        ));
    }
    let typed: Vec<&MatrixUnitShape> = units
        .shapes
        .iter()
        .filter(|s| [&s.a, &s.b, &s.c, &s.result] == [a, b, c, result] && !s.saturating)
        .collect();
    let Some(shape) = typed
        .iter()
        .filter(|s| fits_kernel(kind, s))
        .max_by_key(|s| (s.m * s.n * s.k, s.k))
    else {
        return Err(if typed.is_empty() {
            format!("{name}: the matrix units list no {a} x {b} + {c} -> {result} shape")
        } else {
            format!(
                "{name}: no {a} x {b} + {c} -> {result} shape of the matrix units tiles a {TILE}-square tile ({})",
                typed
                    .iter()
                    .map(|s| format!("{}x{}x{}", s.m, s.n, s.k))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
    };
    let subgroup = units.subgroup_size.max(1);
    let subgroups = UNIT_SUBGROUPS
        .min(TILE / shape.m)
        .min(device.limits.max_compute_work_group_invocations / subgroup)
        .max(1);
    Ok(Kernel {
        kind,
        shader,
        spec: [subgroups * subgroup, shape.m, shape.n, shape.k],
        shape: Some([shape.m, shape.n, shape.k]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::MatrixUnits;

    fn shape(types: [&str; 4], m: u32, n: u32, k: u32) -> MatrixUnitShape {
        MatrixUnitShape {
            m,
            n,
            k,
            a: types[0].into(),
            b: types[1].into(),
            c: types[2].into(),
            result: types[3].into(),
            saturating: false,
        }
    }

    /// A device like an NVIDIA card's list: several fp16 and int8 shapes.
    fn device(shapes: Vec<MatrixUnitShape>) -> DeviceInfo {
        let mut d = DeviceInfo::for_tests(
            0,
            crate::gpu::DeviceKind::DiscreteGpu,
            0x10de,
            0x2335,
            "u",
            None,
        );
        d.limits.max_compute_work_group_invocations = 1024;
        d.cooperative_matrix = true;
        d.matrix_units = MatrixUnits {
            shapes,
            unusable: None,
            subgroup_size: 32,
            int8: true,
        };
        d
    }

    const F16: [&str; 4] = ["f16", "f16", "f32", "f32"];
    const I8: [&str; 4] = ["s8", "s8", "s32", "s32"];

    #[test]
    fn the_largest_shape_of_the_kinds_types_is_chosen() {
        let d = device(vec![
            shape(F16, 16, 8, 16),
            shape(F16, 16, 16, 16),
            shape(["f16", "f16", "f16", "f16"], 16, 16, 32),
            shape(I8, 16, 16, 32),
        ]);
        let (k, why) = Kernel::choose(MatrixKind::Fp16, &d, true);
        assert!(why.is_none(), "{why:?}");
        assert_eq!(k.shape, Some([16, 16, 16]));
        // Four subgroups of 32, each taking strips of 16 rows.
        assert_eq!(k.spec(), &[128, 16, 16, 16]);
        assert_eq!(k.path(), "matrix_units");
        let (k, _) = Kernel::choose(MatrixKind::Int8, &d, true);
        assert_eq!(k.shape, Some([16, 16, 32]));
    }

    #[test]
    fn a_kind_without_a_usable_shape_runs_on_the_alus_and_says_why() {
        let d = device(vec![shape(F16, 16, 16, 16)]);
        let (k, why) = Kernel::choose(MatrixKind::Int8, &d, true);
        assert_eq!(k.path(), "shared_memory");
        assert!(why.unwrap().contains("no s8 x s8 + s32 -> s32 shape"));
        let (k, why) = Kernel::choose(MatrixKind::Fp32, &d, true);
        assert_eq!(k.path(), "shared_memory");
        assert!(why.unwrap().starts_with("fp32:"));
        // Turned off by the profile.
        let (k, why) = Kernel::choose(MatrixKind::Fp16, &d, false);
        assert_eq!(k.path(), "shared_memory");
        assert!(why.unwrap().contains("not used"));
        // A shape that does not tile 64 (M = 48) is not used, and the reason lists it.
        let d = device(vec![shape(F16, 48, 16, 16)]);
        let (k, why) = Kernel::choose(MatrixKind::Fp16, &d, true);
        assert_eq!(k.path(), "shared_memory");
        assert!(why.unwrap().contains("48x16x16"));
        // int8 needs shaderInt8.
        let mut d = device(vec![shape(I8, 16, 16, 32)]);
        d.matrix_units.int8 = false;
        let (_, why) = Kernel::choose(MatrixKind::Int8, &d, true);
        assert!(why.unwrap().contains("shaderInt8"));
        // A device that lacks what the shaders need says so.
        let mut d = device(vec![]);
        d.matrix_units.unusable = Some("it lacks the Vulkan memory model".into());
        let (_, why) = Kernel::choose(MatrixKind::Fp16, &d, true);
        assert!(why.unwrap().contains("memory model"));
    }
}
