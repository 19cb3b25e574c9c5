"""The runs' processes: flat parameter/gradient buffers and a steady heap (docs/validation.md §"Runs",
§"Runs")."""

import os
import subprocess
import sys
import textwrap

import torch

from dnnbench import presets
from dnnbench.measure.alloc import STEADY_TUNABLE, has_steady_tunables, steady_allocator, steady_environment
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
    from dnnbench.measure.alloc import STEADY_TUNABLE, has_steady_tunables, steady_allocator, steady_environment
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


_LARGE_FAULTS = textwrap.dedent("""
    import resource, sys
    import torch
    from dnnbench.measure.alloc import STEADY_TUNABLE, has_steady_tunables, steady_allocator, steady_environment
    if sys.argv[1] == "steady":
        assert steady_allocator()
    torch.set_num_threads(1)
    x = torch.randn(64, 128, 32, 32, requires_grad=True)  # 32 MiB: glibc's largest mmap threshold
    def step():
        y = torch.relu(x * 2.0)  # two outputs of 32 MiB and their errors, freed at the step's end
        y.sum().backward()
    for _ in range(5):
        step()
    faults = []
    for _ in range(21):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        step()
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(sorted(faults)[10])  # the median step: a rare growth of the heap's top is not the steady state
""")


def _faults(mode: str, env: dict[str, str]) -> float:
    return float(subprocess.run([sys.executable, "-c", _LARGE_FAULTS, mode], capture_output=True, text=True,
                                check=True, timeout=120, env=env).stdout)


def test_steady_heap_reuses_blocks_past_the_mmap_threshold() -> None:
    """Outputs of 32 MiB and more come from the heap too (M_MMAP_MAX = 0) and, in a process started
    without glibc's tcache, are reused: no page faults in the median step, where glibc's defaults map
    each anew and fault in its 8192 pages every call (4 such blocks a step: 32768 faults measured). The
    heap's top still grows now and then (64 MiB at once, the top pad: in one of five runs of ten steps)."""
    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    steady, default = _faults("steady", steady_environment(plain)), _faults("default", plain)
    assert steady < 100, steady
    assert default > 10_000, default


def test_steady_environment_adds_the_tunable_and_keeps_the_users() -> None:
    assert steady_environment({})["GLIBC_TUNABLES"] == STEADY_TUNABLE
    env = steady_environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "PATH": "/bin"})
    assert env == {"GLIBC_TUNABLES": f"glibc.malloc.arena_max=2:{STEADY_TUNABLE}", "PATH": "/bin"}
    mine = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=3"}
    assert steady_environment(mine) == mine and has_steady_tunables(mine) and not has_steady_tunables({})


def test_measuring_commands_restart_with_a_steady_heap() -> None:
    """``dnnbench calibrate`` replaces its process (``execve``, intercepted here) by ``python -m
    dnnbench.cli`` with the same arguments and the tunable; a command that measures nothing does not."""
    probe = textwrap.dedent("""
        import os, sys
        from dnnbench.measure import alloc
        calls = []
        alloc.os.execve = lambda exe, argv, env: calls.append((argv, env["GLIBC_TUNABLES"])) or sys.exit(7)
        sys.argv = ["dnnbench", *sys.argv[1:]]
        from dnnbench.cli import main
        try:
            main()
        finally:
            print(calls)
    """)
    plain = {k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"}
    res = subprocess.run([sys.executable, "-c", probe, "calibrate", "-o", "x.json"], capture_output=True,
                         text=True, timeout=120, env=plain)
    assert res.returncode == 7, res.stderr
    assert f"'-m', 'dnnbench.cli', 'calibrate', '-o', 'x.json'], '{STEADY_TUNABLE}')]" in res.stdout
    res = subprocess.run([sys.executable, "-c", probe, "presets"], capture_output=True, text=True, timeout=120,
                         env=plain)
    assert res.returncode == 0 and res.stdout.strip().endswith("[]"), res.stderr


_TIMED_THEN_FAULTS = textwrap.dedent("""
    import resource, sys
    import torch
    from dnnbench import presets
    from dnnbench.measure import chains, shapes
    torch.set_num_threads(1)
    net = presets.network("lenet5")
    if sys.argv[1] == "time_in_steps":
        shapes.time_in_steps(net, 2, 1, steps=1, warmup=0)
    elif sys.argv[1] == "time_cases":
        case = shapes.ShapeCase("c", {"kind": "activation", "function": "relu"}, (4,), 2, 1)
        shapes.time_cases([case], rounds=1)
    elif sys.argv[1] == "plain_step_s":
        chains.plain_step_s(net, 2, 1, steps=1, warmup=0)
    faults = []
    for _ in range(9):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        torch.empty(16 * 2**20).fill_(1.0)  # 64 MiB, freed at once
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    print(sorted(faults)[4])
""")


def test_every_timing_of_a_layer_or_step_runs_on_a_steady_heap() -> None:
    """The timings behind calibrate and ``calibrate --network`` (the layer cases, the layers inside
    steps, whole plain steps) fix the heap themselves, whoever calls them: afterwards a 64 MiB tensor
    comes from memory the heap keeps (no faults), where glibc's defaults map it anew every time."""
    env = steady_environment({k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"})

    def faults(mode: str) -> float:
        res = subprocess.run([sys.executable, "-c", _TIMED_THEN_FAULTS, mode], capture_output=True, text=True,
                             timeout=120, env=env)
        assert res.returncode == 0, res.stderr
        return float(res.stdout.split()[-1])

    assert faults("nothing") > 10_000
    for mode in ("time_in_steps", "time_cases", "plain_step_s"):
        assert faults(mode) < 100, mode
