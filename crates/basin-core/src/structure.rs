//! Which tokens interact: the attention pattern handed to every energy term.
//!
//! A [`Structure`] combines
//! - an [`Interaction`]: all pairs, a dense boolean mask `[B, N, N]`, an additive per-head
//!   bias `[B, H, N, N]`, or a sparse edge list ([`SparseEdges`], CSR) for neighbour attention on
//!   graphs far too large for a dense `N × N` pattern;
//! - an optional padding mask `[B, N]` (`true` = real token): padded tokens are neither queries
//!   nor keys and carry no energy, so they leave real tokens' energies and gradients unchanged;
//! - whether a token may attend to itself. ET eq. 3 sums over B ≠ C (the default, `false`);
//!   the public image code keeps the diagonal (`true`).
//!
//! Index convention: `mask[b, q, k]` says that query token `q` may attend key token `k`, i.e.
//! that the log-sum-exp of query `q` (ET eq. 3, index C) runs over `k` (index B).

use std::cell::OnceCell;

use tch::{Device, Kind, Tensor};

use crate::error::{CoreError, Result};

/// The pattern of allowed (query, key) pairs.
#[derive(Debug)]
pub enum Interaction {
    /// Every token may attend every other token.
    Full,
    /// `[B, N, N]` bool (`B` may be 1 to broadcast): `mask[b, q, k]` allows query `q` to attend `k`.
    Mask(Tensor),
    /// `[B, H, N, N]` float added to the β-scaled logits of head `h` (`B` and `H` may be 1);
    /// `-inf` entries are not allowed pairs.
    Bias(Tensor),
    /// A sparse edge list over the flattened `B·N` tokens.
    Sparse(SparseEdges),
}

/// A sparse attention pattern over `tokens` flattened tokens (`B·N`, batches laid end to end),
/// stored query-major (CSR: sorted by query, then key) for the per-query softmax; the
/// key-major order is computed on first use ([`SparseEdges::key_major`]).
#[derive(Debug)]
pub struct SparseEdges {
    query: Tensor,
    key: Tensor,
    row_ptr: Tensor,
    tokens: i64,
    key_major: OnceCell<(Tensor, Tensor)>,
}

impl SparseEdges {
    /// Edges from explicit (query, key) pairs; both `[E]` int64 in `0..tokens`.
    /// Duplicate pairs are kept (a multigraph counts each copy in the softmax).
    pub fn new(query: &Tensor, key: &Tensor, tokens: i64) -> Result<Self> {
        for (name, t) in [("query", query), ("key", key)] {
            let int64 = t.kind() == Kind::Int64;
            check_tensor(name, t, (1, int64), "a 1-d int64 tensor of token indices")?;
        }
        if query.size() != key.size() {
            return Err(CoreError::tensor(
                "key",
                format!("as many entries as `query` ({})", query.size()[0]),
                format!("{}", key.size()[0]),
            ));
        }
        if tokens < 0 {
            return Err(CoreError::tensor(
                "tokens",
                "a non-negative count",
                tokens.to_string(),
            ));
        }
        for (name, t) in [("query", query), ("key", key)] {
            if t.numel() > 0 {
                let (lo, hi) = (t.min().int64_value(&[]), t.max().int64_value(&[]));
                if lo < 0 || hi >= tokens {
                    return Err(CoreError::tensor(
                        name,
                        format!("indices in 0..{tokens}"),
                        format!("indices in {lo}..={hi}"),
                    ));
                }
            }
        }
        Ok(Self::sorted(
            query.shallow_clone(),
            key.shallow_clone(),
            tokens,
        ))
    }

    /// Edges from a PyG-style `edge_index` `[2, E]`: row 0 = source, row 1 = target. Messages
    /// flow source → target, so the target is the query and the source its key.
    pub fn from_edge_index(edge_index: &Tensor, tokens: i64) -> Result<Self> {
        if edge_index.dim() != 2 || edge_index.size()[0] != 2 {
            return Err(CoreError::tensor(
                "edge_index",
                "shape [2, E]",
                format!("{:?}", edge_index.size()),
            ));
        }
        Self::new(&edge_index.get(1), &edge_index.get(0), tokens)
    }

    fn sorted(query: Tensor, key: Tensor, tokens: i64) -> Self {
        let order = &query * tokens + &key;
        let e = order.size()[0];
        // Edge lists read off a mask (`nonzero`) come in this order already: one pass, no sort.
        let in_order = e < 2
            || order
                .narrow(0, 1, e - 1)
                .ge_tensor(&order.narrow(0, 0, e - 1))
                .all()
                .int64_value(&[])
                != 0;
        let (query, key) = if in_order {
            (query, key)
        } else {
            let order = order.argsort(0, false);
            (query.index_select(0, &order), key.index_select(0, &order))
        };
        let row_ptr = offsets(&query, tokens);
        Self {
            query,
            key,
            row_ptr,
            tokens,
            key_major: OnceCell::new(),
        }
    }

    /// Query index of each edge, `[E]`, ascending.
    pub fn query(&self) -> &Tensor {
        &self.query
    }
    /// Key index of each edge, `[E]`.
    pub fn key(&self) -> &Tensor {
        &self.key
    }
    /// CSR offsets of the query-major order, `[tokens + 1]`.
    pub fn row_ptr(&self) -> &Tensor {
        &self.row_ptr
    }
    /// The key-major order, computed on first use: the permutation that sorts the edges by
    /// key (then query), `[E]`, and the CSR offsets of that order, `[tokens + 1]` (for the
    /// attention gradient's key-side sum as one bag per key).
    pub fn key_major(&self) -> (&Tensor, &Tensor) {
        let (by_key, col_ptr) = self.key_major.get_or_init(|| {
            let by_key = (&self.key * self.tokens + &self.query).argsort(0, false);
            let col_ptr = offsets(&self.key.index_select(0, &by_key), self.tokens);
            (by_key, col_ptr)
        });
        (by_key, col_ptr)
    }
    /// Number of keys of each query, `[tokens]`.
    pub fn degree(&self) -> Tensor {
        self.row_ptr.narrow(0, 1, self.tokens) - self.row_ptr.narrow(0, 0, self.tokens)
    }
    /// Number of (flattened) tokens the indices address.
    pub fn tokens(&self) -> i64 {
        self.tokens
    }
    /// Number of edges.
    pub fn len(&self) -> i64 {
        self.query.size()[0]
    }
    /// Whether there are no edges.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// A second handle on the same tensors (no copy).
    pub fn shallow_clone(&self) -> Self {
        Self {
            query: self.query.shallow_clone(),
            key: self.key.shallow_clone(),
            row_ptr: self.row_ptr.shallow_clone(),
            tokens: self.tokens,
            key_major: OnceCell::new(),
        }
    }

    /// The same edges on another device.
    pub fn to_device(&self, device: Device) -> Self {
        Self {
            query: self.query.to_device(device),
            key: self.key.to_device(device),
            row_ptr: self.row_ptr.to_device(device),
            tokens: self.tokens,
            key_major: OnceCell::new(),
        }
    }

    /// Drops the diagonal, drops edges touching padded tokens, then (if `self_attention`) adds
    /// one self edge per real token.
    fn normalised(&self, valid: Option<&Tensor>, self_attention: bool) -> Self {
        let mut keep = self.query.ne_tensor(&self.key);
        if let Some(valid) = valid {
            keep = keep
                .logical_and(&valid.index_select(0, &self.query))
                .logical_and(&valid.index_select(0, &self.key));
        }
        let (mut q, mut k) = (
            self.query.masked_select(&keep),
            self.key.masked_select(&keep),
        );
        if self_attention {
            let all = Tensor::arange(self.tokens, (Kind::Int64, self.query.device()));
            let diag = match valid {
                Some(valid) => all.masked_select(valid),
                None => all,
            };
            q = Tensor::cat(&[q, diag.shallow_clone()], 0);
            k = Tensor::cat(&[k, diag], 0);
        }
        Self::sorted(q, k, self.tokens)
    }
}

/// CSR offsets `[tokens + 1]` of a sorted index vector.
fn offsets(sorted: &Tensor, tokens: i64) -> Tensor {
    let counts = sorted.bincount::<Tensor>(None, tokens);
    let zero = Tensor::zeros([1], (Kind::Int64, sorted.device()));
    Tensor::cat(&[zero, counts.cumsum(0, Kind::Int64)], 0)
}

/// Which tokens interact, plus padding and the self-attention switch. See the module docs.
#[derive(Debug)]
pub struct Structure {
    interaction: Interaction,
    padding: Option<Tensor>,
    self_attention: bool,
    /// `[B|1, H|1, N, N]` multiplicative factor on the attention scores (ET eq. 25's Â).
    scale: Option<Tensor>,
    /// `[E, H|1]` the same factor per edge of a sparse pattern, in [`Self::sparse_edges`] order.
    edge_scale: Option<Tensor>,
    /// The sparse pattern after padding and the diagonal rule were applied.
    sparse: Option<SparseEdges>,
    /// `[B, N, D]` the normalised input of the descent, `LN(x₀)`, for terms that drive the state
    /// toward it ([`crate::Energy::uses_input`]); set by the block, with its graph.
    input: Option<Tensor>,
    dense: OnceCell<DenseLayout>,
}

/// The effective dense pattern, computed once per structure.
#[derive(Debug)]
pub(crate) struct DenseLayout {
    /// Token count and device the layout was built for.
    key: (i64, Device),
    /// Whether the only blocked pairs are the diagonal (then `blocked` is `None`).
    pub diagonal_only: bool,
    /// `[B|1, H|1, N, N]` bool, `true` for pairs that may NOT interact; `None` when all may
    /// (or when only the diagonal is blocked).
    pub blocked: Option<Tensor>,
    /// `[B|1, H|1, N, N]` finite additive bias, or `None`.
    pub bias: Option<Tensor>,
    /// `[B|1, H|1, N]` bool, true where the query has at least one key, or `None` when all do.
    pub has_keys: Option<Tensor>,
}

/// A dense layout, cached in the structure or built for a one-off use.
pub(crate) enum LayoutRef<'a> {
    Cached(&'a DenseLayout),
    Fresh(Box<DenseLayout>),
}

impl std::ops::Deref for LayoutRef<'_> {
    type Target = DenseLayout;
    fn deref(&self) -> &DenseLayout {
        match self {
            Self::Cached(l) => l,
            Self::Fresh(l) => l,
        }
    }
}

impl Structure {
    fn with_interaction(interaction: Interaction) -> Self {
        let mut s = Self {
            interaction,
            padding: None,
            self_attention: false,
            scale: None,
            edge_scale: None,
            sparse: None,
            input: None,
            dense: OnceCell::new(),
        };
        s.refresh();
        s
    }

    /// Every token attends every other token (not itself unless [`Self::with_self_attention`]).
    pub fn full() -> Self {
        Self::with_interaction(Interaction::Full)
    }

    /// A dense boolean mask `[B, N, N]` (`mask[b, q, k]`: query `q` may attend `k`).
    pub fn mask(mask: Tensor) -> Result<Self> {
        let is_bool = mask.kind() == Kind::Bool;
        check_tensor(
            "mask",
            &mask,
            (3, is_bool),
            "a bool tensor of shape [B, N, N]",
        )?;
        Ok(Self::with_interaction(Interaction::Mask(mask)))
    }

    /// An additive per-head bias `[B, H, N, N]` on the β-scaled logits; `-inf` masks a pair.
    pub fn bias(bias: Tensor) -> Result<Self> {
        let float = bias.is_floating_point();
        check_tensor(
            "bias",
            &bias,
            (4, float),
            "a float tensor of shape [B, H, N, N]",
        )?;
        Ok(Self::with_interaction(Interaction::Bias(bias)))
    }

    /// Multiplies each head's attention scores `K·Q` by a per-pair factor `[B, H, N, N]`
    /// (`B`, `H` may be 1) before β and the log-sum-exp: the parameterised adjacency Â of ET
    /// eq. 24–25 (graph classification). Dense structures only; combine with a mask to keep
    /// non-edges out, as eq. 25 says.
    pub fn with_scale(mut self, scale: Tensor) -> Result<Self> {
        let float = scale.is_floating_point();
        check_tensor(
            "scale",
            &scale,
            (4, float),
            "a float tensor of shape [B, H, N, N]",
        )?;
        if self.sparse.is_some() {
            return Err(CoreError::tensor(
                "scale",
                "a dense structure (full, mask or bias)",
                "a sparse edge list",
            ));
        }
        self.scale = Some(scale);
        self.refresh();
        Ok(self)
    }

    /// The multiplicative factor on the attention scores, if any.
    pub fn scale(&self) -> Option<&Tensor> {
        self.scale.as_ref()
    }

    /// The sparse form of [`Self::with_scale`]: multiplies each head's score of each edge of
    /// the effective pattern by `scale[e, h]` (`[E, H]`, or `[E, 1]` for every head), edges in
    /// the order of [`Self::sparse_edges`] (query-major, after padding and the diagonal rule).
    /// Read the edges from the structure, compute their factors, then attach them: set padding
    /// and self-attention first, since they change the edges ([`Self::check`] refuses factors
    /// whose count no longer matches).
    pub fn with_edge_scale(mut self, scale: Tensor) -> Result<Self> {
        let Some(edges) = &self.sparse else {
            return Err(CoreError::tensor(
                "edge_scale",
                "a sparse structure (an edge list)",
                "a dense structure; use with_scale",
            ));
        };
        let rows = scale.size().first() == Some(&edges.len());
        let expected = format!(
            "a float tensor of shape [{}, H] (one row per effective edge)",
            edges.len()
        );
        check_tensor(
            "edge_scale",
            &scale,
            (2, scale.is_floating_point() && rows),
            &expected,
        )?;
        self.edge_scale = Some(scale);
        Ok(self)
    }

    /// The per-edge factor on the attention scores of a sparse pattern, if any.
    pub fn edge_scale(&self) -> Option<&Tensor> {
        self.edge_scale.as_ref()
    }

    /// A sparse edge list over the flattened `B·N` tokens.
    pub fn sparse(edges: SparseEdges) -> Self {
        Self::with_interaction(Interaction::Sparse(edges))
    }

    /// Marks real tokens: `padding` is `[B, N]` bool, `true` for real tokens.
    pub fn with_padding(mut self, padding: Tensor) -> Result<Self> {
        let is_bool = padding.kind() == Kind::Bool;
        let expected = "a bool tensor of shape [B, N] (true = real token)";
        check_tensor("padding", &padding, (2, is_bool), expected)?;
        if let Interaction::Sparse(e) = &self.interaction
            && padding.numel() as i64 != e.tokens
        {
            return Err(CoreError::tensor(
                "padding",
                format!("B·N = {} entries, one per token of the edge list", e.tokens),
                format!("{:?}", padding.size()),
            ));
        }
        if self.edge_scale.is_some() {
            return Err(CoreError::tensor(
                "padding",
                "padding set before the per-edge scale (it changes the edges)",
                "a structure that already has one",
            ));
        }
        self.padding = Some(padding);
        self.refresh();
        Ok(self)
    }

    /// Whether a token may attend to itself (ET eq. 3 excludes it: `false`, the default).
    pub fn with_self_attention(mut self, allowed: bool) -> Self {
        self.self_attention = allowed;
        self.refresh();
        self
    }

    fn refresh(&mut self) {
        self.dense = OnceCell::new();
        self.sparse = match &self.interaction {
            Interaction::Sparse(e) => {
                let valid = self.padding.as_ref().map(|p| p.reshape([-1]));
                Some(e.normalised(valid.as_ref(), self.self_attention))
            }
            _ => None,
        };
    }

    /// A second handle on the same tensors (no copy; caches rebuilt on first use), e.g. for a
    /// backward pass that runs after the forward's structure was dropped.
    pub fn shallow_clone(&self) -> Self {
        let interaction = match &self.interaction {
            Interaction::Full => Interaction::Full,
            Interaction::Mask(m) => Interaction::Mask(m.shallow_clone()),
            Interaction::Bias(b) => Interaction::Bias(b.shallow_clone()),
            Interaction::Sparse(e) => Interaction::Sparse(e.shallow_clone()),
        };
        Self {
            interaction,
            padding: self.padding.as_ref().map(Tensor::shallow_clone),
            self_attention: self.self_attention,
            scale: self.scale.as_ref().map(Tensor::shallow_clone),
            edge_scale: self.edge_scale.as_ref().map(Tensor::shallow_clone),
            sparse: self.sparse.as_ref().map(SparseEdges::shallow_clone),
            input: self.input.as_ref().map(Tensor::shallow_clone),
            dense: OnceCell::new(),
        }
    }

    /// The same structure carrying the descent's normalised input `LN(x₀)` `[B, N, D]` (its
    /// graph kept, so that gradients reach `x₀` through the terms that read it).
    pub fn with_input(mut self, input: Tensor) -> Self {
        self.input = Some(input);
        self
    }

    /// The descent's normalised input, where the block set it ([`Self::with_input`]).
    pub fn input(&self) -> Option<&Tensor> {
        self.input.as_ref()
    }

    /// The interaction as given (before padding and the diagonal rule).
    pub fn interaction(&self) -> &Interaction {
        &self.interaction
    }
    /// Padding mask `[B, N]` (`true` = real token), if any.
    pub fn padding(&self) -> Option<&Tensor> {
        self.padding.as_ref()
    }
    /// Whether tokens attend to themselves.
    pub fn self_attention(&self) -> bool {
        self.self_attention
    }
    /// The effective sparse pattern (padding and the diagonal rule applied), for sparse structures.
    pub fn sparse_edges(&self) -> Option<&SparseEdges> {
        self.sparse.as_ref()
    }
    /// Whether the pattern is a sparse edge list.
    pub fn is_sparse(&self) -> bool {
        self.sparse.is_some()
    }

    /// `[B, N]` float, 1 for real tokens, or `None` without padding.
    pub fn token_weights(&self, kind: Kind) -> Option<Tensor> {
        self.padding.as_ref().map(|p| p.to_kind(kind))
    }

    /// Checks that the structure fits tokens `g: [B, N, D]` and (for a bias) `heads` heads.
    pub fn check(&self, b: i64, n: i64, heads: Option<i64>) -> Result<()> {
        let fits = |dim: i64, want: i64| dim == want || dim == 1;
        if let Some(p) = &self.padding
            && p.size() != [b, n]
        {
            return Err(CoreError::tensor(
                "padding",
                format!("shape [{b}, {n}]"),
                format!("{:?}", p.size()),
            ));
        }
        if let Some(t) = &self.scale {
            let sz = t.size();
            let h_ok = heads.is_none_or(|h| fits(sz[1], h));
            if !(fits(sz[0], b) && h_ok && sz[2] == n && sz[3] == n) {
                let h = heads.map_or("H".to_owned(), |h| h.to_string());
                return Err(CoreError::tensor(
                    "scale",
                    format!("shape [{b}, {h}, {n}, {n}]"),
                    format!("{sz:?}"),
                ));
            }
        }
        if let (Some(t), Some(e)) = (&self.edge_scale, &self.sparse) {
            let sz = t.size();
            let h_ok = heads.is_none_or(|h| sz[1] == h || sz[1] == 1);
            if sz[0] != e.len() || !h_ok {
                let h = heads.map_or("H".to_owned(), |h| h.to_string());
                return Err(CoreError::tensor(
                    "edge_scale",
                    format!("shape [{}, {h}] (one row per effective edge)", e.len()),
                    format!("{sz:?}"),
                ));
            }
        }
        match &self.interaction {
            Interaction::Full => Ok(()),
            Interaction::Mask(m) => {
                let s = m.size();
                if fits(s[0], b) && s[1] == n && s[2] == n {
                    Ok(())
                } else {
                    Err(CoreError::tensor(
                        "mask",
                        format!("shape [{b}, {n}, {n}]"),
                        format!("{s:?}"),
                    ))
                }
            }
            Interaction::Bias(t) => {
                let s = t.size();
                let h_ok = heads.is_none_or(|h| fits(s[1], h));
                if fits(s[0], b) && h_ok && s[2] == n && s[3] == n {
                    Ok(())
                } else {
                    let h = heads.map_or("H".to_owned(), |h| h.to_string());
                    Err(CoreError::tensor(
                        "bias",
                        format!("shape [{b}, {h}, {n}, {n}]"),
                        format!("{s:?}"),
                    ))
                }
            }
            Interaction::Sparse(e) => {
                if e.tokens == b * n {
                    Ok(())
                } else {
                    Err(CoreError::tensor(
                        "edge_index",
                        format!("indices over B·N = {} tokens", b * n),
                        format!("an edge list over {} tokens", e.tokens),
                    ))
                }
            }
        }
    }

    /// The effective dense pattern for `N` tokens (padding and the diagonal rule applied).
    ///
    /// # Panics
    /// On a sparse structure (a programming error: sparse terms use [`Self::sparse_edges`]).
    pub(crate) fn dense_layout(&self, n: i64, device: Device) -> LayoutRef<'_> {
        let cached = self.dense.get_or_init(|| self.build_dense(n, device));
        if cached.key == (n, device) {
            LayoutRef::Cached(cached)
        } else {
            // Used with other tokens than the first time (another device): build afresh.
            LayoutRef::Fresh(Box::new(self.build_dense(n, device)))
        }
    }

    fn build_dense(&self, n: i64, device: Device) -> DenseLayout {
        let (mut allowed, bias) = match &self.interaction {
            Interaction::Full => (None, None),
            Interaction::Mask(m) => (Some(m.to_device(device).unsqueeze(1)), None),
            Interaction::Bias(t) => {
                let t = t.to_device(device);
                let finite = t.isfinite();
                (
                    Some(finite.shallow_clone()),
                    Some(t.masked_fill(&finite.logical_not(), 0.0)),
                )
            }
            Interaction::Sparse(_) => {
                panic!("Structure::dense_layout called on a sparse structure")
            }
        };
        let eye = Tensor::eye(n, (Kind::Bool, device)).view([1, 1, n, n]);
        allowed = Some(match (allowed, self.self_attention) {
            (None, true) => Tensor::ones([1, 1, n, n], (Kind::Bool, device)),
            (None, false) => eye.logical_not(),
            (Some(a), true) => a.logical_or(&eye),
            (Some(a), false) => a.logical_and(&eye.logical_not()),
        });
        if let Some(p) = &self.padding {
            let p = p.to_device(device);
            let pair = p.view([-1, 1, n, 1]).logical_and(&p.view([-1, 1, 1, n]));
            allowed = allowed.map(|a| a.logical_and(&pair));
        }
        // With self-attention, no padding and no mask/bias, every pair is allowed.
        if self.self_attention
            && self.padding.is_none()
            && matches!(self.interaction, Interaction::Full)
        {
            allowed = None;
        }
        let has_keys = allowed.as_ref().and_then(|a| {
            let has = a.any_dim(-1, false);
            if has.all().int64_value(&[]) == 1 {
                None
            } else {
                Some(has)
            }
        });
        // The paper's default (all pairs but the diagonal, no padding) needs no mask tensor: the
        // diagonal of the logits is filled in place, N entries per head instead of N².
        let diagonal_only = !self.self_attention
            && self.padding.is_none()
            && matches!(self.interaction, Interaction::Full);
        let blocked = if diagonal_only {
            None
        } else {
            allowed.map(|a| a.logical_not())
        };
        DenseLayout {
            key: (n, device),
            diagonal_only,
            blocked,
            bias,
            has_keys,
        }
    }
}

/// `Ok` when `t` has `dims` dimensions and `kind_ok` (its element type, and any other
/// condition, holds); else an error naming `field`, what was `expected`, and `t`'s kind and shape.
fn check_tensor(
    field: &str,
    t: &Tensor,
    (dims, kind_ok): (usize, bool),
    expected: &str,
) -> Result<()> {
    if t.dim() == dims && kind_ok {
        return Ok(());
    }
    Err(CoreError::tensor(
        field,
        expected,
        format!("{:?} {:?}", t.kind(), t.size()),
    ))
}
