//! Unit tests of the CSR adjacency and its conversions.

use super::*;
use crate::graph::Graph;
use ndarray::Array2;

fn triangle_plus_tail() -> Csr {
    Csr::from_undirected(5, &[(0, 1), (1, 2), (2, 0), (3, 4)]).unwrap()
}

#[test]
fn from_edges_sorts_rows_and_tracks_the_permutation() {
    let (a, perm) = Csr::from_edges(3, &[2, 0, 0, 1], &[1, 2, 1, 0]).unwrap();
    assert_eq!(a.indptr(), &[0, 2, 3, 4]);
    assert_eq!(a.indices(), &[1, 2, 0, 1]);
    assert_eq!(perm, vec![2, 1, 3, 0]);
    assert!(Csr::from_edges(2, &[0], &[2]).is_err());
}

#[test]
fn symmetrize_transpose_dedup() {
    let (a, _) = Csr::from_edges(3, &[0, 0, 1, 1], &[1, 1, 2, 1]).unwrap();
    let d = a.deduplicated();
    assert_eq!(d.nnz(), 3);
    let s = a.symmetrized();
    assert!(s.is_symmetric());
    assert_eq!(s.indices(), &[1, 0, 1, 2, 1]);
    assert_eq!(a.transpose().transpose(), a);
    assert_eq!(s.num_self_loops(), 1);
    assert_eq!(s.num_undirected_edges(), 2);
}

#[test]
fn self_loops_and_components() {
    let a = triangle_plus_tail();
    let l = a.with_self_loops();
    assert_eq!(l.nnz(), a.nnz() + 5);
    assert_eq!(l.num_self_loops(), 5);
    assert_eq!(l.with_self_loops(), l);
    assert_eq!(l.without_self_loops(), a);
    let (c, comp) = a.connected_components();
    assert_eq!(c, 2);
    assert_eq!(comp, vec![0, 0, 0, 1, 1]);
}

#[test]
fn induced_and_khop() {
    let a = Csr::from_undirected(5, &[(0, 1), (1, 2), (2, 3), (3, 4)]).unwrap();
    let (s, _) = a.induced(&[3, 2, 1]).unwrap();
    assert_eq!(s.to_dense().sum(), 4.0);
    assert!(s.contains(0, 1) && s.contains(1, 2) && !s.contains(0, 2));
    assert!(a.induced(&[1, 1]).is_err());
    let k2 = a.k_hop(2, false);
    assert_eq!(k2.row(0), &[1, 2]);
    assert_eq!(k2.row(2), &[0, 1, 3, 4]);
    let k1 = a.k_hop(1, true);
    assert_eq!(k1, a.with_self_loops());
}

#[test]
fn petgraph_and_sprs_round_trips() {
    let a = triangle_plus_tail();
    let p = a.to_petgraph();
    assert_eq!(p.edge_count(), a.nnz());
    assert_eq!(Csr::from_petgraph(&p).unwrap(), a);
    let mut u = petgraph::graph::UnGraph::<(), ()>::new_undirected();
    let n: Vec<_> = (0..5).map(|_| u.add_node(())).collect();
    for (x, y) in [(0, 1), (1, 2), (2, 0), (3, 4)] {
        u.add_edge(n[x], n[y], ());
    }
    assert_eq!(Csr::from_petgraph(&u).unwrap(), a);
    let s = a.to_sprs();
    assert_eq!(s.nnz(), a.nnz());
    let back = Csr::from_sprs(&s).unwrap();
    assert_eq!(back.indices(), a.indices());
    assert_eq!(back.weights().unwrap(), vec![1.0; a.nnz()].as_slice());
}

#[test]
fn graph_with_self_loops_carries_edge_features() {
    let a = Csr::from_undirected(3, &[(0, 1), (1, 2)]).unwrap();
    let mut g = Graph::structure_only(a.clone());
    g.edge_features = Some(Array2::from_shape_fn((a.nnz(), 1), |(i, _)| i as f32 + 1.0));
    g.edge_labels = Some((0..a.nnz() as i64).collect());
    let l = g.with_self_loops();
    l.validate().unwrap();
    let ef = l.edge_features.unwrap();
    // Row 0 of the new CSR: 0 (loop), 1 (old entry 0).
    assert_eq!(ef[[0, 0]], 0.0);
    assert_eq!(ef[[1, 0]], 1.0);
    assert_eq!(l.edge_labels.unwrap()[..2], [-1, 0]);
}
