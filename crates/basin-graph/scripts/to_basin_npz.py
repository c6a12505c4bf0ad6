#!/usr/bin/env python3
"""Converts graph data served only for PyTorch Geometric or DGL into the npz layouts basin reads.

basin reads no pickles and no DGL binaries. Run this once where PyG (or DGL) is installed; it
writes:

* ``graphs``: a graph set in the layout of ``basin_graph::lrgb`` (``node_feat``, ``edge_feat``,
  ``edge_index`` local to each graph, ``node_ptr``/``edge_ptr`` offsets, and ``labels``,
  ``node_labels`` or ``link_*`` for the set's task), as ``OUT/<set>.npz`` with the split as
  ``OUT/<split json>``: the LRGB sets other than Peptides-func (PyG's ``LRGBDataset``) and the
  GNN-Benchmark superpixel sets (PyG's ``GNNBenchmarkDataset``, which serves the benchmark's
  pickles as tensors; node features are its ``x`` then its ``pos``) and ZINC (PyG's ``ZINC``,
  the 12k subset: the atom type as the node feature, the bond type as the edge feature).
* ``nodes``: one node-anomaly graph in the layout of ``basin_graph::anomaly``
  (``node_features`` f32 [N, F], ``node_labels`` i64 [N], ``edges`` i64 [E, 2]), from a DGL
  binary graph (T-Finance, T-Social as BWGNN publishes them) or a PyG node dataset.

``--fake N`` in place of a source converts PyG's generated ``FakeDataset`` (no download, seed 0):
what the tests run. Examples::

    python to_basin_npz.py graphs --set mnist-superpixels --pyg gnn-benchmark --name MNIST \\
        --root ~/pyg --out DATA/lrgb/mnist-superpixels
    python to_basin_npz.py nodes --dgl tfinance --out DATA/anomaly/tfinance.npz

Files are written to a temporary name and renamed, so an interrupted conversion leaves none.
"""

import argparse
import json
import os
import sys

import numpy as np

# The sets of ``basin_graph::lrgb::LrgbSet``: task, node and edge feature widths, split JSON.
SETS = {
    "peptides-struct": ("regression", 11, 9, 3, "splits_random_stratified_peptide_structure.json"),
    "pascalvoc-sp": ("node-classes", 21, 14, 2, "splits.json"),
    "coco-sp": ("node-classes", 81, 14, 2, "splits.json"),
    "pcqm-contact": ("links", 0, 9, 3, "splits.json"),
    "mnist-superpixels": ("graph-classes", 10, 3, 1, "splits.json"),
    "cifar10-superpixels": ("graph-classes", 10, 5, 1, "splits.json"),
    "zinc": ("regression", 1, 1, 1, "splits.json"),
}

# PyG's names of the sets above.
PYG_NAMES = {
    "peptides-struct": ("lrgb", "peptides-struct"),
    "pascalvoc-sp": ("lrgb", "pascalvoc-sp"),
    "coco-sp": ("lrgb", "coco-sp"),
    "pcqm-contact": ("lrgb", "pcqm-contact"),
    "mnist-superpixels": ("gnn-benchmark", "MNIST"),
    "cifar10-superpixels": ("gnn-benchmark", "CIFAR10"),
    "zinc": ("zinc", "subset"),
}


def fail(message):
    sys.exit(f"to_basin_npz: {message}")


def save_npz(path, **arrays):
    """Writes ``path`` atomically (a temporary file in the same folder, then a rename)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.partial")
    with open(tmp, "wb") as f:
        np.savez(f, **arrays)
    os.replace(tmp, path)


def save_json(path, value):
    tmp = f"{path}.partial"
    with open(tmp, "w") as f:
        json.dump(value, f)
    os.replace(tmp, path)


def pyg_splits(args):
    """The source's graphs, split by split: ``[(split name, dataset), …]``."""
    if args.fake is not None:
        import torch
        from torch_geometric.datasets import FakeDataset

        torch.manual_seed(0)
        _, classes, fw, pw, _ = SETS[args.set]
        task = "node" if SETS[args.set][0] == "node-classes" else "graph"
        ds = FakeDataset(num_graphs=args.fake, avg_num_nodes=12, num_channels=fw,
                         edge_dim=pw, num_classes=max(classes, 2), task=task)
        graphs = list(ds)
        for data in graphs:
            # FakeDataset draws classes; the regression and link sets get targets of their shape.
            if SETS[args.set][0] == "regression":
                data.y = torch.randn(1, classes)
            elif SETS[args.set][0] == "links":
                data.edge_label_index = torch.randint(0, data.num_nodes, (2, 6))
                data.edge_label = torch.randint(0, 2, (6,))
        a, b = int(0.8 * len(graphs)), int(0.9 * len(graphs))
        return [("train", graphs[:a]), ("val", graphs[a:b]), ("test", graphs[b:])]
    family, name = (args.pyg, args.name) if args.name else PYG_NAMES[args.set]
    if args.root is None:
        fail("--root (PyG's dataset folder) is needed with --pyg")
    if family == "lrgb":
        from torch_geometric.datasets import LRGBDataset as Source
    elif family == "gnn-benchmark":
        from torch_geometric.datasets import GNNBenchmarkDataset as Source
    elif family == "zinc":
        from torch_geometric.datasets import ZINC

        # The GNN Benchmark's 12k subset unless `--name full` asks for all 250k molecules.
        return [(s, ZINC(args.root, subset=name != "full", split=s)) for s in ("train", "val", "test")]
    else:
        fail(f"--pyg: one of lrgb, gnn-benchmark, zinc; got `{family}`")
    return [(s, Source(args.root, name, split=s)) for s in ("train", "val", "test")]


def width(array, rows, expected, what, graph):
    """``array`` as a float [rows, expected] matrix (a vector as one column)."""
    if array is None:
        fail(f"graph {graph}: no {what}; the set needs {expected} columns")
    a = np.asarray(array, dtype=np.float32)
    if a.ndim == 1:
        a = a[:, None]
    if a.shape != (rows, expected):
        fail(f"graph {graph}: {what} of shape {a.shape}, the set needs ({rows}, {expected})")
    return a


def convert_graphs(args):
    task, classes, fw, pw, split_json = SETS[args.set]
    node_feat, edge_feat, edge_index, labels, node_labels = [], [], [], [], []
    links, link_labels, node_ptr, edge_ptr, link_ptr = [], [], [0], [0], [0]
    split, count = {"train": [], "val": [], "test": []}, 0
    for name, graphs in pyg_splits(args):
        for data in graphs:
            n, e = int(data.num_nodes), int(data.edge_index.shape[1])
            x = data.x.numpy() if data.x is not None else None
            if getattr(data, "pos", None) is not None:
                x = np.concatenate([x, data.pos.numpy()], axis=1)
            node_feat.append(width(x, n, fw, "node features (x, then pos)", count))
            attr = data.edge_attr if data.edge_attr is not None else getattr(data, "edge_weight", None)
            edge_feat.append(width(None if attr is None else attr.numpy(), e, pw,
                                   "edge features (edge_attr or edge_weight)", count))
            edge_index.append(data.edge_index.numpy().astype(np.int64))
            y = data.y.numpy()
            if task == "graph-classes":
                labels.append(int(y.reshape(-1)[0]))
            elif task == "regression":
                labels.append(y.reshape(-1, classes)[0].astype(np.float32))
            elif task == "node-classes":
                node_labels.append(y.reshape(-1).astype(np.int64))
            else:
                links.append(data.edge_label_index.numpy().astype(np.int64))
                link_labels.append(data.edge_label.numpy().astype(np.int64))
                link_ptr.append(link_ptr[-1] + links[-1].shape[1])
            node_ptr.append(node_ptr[-1] + n)
            edge_ptr.append(edge_ptr[-1] + e)
            split[name].append(count)
            count += 1
    if count == 0:
        fail("the source has no graphs")
    arrays = {
        "node_feat": np.concatenate(node_feat),
        "edge_feat": np.concatenate(edge_feat),
        "edge_index": np.concatenate(edge_index, axis=1),
        "node_ptr": np.asarray(node_ptr, dtype=np.int64),
        "edge_ptr": np.asarray(edge_ptr, dtype=np.int64),
    }
    if task == "graph-classes":
        arrays["labels"] = np.asarray(labels, dtype=np.int64)
    elif task == "regression":
        arrays["labels"] = np.stack(labels)
    elif task == "node-classes":
        arrays["node_labels"] = np.concatenate(node_labels)
    else:
        arrays["link_index"] = np.concatenate(links, axis=1)
        arrays["link_label"] = np.concatenate(link_labels)
        arrays["link_ptr"] = np.asarray(link_ptr, dtype=np.int64)
    os.makedirs(args.out, exist_ok=True)
    save_npz(os.path.join(args.out, f"{args.set}.npz"), **arrays)
    save_json(os.path.join(args.out, split_json), split)
    print(f"wrote {count} graphs to {args.out} ({args.set}.npz, {split_json})")


def convert_nodes(args):
    if args.dgl:
        try:
            import dgl
        except ImportError:
            fail("--dgl needs DGL (pip install dgl) to read the binary graph")
        graphs, _ = dgl.load_graphs(args.dgl)
        g = graphs[0]
        x = g.ndata[args.feature_key].numpy()
        y = g.ndata[args.label_key].numpy()
        src, dst = (t.numpy() for t in g.edges())
    else:
        if args.fake is not None:
            import torch
            from torch_geometric.datasets import FakeDataset

            torch.manual_seed(0)
            data = FakeDataset(num_graphs=1, avg_num_nodes=args.fake, num_channels=8,
                               num_classes=2, task="node")[0]
        elif args.pyg:
            import torch_geometric.datasets as datasets

            source = getattr(datasets, args.pyg, None)
            if source is None:
                fail(f"--pyg: torch_geometric.datasets has no `{args.pyg}`")
            data = (source(args.root, args.name) if args.name else source(args.root))[0]
        else:
            fail("nodes: give --dgl FILE, --pyg CLASS --root DIR, or --fake N")
        x, y = data.x.numpy(), data.y.numpy()
        src, dst = data.edge_index.numpy()
    if y.ndim == 2:
        # One-hot labels (T-Finance's [N, 2]): the class index.
        y = y.argmax(axis=1)
    y = y.astype(np.int64)
    if not set(np.unique(y)) <= {0, 1}:
        fail(f"labels {sorted(set(np.unique(y)))[:5]}…: a node-anomaly graph has 0 (normal) and 1 (anomaly)")
    save_npz(args.out, node_features=np.asarray(x, dtype=np.float32), node_labels=y,
             edges=np.stack([src, dst], axis=1).astype(np.int64))
    print(f"wrote {len(y)} nodes, {len(src)} edges, {int(y.sum())} anomalies to {args.out}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    g = sub.add_parser("graphs", help="a PyG graph set into basin's LRGB layout")
    g.add_argument("--set", required=True, choices=sorted(SETS), help="the basin set to write")
    g.add_argument("--pyg", choices=["lrgb", "gnn-benchmark", "zinc"], help="PyG's dataset family")
    g.add_argument("--name", help="PyG's name of the set (default: the set's)")
    g.add_argument("--root", help="PyG's dataset folder")
    g.add_argument("--fake", type=int, help="convert PyG's generated FakeDataset of N graphs")
    g.add_argument("--out", required=True, help="the set's folder under the data directory")
    n = sub.add_parser("nodes", help="one node-anomaly graph into basin's anomaly npz")
    n.add_argument("--dgl", help="a DGL binary graph (T-Finance, T-Social)")
    n.add_argument("--feature-key", default="feature", help="DGL node data key of the features")
    n.add_argument("--label-key", default="label", help="DGL node data key of the labels")
    n.add_argument("--pyg", help="a torch_geometric.datasets class")
    n.add_argument("--name", help="its name argument, if it takes one")
    n.add_argument("--root", help="PyG's dataset folder")
    n.add_argument("--fake", type=int, help="convert PyG's generated graph of about N nodes")
    n.add_argument("--out", required=True, help="the .npz to write")
    args = parser.parse_args(argv)
    if args.command == "graphs":
        if args.pyg is None and args.fake is None:
            fail("graphs: give --pyg FAMILY --root DIR, or --fake N")
        convert_graphs(args)
    else:
        convert_nodes(args)


if __name__ == "__main__":
    main()
