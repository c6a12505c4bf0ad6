//! GPS positional statistics: LapPE eigenpairs of the combinatorial Laplacian (trivial vector
//! kept, NaN padding) and RWSE against values computed with numpy.

use basin_graph::Csr;
use basin_graph::posenc::{gps_laplacian, rwse};

#[test]
fn lappe_of_a_path_has_the_closed_form_spectrum_and_keeps_the_trivial_vector() {
    let n = 6;
    let edges: Vec<(u32, u32)> = (0..n as u32 - 1).map(|i| (i, i + 1)).collect();
    let adj = Csr::from_undirected(n, &edges).unwrap();
    let lap = gps_laplacian(&adj, 8).unwrap();
    for j in 0..n {
        // L = D − A of P_n: λ_j = 2 − 2 cos(π j / n).
        let want = 2.0 - 2.0 * (std::f64::consts::PI * j as f64 / n as f64).cos();
        assert!((lap.values[j] as f64 - want).abs() < 1e-5, "λ{j}");
    }
    // The trivial vector: constant 1/√n.
    for i in 0..n {
        assert!((lap.vectors[(i, 0)] as f64 - 1.0 / (n as f64).sqrt()).abs() < 1e-5);
    }
    // Fewer nodes than frequencies: NaN past n, in values and vectors.
    assert!(lap.values[6].is_nan() && lap.values[7].is_nan());
    assert!((0..n).all(|i| lap.vectors[(i, 7)].is_nan() && !lap.vectors[(i, 5)].is_nan()));
    // Unit columns, and L v = λ v.
    for j in 0..n {
        let v: Vec<f64> = (0..n).map(|i| lap.vectors[(i, j)] as f64).collect();
        assert!((v.iter().map(|x| x * x).sum::<f64>() - 1.0).abs() < 1e-5);
        for i in 0..n {
            let deg = adj.row(i).len() as f64;
            let lv = deg * v[i] - adj.row(i).iter().map(|&k| v[k as usize]).sum::<f64>();
            assert!((lv - lap.values[j] as f64 * v[i]).abs() < 1e-4);
        }
    }
}

#[test]
fn rwse_of_a_six_cycle_with_a_pendant_matches_numpy() {
    let mut edges: Vec<(u32, u32)> = (0..6).map(|i| (i, (i + 1) % 6)).collect();
    edges.push((2, 6));
    let adj = Csr::from_undirected(7, &edges).unwrap();
    let r = rwse(&adj, 4);
    // numpy: P = A / A.sum(1); diag(P^k), k = 1..4.
    let want = [
        [0.0, 0.5, 0.0, 0.354166666667],
        [0.0, 0.416666666667, 0.0, 0.319444444444],
        [0.0, 0.666666666667, 0.0, 0.527777777778],
        [0.0, 0.416666666667, 0.0, 0.319444444444],
        [0.0, 0.5, 0.0, 0.354166666667],
        [0.0, 0.5, 0.0, 0.375],
        [0.0, 0.333333333333, 0.0, 0.222222222222],
    ];
    for (i, row) in want.iter().enumerate() {
        for (k, &w) in row.iter().enumerate() {
            assert!((r[(i, k)] as f64 - w).abs() < 1e-6, "node {i}, k {}", k + 1);
        }
    }
}
