"""Graph preprocessing by basin-graph."""

from . import _native


def laplacian_pe(edge_index, num_nodes, k, cls=False):
    """The ``k`` eigenvectors of the symmetric normalised Laplacian of smallest eigenvalue
    (the first, constant one dropped), ``[num_nodes, k]`` float32; with ``cls`` on the
    CLS-augmented graph of ET eq. 23 (CLS as row 0). Columns past the available ones are 0."""
    return _native.laplacian_pe(edge_index, int(num_nodes), int(k), bool(cls))
