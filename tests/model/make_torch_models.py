#!/usr/bin/env python3
"""Writes the TorchScript files torch_model_test.cc loads into OUTDIR.

    make_torch_models.py OUTDIR

Every test process of a suite runs it (ctest starts one per test), and
python3 takes ~3 s to import torch: so it returns at once, before that
import, when OUTDIR holds what this version of the scripts makes (OUTDIR/.made
names their hash), and otherwise makes the files in a directory of its own
and renames it to OUTDIR, so that processes that run at the same time never
see half of them.

Good models come from examples/models/ (so the examples are what is tested);
the bad ones each break one rule of the contract (worker/model/torch/torch_model.h).
"""
import hashlib
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "models")


def _version():
    h = hashlib.sha256()
    for path in [os.path.abspath(__file__)] + sorted(
            os.path.join(EXAMPLES, f) for f in os.listdir(EXAMPLES) if f.endswith(".py")):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()


def _made(out, version):
    try:
        with open(os.path.join(out, ".made")) as f:
            return f.read() == version
    except OSError:
        return False


if __name__ == "__main__" and _made(sys.argv[1], _version()):
    sys.exit(0)

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

sys.path.insert(0, EXAMPLES)
import charlm  # noqa: E402
import lenet  # noqa: E402
import mlp  # noqa: E402
import resnet  # noqa: E402


class NoParams(nn.Module):
    def forward(self, x):
        return x[:, :10]


class WrongOutput(nn.Module):  # 3 logits for 10 classes
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(20, 3)

    def forward(self, x):
        return self.fc(x)


class BadView(nn.Module):  # fails at run time: 20 features are not 30x30
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(900, 10)

    def forward(self, x):
        return self.fc(x.view(-1, 900))


class CustomLoss(nn.Module):  # loss(x, y): squared error on the logits
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(20, 10)

    def forward(self, x):
        return self.fc(x)

    @torch.jit.export
    def loss(self, x, y):
        target = torch.nn.functional.one_hot(y, 10).float()
        return ((self.forward(x) - target) ** 2).mean()


class Unused(nn.Module):  # `spare` never reaches the loss
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 8)
        self.spare = nn.Linear(8, 8)
        self.fc2 = nn.Linear(8, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


class Hog(nn.Module):  # its forward takes 64 MiB more once past the dry run
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(20, 10)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 1:
            x = x + torch.zeros(1 << 24).sum()
        return self.fc(x)


class SwapsParameter(nn.Module):  # its forward swaps w for a larger tensor
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(20, 10))
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 1:  # after the load's dry run
            with torch.no_grad():
                self.w.set_(torch.zeros(400, 100))
        return x @ self.w[:20, :10]


def main():
    final = os.path.abspath(sys.argv[1])
    version = _version()
    out = "%s.tmp-%d" % (final, os.getpid())
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    make(out)
    with open(os.path.join(out, ".made"), "w") as f:
        f.write(version)
    if os.path.isdir(final):  # another version's files (or another process's)
        if _made(final, version):
            shutil.rmtree(out)
            return
        os.rename(final, "%s.old-%d" % (final, os.getpid()))
        shutil.rmtree("%s.old-%d" % (final, os.getpid()), ignore_errors=True)
    try:
        os.rename(out, final)
    except OSError:  # made at the same time by another process
        if not _made(final, version):
            raise
        shutil.rmtree(out)


def make(out):
    torch.manual_seed(1)
    save = lambda m, name: torch.jit.script(m).save(os.path.join(out, name))  # noqa: E731
    save(mlp.Mlp([20, 16, 8, 10]), "mlp.pt")
    save(mlp.Mlp([784, 64, 10]), "mlp784.pt")
    same = mlp.Mlp([20, 16, 8, 10])
    mlp.gradsync_init(same, 7)
    save(same, "mlp_gradsync_init.pt")
    save(lenet.LeNet(), "lenet.pt")
    save(resnet.ResNet(), "resnet.pt")
    save(charlm.CharLM(32, 64, 2), "charlm.pt")
    save(NoParams(), "noparams.pt")
    save(WrongOutput(), "wrong_output.pt")
    save(BadView(), "bad_view.pt")
    save(CustomLoss(), "custom_loss.pt")
    save(Unused(), "unused.pt")
    save(SwapsParameter(), "swaps_parameter.pt")
    save(Hog(), "hog.pt")
    save(mlp.Mlp([20, 10]).double(), "double.pt")
    # PyTorch's own training loop on lenet.pt: the losses the C++ replica
    # must reproduce (same inputs, SGD lr 0.05 momentum 0.9, 20 steps).
    m = torch.jit.load(os.path.join(out, "lenet.pt"))
    x = torch.tensor([[((i * 31 + j * 7) % 17) / 17.0 for j in range(784)]
                      for i in range(16)])
    y = torch.arange(16) % 10
    opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
    with open(os.path.join(out, "lenet_losses.txt"), "w") as f:
        for _ in range(20):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()
            f.write(f"{loss.item():.8f}\n")
    # Tensor data files (worker/model/torch/tensor_data.h): good ones and
    # one per rule broken.
    x = torch.arange(50 * 4 * 5, dtype=torch.float64).reshape(50, 4, 5)
    y = torch.arange(50) % 3
    data = {
        "data_good.pt": {"x": x, "y": y},
        "data_split.pt": {"x": x, "y": y, "x_test": x[:7], "y_test": torch.full((7,), 4)},
        "data_list.pt": [x, y],
        "data_no_y.pt": {"x": x},
        "data_short_y.pt": {"x": x, "y": y[:49]},
        "data_float_y.pt": {"x": x, "y": y.float()},
        "data_big_y.pt": {"x": x, "y": y + 300},
        "data_negative_y.pt": {"x": x, "y": y - 1},
        "data_half_split.pt": {"x": x, "y": y, "x_test": x},
        "data_one.pt": {"x": x[:1], "y": y[:1]},
        "data_test_width.pt": {"x": x, "y": y, "x_test": x[:, :2], "y_test": y},
    }
    # Tensors whose sizes claim more values than their storage holds (a
    # shrunken storage saves as it is; libtorch's reader does not check).
    short_x = x.float().clone()
    short_x.storage().resize_(3)
    short_y = y.clone()
    short_y.storage().resize_(10)
    data["data_short_storage.pt"] = {"x": short_x, "y": y}
    data["data_short_label_storage.pt"] = {"x": x, "y": short_y}
    # A few hundred bytes that expand (stride 0) to 313 MB of float32.
    data["data_expanded.pt"] = {"x": torch.zeros(1, 1).expand(100000, 784),
                                "y": torch.zeros(1, dtype=torch.long).expand(100000)}
    for name, value in data.items():
        torch.save(value, os.path.join(out, name))
    with open(os.path.join(out, "not_torchscript.pt"), "wb") as f:
        f.write(b"PK\x03\x04 this is not a TorchScript archive")


if __name__ == "__main__":
    main()
