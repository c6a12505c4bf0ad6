"""Graphs for basin's blocks: Laplacian positional encodings (basin-graph) and PyG batches as
padded tensors."""

from . import _native


def laplacian_pe(edge_index, num_nodes, k, cls=False):
    """The ``k`` eigenvectors of the symmetric normalised Laplacian of smallest eigenvalue
    (the first, constant one dropped), ``[num_nodes, k]`` float32; with ``cls`` on the
    CLS-augmented graph of ET eq. 23 (CLS as row 0). Columns past the available ones are 0."""
    return _native.laplacian_pe(edge_index, int(num_nodes), int(k), bool(cls))


def to_dense(batch, max_nodes=None):
    """A PyG ``Batch`` (or any object with ``x [V, F]``, ``edge_index [2, E]`` and ``batch [V]``,
    nodes grouped by graph in order, as PyG keeps them) as the padded tensors basin's blocks
    take: ``(x [B, N, F], key_padding_mask [B, N], edge_index [2, E])``.

    ``N`` is the largest graph's node count (or ``max_nodes``); ``key_padding_mask`` is ``True``
    where a slot is padding (``nn.MultiheadAttention``'s convention); the edges are renumbered
    over the flattened ``B·N`` slots, as :class:`basin.EnergyBlock`'s ``edge_index`` reads them.
    """
    import torch

    x, edge_index = getattr(batch, "x", None), getattr(batch, "edge_index", None)
    if x is None or edge_index is None:
        raise ValueError("to_dense needs the batch's node features `x` and its `edge_index`")
    nodes = x.shape[0]
    index = getattr(batch, "batch", None)
    if index is None:  # one graph
        index = torch.zeros(nodes, dtype=torch.long, device=x.device)
    if nodes and bool((index[1:] < index[:-1]).any()):
        raise ValueError("batch: the nodes of each graph must be contiguous and in graph order "
                         "(as PyG's Batch keeps them)")
    graphs = int(index.max()) + 1 if nodes else 0
    counts = torch.bincount(index, minlength=graphs)
    largest = int(counts.max()) if nodes else 0
    width = largest if max_nodes is None else int(max_nodes)
    if largest > width:
        raise ValueError(f"max_nodes={width}: a graph of the batch has {largest} nodes")
    slot = torch.arange(nodes, device=x.device) - (torch.cumsum(counts, 0) - counts)[index]
    flat = index * width + slot
    dense = x.new_zeros(graphs * width, *x.shape[1:]).index_copy(0, flat, x)
    padding = torch.ones(graphs * width, dtype=torch.bool, device=x.device)
    padding[flat] = False
    return (dense.view(graphs, width, *x.shape[1:]), padding.view(graphs, width),
            flat[edge_index])
