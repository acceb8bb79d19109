#!/usr/bin/python3
"""bench/gpu/export_models.py - the models of the public GPU tables.

Writes CACHE/models/gpu/{resnet50,resnext101_32x4d,se_resnext101_32x4d,
efficientnet_b0,efficientnet_b4,bert_base}.onnx (CACHE: $TOPLU_CACHE or ~/.cache/toplu),
skipping files already there: torchvision's ResNet-50, a ResNeXt-101 32x4d (torchvision's
ResNet with Bottleneck blocks [3, 4, 23, 3], groups 32, width 4 per group, the
architecture of NVIDIA's resnext101-32x4d), the same with a squeeze-and-excitation
block on each bottleneck's output before the residual add (global average pool,
1x1 convolutions to a sixteenth of the channels and back, ReLU, sigmoid, scale:
Hu, Shen and Sun 2018, the architecture of NVIDIA's se-resnext101-32x4d), EfficientNet-B0 at 224 x 224 and
EfficientNet-B4 at 380 x 380 (the resolutions of the EfficientNet paper, Tan
and Le 2019), and a BERT Base encoder stack (12 layers of hidden 768, 12
heads, FFN 3072: bench/export_models.py's post-LayerNorm EncoderLayer) taking
float embeddings [B, S, 768] with the sequence length S free.  Random weights (torch seed 0), eval mode, opset 13, dynamic
batch dim: the planner needs the graph's FLOPs and bytes, not its accuracy.
Needs Debian's python3-torch, python3-torchvision and python3-onnx.
"""
import os
import sys

import torch
import torchvision
from torch import nn
from torchvision.models.resnet import Bottleneck, ResNet

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from export_models import EncoderLayer  # noqa: E402  (bench/export_models.py)

class SEBottleneck(Bottleneck):
    """torchvision's Bottleneck with squeeze-and-excitation (reduction 16) before the residual add."""

    def __init__(self, inplanes, planes, *args, **kwargs):
        super().__init__(inplanes, planes, *args, **kwargs)
        c = planes * self.expansion
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c // 16, 1), nn.ReLU(inplace=True),
                                nn.Conv2d(c // 16, c, 1), nn.Sigmoid())

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out * self.se(out) + identity)


MODELS = {
    'resnet50': (lambda: torchvision.models.resnet50(), 224),
    'resnext101_32x4d': (lambda: ResNet(Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=4), 224),
    'se_resnext101_32x4d': (lambda: ResNet(SEBottleneck, [3, 4, 23, 3], groups=32, width_per_group=4), 224),
    'efficientnet_b0': (lambda: torchvision.models.efficientnet_b0(), 224),
    'efficientnet_b4': (lambda: torchvision.models.efficientnet_b4(), 380),
    'bert_base': (lambda: nn.Sequential(*[EncoderLayer(768, 12, 3072) for _ in range(12)]), (128, 768)),
}


def main():
    cache = os.environ.get('TOPLU_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'toplu')
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(cache, 'models', 'gpu')
    os.makedirs(out, exist_ok=True)
    torch.set_num_threads(1)
    for name, (make, size) in MODELS.items():
        path = os.path.join(out, name + '.onnx')
        if os.path.isfile(path):
            continue
        torch.manual_seed(0)
        model = make().eval()
        tmp = path + '.tmp'
        shape, axes = ((1, 3, size, size), {0: 'B'}) if isinstance(size, int) else ((1,) + size, {0: 'B', 1: 'S'})
        with torch.no_grad():
            torch.onnx.export(model, torch.randn(*shape), tmp, opset_version=13, input_names=['input'],
                              output_names=['output'], dynamic_axes={'input': axes, 'output': axes})
        os.replace(tmp, path)
        print(f'wrote {path}')


if __name__ == '__main__':
    main()
