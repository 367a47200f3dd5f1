//! The matrix test's buffers and dispatches: where everything lies, and the GPU work of
//! a round (inputs and checksums, the product, the recomputation and the checks).

use super::*;

/// Where everything lies, in 32-bit words, for an edge: mirrors the shaders' push
/// constants. The GEMM's inputs (`ab`: A then B, in the widest kind's words), its output
/// (`c`: C, then the recomputed tiles) and the auxiliary buffer (`aux`: counters,
/// records, the packed inputs, the tile sums and the checksums).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Layout {
    pub(super) edge: u32,
    pub(super) tiles: u32,
    /// Tiles recomputed per round.
    pub(super) sampled: u32,
    /// Packed input words (A then B, four elements each).
    pub(super) source_words: u32,
    pub(super) ab_words: u32,
    pub(super) c2_base: u32,
    pub(super) c_words: u32,
    pub(super) src_base: u32,
    pub(super) sa_base: u32,
    pub(super) sb_base: u32,
    pub(super) er_base: u32,
    pub(super) ec_base: u32,
    pub(super) aux_words: u32,
}

impl Layout {
    /// The workgroup that computes `tile` in a product split into `pieces` dispatches:
    /// each takes its tiles in order (slot = tile), one per workgroup, wrapping at
    /// MAX_GROUPS.
    pub(super) fn primary_workgroup(&self, pieces: u32, tile: u32) -> u32 {
        let per = self.tiles.div_ceil(pieces.clamp(1, self.tiles));
        let first = tile / per * per;
        let groups = per.min(self.tiles - first).clamp(1, MAX_GROUPS);
        (tile - first) % groups
    }

    pub(super) fn new(edge: u32, record_capacity: u32) -> Layout {
        let tiles_edge = edge / TILE;
        let tiles = tiles_edge * tiles_edge;
        let sampled = (tiles / RECOMPUTE_ONE_IN).max(1);
        let source_words = 2 * edge * edge / 4;
        let src_base =
            (RECORDS_AT as u32 + record_capacity * RECORD_WORDS as u32).next_multiple_of(16);
        let sa_base = src_base + source_words;
        let sb_base = sa_base + tiles_edge * edge;
        let er_base = sb_base + tiles_edge * edge;
        let ec_base = er_base + edge * tiles_edge;
        Layout {
            edge,
            tiles,
            sampled,
            source_words,
            ab_words: 2 * edge * edge,
            c2_base: edge * edge,
            c_words: edge * edge + sampled * TILE_ELEMS,
            src_base,
            sa_base,
            sb_base,
            er_base,
            ec_base,
            aux_words: ec_base + tiles_edge * edge,
        }
    }

    pub(super) fn total_bytes(&self) -> u64 {
        4 * (u64::from(self.ab_words) + u64::from(self.c_words) + u64::from(self.aux_words))
    }

    /// Operations (two per multiply-add) in one product.
    pub(super) fn ops(&self) -> u64 {
        2 * u64::from(self.edge).pow(3)
    }
}

/// The buffers of one edge, bound once.
pub(super) struct Gpu<'c> {
    pub(super) ctx: &'c mut DeviceContext,
    pub(super) layout: Layout,
    /// Held for the binding.
    pub(super) _ab: GpuBuffer,
    pub(super) c: GpuBuffer,
    pub(super) aux: GpuBuffer,
    pub(super) readback: GpuBuffer,
    pub(super) set: Binding,
    /// Dispatches each product is split into.
    pub(super) pieces: u32,
    /// The seed whose checksums the buffers hold (none yet in new buffers).
    sums_of: Option<u32>,
}

/// Words of the readback buffer: the counters and records, then located elements.
pub(super) fn readback_words(record_capacity: u32) -> usize {
    RECORDS_AT + record_capacity as usize * RECORD_WORDS + LOCATE_MAX
}

/// The buffers of one layout, bound, before they are tied to their context: made with
/// the context lent, so that a caller whose attempt fails still holds it.
struct Buffers {
    ab: GpuBuffer,
    c: GpuBuffer,
    aux: GpuBuffer,
    readback: GpuBuffer,
    set: Binding,
}

impl Buffers {
    fn open(ctx: &mut DeviceContext, layout: &Layout, record_capacity: u32) -> GpuResult<Buffers> {
        let mut ab = ctx.buffer(
            BufferKind::Device,
            u64::from(layout.ab_words) * 4,
            "kiln matrix inputs",
        )?;
        let mut c = ctx.buffer(
            BufferKind::Device,
            u64::from(layout.c_words) * 4,
            "kiln matrix product",
        )?;
        let mut aux = ctx.buffer(
            BufferKind::Device,
            u64::from(layout.aux_words) * 4,
            "kiln matrix checksums",
        )?;
        let readback = ctx.buffer(
            BufferKind::Readback,
            readback_words(record_capacity) as u64 * 4,
            "kiln matrix results readback",
        )?;
        let set = ctx.bind([&mut ab, &mut c, &mut aux])?;
        Ok(Buffers {
            ab,
            c,
            aux,
            readback,
            set,
        })
    }
}

impl<'c> Gpu<'c> {
    pub(super) fn open(
        ctx: &'c mut DeviceContext,
        edge: u32,
        record_capacity: u32,
    ) -> GpuResult<Gpu<'c>> {
        let layout = Layout::new(edge, record_capacity);
        let buffers = Buffers::open(ctx, &layout, record_capacity)?;
        Ok(Gpu::of(ctx, layout, buffers))
    }

    /// These buffers freed, then those of `edge` on the same context (the old ones go
    /// first: both sizes at once may not fit); the context back where the new ones cannot
    /// be had.
    pub(super) fn reopen(
        self,
        edge: u32,
        record_capacity: u32,
    ) -> Result<Gpu<'c>, &'c mut DeviceContext> {
        let Gpu {
            ctx,
            _ab: ab,
            c,
            aux,
            readback,
            ..
        } = self;
        drop((ab, c, aux, readback));
        let layout = Layout::new(edge, record_capacity);
        match Buffers::open(ctx, &layout, record_capacity) {
            Ok(buffers) => Ok(Gpu::of(ctx, layout, buffers)),
            Err(_) => Err(ctx),
        }
    }

    fn of(ctx: &'c mut DeviceContext, layout: Layout, b: Buffers) -> Gpu<'c> {
        Gpu {
            ctx,
            layout,
            _ab: b.ab,
            c: b.c,
            aux: b.aux,
            readback: b.readback,
            set: b.set,
            pieces: 1,
            sums_of: None,
        }
    }

    /// Groups for a grid-stride dispatch over `items`.
    pub(super) fn groups(items: u64) -> u32 {
        items
            .div_ceil(u64::from(WORKGROUP))
            .clamp(1, u64::from(MAX_GROUPS)) as u32
    }

    /// The product on `kernel` of the current inputs, in `self.pieces` submissions; GPU
    /// ns.
    pub(super) fn multiply(&mut self, kernel: &Kernel) -> GpuResult<u64> {
        let kind = kernel.kind;
        let tiles = self.layout.tiles;
        let pieces = self.pieces.clamp(1, tiles);
        let per = tiles.div_ceil(pieces);
        let pipeline = self.ctx.pipeline(kernel.shader, kernel.spec())?;
        let mut ns = 0;
        let mut first = 0;
        while first < tiles {
            let count = per.min(tiles - first);
            let set = self.set;
            let l = self.layout;
            let mut rec = self.ctx.record(format!(
                "matrix {} product of {}-square matrices on the {}, tiles {first}..{}",
                kind.name(),
                l.edge,
                path_words(kernel.shape),
                first + count
            ))?;
            let push = [
                l.edge,
                l.edge,
                l.edge,
                first,
                count,
                1,
                0,
                0,
                0,
                l.source_words / 2 * kind.words_per_source_word(),
            ];
            rec.dispatch(pipeline, set, &push, count.clamp(1, MAX_GROUPS));
            ns += rec.submit_and_wait()?.best_ns();
            first += count;
        }
        Ok(ns)
    }

    /// The inputs from `seed` in `kind`'s type, and, when `fresh` (a new seed) or when
    /// these buffers do not hold the seed's checksums yet (new, larger buffers), their
    /// checksums, which every kind shares; GPU ns.
    pub(super) fn prepare(&mut self, kind: MatrixKind, seed: u32, fresh: bool) -> GpuResult<u64> {
        let fresh = fresh || self.sums_of != Some(seed);
        let l = self.layout;
        let generate = self.ctx.pipeline(GEN, &[])?;
        let sums = self.ctx.pipeline(SUMS, &[])?;
        let set = self.set;
        let mut rec = self
            .ctx
            .record(format!("matrix {} inputs and checksums", kind.name()))?;
        rec.dispatch(
            generate,
            set,
            &[l.source_words, seed, kind.code(), l.src_base],
            Self::groups(u64::from(l.source_words)),
        );
        if !fresh {
            return Ok(rec.submit_and_wait()?.best_ns());
        }
        rec.barrier();
        let tiles_edge = l.edge / TILE;
        let base = [
            l.edge, l.edge, l.edge, l.src_base, l.sa_base, l.sb_base, l.er_base, l.ec_base,
        ];
        let mut stage0 = base.to_vec();
        stage0.push(0);
        rec.dispatch(
            sums,
            set,
            &stage0,
            Self::groups(2 * u64::from(tiles_edge) * u64::from(l.edge)),
        );
        rec.barrier();
        let mut stage1 = base.to_vec();
        stage1.push(1);
        rec.dispatch(
            sums,
            set,
            &stage1,
            Self::groups(2 * u64::from(l.edge) * u64::from(tiles_edge)),
        );
        let ns = rec.submit_and_wait()?.best_ns();
        self.sums_of = Some(seed);
        Ok(ns)
    }

    /// Plants `plant`, recomputes the sampled tiles on `kernel` with the mapping (`mul`,
    /// `add`), runs both checks and copies counters and records to the host; GPU ns.
    pub(super) fn check(
        &mut self,
        kernel: &Kernel,
        (mul, add): (u32, u32),
        plant: Option<PlantedFault>,
        record_capacity: u32,
    ) -> GpuResult<u64> {
        let l = self.layout;
        let kind = kernel.kind;
        let gemm = self.ctx.pipeline(kernel.shader, kernel.spec())?;
        let check = self.ctx.pipeline(CHECK, &[])?;
        let planter = match plant {
            Some(_) => Some(self.ctx.pipeline(PLANT, &[])?),
            None => None,
        };
        let set = self.set;
        let counters_bytes = (RECORDS_AT * 4) as u64;
        let records_bytes = (RECORDS_AT + record_capacity as usize * RECORD_WORDS) as u64 * 4;
        let mut rec = self.ctx.record(format!("matrix {} checks", kind.name()))?;
        rec.fill(&self.aux, 0, counters_bytes, 0);
        if let (Some(p), Some(pipeline)) = (plant, planter) {
            rec.dispatch(
                pipeline,
                set,
                &[l.edge, p.row, p.col, p.rows, p.cols, p.xor],
                Self::groups(u64::from(p.rows) * u64::from(p.cols)),
            );
        }
        let push = [
            l.edge,
            l.edge,
            l.edge,
            0,
            l.sampled,
            mul,
            add,
            1,
            l.c2_base,
            l.source_words / 2 * kind.words_per_source_word(),
        ];
        rec.dispatch(gemm, set, &push, l.sampled.clamp(1, MAX_GROUPS));
        rec.barrier();
        let checks = |stage: u32| {
            [
                l.edge,
                l.edge,
                kind.code(),
                l.er_base,
                l.ec_base,
                stage,
                record_capacity,
                l.c2_base,
                l.sampled,
                mul,
                add,
            ]
        };
        let tiles_edge = u64::from(l.edge / TILE);
        rec.dispatch(
            check,
            set,
            &checks(0),
            Self::groups(2 * u64::from(l.edge) * tiles_edge),
        );
        rec.dispatch(
            check,
            set,
            &checks(1),
            Self::groups(u64::from(l.sampled) * u64::from(TILE_ELEMS)),
        );
        rec.barrier();
        rec.copy(&self.aux, 0, &self.readback, 0, records_bytes);
        Ok(rec.submit_and_wait()?.best_ns())
    }

    /// The output words at `places` (row, column), read back.
    pub(super) fn read_elements(
        &mut self,
        places: &[(u32, u32)],
        after: usize,
    ) -> GpuResult<Vec<u32>> {
        if places.is_empty() {
            return Ok(Vec::new());
        }
        let edge = u64::from(self.layout.edge);
        let mut rec = self.ctx.record("matrix elements to locate")?;
        for (n, &(row, col)) in places.iter().enumerate() {
            rec.copy(
                &self.c,
                (u64::from(row) * edge + u64::from(col)) * 4,
                &self.readback,
                (after + n) as u64 * 4,
                4,
            );
        }
        rec.submit_and_wait()?;
        let words = self.words()?;
        Ok(words[after..after + places.len()].to_vec())
    }

    pub(super) fn words(&self) -> GpuResult<&[u32]> {
        self.readback
            .words()
            .ok_or_else(|| GpuError::Unsupported("matrix results readback is not mapped".into()))
    }
}
