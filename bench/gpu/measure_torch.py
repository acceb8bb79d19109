#!/usr/bin/env python3
"""bench/gpu/measure_torch.py - measure a GPU the way the planner's "pytorch" runtime is meant to predict.

usage: bench/gpu/measure_torch.py --device-name NAME [--models resnet50,efficientnet_b0,bert_base_seq128]
                                  [--precisions fp32,tf32,fp16] [--batches 1,2,4,...,256] [--seconds S]
                                  [--out measured.csv] [--ort]

Runs the models of bench/gpu/export_models.py (the same architectures and
random weights, torch seed 0, that `toplu plan` is given as ONNX) in eager
PyTorch on the first CUDA device, as NVIDIA's DeepLearningExamples ConvNets
inference benchmark does: eval mode, torch.inference_mode, channels_last for
the CNNs, cudnn.benchmark on, mixed precision by
torch.autocast (fp16); fp32 is plain IEEE fp32 (TF32 off for cuDNN and
cuBLAS), tf32 turns TF32 on.  For each batch size: warm-up runs (cuDNN's
algorithm search among them), then timed runs until --seconds have passed
(at least 10), each timed by CUDA events around the input's copy from
pinned host memory and one forward pass (the comment lines also give the
mean with the input resident on the GPU).
Writes rows in src/plan/gpu_measurements.csv's columns
(source,model,device,precision,runtime,batch,throughput,latency_ms;
throughput = batch / mean latency, latency_ms = mean of the timed runs),
plus a comment line per table with the median and p99 latency and the peak
memory PyTorch allocated (torch.cuda.max_memory_allocated), and the GPU's
name, driver, torch and cuDNN versions.

With --ort, also times ONNX Runtime's CUDA execution provider on the same
models exported to ONNX there (runtime onnxruntime-cuda, fp32 only), when
the installed onnxruntime has that provider (else a comment says it had not).

The batch-size and precision sweep is what a user with one GPU would run to
check `toplu plan --device NAME --runtime pytorch`, or to feed
`toplu plan --calibration` one measured (batch, latency) row.
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
# bench/gpu/export_models.py under another name: it imports bench/export_models.py as export_models itself
_spec = importlib.util.spec_from_file_location('gpu_export_models', os.path.join(HERE, 'export_models.py'))
_gpu_export = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_gpu_export)
MODELS = _gpu_export.MODELS

TABLE = {'resnet50': 'resnet50', 'efficientnet_b0': 'efficientnet_b0', 'efficientnet_b4': 'efficientnet_b4',
         'resnext101_32x4d': 'resnext101_32x4d', 'bert_base_seq128': 'bert_base', 'bert_base_seq384': 'bert_base'}


def build(name):
    torch.manual_seed(0)
    make, size = MODELS[TABLE[name]]
    model = make().eval().cuda()
    if name.startswith('bert_base_seq'):
        seq = int(name[len('bert_base_seq'):])
        return model, (seq, 768), False
    return model.to(memory_format=torch.channels_last), (3, size, size), True


def set_precision(precision):
    tf32 = precision == 'tf32'
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def time_runs(fn, seconds, min_runs=10, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    t_end = time.perf_counter() + seconds
    while len(times) < min_runs or time.perf_counter() < t_end:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return times


def p99(xs):
    s = sorted(xs)
    return s[min(len(s) - 1, int(0.99 * len(s)))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--device-name', required=True, help="the catalog's name for this GPU (toplu plan --list-devices)")
    ap.add_argument('--models', default='resnet50,efficientnet_b0,bert_base_seq128')
    ap.add_argument('--precisions', default='fp32,tf32,fp16')
    ap.add_argument('--batches', default='1,2,4,8,16,32,64,128,256')
    ap.add_argument('--seconds', type=float, default=0.5)
    ap.add_argument('--out', default='-')
    ap.add_argument('--source', default='toplu-h200-torch')
    ap.add_argument('--ort', action='store_true')
    a = ap.parse_args()
    out = sys.stdout if a.out == '-' else open(a.out, 'w')
    batches = [int(b) for b in a.batches.split(',')]
    torch.backends.cudnn.benchmark = True
    props = torch.cuda.get_device_properties(0)
    print(f'# {a.source}: {props.name}, {props.multi_processor_count} SMs, {props.total_memory / 2**30:.0f} GiB; '
          f'torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}; '
          f'eager PyTorch (bench/gpu/measure_torch.py), input copied from pinned host memory in each timed run, '
          f'{a.seconds} s of timed runs per row',
          file=out, flush=True)
    print('source,model,device,precision,runtime,batch,throughput,latency_ms', file=out, flush=True)
    for name in a.models.split(','):
        model, dims, cnn = build(name)
        for precision in a.precisions.split(','):
            set_precision(precision)
            rows, notes = [], []
            for b in batches:
                xh = torch.randn((b,) + dims).pin_memory()
                x = xh.to('cuda')
                if cnn:
                    x = x.contiguous(memory_format=torch.channels_last)
                torch.cuda.reset_peak_memory_stats()

                def fwd_resident():
                    with torch.inference_mode(), torch.autocast('cuda', dtype=torch.float16,
                                                                enabled=precision == 'fp16'):
                        model(x)

                def fwd_copy():  # the input copied from pinned host memory first, as a server or batch job does
                    with torch.inference_mode(), torch.autocast('cuda', dtype=torch.float16,
                                                                enabled=precision == 'fp16'):
                        xg = xh.to('cuda', non_blocking=True)
                        model(xg.contiguous(memory_format=torch.channels_last) if cnn else xg)
                try:
                    ts = time_runs(fwd_copy, a.seconds)
                    tr = time_runs(fwd_resident, a.seconds / 2)
                except torch.cuda.OutOfMemoryError:
                    notes.append(f'B={b}: out of memory')
                    break
                mean = statistics.fmean(ts)
                rows.append((b, b / mean * 1000.0, mean))
                notes.append(f'B={b}: median {statistics.median(ts):.3f} ms, p99 {p99(ts):.3f} ms, {len(ts)} runs, '
                             f'input resident {statistics.fmean(tr):.3f} ms, '
                             f'peak {torch.cuda.max_memory_allocated() / 2**20:.0f} MiB')
                del x, xh
            print(f'# {name} {precision}: ' + '; '.join(notes), file=out, flush=True)
            for b, thr, lat in rows:
                print(f'{a.source},{name},{a.device_name},{precision},pytorch,{b},{thr:.1f},{lat:.3f}', file=out,
                      flush=True)
        del model
        torch.cuda.empty_cache()
    if a.ort:
        measure_ort(a, batches, out)


def measure_ort(a, batches, out):
    try:
        import onnxruntime as ort
    except ImportError:
        print('# onnxruntime: not installed', file=out, flush=True)
        return
    if 'CUDAExecutionProvider' not in ort.get_available_providers():
        print(f'# onnxruntime {ort.__version__}: no CUDAExecutionProvider ({ort.get_available_providers()})',
              file=out, flush=True)
        return
    import numpy as np
    set_precision('fp32')
    for name in a.models.split(','):
        model, dims, _ = build(name)
        path = f'/tmp/{name}.onnx'
        axes = {0: 'B'}
        try:
            torch.onnx.export(model.float().to(memory_format=torch.contiguous_format).cpu(),
                              torch.randn((1,) + dims), path, opset_version=13, input_names=['input'],
                              output_names=['output'], dynamic_axes={'input': axes, 'output': axes})
            sess = ort.InferenceSession(path, providers=['CUDAExecutionProvider'])
        except Exception as e:  # noqa: BLE001 (the exporter or provider of that image; say which and go on)
            print(f'# onnxruntime-cuda {name}: {type(e).__name__}: {str(e)[:200]}', file=out, flush=True)
            continue
        rows = []
        for b in batches:
            x = np.random.default_rng(0).standard_normal((b,) + dims).astype(np.float32)
            xo = ort.OrtValue.ortvalue_from_numpy(x, 'cuda', 0)
            io = sess.io_binding()
            io.bind_ortvalue_input('input', xo)
            io.bind_output('output', 'cuda')
            for _ in range(5):
                sess.run_with_iobinding(io)
            ts = []
            t_end = time.perf_counter() + a.seconds
            while len(ts) < 10 or time.perf_counter() < t_end:
                t0 = time.perf_counter()
                sess.run_with_iobinding(io)
                ts.append((time.perf_counter() - t0) * 1000.0)
            mean = statistics.fmean(ts)
            rows.append((b, b / mean * 1000.0, mean))
        for b, thr, lat in rows:
            print(f'{a.source},{name},{a.device_name},fp32,onnxruntime-cuda,{b},{thr:.1f},{lat:.3f}', file=out,
                  flush=True)


if __name__ == '__main__':
    main()
