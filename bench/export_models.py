#!/usr/bin/python3
"""bench/export_models.py - the dense models of the engine-speed benchmark.

Writes CACHE/models/speed/bert_base_like.onnx and mlp.onnx (CACHE: $TOPLU_CACHE
or ~/.cache/toplu), skipping files already there:
- bert_base_like: 12 post-LayerNorm encoder layers, hidden 768, 12 heads,
  FFN 3072 with erf GELU, input float embeddings [B, 128, 768], built from
  plain torch modules so the export writes MatMul, Softmax and the LayerNorm
  and GELU patterns out as PyTorch does for BERT before opset 17;
- bert_base_like_seq: the same with the sequence dim dynamic too ([B, S, 768]),
  for the benchmark at sequence 384;
- mlp: Linear 784-512, ReLU, Linear 512-10, input [B, 784];
- lstm_bi2, gru_bi2: torch.nn.LSTM / nn.GRU, 2 layers, bidirectional, input 40,
  hidden 128, batch_first=False: input `x` [S, N, 40], outputs `y` [S, N, 256],
  `h_n` [4, N, 128] (and `c_n` for the LSTM), S and N dynamic, opset 14 (two
  LSTM/GRU nodes); also the real-model tests' models (tests/models/recurrent_test.py,
  exported by scripts/fetch-models.sh with --only lstm_bi2,gru_bi2).
Random weights (torch seed 0), eval mode, opset 13 (the recurrent ones 14),
dynamic batch dim: for speed, not for accuracy.  Needs Debian's python3-torch
and python3-onnx.

    export_models.py [OUT_DIR] [--only NAME,...]
"""
import math
import os
import sys
import warnings

import torch
from torch import nn


class EncoderLayer(nn.Module):
    def __init__(self, d=768, heads=12, ffn=3072):
        super().__init__()
        self.heads, self.dk = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d, eps=1e-12), nn.LayerNorm(d, eps=1e-12)
        self.up, self.down = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def heads_first(self, t):
        b, s, _ = t.shape
        return t.view(b, s, self.heads, self.dk).transpose(1, 2)

    def forward(self, x):
        b, s, d = x.shape
        q, k, v = self.heads_first(self.q(x)), self.heads_first(self.k(x)), self.heads_first(self.v(x))
        w = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dk), dim=-1)
        x = self.ln1(x + self.o((w @ v).transpose(1, 2).reshape(b, s, d)))
        return self.ln2(x + self.down(nn.functional.gelu(self.up(x))))


def export(model, shape, path, seq=False):
    """Dynamic batch dim B; with seq also dim 1, S."""
    model.eval()
    tmp = path + '.tmp'
    axes = {0: 'B', 1: 'S'} if seq else {0: 'B'}
    with torch.no_grad():
        torch.onnx.export(model, torch.randn(*shape), tmp, opset_version=13, input_names=['input'],
                          output_names=['output'], dynamic_axes={'input': axes, 'output': axes})
    os.replace(tmp, path)
    print(f'wrote {path}')


class Recurrent(nn.Module):
    """nn.LSTM or nn.GRU returning the sequence and the final states as separate outputs."""

    def __init__(self, kind):
        super().__init__()
        self.rnn = getattr(nn, kind)(40, 128, num_layers=2, bidirectional=True)

    def forward(self, x):
        y, state = self.rnn(x)
        return (y,) + (tuple(state) if isinstance(state, tuple) else (state,))


def export_recurrent(kind, path):
    """lstm_bi2 / gru_bi2: sequence-first input x [S, N, 40], S and N dynamic, opset 14."""
    torch.manual_seed(0)
    model = Recurrent(kind).eval()
    outs = ['y', 'h_n'] + (['c_n'] if kind == 'LSTM' else [])
    axes = {'x': {0: 'S', 1: 'N'}, 'y': {0: 'S', 1: 'N'}}
    axes.update({o: {1: 'N'} for o in outs[1:]})
    tmp = path + '.tmp'
    # torch warns that a GRU exported at batch 2 may not run at other batch
    # sizes; its initial state is ConstantOfShape of the input's batch here,
    # and the tests run it at batch 1 and 8
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter('ignore')
        torch.onnx.export(model, torch.randn(5, 2, 40), tmp, opset_version=14, input_names=['x'],
                          output_names=outs, dynamic_axes=axes)
    os.replace(tmp, path)
    print(f'wrote {path}')


def main():
    cache = os.environ.get('TOPLU_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'toplu')
    argv = sys.argv[1:]
    only = None
    if '--only' in argv:
        i = argv.index('--only')
        only = set(argv[i + 1].split(',')) if i + 1 < len(argv) else set()
        del argv[i:i + 2]
    out = argv[0] if argv else os.path.join(cache, 'models', 'speed')
    os.makedirs(out, exist_ok=True)
    want = lambda name: only is None or name in only  # noqa: E731
    torch.manual_seed(0)
    bert = os.path.join(out, 'bert_base_like.onnx')
    if want('bert_base_like') and not os.path.isfile(bert):
        export(nn.Sequential(*[EncoderLayer() for _ in range(12)]), (1, 128, 768), bert)
    bert_seq = os.path.join(out, 'bert_base_like_seq.onnx')
    if want('bert_base_like_seq') and not os.path.isfile(bert_seq):
        torch.manual_seed(0)
        export(nn.Sequential(*[EncoderLayer() for _ in range(12)]), (1, 128, 768), bert_seq, seq=True)
    mlp = os.path.join(out, 'mlp.onnx')
    if want('mlp') and not os.path.isfile(mlp):
        torch.manual_seed(0)
        export(nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 10)), (1, 784), mlp)
    for name, kind in (('lstm_bi2', 'LSTM'), ('gru_bi2', 'GRU')):
        path = os.path.join(out, f'{name}.onnx')
        if want(name) and not os.path.isfile(path):
            export_recurrent(kind, path)


if __name__ == '__main__':
    main()
