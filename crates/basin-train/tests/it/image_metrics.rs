//! PSNR and SSIM against scikit-image (fixture from `fixtures/image_metrics/gen.py`).

use basin_train::image_metrics::{psnr, ssim};

#[test]
fn psnr_and_ssim_match_scikit_image() {
    let f: serde_json::Value =
        serde_json::from_str(include_str!("../fixtures/image_metrics/image_metrics.json")).unwrap();
    for case in f["cases"].as_array().unwrap() {
        let shape: Vec<usize> = case["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as usize)
            .collect();
        let vec = |k: &str| {
            case[k]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect::<Vec<f32>>()
        };
        let (a, b) = (vec("a"), vec("b"));
        let name = case["name"].as_str().unwrap();
        let p = psnr(&a, &b, 1.0).unwrap();
        assert!(
            (p - case["psnr"].as_f64().unwrap()).abs() < 1e-4,
            "{name}: psnr {p}"
        );
        let s = ssim(&a, &b, shape[0], shape[1], shape[2], 1.0).unwrap();
        assert!(
            (s - case["ssim"].as_f64().unwrap()).abs() < 1e-5,
            "{name}: ssim {s} vs {}",
            case["ssim"]
        );
        assert!((ssim(&a, &a, shape[0], shape[1], shape[2], 1.0).unwrap() - 1.0).abs() < 1e-12);
    }
    assert!(
        ssim(&[0.0; 4], &[0.0; 4], 2, 2, 1, 1.0).is_err(),
        "smaller than the window"
    );
}
