//! basin-image on the real Fashion-MNIST and CIFAR-10 files, on malformed files, and the
//! patching, masking and augmentation contracts.

use basin_image::folder::{load_folder, load_tar};
use basin_image::idx::load_fashion_mnist;
use basin_image::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

#[test]
fn fashion_mnist_has_the_published_counts() {
    let dir = basin_data::require_data!("images/fashion-mnist");
    let test = load_fashion_mnist(&dir, false).unwrap();
    assert_eq!(
        (test.len(), test.width, test.height, test.channels),
        (10_000, 28, 28, 1)
    );
    let mut counts = [0usize; 10];
    for &l in &test.labels {
        counts[l as usize] += 1;
    }
    assert_eq!(counts, [1000; 10]);
    assert_eq!(test.classes[9], "Ankle boot");
    let train = load_fashion_mnist(&dir, true).unwrap();
    assert_eq!(train.len(), 60_000);
    let (mean, std) = train.channel_stats();
    assert!(
        (mean[0] - 0.2860).abs() < 1e-3 && (std[0] - 0.3530).abs() < 1e-3,
        "{mean:?} {std:?}"
    );
}

#[test]
fn cifar10_tar_has_the_published_counts() {
    let tar = basin_data::require_data!("images/cifar10-jpg/CIFAR-10-images_jpg.tar");
    let test = load_tar(&tar, "test", false).unwrap();
    assert_eq!(
        (test.len(), test.width, test.height, test.channels),
        (10_000, 32, 32, 3)
    );
    assert_eq!(
        test.classes,
        [
            "airplane",
            "automobile",
            "bird",
            "cat",
            "deer",
            "dog",
            "frog",
            "horse",
            "ship",
            "truck"
        ]
    );
    let mut counts = [0usize; 10];
    for &l in &test.labels {
        counts[l as usize] += 1;
    }
    assert_eq!(counts, [1000; 10]);
    let (mean, _) = test.channel_stats();
    // CIFAR-10's well-known channel means (the JPEG copy is lossy: within 0.01).
    for (m, want) in mean.iter().zip([0.4914, 0.4822, 0.4465]) {
        assert!((m - want).abs() < 0.01, "{mean:?}");
    }
}

fn write_png(path: &std::path::Path, w: u32, h: u32, v: u8) {
    image::RgbImage::from_pixel(w, h, image::Rgb([v, v / 2, 255 - v]))
        .save(path)
        .unwrap();
}

#[test]
fn malformed_files_give_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // IDX: bad magic, truncated data, label count mismatch, truncated gzip.
    let mut images = vec![0u8, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 2];
    images.extend([1, 2, 3, 4, 5, 6, 7, 8]);
    let labels = vec![0u8, 0, 8, 1, 0, 0, 0, 2, 3, 4];
    std::fs::write(d.join("train-images-idx3-ubyte"), &images).unwrap();
    std::fs::write(d.join("train-labels-idx1-ubyte"), &labels).unwrap();
    let set = load_fashion_mnist(d, true).unwrap();
    assert_eq!((set.len(), set.width), (2, 2));
    std::fs::write(
        d.join("train-images-idx3-ubyte"),
        &images[..images.len() - 3],
    )
    .unwrap();
    let err = load_fashion_mnist(d, true).unwrap_err().to_string();
    assert!(
        err.contains("train-images-idx3-ubyte") && err.contains("truncated"),
        "{err}"
    );
    let mut bad = images.clone();
    bad[2] = 9;
    std::fs::write(d.join("train-images-idx3-ubyte"), &bad).unwrap();
    assert!(
        load_fashion_mnist(d, true)
            .unwrap_err()
            .to_string()
            .contains("bad IDX magic")
    );
    std::fs::write(d.join("train-images-idx3-ubyte"), &images).unwrap();
    std::fs::write(
        d.join("train-labels-idx1-ubyte"),
        [0u8, 0, 8, 1, 0, 0, 0, 3, 1, 2, 3],
    )
    .unwrap();
    let err = load_fashion_mnist(d, true).unwrap_err().to_string();
    assert!(err.contains("3 labels for 2 images"), "{err}");
    std::fs::write(
        d.join("train-labels-idx1-ubyte"),
        [0u8, 0, 8, 1, 0, 0, 0, 2, 3, 42],
    )
    .unwrap();
    assert!(
        load_fashion_mnist(d, true)
            .unwrap_err()
            .to_string()
            .contains("label 42")
    );
    std::fs::write(
        d.join("t10k-images-idx3-ubyte.gz"),
        [0x1f, 0x8b, 8, 0, 0, 0],
    )
    .unwrap();
    let err = load_fashion_mnist(d, false).unwrap_err().to_string();
    assert!(
        err.contains("t10k-images-idx3-ubyte.gz") && err.contains("gzip"),
        "{err}"
    );

    // Folders and tars: a good set, a corrupt image, a size mismatch, a truncated archive.
    let root = d.join("imgs");
    for (class, v) in [("cat", 10u8), ("dog", 200)] {
        std::fs::create_dir_all(root.join("train").join(class)).unwrap();
        for k in 0..3 {
            write_png(
                &root.join("train").join(class).join(format!("{k}.png")),
                8,
                6,
                v + k,
            );
        }
    }
    let set = load_folder(&root.join("train"), false).unwrap();
    assert_eq!(
        (set.len(), set.width, set.height, set.classes.len()),
        (6, 8, 6, 2)
    );
    assert_eq!(set.labels, [0, 0, 0, 1, 1, 1]);
    let tar_path = d.join("imgs.tar");
    {
        let mut b = tar::Builder::new(std::fs::File::create(&tar_path).unwrap());
        b.append_dir_all("imgs", &root).unwrap();
        b.finish().unwrap();
    }
    let from_tar = load_tar(&tar_path, "train", false).unwrap();
    assert_eq!(from_tar, set);
    let bytes = std::fs::read(&tar_path).unwrap();
    let missing_split = load_tar(&tar_path, "nope", false).unwrap_err().to_string();
    assert!(
        missing_split.contains("no images under `nope/"),
        "{missing_split}"
    );
    for cut in [bytes.len() / 2, bytes.len() - 512, 1000] {
        std::fs::write(&tar_path, &bytes[..cut]).unwrap();
        let err = load_tar(&tar_path, "train", false).unwrap_err().to_string();
        assert!(
            err.contains("imgs.tar") && err.contains("truncated"),
            "cut at {cut}: {err}"
        );
    }
    std::fs::write(root.join("train/cat/bad.png"), b"not a png at all").unwrap();
    let err = load_folder(&root.join("train"), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("bad.png") && err.contains("decode"), "{err}");
    std::fs::remove_file(root.join("train/cat/bad.png")).unwrap();
    write_png(&root.join("train/dog/big.png"), 9, 6, 1);
    let err = load_folder(&root.join("train"), false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("big.png") && err.contains("9×6"), "{err}");
}

#[test]
fn patchify_round_trip_is_exact_for_every_divisor() {
    let (h, w, c) = (12, 8, 3);
    let img: Vec<f32> = (0..h * w * c).map(|i| i as f32 * 0.5 - 3.0).collect();
    for p in [1, 2, 4] {
        let g = Grid::new(h, w, c, p).unwrap();
        let patches = g.patchify(&img);
        assert_eq!(patches.len(), g.tokens() * g.patch_len());
        assert_eq!(g.unpatchify(&patches), img, "patch {p}");
    }
    // Patch 0 holds the top-left p×p window, channel first.
    let g = Grid::new(h, w, c, 2).unwrap();
    let patches = g.patchify(&img);
    assert_eq!(&patches[..4], &[img[0], img[3], img[w * c], img[w * c + 3]]);
    assert!(Grid::new(h, w, c, 5).is_err());
}

#[test]
fn masks_choose_exactly_what_was_asked() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    for _ in 0..20 {
        let p = MaskStrategy::Random { k: 7 }.sample(4, 5, &mut rng);
        assert_eq!(p.masked.iter().filter(|&&m| m).count(), 7);
        assert_eq!(p.masked, p.scored);
        let p = MaskStrategy::Mixed {
            masked: 9,
            visible: 3,
        }
        .sample(4, 5, &mut rng);
        assert_eq!(p.masked.iter().filter(|&&m| m).count(), 9);
        assert_eq!(p.scored.iter().filter(|&&s| s).count(), 12);
        assert!(p.masked.iter().zip(&p.scored).all(|(m, s)| !m || *s));
        let p = MaskStrategy::Block { h: 2, w: 3 }.sample(4, 5, &mut rng);
        let rows: Vec<usize> = (0..20).filter(|&i| p.masked[i]).map(|i| i / 5).collect();
        assert_eq!(rows.len(), 6);
        assert_eq!(rows.iter().max().unwrap() - rows.iter().min().unwrap(), 1);
    }
    assert_eq!(
        MaskStrategy::et_mix(196),
        MaskStrategy::Mixed {
            masked: 90,
            visible: 10
        }
    );
    assert!(MaskStrategy::Random { k: 21 }.validate(4, 5).is_err());
}

#[test]
fn augmentations_are_deterministic_and_sane() {
    let img = FloatImage {
        w: 16,
        h: 12,
        c: 3,
        data: (0..16 * 12 * 3).map(|i| (i % 97) as f32 / 97.0).collect(),
    };
    let aug = Augment::et_table4();
    let run = |seed| {
        let mut x = img.clone();
        aug.apply(&mut x, &mut ChaCha8Rng::seed_from_u64(seed));
        x
    };
    assert_eq!(run(5), run(5));
    assert_ne!(run(5), run(6));
    assert!(run(7).data.iter().all(|v| (0.0..=1.0).contains(v)));
    assert_eq!((run(7).w, run(7).h), (16, 12));
    // Flip twice is the identity; a full-window crop is the identity.
    let mut f = img.clone();
    f.hflip();
    assert_ne!(f, img);
    f.hflip();
    assert_eq!(f, img);
    let same = img.resize_window(0.0, 0.0, 12.0, 16.0, 12, 16);
    assert!(
        same.data
            .iter()
            .zip(&img.data)
            .all(|(a, b)| (a - b).abs() < 1e-6)
    );
    assert!(
        Augment {
            hflip: 1.5,
            ..Augment::none()
        }
        .validate()
        .is_err()
    );
}

#[test]
fn pipeline_batches_are_deterministic() {
    let set = ImageSet::new(
        8,
        8,
        1,
        (0..4 * 64).map(|i| (i % 251) as u8).collect(),
        vec![0, 1, 0, 1],
        vec!["a".into(), "b".into()],
    )
    .unwrap();
    let pipe = Pipeline {
        patch: 4,
        augment: Augment::et_table4(),
        normalize: Normalize::of(&set),
        mask: MaskStrategy::Random { k: 2 },
    };
    let a = pipe.batch(&set, &[3, 1, 2], 9).unwrap();
    assert_eq!(a, pipe.batch(&set, &[3, 1, 2], 9).unwrap());
    assert_ne!(a, pipe.batch(&set, &[3, 1, 2], 10).unwrap());
    assert_eq!(
        (a.batch, a.tokens, a.patch_len, a.patches.len()),
        (3, 4, 16, 3 * 64)
    );
    assert_eq!(a.masked.iter().filter(|&&m| m).count(), 6);
    assert_eq!(a.labels, [1, 1, 0]);
}
