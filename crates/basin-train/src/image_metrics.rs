//! Image-quality metrics for reconstructions (ET Table 16): PSNR and SSIM, on images in
//! `[0, data_range]`, channel-last, with scikit-image's semantics (`peak_signal_noise_ratio`,
//! `structural_similarity(gaussian_weights=True, sigma=1.5, use_sample_covariance=False)`).

use crate::metrics::MetricError;

/// Peak signal-to-noise ratio in dB: `10 log10(range² / MSE)` (∞ for identical images).
pub fn psnr(reference: &[f32], test: &[f32], data_range: f64) -> Result<f64, MetricError> {
    if reference.len() != test.len() || reference.is_empty() {
        return Err(MetricError::Shape(format!(
            "images of {} and {} values",
            reference.len(),
            test.len()
        )));
    }
    let mse = reference
        .iter()
        .zip(test)
        .map(|(a, b)| (f64::from(*a) - f64::from(*b)).powi(2))
        .sum::<f64>()
        / reference.len() as f64;
    Ok(10.0 * (data_range * data_range / mse).log10())
}

/// 1-d Gaussian weights of radius 3.5σ (11 taps for σ = 1.5), normalised.
fn gaussian(sigma: f64) -> Vec<f64> {
    let r = (3.5 * sigma + 0.5) as i64;
    let w: Vec<f64> = (-r..=r)
        .map(|x| (-(x * x) as f64 / (2.0 * sigma * sigma)).exp())
        .collect();
    let s: f64 = w.iter().sum();
    w.into_iter().map(|v| v / s).collect()
}

/// Separable Gaussian filter of one `h × w` plane with mirrored borders (`scipy.ndimage`'s
/// default `reflect` mode, as skimage uses).
fn filter(plane: &[f64], h: usize, w: usize, k: &[f64]) -> Vec<f64> {
    let r = (k.len() / 2) as i64;
    let reflect = |i: i64, n: usize| -> usize {
        let n = n as i64;
        let mut i = i;
        loop {
            if i < 0 {
                i = -i - 1;
            } else if i >= n {
                i = 2 * n - i - 1;
            } else {
                return i as usize;
            }
        }
    };
    // One pass along the rows, then one along the columns: `at(y, x, o)` is the index of the
    // sample `o` places from (y, x) along the pass, reflected at the border.
    let pass = |src: &[f64], at: &dyn Fn(usize, usize, i64) -> usize| -> Vec<f64> {
        let mut out = vec![0f64; h * w];
        for y in 0..h {
            for x in 0..w {
                out[y * w + x] = k
                    .iter()
                    .enumerate()
                    .map(|(j, kv)| kv * src[at(y, x, j as i64 - r)])
                    .sum();
            }
        }
        out
    };
    let along_rows = pass(plane, &|y, x, o| y * w + reflect(x as i64 + o, w));
    pass(&along_rows, &|y, x, o| reflect(y as i64 + o, h) * w + x)
}

/// Mean structural similarity (Wang et al. 2004) over channels, with a Gaussian window
/// (σ = 1.5), K1 = 0.01, K2 = 0.03; the mean skips a border of the window radius, as
/// scikit-image does.
pub fn ssim(
    reference: &[f32],
    test: &[f32],
    h: usize,
    w: usize,
    c: usize,
    data_range: f64,
) -> Result<f64, MetricError> {
    if reference.len() != test.len() || reference.len() != h * w * c || h == 0 || w == 0 {
        return Err(MetricError::Shape(format!(
            "images of {} and {} values for {h}×{w}×{c}",
            reference.len(),
            test.len()
        )));
    }
    let k = gaussian(1.5);
    let pad = k.len() / 2;
    let (c1, c2) = ((0.01 * data_range).powi(2), (0.03 * data_range).powi(2));
    let mut total = 0.0;
    for ch in 0..c {
        let a: Vec<f64> = (0..h * w)
            .map(|i| f64::from(reference[i * c + ch]))
            .collect();
        let b: Vec<f64> = (0..h * w).map(|i| f64::from(test[i * c + ch])).collect();
        let prod = |p: &[f64], q: &[f64]| p.iter().zip(q).map(|(x, y)| x * y).collect::<Vec<f64>>();
        let (ux, uy) = (filter(&a, h, w, &k), filter(&b, h, w, &k));
        let (uxx, uyy, uxy) = (
            filter(&prod(&a, &a), h, w, &k),
            filter(&prod(&b, &b), h, w, &k),
            filter(&prod(&a, &b), h, w, &k),
        );
        let (mut sum, mut count) = (0.0, 0usize);
        for y in pad..h.saturating_sub(pad) {
            for x in pad..w.saturating_sub(pad) {
                let i = y * w + x;
                let (vx, vy, vxy) = (
                    uxx[i] - ux[i] * ux[i],
                    uyy[i] - uy[i] * uy[i],
                    uxy[i] - ux[i] * uy[i],
                );
                let s = ((2.0 * ux[i] * uy[i] + c1) * (2.0 * vxy + c2))
                    / ((ux[i] * ux[i] + uy[i] * uy[i] + c1) * (vx + vy + c2));
                sum += s;
                count += 1;
            }
        }
        if count == 0 {
            return Err(MetricError::Shape(format!(
                "{h}×{w} is smaller than the SSIM window ({} pixels)",
                k.len()
            )));
        }
        total += sum / count as f64;
    }
    Ok(total / c as f64)
}
