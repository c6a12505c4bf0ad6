//! What the classifier needs of a dataset before it trains: its classes, its Laplacian
//! encodings (eq. 23), whether its graphs are large.

use basin_graph::batch::BatchConfig;
use basin_graph::cache::EncodingCache;
use basin_graph::laplacian::LaplacianPe;
use basin_graph::{Csr, GraphDataset};

use crate::{Result, TaskError};

/// Mean nodes per graph from which the TU tables run a dense-attention model over the edges
/// (`sparse_attention`), the same model: of the TU sets here only DD (284 nodes on average) is
/// above it, and there masked dense scores are mostly wasted work. The papers' presets
/// (D = 128, meant for a GPU) use the threshold; the CPU presets attend over the edges on every
/// set ([`GraphClassifierConfig::with_tu_cpu_front_end`](super::GraphClassifierConfig::with_tu_cpu_front_end)).
pub const SPARSE_MEAN_NODES: f64 = 100.0;

/// Whether `data`'s graphs have [`SPARSE_MEAN_NODES`] or more nodes on average.
pub fn large_graphs(data: &GraphDataset) -> bool {
    let nodes: usize = data.graphs.iter().map(|g| g.num_nodes()).sum();
    nodes as f64 >= SPARSE_MEAN_NODES * data.graphs.len().max(1) as f64
}

/// The encodings of every graph of a dataset as the batches see it (computed once, in
/// parallel, and kept in the user's [`EncodingCache`] for the next run), if `batching` asks for them: a graph above the node cap is encoded cut to it, as
/// [`make_batch`](basin_graph::batch::make_batch) would encode it (else every batch holding it would recompute its encoding:
/// DD has graphs of up to 5,748 nodes under a cap of 500).
pub fn dataset_pe(data: &GraphDataset, batching: &BatchConfig) -> Result<Option<Vec<LaplacianPe>>> {
    match &batching.pe {
        Some(pe) => {
            let cut: Vec<(usize, basin_graph::Graph)> = data
                .graphs
                .iter()
                .enumerate()
                .filter(|(_, g)| g.num_nodes() > batching.max_nodes)
                .map(|(i, g)| (i, g.truncated(batching.max_nodes)))
                .collect();
            let mut adjs: Vec<&Csr> = data.graphs.iter().map(|g| &g.adjacency).collect();
            for (i, g) in &cut {
                adjs[*i] = &g.adjacency;
            }
            let t0 = std::time::Instant::now();
            tracing::info!(
                "{}: Laplacian encodings of {} graphs (k = {})…",
                data.name,
                adjs.len(),
                pe.k
            );
            let (out, cached) = EncodingCache::user().laplacian_pe(&adjs, pe)?;
            tracing::info!(
                "{}: encodings {} in {:.1} s",
                data.name,
                if cached {
                    "read from the cache"
                } else {
                    "computed"
                },
                t0.elapsed().as_secs_f64()
            );
            Ok(Some(out))
        }
        None => Ok(None),
    }
}

/// The class of every graph (as model labels), and the number of classes (at least 2).
pub fn graph_classes(data: &GraphDataset) -> Result<(Vec<i64>, i64)> {
    let labels: Vec<i64> = data
        .targets
        .classes()
        .ok_or_else(|| {
            TaskError::config(
                "data",
                format!(
                    "{}: graph classification needs one class per graph",
                    data.name
                ),
            )
        })?
        .iter()
        .map(|&c| c as i64)
        .collect();
    let classes = labels.iter().copied().max().map_or(2, |m| m + 1).max(2);
    Ok((labels, classes))
}

/// The class of every node of every graph (node-class targets), and the number of classes.
pub fn node_classes(data: &GraphDataset) -> Result<(Vec<Vec<i64>>, i64)> {
    let basin_graph::Targets::NodeClasses { num_classes } = data.targets else {
        return Err(TaskError::config(
            "readout",
            format!("{}: `nodes` needs a class per node", data.name),
        ));
    };
    let labels = data
        .graphs
        .iter()
        .enumerate()
        .map(|(i, g)| {
            g.node_labels.clone().ok_or_else(|| {
                TaskError::config(format!("{} graph {i}", data.name), "no node labels")
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((labels, (num_classes as i64).max(2)))
}
