//! Laplacian positional encodings against scipy (`tests/fixtures/laplacian/gen.py`): the same
//! eigenvalues within 1e-8 and the same eigen-subspaces (projectors, since eigenvectors of
//! repeated eigenvalues are not unique), on real TU graphs, disconnected graphs and graphs
//! smaller than k; the sparse LOBPCG path against the dense one; sign conventions and flips;
//! the reference's sink-node encoding.

use basin_graph::Csr;
use basin_graph::laplacian::{
    LaplacianPe, PeConfig, SignFlip, Solver, laplacian_pe, laplacian_pe_many, normalized_laplacian,
    reference_sink_pe, smallest_nontrivial,
};
use basin_graph::npz::NpzReader;
use ndarray::{Array2, ArrayView2, Axis, s};
use rand::SeedableRng;

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/laplacian/laplacian.npz"
);

struct Case {
    n: usize,
    adj: Csr,
}

fn cases(z: &mut NpzReader) -> Vec<Case> {
    let mut out = Vec::new();
    for i in 0.. {
        if !z.contains(&format!("{i}_n")) {
            break;
        }
        let n = z.read1::<i64>(&format!("{i}_n")).unwrap()[0] as usize;
        let e = z.read2::<i64>(&format!("{i}_edges"), Some(2)).unwrap();
        let src: Vec<u32> = e.column(0).iter().map(|&v| v as u32).collect();
        let dst: Vec<u32> = e.column(1).iter().map(|&v| v as u32).collect();
        out.push(Case {
            n,
            adj: Csr::from_edges(n, &src, &dst).unwrap().0,
        });
    }
    out
}

/// `V Vᵀ`.
fn projector(v: ArrayView2<'_, f64>) -> Array2<f64> {
    v.dot(&v.t())
}

fn max_abs(a: &Array2<f64>) -> f64 {
    a.iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// Checks one solve against the scipy eigenpairs `w` (all) and `v` (first columns).
fn check(
    label: &str,
    l: &Array2<f64>,
    deg_sqrt: &ndarray::Array1<f64>,
    ours_vals: &[f64],
    ours: ArrayView2<'_, f64>,
    w: &[f64],
    v: ArrayView2<'_, f64>,
) {
    let np = l.nrows();
    let k = 15usize.min(np - 1);
    assert_eq!(ours_vals.len(), k, "{label}: number of eigenvectors");
    assert_eq!(ours.dim(), (np, k), "{label}");
    // Our Laplacian has scipy's eigenpairs: L V = V diag(w).
    let lv = l.dot(&v);
    let vw = &v * &ndarray::Array1::from_vec(w[..v.ncols()].to_vec());
    assert!(
        max_abs(&(lv - vw)) < 1e-10,
        "{label}: Laplacian differs from numpy's"
    );
    // Eigenvalues: scipy's, minus the trivial zero.
    for j in 0..k {
        assert!(
            (ours_vals[j] - w[j + 1]).abs() < 1e-8,
            "{label}: λ{j} {} vs scipy {}",
            ours_vals[j],
            w[j + 1]
        );
    }
    // Orthonormal eigenvectors, orthogonal to the trivial one.
    let gram = ours.t().dot(&ours);
    assert!(
        max_abs(&(gram - Array2::<f64>::eye(k))) < 1e-8,
        "{label}: not orthonormal"
    );
    let res = l.dot(&ours) - &ours * &ndarray::Array1::from_vec(ours_vals.to_vec());
    assert!(max_abs(&res) < 1e-8, "{label}: residual");
    let u0 = deg_sqrt / deg_sqrt.dot(deg_sqrt).sqrt();
    assert!(
        ours.t().dot(&u0).iter().all(|x| x.abs() < 1e-8),
        "{label}: trivial vector kept"
    );
    // Subspaces: compare projectors over whole eigenvalue clusters below the cut.
    let cut = if k + 1 < np { w[k + 1] } else { f64::INFINITY };
    let ours_in: Vec<usize> = (0..k).filter(|&j| ours_vals[j] < cut - 1e-9).collect();
    let ref_in: Vec<usize> = (0..v.ncols()).filter(|&j| w[j] < cut - 1e-9).collect();
    assert_eq!(
        ours_in.len() + 1,
        ref_in.len(),
        "{label}: cluster bookkeeping"
    );
    let p_ours = projector(ours.select(Axis(1), &ours_in).view());
    let p_ref =
        projector(v.select(Axis(1), &ref_in).view()) - projector(u0.view().insert_axis(Axis(1)));
    assert!(
        max_abs(&(&p_ours - &p_ref)) < 1e-7,
        "{label}: eigen-subspace differs from scipy's by {}",
        max_abs(&(p_ours - p_ref))
    );
}

fn sqrt_degrees(adj: &Csr, cls: bool) -> ndarray::Array1<f64> {
    let n = adj.num_nodes();
    let d = adj.row_sums();
    if cls {
        let mut out = vec![((n + 1) as f64).sqrt()];
        out.extend(d.iter().map(|x| (x + 1.0).sqrt()));
        ndarray::Array1::from_vec(out)
    } else {
        ndarray::Array1::from_vec(d.iter().map(|x| x.sqrt()).collect())
    }
}

#[test]
fn eigenpairs_match_scipy() {
    let mut z = NpzReader::open(std::path::Path::new(FIXTURE)).unwrap();
    let cases = cases(&mut z);
    assert!(cases.len() >= 15);
    for (i, c) in cases.iter().enumerate() {
        for cls in [false, true] {
            let w = z
                .read1::<f64>(&format!("{i}_cls{}_values", u8::from(cls)))
                .unwrap();
            let v = z
                .read2::<f64>(&format!("{i}_cls{}_vectors", u8::from(cls)), None)
                .unwrap();
            let l = normalized_laplacian(&c.adj, cls).unwrap();
            let deg = sqrt_degrees(&c.adj, cls);
            for solver in [Solver::Dense, Solver::Sparse] {
                let cfg = PeConfig {
                    k: 15,
                    cls,
                    solver,
                    ..PeConfig::et_graph()
                };
                let mut cfg = cfg;
                cfg.lobpcg.tol = 1e-10;
                cfg.lobpcg.guard = 2;
                let sp = smallest_nontrivial(&c.adj, &cfg).unwrap();
                let label = format!(
                    "graph {i} (n={}) cls={cls} {solver:?} sparse={}",
                    c.n, sp.sparse
                );
                check(
                    &label,
                    &l,
                    &deg,
                    &sp.values,
                    sp.vectors.view(),
                    w.as_slice().unwrap(),
                    v.view(),
                );
            }
        }
    }
}

#[test]
fn fixture_graphs_are_the_loaded_tu_graphs() {
    let mut z = NpzReader::open(std::path::Path::new(FIXTURE)).unwrap();
    let cases = cases(&mut z);
    let mutag = basin_graph::tu::load_tu(&basin_data::require_data!("tu/MUTAG")).unwrap();
    for (case, g) in [(0, 0), (1, 1), (2, 2), (3, 4)] {
        assert_eq!(cases[case].adj, mutag.graphs[g].adjacency);
    }
}

#[test]
fn graphs_smaller_than_k_are_zero_padded() {
    let mut z = NpzReader::open(std::path::Path::new(FIXTURE)).unwrap();
    let cases = cases(&mut z);
    for c in &cases {
        let pe = laplacian_pe(&c.adj, &PeConfig::et_graph()).unwrap();
        let np = c.n + 1;
        assert_eq!(pe.vectors.dim(), (np, 15));
        let avail = 15.min(np - 1);
        assert_eq!(pe.values.len(), avail);
        assert!(pe.vectors.slice(s![.., avail..]).iter().all(|&x| x == 0.0));
        for j in 0..avail {
            let norm: f32 = pe.vectors.column(j).iter().map(|x| x * x).sum();
            assert!((norm - 1.0).abs() < 1e-5);
        }
    }
}

fn grid(w: u32, h: u32) -> Vec<(u32, u32)> {
    let mut e = vec![];
    for y in 0..h {
        for x in 0..w {
            let i = y * w + x;
            if x + 1 < w {
                e.push((i, i + 1));
            }
            if y + 1 < h {
                e.push((i, i + w));
            }
        }
    }
    e
}

#[test]
fn sparse_lobpcg_matches_dense_on_repeated_and_disconnected_spectra() {
    // A 25×25 grid (many degenerate pairs), plus three more components: a 10×10 grid, a
    // 12-cycle and two isolated nodes.
    let mut e = grid(25, 25);
    let off = 625;
    e.extend(grid(10, 10).into_iter().map(|(a, b)| (a + off, b + off)));
    let off = 725;
    e.extend((0..12).map(|i| (off + i, off + (i + 1) % 12)));
    let n = 739;
    let adj = Csr::from_undirected(n, &e).unwrap();
    assert_eq!(adj.connected_components().0, 5);
    for cls in [false, true] {
        let mut cfg = PeConfig::plain(12);
        cfg.cls = cls;
        cfg.solver = Solver::Dense;
        let d = smallest_nontrivial(&adj, &cfg).unwrap();
        cfg.solver = Solver::Sparse;
        cfg.lobpcg.tol = 1e-9;
        let sp = smallest_nontrivial(&adj, &cfg).unwrap();
        assert!(sp.sparse && !d.sparse);
        for (a, b) in d.values.iter().zip(&sp.values) {
            assert!(
                (a - b).abs() < 1e-9,
                "cls={cls}: {:?} vs {:?}",
                d.values,
                sp.values
            );
        }
        if !cls {
            // Four extra null directions come first, with eigenvalue exactly 0.
            assert_eq!(&d.values[..4], &[0.0; 4]);
        }
        // Compare projectors on complete clusters.
        let cut = d.values[11];
        let keep: Vec<usize> = (0..12).filter(|&j| d.values[j] < cut - 1e-7).collect();
        let pd = projector(d.vectors.select(Axis(1), &keep).view());
        let ps = projector(sp.vectors.select(Axis(1), &keep).view());
        assert!(max_abs(&(pd - ps)) < 1e-6, "cls={cls}");
    }
}

#[test]
fn signs_are_deterministic_and_flips_are_seeded() {
    let adj = Csr::from_undirected(30, &grid(6, 5)).unwrap();
    let cfg = PeConfig::et_graph();
    let a = laplacian_pe(&adj, &cfg).unwrap();
    let b = laplacian_pe_many(&[&adj, &adj], &cfg).unwrap();
    assert_eq!(a, b[0]);
    assert_eq!(a, b[1]);
    // Largest-magnitude entry of each column is positive.
    for col in a.vectors.columns() {
        let m = col.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        let first = col.iter().find(|x| x.abs() >= m * (1.0 - 1e-5)).unwrap();
        assert!(*first > 0.0);
    }
    let flip = |mode: SignFlip, seed: u64| -> LaplacianPe {
        let mut p = a.clone();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        mode.apply(&mut p.vectors.view_mut(), &mut rng);
        p
    };
    assert_eq!(flip(SignFlip::None, 1), a);
    let e1 = flip(SignFlip::PerEigenvector, 1);
    assert_eq!(e1, flip(SignFlip::PerEigenvector, 1));
    let mut flipped_cols = 0;
    for (c0, c1) in a.vectors.columns().into_iter().zip(e1.vectors.columns()) {
        if c0 == c1 {
            continue;
        }
        assert_eq!(c0.mapv(|x| -x), c1, "a column is flipped as a whole");
        flipped_cols += 1;
    }
    assert!(flipped_cols > 0 && flipped_cols < 15);
    let p1 = flip(SignFlip::PerEntry, 1);
    assert_eq!(p1.vectors.mapv(f32::abs), a.vectors.mapv(f32::abs));
    let mixed = a
        .vectors
        .columns()
        .into_iter()
        .zip(p1.vectors.columns())
        .filter(|(c0, c1)| c0 != c1 && c0.mapv(|x| -x) != *c1)
        .count();
    assert!(mixed > 0, "per-entry flips mix signs inside a column");
}

#[test]
fn reference_sink_encoding_matches_numpy() {
    let mut z = NpzReader::open(std::path::Path::new(FIXTURE)).unwrap();
    let cases = cases(&mut z);
    for i in [0usize, 3] {
        let w = z.read1::<f64>(&format!("sink{i}_values")).unwrap();
        let v = z.read2::<f64>(&format!("sink{i}_vectors"), None).unwrap();
        let pe = reference_sink_pe(&cases[i].adj, 25, 15).unwrap();
        assert_eq!(pe.vectors.dim(), (26, 15));
        for j in 0..15 {
            assert!((pe.values[j] - w[j + 1]).abs() < 1e-8, "sink {i}: λ{j}");
        }
        let cut = w[16];
        let ours: Vec<usize> = (0..15).filter(|&j| pe.values[j] < cut - 1e-9).collect();
        let refs: Vec<usize> = (1..v.ncols()).filter(|&j| w[j] < cut - 1e-9).collect();
        let ov = pe.vectors.mapv(f64::from);
        let d = projector(ov.select(Axis(1), &ours).view())
            - projector(v.select(Axis(1), &refs).view());
        assert!(max_abs(&d) < 1e-5, "sink {i}: subspace (f32 output)");
    }
    assert!(reference_sink_pe(&cases[0].adj, 3, 15).is_err());
}
