"""A first fit imports neither torch._dynamo nor scikit-learn (issue 35 item 6), and the
optimizer step that avoids torch._dynamo is torch's own step, number for number."""

import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from nodegraph.check import eager

ROOT = Path(__file__).resolve().parents[1]


def test_first_fit_imports_no_dynamo_sympy_or_sklearn():
    code = ("import sys, nodegraph\n"
            "r = nodegraph.fit(nodegraph.load('examples/xor.json'), epochs=2)\n"
            "assert len(r.history) == 2\n"
            "print(sorted(m for m in ('torch._dynamo', 'sympy', 'sklearn') "
            "if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=ROOT)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def _pair(seed=0):
    torch.manual_seed(seed)
    a = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    b = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2))
    b.load_state_dict(a.state_dict())
    return a, b


OPTIMIZERS = [
    lambda p: torch.optim.Adam(p, lr=0.01),
    lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    lambda p: torch.optim.RMSprop(p, lr=0.01),
]


@pytest.mark.parametrize("make", OPTIMIZERS)
def test_stepper_equals_torch_step(make):
    a, b = _pair()
    oa, ob = make(a.parameters()), make(b.parameters())
    sched = torch.optim.lr_scheduler.StepLR(ob, 2, 0.5)  # wraps ob.step to track calls
    sched_a = torch.optim.lr_scheduler.StepLR(oa, 2, 0.5)
    step = eager.stepper(ob)
    x, y = torch.randn(16, 3), torch.randn(16, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "lr_scheduler.step() before optimizer.step()"
        for _ in range(5):
            for model, opt, do in ((a, oa, oa.step), (b, ob, step)):
                opt.zero_grad()
                torch.nn.functional.mse_loss(model(x), y).backward()
                do()
            sched.step()
            sched_a.step()
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert ob.state_dict()["state"].keys() == oa.state_dict()["state"].keys()


def test_stepper_with_closure_equals_lbfgs():
    a, b = _pair(1)
    oa = torch.optim.LBFGS(a.parameters(), lr=0.5, max_iter=4)
    ob = torch.optim.LBFGS(b.parameters(), lr=0.5, max_iter=4)
    step = eager.stepper(ob)
    x, y = torch.randn(16, 3), torch.randn(16, 2)

    def closure(model, opt):
        def run():
            opt.zero_grad()
            with torch.enable_grad():
                loss = torch.nn.functional.mse_loss(model(x), y)
                loss.backward()
            return loss
        return run

    for _ in range(3):
        la, lb = oa.step(closure(a, oa)), step(closure(b, ob))
        assert torch.equal(la, lb)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)


def test_stepper_hands_hooked_steps_to_torch():
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    seen = []
    opt.register_step_post_hook(lambda o, args, kwargs: seen.append(o))
    model(torch.ones(1, 2)).sum().backward()
    eager.stepper(opt)()
    assert seen == [opt]


def test_custom_optimizer_step_is_returned_as_is():
    class Plain(torch.optim.Optimizer):
        def __init__(self, params):
            super().__init__(params, {"lr": 0.1})

        def step(self, closure=None):
            for g in self.param_groups:
                for p in g["params"]:
                    p.data.add_(p.grad, alpha=-g["lr"])

    opt = Plain(torch.nn.Linear(2, 1).parameters())
    assert eager.stepper(opt) == opt.step


def test_untraced_restores_the_wrappers():
    """In a fresh process (torch._dynamo not loaded, where untraced acts)."""
    code = """
import sys
from nodegraph.check import eager
methods = eager._plain_methods()
assert len(methods) == 4
with eager.untraced():
    with eager.untraced():  # nested: the outer one's marks stay
        assert all(getattr(m, "__dynamo_disable") is m for m in methods)
    assert all(getattr(m, "__dynamo_disable") is m for m in methods)
assert not any(hasattr(m, "__dynamo_disable") for m in methods)
assert "torch._dynamo" not in sys.modules
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.stdout.strip() == "ok", out.stderr
