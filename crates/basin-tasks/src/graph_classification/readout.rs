//! What is read out of the last block's tokens (the CLS token, pooled nodes, their
//! moments) and the graph statistics some readouts add.

use tch::{Kind, Tensor};

use super::*;

/// Each token's degree in its graph, `[B, N]` (Int64), and which tokens are the graph's nodes
/// (`[B, N]`, Bool), from the batch's attention mask `[B, N, N]` and `padding` `[B, N]` (true
/// for real tokens, CLS in slot 0): a node's degree counts the real nodes other than itself
/// that it may attend (CLS, padding and a self-loop of the mask are not edges of the graph);
/// CLS and padding read 0.
pub fn node_degrees(mask: &Tensor, padding: &Tensor) -> (Tensor, Tensor) {
    let n = padding.size()[1];
    let device = padding.device();
    let not_cls = Tensor::arange(n, (Kind::Int64, device)).gt(0);
    let nodes = padding.logical_and(&not_cls.unsqueeze(0));
    let others = Tensor::eye(n, (Kind::Bool, device)).logical_not();
    let degree = mask
        .logical_and(&nodes.unsqueeze(1))
        .logical_and(&others)
        .logical_and(&nodes.unsqueeze(-1))
        .sum_dim_intlist(-1, false, Kind::Int64);
    (degree, nodes)
}

/// `[B, 4]` (float64): ln(1 + ·) of each graph's node count and of the mean, standard
/// deviation (population) and maximum of its nodes' degrees ([`node_degrees`]); 0 for a graph
/// without nodes. What [`GraphClassifierConfig::readout_degrees`] gives the readout.
pub fn structure_statistics(mask: &Tensor, padding: &Tensor) -> Tensor {
    let (degree, nodes) = node_degrees(mask, padding);
    let degree = degree.to_kind(Kind::Double);
    let nodes = nodes.to_kind(Kind::Double);
    let count = nodes.sum_dim_intlist(1, false, Kind::Double);
    let per = count.clamp_min(1.0);
    let mean = degree.sum_dim_intlist(1, false, Kind::Double) / &per;
    let centred = (&degree - mean.unsqueeze(1)) * &nodes;
    let std = ((&centred * &centred).sum_dim_intlist(1, false, Kind::Double) / &per).sqrt();
    let max = degree.amax(1, false);
    Tensor::stack(&[count, mean, std, max], 1).log1p()
}

/// What the readout sees of the final tokens `x: [B, N, D]` (CLS in slot 0, `padding` `[B, N]`
/// true for real tokens): `[B, D]`, `[B, 2D]`, `[B, 3D]` or `[B, 5D]` per graph, or `[M, D]`
/// for every real node with [`Readout::Nodes`], graph by graph.
pub fn pool(readout: Readout, x: &Tensor, padding: &Tensor) -> Tensor {
    let cls = x.select(1, 0);
    let n = x.size()[1];
    let not_cls = Tensor::arange(n, (Kind::Int64, x.device())).gt(0);
    match readout {
        Readout::Cls => cls,
        Readout::Nodes => x.index(&[Some(&padding.logical_and(&not_cls.unsqueeze(0)))]),
        Readout::ClsMean | Readout::ClsMeanSize | Readout::ClsMoments => {
            let real = padding.logical_and(&not_cls.unsqueeze(0));
            let nodes = real.to_kind(x.kind()).unsqueeze(-1);
            let count = nodes.sum_dim_intlist(1, false, x.kind()).clamp_min(1.0);
            let mean = (x * &nodes).sum_dim_intlist(1, false, x.kind()) / &count;
            let mut seen = vec![cls, mean.shallow_clone()];
            if readout != Readout::ClsMean {
                seen.push(&mean * (&count + 1.0).log());
            }
            if readout == Readout::ClsMoments {
                let centred = (x - mean.unsqueeze(1)) * &nodes;
                // ε keeps the gradient of the square root finite on one-node graphs.
                let var = (&centred * &centred).sum_dim_intlist(1, false, x.kind()) / &count;
                seen.push((var + 1e-5).sqrt());
                seen.push(
                    x.masked_fill(&real.logical_not().unsqueeze(-1), f64::NEG_INFINITY)
                        .amax(1, false)
                        // A graph without nodes reads 0, as its mean does.
                        .masked_fill(&real.any_dim(1, true).logical_not(), 0.0),
                );
            }
            Tensor::cat(&seen, 1)
        }
    }
}
