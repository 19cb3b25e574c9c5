"""The runs' processes: flat parameter/gradient buffers and a steady heap (docs/validation.md §"Runs",
§"Runs")."""

import subprocess
import sys
import textwrap

import torch

from dnnbench import presets
from dnnbench.measure.alloc import steady_allocator
from dnnbench.measure.dataparallel import flat_buffers
from dnnbench.measure.torchnet import batch, build_model, loss_fn


def test_gradients_land_in_the_flat_buffer_and_weights_come_from_it() -> None:
    net = presets.network("lenet5")
    torch.manual_seed(0)
    model, reference = build_model(net), build_model(net)
    reference.load_state_dict(model.state_dict())
    crit, (x, y) = loss_fn(net), batch(net, 8, seed=1)
    params, grad = flat_buffers(model)
    assert params.numel() == grad.numel() == sum(p.numel() for p in reference.parameters())
    for _ in range(2):  # the second step checks that zero_grad keeps the views
        model.zero_grad(set_to_none=False)
        crit(model(x), y).backward()
        reference.zero_grad(set_to_none=False)
        crit(reference(x), y).backward()
        expected = torch.cat([p.grad.reshape(-1) for p in reference.parameters()])
        assert torch.equal(grad, expected)
    # What a pull writes into the flat buffer is what the model computes with.
    new = torch.randn_like(params)
    params.copy_(new)
    with torch.no_grad():
        for p, q in zip(reference.parameters(), torch.split(new, [p.numel() for p in reference.parameters()]),
                        strict=True):
            p.copy_(q.view_as(p))
        assert torch.allclose(model(x), reference(x))


def test_steady_allocator_is_idempotent() -> None:
    assert steady_allocator() is steady_allocator()


_FAULTS = textwrap.dedent("""
    import resource, sys
    import torch
    from dnnbench import presets
    from dnnbench.measure.alloc import steady_allocator
    from dnnbench.measure.torchnet import batch, build_model, loss_fn
    if sys.argv[1] == "steady":
        assert steady_allocator()
    torch.set_num_threads(1)
    net = presets.network("lenet5")
    model, crit, (x, y) = build_model(net), loss_fn(net), batch(net, 32, seed=1)
    def step():
        model.zero_grad(set_to_none=False)
        crit(model(x), y).backward()
    for _ in range(10):
        step()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(40):
        step()
    print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 40)
""")


def test_steady_heap_takes_no_page_faults_per_step() -> None:
    """In the steady state a LeNet-5 training step takes (almost) no page faults with the fixed
    thresholds (0-7 per step measured over 40 steps after 10: the heap's first growth); glibc's defaults
    fault activations back in every step (83-586 faults measured)."""
    faults = float(subprocess.run([sys.executable, "-c", _FAULTS, "steady"], capture_output=True, text=True,
                                  check=True, timeout=120).stdout)
    assert faults < 20, faults
