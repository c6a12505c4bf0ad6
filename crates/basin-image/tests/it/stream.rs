//! The streamed image folder (ImageNet-1k's layout): files of mixed sizes and formats read as
//! batches need them, brought to one shape; a corrupt file refused by name or skipped and
//! counted.

use std::sync::Arc;

use basin_image::stream::{ImageFolder, OnCorrupt};
use basin_image::*;

/// A folder of 3 classes × 4 mixed-size images and one file that is not an image.
fn folder() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("train");
    basin_image::synthetic::write_folder(&root, 4, 1).unwrap();
    let bad = root.join("vertical").join("broken.jpg");
    std::fs::write(&bad, b"not a jpeg at all").unwrap();
    (tmp, bad)
}

#[test]
fn a_corrupt_file_is_refused_by_name_or_skipped_and_counted() {
    let (tmp, bad) = folder();
    let root = tmp.path().join("train");
    let e = ImageFolder::open(&root, 16, false, OnCorrupt::Error)
        .unwrap_err()
        .to_string();
    assert!(e.contains("broken.jpg") && e.contains("skip"), "{e}");
    let f = ImageFolder::open(&root, 16, false, OnCorrupt::Skip).unwrap();
    assert_eq!(f.len(), 12);
    assert_eq!(f.skipped().len(), 1);
    assert_eq!(f.skipped()[0].0, bad);
    assert_eq!(f.classes(), ["checker", "horizontal", "vertical"]);
    // Labels follow the sorted classes, files sorted within a class.
    let labels: Vec<i64> = (0..12).map(|i| f.label(i)).collect();
    assert_eq!(labels, [0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
    // An image that breaks after opening is an error naming it, in a batch too.
    let victim = root.join("checker").join("000.png");
    std::fs::write(&victim, b"\x89PNG\r\n\x1a\n truncated").unwrap();
    let pipe = Pipeline {
        patch: 4,
        augment: Augment::none(),
        normalize: Normalize {
            mean: vec![0.5; 3],
            std: vec![0.25; 3],
        },
        mask: MaskStrategy::et_mix(16),
    };
    let e = pipe.batch(&f, &[0, 5], 0).unwrap_err().to_string();
    assert!(e.contains("000.png"), "{e}");
}

#[test]
fn mixed_sizes_become_one_shape_deterministically() {
    let (tmp, _) = folder();
    let f = ImageFolder::open(&tmp.path().join("train"), 16, false, OnCorrupt::Skip).unwrap();
    let sizes: std::collections::BTreeSet<(usize, usize)> = (0..f.len())
        .map(|i| {
            let img = f.read(i).unwrap();
            (img.h, img.w)
        })
        .collect();
    assert!(sizes.len() > 3, "the folder has mixed sizes: {sizes:?}");
    let normalize = Normalize::of_items(&f, &(0..12).collect::<Vec<_>>()).unwrap();
    assert!(normalize.mean.iter().all(|m| (0.0..=1.0).contains(m)));
    for augment in [Augment::none(), Augment::et_table4()] {
        let pipe = Pipeline {
            patch: 4,
            augment,
            normalize: normalize.clone(),
            mask: MaskStrategy::et_mix(16),
        };
        let items: Vec<usize> = (0..12).collect();
        let a = pipe.batch(&f, &items, 3).unwrap();
        assert_eq!((a.batch, a.tokens, a.patch_len), (12, 16, 48));
        assert_eq!(a.patches.len(), 12 * 16 * 48);
        assert!(a.patches.iter().all(|v| v.is_finite()));
        assert_eq!(a, pipe.batch(&f, &items, 3).unwrap());
    }
    // The evaluation view of a uniform image is that colour; a 16 × 16 image is itself.
    let uniform = FloatImage {
        w: 40,
        h: 24,
        c: 3,
        data: [0.2f32, 0.5, 0.9].repeat(40 * 24),
    };
    let v = basin_image::transform::centre_crop(&uniform, 16, 16);
    assert_eq!((v.h, v.w), (16, 16));
    assert!(
        v.data
            .chunks(3)
            .all(|p| (p[0] - 0.2).abs() < 1e-6 && (p[2] - 0.9).abs() < 1e-6)
    );
    let same = f
        .read(0)
        .map(|i| basin_image::transform::centre_crop(&i, i.h, i.w))
        .unwrap();
    assert_eq!(same, f.read(0).unwrap());
}

/// Drawn parts of a streamed folder and of an in-memory set join without copies, keep their
/// labels, and an in-memory part's statistics are its exact pixel statistics.
#[test]
fn parts_join_sources_and_keep_exact_statistics() {
    let set = basin_image::synthetic::stripes(10, 4).unwrap();
    let shared: Arc<dyn Images> = Arc::new(set.clone());
    let parts = Parts::new(vec![(shared.clone(), vec![3, 1]), (shared, vec![7])]).unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(
        (0..3).map(|i| parts.label(i)).collect::<Vec<_>>(),
        [set.labels[3], set.labels[1], set.labels[7]]
    );
    assert_eq!(parts.read(2).unwrap(), Images::read(&set, 7).unwrap());
    let exact = Normalize::of(&set.subset(&[3, 1]));
    assert_eq!(Normalize::of_items(&parts, &[0, 1]).unwrap(), exact);
}
