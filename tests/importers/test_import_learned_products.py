"""Products with a learned matrix written by hand (``x @ self.w``, ``self.w @ x``, ``torch.einsum`` with a
parameter) import as fc layers without a bias along the summed axis, and a tensor unpacked along its first
axis (``q, k, v = qkv``) as slices: the runner's build, given the module's weights, computes what the
module computes."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from importers.import_helpers import imports_like_pytorch
from torch import nn

import dnnbench
from dnnbench.errors import SpecError
from dnnbench.measure import torchnet


class Product(nn.Module):
    """``einsum(equation, x, w)`` (or ``(w, x)`` with ``learned_first``) with a learned ``w``."""

    def __init__(self, equation: str, weight_shape: tuple[int, int], learned_first: bool = False) -> None:
        super().__init__()
        self.equation, self.learned_first = equation, learned_first
        self.w = nn.Parameter(torch.randn(*weight_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.equation == "@":
            return x @ self.w
        if self.equation == "@left":
            return self.w @ x
        operands = (self.w, x) if self.learned_first else (x, self.w)
        return torch.einsum(self.equation, *operands)


def _computes_what_the_module_computes(module: Product, shape: tuple[int, ...], transposed: bool) -> None:
    net = imports_like_pytorch(module, shape, torch.randn(2, *shape))
    fcs = [layer for layer in net.layers if layer.kind == "fc"]
    assert len(fcs) == 1 and fcs[0].bias is False
    built = torchnet.build_model(net)
    (weight,) = built.parameters()
    weight.data.copy_(module.w.data.T if transposed else module.w.data)
    x = torch.randn(3, *shape)
    assert torch.allclose(built(x), module(x), atol=1e-5)


@pytest.mark.parametrize("equation,weight,shape,transposed,learned_first", [
    ("@", (8, 5), (4, 8), True, False),            # x @ W: W is (in, out)
    ("@", (8, 5), (8,), True, False),              # a vector per sample
    ("@left", (6, 4), (3, 4, 7), False, False),    # W @ x: W is (out, in), the last axis but one
    ("bni,io->bno", (8, 3), (5, 8), True, False),
    ("bni,oi->bno", (3, 8), (5, 8), False, False),
    ("oc,bcn->bon", (5, 4), (4, 7), False, True),  # the learned operand first, the channels summed
    ("...i,io->...o", (8, 3), (2, 5, 8), True, False),
])
def test_a_product_with_a_learned_matrix_is_an_fc_layer_along_the_summed_axis(
        equation: str, weight: tuple[int, int], shape: tuple[int, ...], transposed: bool, learned_first: bool) -> None:
    _computes_what_the_module_computes(Product(equation, weight, learned_first), shape, transposed)


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=3), data=st.data())
def test_any_einsum_that_sums_one_axis_into_a_learned_one_imports_as_pytorch_computes(
        sizes: list[int], data: st.DataObject) -> None:
    """Over generated einsums: a per-sample value of 1–3 axes, any of them summed into a new axis of any
    size at its place, the learned matrix (in, out) or (out, in), before or after the data (a summed axis
    of one value torch computes as a broadcast product, which FlopCounterMode does not count)."""
    letters = "pqr"[:len(sizes)]
    axis = data.draw(st.integers(0, len(sizes) - 1), label="axis")
    sizes[axis] = data.draw(st.integers(2, 5), label="summed")  # one value summed: torch multiplies, uncounted
    out_size = data.draw(st.integers(1, 5), label="out")
    transposed = data.draw(st.booleans(), label="(in, out)")
    learned_first = data.draw(st.booleans(), label="learned first")
    summed = letters[axis]
    learned, weight = (f"{summed}o", (sizes[axis], out_size)) if transposed else (f"o{summed}", (out_size, sizes[axis]))
    terms = [f"b{letters}", learned][::-1 if learned_first else 1]
    equation = f"{terms[0]},{terms[1]}->b{letters.replace(summed, 'o')}"
    _computes_what_the_module_computes(Product(equation, weight, learned_first), tuple(sizes), transposed)


@pytest.mark.parametrize("equation,weight,shape", [
    ("bi,ij->bij", (4, 3), (4,)),        # an outer product: nothing summed
    ("bij,jk->bki", (3, 2), (4, 3)),     # the new axis not in the summed one's place
    ("bi,i->b", (4,), (4,)),             # a vector operand
    ("bld,dn->bldn", (3, 2), (5, 3)),    # a state space model's input spread over its states
    ("bld,ld->bd", (5, 3), (5, 3)),      # a learned weighting of the positions, summed over them
    ("dn,bld->bnld", (3, 2), (5, 3)),    # the learned operand first, the output in another order
])
def test_an_einsum_with_a_learned_operand_of_another_form_is_a_product_with_the_tensor(
        equation: str, weight: tuple[int, ...], shape: tuple[int, ...]) -> None:
    """Not an fc layer's form: the learned tensor as a layer of its own (zeros plus a learned table) and the
    batched product of the two, with the module's weights and FlopCounterMode's FLOPs; the runner's build
    trains."""
    module = Product(equation, (1, 1), learned_first=not equation.startswith("b"))
    module.w = nn.Parameter(torch.randn(*weight))
    net = imports_like_pytorch(module, shape, torch.randn(2, *shape))
    kinds = [layer.kind for layer in net.layers]
    outer = equation in ("bi,ij->bij", "bld,dn->bldn", "dn,bld->bnld")  # nothing summed: PyTorch's broadcast mul
    assert ("mul" if outer else "matmul") in kinds and "position_embedding" in kinds and "fc" not in kinds


def test_an_einsum_of_three_operands_with_a_learned_one_is_one_line() -> None:
    class Three(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.einsum("bi,i,i->b", x, self.w, self.w)

    with pytest.raises(SpecError, match=r"is einsum 'bi,i,i->b'") as err:
        dnnbench.from_torch(Three(), (4,))
    assert "\n" not in str(err.value)


class UnpackedAttention(nn.Module):
    """Attention whose queries, keys and values are unpacked from one tensor (``q, k, v = qkv``)."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv, self.out = nn.Linear(16, 48), nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).reshape(b, t, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, c)
        return self.out(y.mean(1))


class PerSampleLoop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([self.fc(row) for row in x])


def test_a_tensor_unpacked_along_its_first_axis_imports_as_its_slices() -> None:
    module = UnpackedAttention()
    net = imports_like_pytorch(module, (6, 16), torch.randn(2, 6, 16))
    assert [layer.kind for layer in net.layers].count("slice") == 3
    built = torchnet.build_model(net)
    for mine, theirs in zip(built.parameters(), module.parameters(), strict=True):
        mine.data.copy_(theirs.data)
    x = torch.randn(4, 6, 16)
    assert torch.allclose(built(x), module(x), atol=1e-5)


def test_a_loop_over_the_batch_s_samples_is_one_line() -> None:
    """Unpacking the batch's own axis would trace one sample of it: refused, not imported as one."""
    with pytest.raises(SpecError, match=r"changes the batch dimension") as err:
        dnnbench.from_torch(PerSampleLoop(), (8,))
    assert "\n" not in str(err.value)


class TableProduct(nn.Module):
    """``x * t`` (or ``t * x``) of a learned tensor ``t`` of ``table`` (computed value for value from its
    parameter, as ``torch.exp(A)``), after an fc so that the product's input needs its gradient."""

    def __init__(self, width: int, table: tuple[int, ...], unsqueeze: bool, exp: bool, left: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.t = nn.Parameter(torch.randn(*table))
        self.unsqueeze, self.exp, self.left = unsqueeze, exp, left

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if self.unsqueeze:
            h = h.unsqueeze(-1)  # (.., D, 1) spread over a new axis by (D, N)
        t = torch.exp(self.t) if self.exp else self.t
        return t * h if self.left else h * t


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 4), width=st.integers(1, 5), n=st.integers(1, 4), unsqueeze=st.booleans(),
       exp=st.booleans(), left=st.booleans(), lead=st.booleans(), rows_broadcast=st.booleans())
def test_a_product_with_a_learned_tensor_of_the_values_shape_imports_as_pytorch_computes(
        rows: int, width: int, n: int, unsqueeze: bool, exp: bool, left: bool, lead: bool,
        rows_broadcast: bool) -> None:
    """A learned tensor that broadcasts over a sample's values (a state space model's exp(A), a learned
    mask of the values' shape, with or without a leading axis of 1) times a layer output: its weights
    are the parameter's, FLOPs as FlopCounterMode counts them, and the runner's build computes the
    module's function of the same shape."""
    table: tuple[int, ...] = (1 if rows_broadcast else rows, width, n) if unsqueeze else (
        1 if rows_broadcast else rows, width)
    if lead:
        table = (1, *table)
    module = TableProduct(width, table, unsqueeze, exp, left)
    net = imports_like_pytorch(module, (rows, width), torch.randn(2, rows, width))
    # one factor per position of one axis is a layer scale; any other form a product with the table
    assert net.layers[-1].kind in ("scale", "mul")
    assert net.layers[-1].kind == "mul" or sum(d > 1 for d in table) <= 1
    assert net.shapes[-1] == ((rows, width, n) if unsqueeze else (rows, width))


def test_a_product_with_a_learned_tensor_that_does_not_broadcast_is_one_line() -> None:
    class Mismatch(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc, self.t = nn.Linear(4, 4), nn.Parameter(torch.randn(3, 4))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(x) * self.t[:2]  # a part of the parameter: not value for value

    with pytest.raises(SpecError, match="not computed value for value from its parameters") as err:
        dnnbench.from_torch(Mismatch(), (2, 4))
    assert "\n" not in str(err.value)


class BroadcastUp(nn.Module):
    """``h + t`` where the layer output ``h`` has axes of 1 that the learned (or constant) ``t`` spreads
    it over (a VQ-VAE's distances: (N, 1) + (K,))."""

    def __init__(self, width: int, ones: tuple[bool, ...], sizes: tuple[int, ...], learned: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.ones = ones
        table = torch.randn(*sizes)
        if learned:
            self.t = nn.Parameter(table)
        else:
            self.register_buffer("t", table)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)  # (B, R, W)
        for axis, one in enumerate(self.ones):
            if one:
                h = h.mean(axis + 1, keepdim=True)
        return h + self.t


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 4), width=st.integers(1, 5), ones=st.tuples(st.booleans(), st.booleans()),
       learned=st.booleans())
def test_a_layer_output_broadcast_up_by_a_table_imports_as_pytorch_computes(
        rows: int, width: int, ones: tuple[bool, bool], learned: bool) -> None:
    """The values copied along each axis of 1 (a ``repeat``), then the learned table or constant added:
    the output's shape and weights are PyTorch's, and the runner's build trains."""
    sizes = (rows, width)
    module = BroadcastUp(width, ones, sizes, learned)
    net = imports_like_pytorch(module, (rows, width), torch.randn(2, rows, width))
    assert net.shapes[-1] == sizes
    repeats = [layer for layer in net.layers if layer.kind == "repeat"]
    assert len(repeats) == sum(o and s > 1 for o, s in zip(ones, sizes, strict=True))
