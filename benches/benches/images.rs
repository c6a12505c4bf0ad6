//! Image loading benchmarks (run with `cargo bench -p basin-benches --bench images`).
//!
//! - `image_folder/train_224` and `image_folder/eval_224`: a batch of 64 images streamed from an
//!   ImageNet-style folder (`basin_image::stream::ImageFolder`) — files read, JPEGs decoded in
//!   parallel, Table 4's random resized crop and flip (training) or the resize and centre crop
//!   (evaluation) to 224², normalised, patchified and masked: the images/s ET's ImageNet
//!   training gets from two cores. The folder is generated once per run (400 JPEGs of
//!   ImageNet's typical 500 × 375, quality 90, textured so they compress as photographs do).
//!   Reported as images/s; `benches/image_folder.py` is the Python anchor (PIL decoding and
//!   torchvision's crops in two worker processes) on the same files: with
//!   `BASIN_BENCH_IMAGE_DIR=DIR` the folder is written there and kept for it.

use std::time::Duration;

use basin_image::stream::{ImageFolder, OnCorrupt};
use basin_image::{Augment, MaskStrategy, Normalize, Pipeline};
use criterion::{Criterion, Throughput, criterion_group};
use rand::{RngExt, SeedableRng};

/// 400 JPEGs of 500 × 375 in 4 class folders: smooth colour fields with noise.
fn folder(dir: &std::path::Path) {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
    for class in 0..4 {
        let sub = dir.join(format!("n{class:08}"));
        std::fs::create_dir_all(&sub).expect("folder");
        for k in 0..100 {
            let (a, b) = (rng.random_range(0.0..6.0f32), rng.random_range(0.0..6.0f32));
            let img = image::RgbImage::from_fn(500, 375, |x, y| {
                let (u, v) = (x as f32 / 500.0, y as f32 / 375.0);
                let base = |p: f32| (127.0 + 100.0 * (p).sin()) as u8;
                let noise = (x.wrapping_mul(2_654_435_761) ^ y.wrapping_mul(40_503)) % 24;
                image::Rgb([
                    base(a * u + b * v).saturating_add(noise as u8),
                    base(b * u - a * v),
                    base((a + b) * u * v * 3.0),
                ])
            });
            let path = sub.join(format!("{k:04}.JPEG"));
            let mut out = std::io::BufWriter::new(std::fs::File::create(&path).expect("file"));
            image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, 90)
                .encode_image(&img)
                .expect("encodes");
        }
    }
}

fn streaming(c: &mut Criterion) {
    let kept = std::env::var_os("BASIN_BENCH_IMAGE_DIR").map(std::path::PathBuf::from);
    let tmp = kept.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("basin-bench-imagenet-{}", std::process::id()))
    });
    folder(&tmp);
    let set = ImageFolder::open(&tmp, 224, false, OnCorrupt::Error).expect("opens");
    let normalize = Normalize {
        mean: vec![0.485, 0.456, 0.406],
        std: vec![0.229, 0.224, 0.225],
    };
    let mut group = c.benchmark_group("image_folder");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .throughput(Throughput::Elements(64));
    for (name, augment) in [
        ("train_224", Augment::et_table4()),
        ("eval_224", Augment::none()),
    ] {
        let pipe = Pipeline {
            patch: 16,
            augment,
            normalize: normalize.clone(),
            mask: MaskStrategy::et_mix(196),
        };
        let mut start = 0usize;
        group.bench_function(name, |b| {
            b.iter(|| {
                let items: Vec<usize> = (0..64).map(|i| (start + i) % 400).collect();
                start += 64;
                pipe.batch(&set, &items, start as u64).expect("batch")
            })
        });
    }
    group.finish();
    if kept.is_none() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
}

criterion_group!(benches, streaming);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
