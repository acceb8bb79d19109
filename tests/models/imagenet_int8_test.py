#!/usr/bin/python3
"""tests/models/imagenet_int8_test.py - MobileNetV2 int8 (QDQ) on five real photos.

    imagenet_int8_test.py --toplu build/toplu [--cache DIR] [--shared DIR]

Photos from ../shared/data/images (or the cache's copy in images/), resized to
224x224 RGB uint8 NHWC with PIL bilinear, in one `toplu run`; each must get its
class as top-1 (the bald eagle: top-3, it is a close call with vulture).
The photos are for local tests only (see docs/models.md).
"""
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import photos  # noqa: E402  (scripts/photos.py)


def find_photo(name, cache, shared):
    """A photo from ../shared/data/images, else from the cache's images/, else None."""
    for d in (os.path.join(shared, 'data', 'images'), os.path.join(cache, 'images')):
        p = os.path.join(d, name)
        if os.path.isfile(p):
            return p
    return None


def main():
    """Classify the photos and check the classes."""
    args = common.parse_args()
    mdir = os.path.join(args.shared, 'models', 'imagenet-mobilenet')
    model = os.path.join(mdir, 'mobilenet_v2_1.0_224_int8_per_tensor.onnx')
    if not os.path.isfile(model):
        common.missing(f'no MobileNetV2 int8 model at {model}')
    paths = [find_photo(p, args.cache, args.shared) for p, _, _ in photos.IMAGENET_PHOTOS]
    if None in paths:
        common.missing('photos missing: ' + ', '.join(p for (p, _, _), q in zip(photos.IMAGENET_PHOTOS, paths) if not q)
                    + f' (from {args.shared}/data/images; local only)')
    if not os.access(args.toplu, os.X_OK):
        common.missing(f'no toplu binary at {args.toplu}')
    labels = photos.imagenet_labels(os.path.join(mdir, 'labels_imagenet_2012.txt'))
    work = common.workdir('int8')
    x = photos.nhwc_uint8(paths)
    xp = os.path.join(work, 'photos.npy')
    np.save(xp, x)
    r = common.Report()
    # the output directory is the job's own: a directory holding other .npy
    # files is refused (they could be taken for results; docs/pipeline.md)
    outdir = os.path.join(work, 'out')
    code, out, err, secs = common.toplu_run(args.toplu, model, {'serving_default_input_1:0': xp}, outdir)
    if r.check(code == 0, f'mobilenet_v2 int8: toplu run on {len(paths)} photos ({secs:.1f}s)',
               common.tail(code, out, err)):
        f = common.out_file(outdir, 'StatefulPartitionedCall:0')
        if r.check(os.path.isfile(f), 'mobilenet_v2 int8: output written', f'no {f}'):
            probs = np.load(f)
            if r.check(probs.shape == (len(paths), 1000), f'mobilenet_v2 int8: output shape {list(probs.shape)}',
                       f'expected {[len(paths), 1000]}'):
                for (photo, want, top), row in zip(photos.IMAGENET_PHOTOS, probs):
                    order = np.argsort(-row)
                    best = [f'{labels[k]} {row[k]:.2f}' for k in order[:3]]
                    ok = want in [labels[k] for k in order[:top]]
                    r.check(ok, f'{photo}: {want} in top-{top} (got {", ".join(best)})')
    shutil.rmtree(work, ignore_errors=True)
    r.end()


if __name__ == '__main__':
    main()
