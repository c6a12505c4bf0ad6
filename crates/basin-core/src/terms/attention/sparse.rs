//! The edge-list form of energy attention: logits at each edge, log-sum-exp per query segment.

use tch::Tensor;

use super::*;

/// How the sparse form computes its per-edge scores and the gradient's two sums over edges.
/// Results do not depend on it, only speed and memory do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SparseKernels {
    /// [`SparseKernels::Bags`] when one `[E, H, Y]` tensor of the edges' gathered rows would
    /// exceed [`GATHER_BYTES`], [`SparseKernels::Gather`] otherwise.
    #[default]
    Auto,
    /// Queries and keys gathered at the edges, every head at once, in chunks of edges: the
    /// fastest on the batches of small graphs of the TU sets (the bags' `embedding_bag` backward,
    /// which libtorch computes by sorting and adding short rows one by one, is slow there), but
    /// under autograd every gathered `[E, H, Y]` chunk is kept for the backward pass (four per
    /// descent step).
    Gather,
    /// Per head, a CSR sampled matmul for the scores and a weighted `embedding_bag` per sum:
    /// nothing per edge wider than `[E, H]` is kept under autograd, and no `[E, H, Y]` rows
    /// stream through memory: the faster and smaller form on one large graph.
    Bags,
}

/// Under [`SparseKernels::Auto`], the size of one `[E, H, Y]` tensor of gathered rows above
/// which the sparse form uses [`SparseKernels::Bags`]: 64 MiB, between DD's batches (about 8
/// MiB) and one tolokers graph (266 MiB).
pub const GATHER_BYTES: i64 = 64 << 20;

impl EnergyAttention {
    /// Per-edge logits `[E, H]`, per-token queries and keys `[T, H, Y]` (T = B·N), and the
    /// unit parts in unit mode; `scale` `[E, H|1]` multiplies the scores (Â per edge).
    pub(super) fn sparse_logits(
        &self,
        g: &Tensor,
        edges: &SparseEdges,
        scale: Option<&Tensor>,
    ) -> (Tensor, Tensor, Tensor, Option<Unit>) {
        let d = g.size()[2];
        let h = self.heads();
        let (q, k, unit) = self.project_rows(&g.reshape([-1, d])); // [T, H, Y]
        let e = edges.len();
        if e == 0 {
            return (
                self.clipped(Tensor::zeros([0, h], (g.kind(), g.device()))),
                q,
                k,
                unit,
            );
        }
        let s = if self.bags(&q, edges) {
            sampled_dots(&q, &k, edges)
        } else {
            edge_dots(&q, &k, edges.query(), edges.key())
        };
        let s = match &self.head_mix {
            Some(mix) => s.matmul(mix),
            None => s,
        };
        let s = match scale {
            Some(scale) => s * scale, // ET eq. 25 per edge, as the dense form
            None => s,
        };
        (self.clipped(s), q, k, unit)
    }

    /// Row-wise log-sum-exp over each query's edges: `(lse [T, H], exp(s − max) [E, H],
    /// Σ exp(s − max) [T, H])`; queries without edges get lse 0 (and a sum of 1).
    pub(super) fn sparse_lse(&self, s: &Tensor, edges: &SparseEdges) -> (Tensor, Tensor, Tensor) {
        let t = edges.tokens();
        let h = self.heads();
        let max = Tensor::segment_reduce(
            &s.detach(),
            "max",
            None::<&Tensor>,
            None::<&Tensor>,
            Some(edges.row_ptr()),
            0,
            true,
            f64::NEG_INFINITY,
        );
        let has = edges.degree().gt(0).unsqueeze(1); // [T, 1]
        let max = max.masked_fill(&has.logical_not(), 0.0);
        let ex = (s - max.index_select(0, edges.query())).exp();
        let z = Tensor::zeros([t, h], (s.kind(), s.device())).index_add(0, edges.query(), &ex);
        let z_safe = z.where_scalarother(&has, 1.0);
        let lse = z_safe.log() + max;
        (lse, ex, z_safe)
    }

    pub(super) fn sparse_energy_from(&self, lse: &Tensor, b: i64) -> Tensor {
        self.sparse_token_energy(lse, b)
            .sum_dim_intlist(-1, false, lse.kind())
    }

    /// Each query's share `−Σ_h (1/β_h) lse_q` from per-token log-sum-exps `[B·N, H]`, as
    /// `[B, N]`.
    pub(super) fn sparse_token_energy(&self, lse: &Tensor, b: i64) -> Tensor {
        let h = self.heads();
        -(lse / self.beta().view([1, h]))
            .sum_dim_intlist(-1, false, lse.kind())
            .view([b, -1])
    }

    pub(super) fn sparse_energy_and_grad(
        &self,
        g: &Tensor,
        edges: &SparseEdges,
        scale: Option<&Tensor>,
    ) -> (Tensor, Tensor) {
        let size = g.size();
        let (b, d) = (size[0], size[2]);
        let (s, q, k, unit) = self.sparse_logits(g, edges, scale);
        let (lse, ex, z) = self.sparse_lse(&s, edges);
        drop(s); // [E, H]: not needed past the normaliser
        let energy = self.sparse_energy_from(&lse, b);
        let omega = ex / z.index_select(0, edges.query()); // [E, H]
        // The scale multiplies the scores, so it multiplies both gradient terms (as the dense
        // form's weighted sums).
        let omega = match scale {
            Some(scale) => omega * scale,
            None => omega,
        };
        // Query side: T^Q_q = Σ_{e ∈ row q} ω_e K_key(e); key side: T^K_k = Σ_{e: key(e) = k} ω_e Q_query(e).
        let (tq, tk) = if self.bags(&q, edges) {
            let (by_key, col_ptr) = edges.key_major();
            (
                head_bags(&omega, edges.key(), edges.row_ptr(), None, &k),
                head_bags(&omega, edges.query(), col_ptr, Some(by_key), &q),
            )
        } else {
            (
                head_spmm(&omega, edges.query(), edges.key(), &k),
                head_spmm(&omega, edges.key(), edges.query(), &q),
            )
        };
        let grad = self
            .back_project_rows(&tq, &tk, unit.as_ref())
            .view([b, -1, d]);
        (energy, grad)
    }
}

/// Per-edge, per-head dot products `s[e, h] = q[query(e), h] · k[key(e), h]` (an SDDMM) for
/// `q, k: [T, H, Y]` → `[E, H]`: both gathered at the edges, multiplied and summed over the head
/// width, in chunks of [`SPMM_CHUNK_EDGES`] ([`SparseKernels::Gather`]; [`sampled_dots`] for
/// large graphs).
pub(super) fn edge_dots(q: &Tensor, k: &Tensor, query: &Tensor, key: &Tensor) -> Tensor {
    let e = query.size()[0];
    let out = Tensor::zeros([e, q.size()[1]], (q.kind(), q.device()));
    let mut start = 0;
    while start < e {
        let len = SPMM_CHUNK_EDGES.min(e - start);
        let (qi, ki) = (query.narrow(0, start, len), key.narrow(0, start, len));
        let dots =
            (q.index_select(0, &qi) * k.index_select(0, &ki)).sum_dim_intlist(-1, false, q.kind());
        // In place into a fresh tensor's rows: autograd records it, nothing is concatenated.
        out.narrow(0, start, len).copy_(&dots);
        start += len;
    }
    out
}

/// [`edge_dots`] by one CSR sampled matmul (SDDMM) per head over the query-major pattern, for
/// [`SparseKernels::Bags`]: libtorch differentiates it with respect to Q and K by sparse ×
/// dense products, so training keeps no `[E, H, Y]` activations.
pub(super) fn sampled_dots(q: &Tensor, k: &Tensor, edges: &SparseEdges) -> Tensor {
    let t = edges.tokens();
    let zeros = Tensor::zeros([edges.len()], (q.kind(), q.device()));
    let pattern = Tensor::sparse_csr_tensor_crow_col_value_size(
        edges.row_ptr(),
        edges.key(),
        &zeros,
        [t, t],
        (q.kind(), q.device()),
    );
    let heads: Vec<Tensor> = (0..q.size()[1])
        .map(|head| {
            pattern
                .sparse_sampled_addmm(
                    &q.select(1, head).contiguous(),
                    &k.select(1, head).tr().contiguous(),
                )
                .values()
        })
        .collect();
    Tensor::stack(&heads, 1)
}

/// [`head_spmm`] as one weighted `embedding_bag` per head (a sum over each row's bag of
/// columns), for [`SparseKernels::Bags`]: `cols` are the columns in the order whose CSR
/// offsets are `ptr`, `perm` the permutation from the query-major edge order to it (`None`:
/// the same order). libtorch differentiates it with respect to the weights and `x` without
/// keeping per-edge messages.
pub(super) fn head_bags(
    w: &Tensor,
    cols: &Tensor,
    ptr: &Tensor,
    perm: Option<&Tensor>,
    x: &Tensor,
) -> Tensor {
    let sorted = |v: &Tensor| match perm {
        Some(p) => v.index_select(0, p),
        None => v.shallow_clone(),
    };
    let cols = sorted(cols);
    let heads: Vec<Tensor> = (0..w.size()[1])
        .map(|head| {
            let weights = sorted(&w.select(1, head)).contiguous();
            let (out, _, _, _) = Tensor::embedding_bag(
                &x.select(1, head).contiguous(),
                &cols,
                ptr,
                false,
                0, // sum
                false,
                Some(&weights),
                true,
            );
            out
        })
        .collect();
    Tensor::stack(&heads, 1)
}

/// Edges per chunk of [`edge_dots`] and [`head_spmm`]: their `[chunk, H, Y]` gathers (8 MiB at
/// H·Y = 32 in float32) stay near the caches instead of streaming through memory. Measured on one
/// CPU thread, 10⁴–10⁶ nodes × 16 edges: 2–4× faster than chunks of 2²⁰ edges, 2²⁰ being no
/// faster than 2¹⁸.
pub(super) const SPMM_CHUNK_EDGES: i64 = 1 << 16;

/// Per-head sparse × dense product: `out[r, h] = Σ_{e: row(e) = r} w[e, h] · x[col(e), h]` for
/// `w: [E, H]`, `x: [T, H, Y]` → `[T, H, Y]`, by gathering `x` at the columns, weighting and
/// adding into the rows, every head at once.
///
/// Its backward is the same two index operations the other way round. The messages kept for
/// training are `[E, H, Y]` ([`SparseKernels::Gather`]; [`head_bags`] keeps none, for large
/// graphs).
pub(super) fn head_spmm(w: &Tensor, row: &Tensor, col: &Tensor, x: &Tensor) -> Tensor {
    let e = w.size()[0];
    let out = x.zeros_like();
    let mut start = 0;
    while start < e {
        let len = SPMM_CHUNK_EDGES.min(e - start);
        let (w, row, col) = (
            w.narrow(0, start, len),
            row.narrow(0, start, len),
            col.narrow(0, start, len),
        );
        let messages = x.index_select(0, &col) * w.unsqueeze(-1);
        // In place on a fresh tensor: autograd records it (no chunk copies `out`).
        let _ = out.shallow_clone().index_add_(0, &row, &messages);
        start += len;
    }
    out
}
