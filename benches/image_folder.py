"""The Python anchor of `cargo bench -p basin-benches --bench images`: batches of 64 images
streamed from the same ImageNet-style folder the way torchvision's `ImageFolder` transforms
run on PIL images — open and decode with PIL, `RandomResizedCrop(224, scale=(0.08, 1),
ratio=(3/4, 4/3))` and a horizontal flip (training) or `Resize(256)` + `CenterCrop(224)`
(evaluation), to float arrays normalised per channel — in 2 worker processes, as a
`DataLoader(num_workers=2)` feeds a training loop. Prints images/s for each view.

Usage: python3 benches/image_folder.py FOLDER [--batches 10]
(FOLDER: `BASIN_BENCH_IMAGE_DIR` of the Rust bench, which keeps the folder it writes there.)
Needs pillow and numpy.
"""
import argparse
import math
import multiprocessing as mp
import os
import random
import time

import numpy as np
from PIL import Image

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def crop_params(w, h, rng):
    """torchvision's RandomResizedCrop.get_params."""
    area = w * h
    log_ratio = (math.log(3 / 4), math.log(4 / 3))
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        aspect = math.exp(rng.uniform(*log_ratio))
        cw = int(round(math.sqrt(target * aspect)))
        ch = int(round(math.sqrt(target / aspect)))
        if 0 < cw <= w and 0 < ch <= h:
            return rng.randint(0, h - ch), rng.randint(0, w - cw), ch, cw
    return 0, 0, h, w


def load(args):
    path, train, seed = args
    rng = random.Random(seed)
    img = Image.open(path).convert("RGB")
    w, h = img.size
    if train:
        top, left, ch, cw = crop_params(w, h, rng)
        img = img.resize((224, 224), Image.BILINEAR, box=(left, top, left + cw, top + ch))
        if rng.random() < 0.5:
            img = img.transpose(Image.FLIP_LEFT_RIGHT)
    else:
        s = 256 / min(w, h)
        img = img.resize((round(w * s), round(h * s)), Image.BILINEAR)
        w, h = img.size
        left, top = (w - 224) // 2, (h - 224) // 2
        img = img.crop((left, top, left + 224, top + 224))
    a = np.asarray(img, dtype=np.float32) / 255.0
    return (a - MEAN) / STD


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("folder")
    p.add_argument("--batches", type=int, default=10)
    args = p.parse_args()
    files = sorted(
        os.path.join(root, f)
        for root, _, names in os.walk(args.folder)
        for f in names
        if f.lower().endswith((".jpg", ".jpeg", ".png"))
    )
    with mp.Pool(2) as pool:
        for name, train in [("train_224", True), ("eval_224", False)]:
            pool.map(load, [(f, train, i) for i, f in enumerate(files[:64])])  # warm-up
            start, n = time.perf_counter(), 0
            for b in range(args.batches):
                batch = [(files[(b * 64 + i) % len(files)], train, b * 64 + i) for i in range(64)]
                np.stack(pool.map(load, batch, chunksize=8))
                n += 64
            dt = time.perf_counter() - start
            print(f"{name}: {n / dt:.1f} images/s ({n} images in {dt:.2f} s, 2 processes)")


if __name__ == "__main__":
    main()
