//! The attention structure of a batch: the non-edge mask of ET eq. 25 and the parameterised
//! adjacency `Â = Conv2D(X ⊗ X) ⊙ A′` of eq. 24, dense per pair or at each edge only.

use basin_core::Structure;
use tch::nn::Module;
use tch::{Kind, Tensor};

use super::*;
use crate::{Result, TaskError};

impl GraphClassifier {
    /// The tokens X ⊗ X is taken of: the initial tokens with padding zeroed (the kernel would
    /// otherwise carry padded tokens into the real pairs at a graph's border, and a graph's
    /// output would depend on its batch; zeros are what the convolution's own padding sees),
    /// over their norms with [`Gram::Cosine`].
    fn gram_tokens(&self, x: &Tensor, padding: &Tensor) -> Tensor {
        let xr = x * padding.to_kind(x.kind()).unsqueeze(-1);
        match self.cfg.gram {
            Gram::Dot => xr,
            Gram::Cosine => {
                let norm = xr.norm_scalaropt_dim(2.0, [-1], true).clamp_min(1e-12);
                xr / norm
            }
        }
    }

    /// What A′ projects (eq. 24's text), `[B, N', N', P]`: the edge features where the model has
    /// edge channels, else the adjacency as one channel. With `at` (flat indices into the
    /// `B·N'·N'` pairs) only those pairs, `[E, P]`.
    fn a_prime_input(
        &self,
        b: &GraphBatchOnDevice,
        kind: Kind,
        at: Option<&Tensor>,
    ) -> Result<Tensor> {
        let pick = |t: &Tensor| match at {
            Some(at) => {
                let channels = t.size()[3];
                t.reshape([-1, channels]).index_select(0, at).to_kind(kind)
            }
            None => t.to_kind(kind),
        };
        match (self.edge_channels, &b.edge_features) {
            (None, _) => Ok(pick(&b.mask.unsqueeze(-1))),
            (Some(p), Some(e)) if e.size().get(3) == Some(&p) => Ok(pick(e)),
            (Some(p), e) => Err(TaskError::config(
                "batching.dense_edge_features",
                format!(
                    "A′ projects {p} edge-feature channels; the batch has {}",
                    e.as_ref()
                        .map_or("none".to_owned(), |e| format!("{:?}", e.size()))
                ),
            )),
        }
    }

    /// The dense structure: the mask (or every pair), padding, and Â `[B, H, N', N']`.
    pub(super) fn dense_structure(&self, x: &Tensor, b: &GraphBatchOnDevice) -> Result<Structure> {
        let structure = match self.cfg.adjacency {
            AdjacencyMode::Masked | AdjacencyMode::MaskOnly => {
                Structure::mask(b.mask.shallow_clone())?
            }
            AdjacencyMode::ReferenceMultiply => Structure::full(),
        }
        .with_self_attention(self.cfg.batching.self_loops)
        .with_padding(b.padding.shallow_clone())?;
        let Some((conv, adj_proj)) = &self.adjacency else {
            return Ok(structure);
        };
        // Â = Conv2D(X ⊗ X) ⊙ A′ (eq. 24), from the initial tokens, per head.
        let xr = self.gram_tokens(x, &b.padding);
        let outer = xr.matmul(&xr.transpose(1, 2)).unsqueeze(1);
        let a_prime = adj_proj
            .forward(&self.a_prime_input(b, x.kind(), None)?)
            .permute([0, 3, 1, 2]);
        Ok(structure.with_scale(conv.forward(&outer) * a_prime)?)
    }

    /// The sparse structure: the mask's pairs as an edge list over the flattened `B·N'`
    /// tokens, padding, and Â at each edge only: the kernel's window of X ⊗ X around the edge,
    /// `Σ_ij w_hij ⟨x_{q+i−p}, x_{k+j−p}⟩` (zero outside the graph's slots, as the dense
    /// convolution's zero padding), times A′ of the edge. The same values as
    /// [`Self::dense_structure`]'s at the edges, without its `[B, H, N', N']` convolution.
    pub(super) fn sparse_structure(&self, x: &Tensor, b: &GraphBatchOnDevice) -> Result<Structure> {
        let size = x.size();
        let (bs, n) = (size[0], size[1]);
        let pairs = b.mask.nonzero(); // [E, 3]: graph, query, key
        let (graph, query, key) = (pairs.select(1, 0), pairs.select(1, 1), pairs.select(1, 2));
        let edges =
            basin_core::SparseEdges::new(&(&graph * n + &query), &(&graph * n + &key), bs * n)?;
        let structure = Structure::sparse(edges)
            .with_self_attention(self.cfg.batching.self_loops)
            .with_padding(b.padding.shallow_clone())?;
        let Some((conv, adj_proj)) = &self.adjacency else {
            return Ok(structure);
        };
        let Some(edges) = structure.sparse_edges() else {
            return Ok(structure);
        };
        let e = edges.len();
        let (tq, tk) = (edges.query(), edges.key());
        let graph = tq.divide_scalar_mode(n, "floor");
        let (qi, ki) = (tq.remainder(n), tk.remainder(n));
        let kernel = self.cfg.conv_kernel;
        let p = kernel / 2;
        // X ⊗ X per graph, zero-padded by p on each side as the convolution pads it (the batch's
        // mask is N' × N' per graph already): entry (q + i − p, k + j − p) of graph g is entry
        // g·S² + (q + i)·S + k + j of the flattened padded map, S = N' + 2p. Gathering the
        // kernel's window from it costs far less than per-edge products of token windows,
        // whose batched 3 × 3 matmuls are slow to differentiate.
        let xr = self.gram_tokens(x, &b.padding);
        let side = n + 2 * p;
        let gram = xr
            .matmul(&xr.transpose(1, 2))
            .constant_pad_nd([p, p, p, p])
            .reshape([-1]);
        let steps = Tensor::arange(kernel, (Kind::Int64, x.device()));
        let window = (steps.view([kernel, 1]) * side + steps.view([1, kernel])).view([1, -1]);
        let corner = (&graph * side * side + &qi * side + &ki).view([e, 1]);
        let windows = gram
            .index_select(0, &(corner + window).view([-1]))
            .view([e, kernel * kernel]);
        let heads = conv.ws.size()[0];
        let conv_at = windows.matmul(&conv.ws.view([heads, kernel * kernel]).tr());
        let flat = (&graph * n + &qi) * n + &ki;
        let a_prime = adj_proj.forward(&self.a_prime_input(b, x.kind(), Some(&flat))?);
        Ok(structure.with_edge_scale(conv_at * a_prime)?)
    }
}
