"""More programs in the style of pytorch/examples, written and compared as
in test_examples.py: mnist_rnn (batch-first LSTM, BatchNorm1d, Dropout2d of
a 2-D input), siamese_network (torchvision's ResNet-18 as written there,
children() surgery, apply() with the deprecated init.xavier_uniform, a
Dataset of pairs, BCELoss, where(cond, 1, 0)) and mnist_forward_forward
(nn.Linear subclassed with its own train(), in-place slice scaling, indexing
with range, per-layer Adam).
"""
import numpy as np
import pytest
import torch as real_torch

import musa
from test_examples import data, labels, same_start, snapshot
# ---- mnist_rnn ----

def mnist_rnn_program(torch, p1=0.25, p2=0.5):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.rnn = nn.LSTM(input_size=28, hidden_size=64, batch_first=True)
            self.batchnorm = nn.BatchNorm1d(64)
            self.dropout1 = nn.Dropout2d(p1)
            self.dropout2 = nn.Dropout2d(p2)
            self.fc1 = nn.Linear(64, 32)
            self.fc2 = nn.Linear(32, 10)

        def forward(self, input):
            input = input.reshape(-1, 28, 28)
            output, hidden = self.rnn(input)
            output = output[:, -1, :]
            output = self.batchnorm(output)
            output = self.dropout1(output)
            output = self.fc1(output)
            output = F.relu(output)
            output = self.dropout2(output)
            output = self.fc2(output)
            output = F.log_softmax(output, dim=1)
            return output

    return Net


def mnist_rnn_run(lib, model, steps=3):
    F = lib.nn.functional
    opt = lib.optim.Adadelta(model.parameters(), lr=0.1)
    sched = lib.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    x, y = data(lib, 8, 1, 28, 28), labels(lib, 8, 10)
    run = []
    model.train()
    for _ in range(steps):
        opt.zero_grad()
        loss = F.nll_loss(model(x), y)
        loss.backward()
        opt.step()
        run.append(loss.item())
        sched.step()
    model.eval()
    with lib.no_grad():
        out = model(x)
        run.append(F.nll_loss(out, y, reduction="sum").item())
        pred = out.argmax(dim=1, keepdim=True)
        run.append(pred.eq(y.view_as(pred)).sum().item())
    return run


def test_mnist_rnn():
    import warnings
    runs = []
    for lib in (real_torch, musa):
        model = mnist_rnn_program(lib, 0.0, 0.0)()
        if lib is real_torch:
            ref = snapshot(model)
        else:
            same_start(model, ref)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Dropout2d of a 2-D input warns in both
            runs.append(mnist_rnn_run(lib, model))
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-4, atol=1e-5)
    # as written: Dropout2d of (N, 64) warns and drops whole rows, as torch's does
    model = mnist_rnn_program(musa)()
    with pytest.warns(UserWarning, match="Received a 2-D input to dropout2d"):
        run = mnist_rnn_run(musa, model, steps=4)
    assert np.isfinite(run).all()
    with pytest.warns(UserWarning, match="2-D input"):
        dropped = musa.nn.functional.dropout2d(musa.ones(50, 6), 0.5)
    rows = dropped.numpy()
    assert all(len(set(r)) == 1 for r in rows) and {0.0, 2.0} == set(rows[:, 0])


# ---- siamese_network ----

def resnet18(torch, in_channels=3, num_classes=1000):
    """torchvision's resnet18 (BasicBlock, [2, 2, 2, 2]), the feature
    extractor the siamese example builds on."""
    nn = torch.nn

    class BasicBlock(nn.Module):
        def __init__(self, inplanes, planes, stride=1, downsample=None):
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.relu = nn.ReLU(inplace=True)
            self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.downsample = downsample

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.bn2(self.conv2(out))
            out += identity
            return self.relu(out)

    class ResNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.inplanes = 64
            self.conv1 = nn.Conv2d(in_channels, 64, kernel_size=7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
            self.layer1 = self._make_layer(64, 2)
            self.layer2 = self._make_layer(128, 2, stride=2)
            self.layer3 = self._make_layer(256, 2, stride=2)
            self.layer4 = self._make_layer(512, 2, stride=2)
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(512, num_classes)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

        def _make_layer(self, planes, blocks, stride=1):
            downsample = None
            if stride != 1 or self.inplanes != planes:
                downsample = nn.Sequential(nn.Conv2d(self.inplanes, planes, 1, stride, bias=False),
                                           nn.BatchNorm2d(planes))
            layers = [BasicBlock(self.inplanes, planes, stride, downsample)]
            self.inplanes = planes
            layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
            return nn.Sequential(*layers)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return ResNet()


def siamese_program(torch):
    nn = torch.nn

    class SiameseNetwork(nn.Module):
        def __init__(self):
            super(SiameseNetwork, self).__init__()
            self.resnet = resnet18(torch)
            self.resnet.conv1 = nn.Conv2d(1, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
            self.fc_in_features = self.resnet.fc.in_features
            self.resnet = torch.nn.Sequential(*(list(self.resnet.children())[:-1]))
            self.fc = nn.Sequential(
                nn.Linear(self.fc_in_features * 2, 256),
                nn.ReLU(inplace=True),
                nn.Linear(256, 1),
            )
            self.sigmoid = nn.Sigmoid()
            self.resnet.apply(self.init_weights)
            self.fc.apply(self.init_weights)

        def init_weights(self, m):
            if isinstance(m, nn.Linear):
                torch.nn.init.xavier_uniform(m.weight)
                m.bias.data.fill_(0.01)

        def forward_once(self, x):
            output = self.resnet(x)
            output = output.view(output.size()[0], -1)
            return output

        def forward(self, input1, input2):
            output1 = self.forward_once(input1)
            output2 = self.forward_once(input2)
            output = torch.cat((output1, output2), 1)
            output = self.fc(output)
            output = self.sigmoid(output)
            return output

    class PairDataset(torch.utils.data.Dataset):
        """APP_MATCHER's pairing (same class for even indices, another class
        for odd ones) over synthetic digits."""

        def __init__(self, n=16, seed=0):
            super().__init__()
            rng = np.random.default_rng(seed)
            self.data = torch.tensor(rng.integers(0, 256, (n, 28, 28)).astype(np.uint8)).unsqueeze(1).clone()
            targets = np.arange(n) % 10
            self.grouped_examples = {i: np.where(targets == i)[0] for i in range(10)}
            self.rng = np.random.default_rng(seed + 1)

        def __len__(self):
            return self.data.shape[0]

        def __getitem__(self, index):
            selected_class = int(self.rng.integers(0, 10))
            group = self.grouped_examples[selected_class]
            index_1 = group[int(self.rng.integers(0, len(group)))]
            image_1 = self.data[index_1].clone().float()
            if index % 2 == 0:
                index_2 = group[(list(group).index(index_1) + 1) % len(group)]
                target = torch.tensor(1, dtype=torch.float)
            else:
                other = (selected_class + 1 + int(self.rng.integers(0, 9))) % 10
                index_2 = self.grouped_examples[other][0]
                target = torch.tensor(0, dtype=torch.float)
            image_2 = self.data[index_2].clone().float()
            return image_1, image_2, target

    return SiameseNetwork, PairDataset


def siamese_run(torch, model, Pairs, steps=2, dtype=None):
    nn, optim = torch.nn, torch.optim
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    loader = torch.utils.data.DataLoader(Pairs(), batch_size=4)
    criterion = nn.BCELoss()
    run = []
    model.train()
    for batch_idx, (images_1, images_2, targets) in enumerate(loader):
        if batch_idx == steps:
            break
        optimizer.zero_grad()
        images_1, images_2, targets = (t.to(dtype or t.dtype) for t in (images_1, images_2, targets))
        outputs = model(images_1 / 255, images_2 / 255).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        run.append(loss.item())
    scheduler.step()
    model.eval()
    correct = 0
    with torch.no_grad():
        for (images_1, images_2, targets) in loader:
            images_1, images_2, targets = (t.to(dtype or t.dtype) for t in (images_1, images_2, targets))
            outputs = model(images_1 / 255, images_2 / 255).squeeze()
            run.append(criterion(outputs, targets).sum().item())
            pred = torch.where(outputs > 0.5, 1, 0)
            correct += pred.eq(targets.view_as(pred)).sum().item()
    run.append(correct)
    return run


def test_siamese_network():
    import warnings
    runs = []
    for lib in (real_torch, musa):
        Siamese, Pairs = siamese_program(lib)
        lib.manual_seed(1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # init.xavier_uniform is deprecated in both
            model = Siamese()
        model.double()  # float32 rounding flips a ReLU of the head between the libraries
        if lib is real_torch:
            ref = snapshot(model)
        else:
            same_start(model, ref)
        runs.append(siamese_run(lib, model, Pairs, dtype=lib.float64))
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-7)
    # as written, in float32, it trains
    Siamese, Pairs = siamese_program(musa)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run = siamese_run(musa, Siamese(), Pairs, steps=3)
    assert np.isfinite(run).all()
    with pytest.warns(FutureWarning, match="xavier_uniform is now deprecated"):
        siamese_program(musa)[0]()


# ---- mnist_forward_forward ----

def forward_forward_program(torch, args, device):
    nn, Adam = torch.nn, torch.optim.Adam

    def get_y_neg(y):
        y_neg = y.clone()
        for idx, y_samp in enumerate(y):
            allowed_indices = list(range(10))
            allowed_indices.remove(y_samp.item())
            y_neg[idx] = torch.tensor(allowed_indices)[
                torch.randint(len(allowed_indices), size=(1,))
            ].item()
        return y_neg.to(device)

    def overlay_y_on_x(x, y, classes=10):
        x_ = x.clone()
        x_[:, :classes] *= 0.0
        x_[range(x.shape[0]), y] = x.max()
        return x_

    class Net(torch.nn.Module):
        def __init__(self, dims):
            super().__init__()
            self.layers = []
            for d in range(len(dims) - 1):
                self.layers = self.layers + [Layer(dims[d], dims[d + 1]).to(device)]

        def predict(self, x):
            goodness_per_label = []
            for label in range(10):
                h = overlay_y_on_x(x, label)
                goodness = []
                for layer in self.layers:
                    h = layer(h)
                    goodness = goodness + [h.pow(2).mean(1)]
                goodness_per_label += [sum(goodness).unsqueeze(1)]
            goodness_per_label = torch.cat(goodness_per_label, 1)
            return goodness_per_label.argmax(1)

        def train(self, x_pos, x_neg):
            h_pos, h_neg = x_pos, x_neg
            losses = []
            for i, layer in enumerate(self.layers):
                h_pos, h_neg = layer.train(h_pos, h_neg, losses)
            return losses

    class Layer(nn.Linear):
        def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
            super().__init__(in_features, out_features, bias, device, dtype)
            self.relu = torch.nn.ReLU()
            self.opt = Adam(self.parameters(), lr=args.lr)
            self.threshold = args.threshold
            self.num_epochs = args.epochs

        def forward(self, x):
            x_direction = x / (x.norm(2, 1, keepdim=True) + 1e-4)
            return self.relu(torch.mm(x_direction, self.weight.T) + self.bias.unsqueeze(0))

        def train(self, x_pos, x_neg, losses):
            for i in range(self.num_epochs):
                g_pos = self.forward(x_pos).pow(2).mean(1)
                g_neg = self.forward(x_neg).pow(2).mean(1)
                loss = torch.log1p(
                    torch.exp(
                        torch.cat([-g_pos + self.threshold, g_neg - self.threshold])
                    )
                ).mean()
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                losses.append(loss.item())
            return self.forward(x_pos).detach(), self.forward(x_neg).detach()

    return Net, get_y_neg, overlay_y_on_x


def test_mnist_forward_forward():
    import types
    args = types.SimpleNamespace(lr=0.03, threshold=2.0, epochs=5)
    y_ref = real_torch.tensor(np.random.default_rng(5).integers(0, 10, 32))
    runs = []
    for lib in (real_torch, musa):
        Net, get_y_neg, overlay = forward_forward_program(lib, args, lib.device("cpu"))
        lib.manual_seed(1)
        net = Net([784, 50, 50])
        if lib is real_torch:
            ref = [snapshot(layer) for layer in net.layers]
            y_neg = get_y_neg(y_ref)
            neg = y_neg.numpy()
        else:
            for layer, saved in zip(net.layers, ref):
                same_start(layer, saved)
            y_neg = get_y_neg(lib.tensor(y_ref.numpy()))  # as written: draws another wrong label
            assert (y_neg.numpy() != y_ref.numpy()).all() and (y_neg.numpy() < 10).all()
            y_neg = lib.tensor(neg)  # torch's draws, to compare the rest
        x = data(lib, 32, 784, seed=6)
        y = lib.tensor(y_ref.numpy())
        losses = net.train(overlay(x, y), overlay(x, y_neg))
        losses.append(1.0 - net.predict(x).eq(y).float().mean().item())
        runs.append(losses)
    np.testing.assert_allclose(runs[1], runs[0], rtol=1e-4, atol=1e-6)
