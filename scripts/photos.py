"""scripts/photos.py - the sample photos and how toplu's tests and demo turn them into model inputs.

Photos live in the cache's images/ folder (scripts/fetch-models.sh puts them there).
Resizing is PIL bilinear straight to the target size (no crop), so every script that
feeds a photo to a model makes exactly the same pixels.
"""
import os

import numpy as np
from PIL import Image

# Eight photos with clear licenses (Debian's python3-skimage and python3-sklearn data):
# the inputs of the torchvision fixtures.
FIXTURE_PHOTOS = ['astronaut.png', 'chelsea.png', 'coffee.png', 'rocket.jpg',
                  'page.png', 'text.png', 'china.jpg', 'flower.jpg']

# Other Debian photos, used only to calibrate the BatchNorm statistics of the
# randomly initialised torchvision models (never as test inputs).
CALIBRATION_PHOTOS = ['camera.png', 'coins.png', 'moon.png', 'brick.png', 'grass.png', 'gravel.png',
                      'motorcycle_left.png', 'motorcycle_right.png', 'hubble_deep_field.jpg',
                      'retina.jpg', 'ihc.png', 'color.png', 'logo.png', 'horse.png', 'cell.png']

# The five ImageNet photos of ../shared/data/images (local tests only) and the
# class each must get from MobileNetV2 int8; 'top' is how many best classes may hold it.
IMAGENET_PHOTOS = [
    ('ortex-goldfish.jpg', 'goldfish', 1),
    ('ortex-kimono.jpg', 'kimono', 1),
    ('ortex-wolves.jpg', 'white wolf', 1),
    ('wonnx-bald_eagle.jpeg', 'bald eagle', 3),  # a close call with vulture
    ('wonnx-pelican.jpeg', 'pelican', 1),
]

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def cache_dir():
    """toplu's cache: $TOPLU_CACHE or ~/.cache/toplu."""
    return os.environ.get('TOPLU_CACHE') or os.path.join(os.path.expanduser('~'), '.cache', 'toplu')


def load_rgb(path, size=(224, 224)):
    """A photo as uint8 HWC RGB, resized to size (width, height) with PIL bilinear."""
    with Image.open(path) as im:
        im = im.convert('RGB')
        return np.asarray(im.resize(size, Image.BILINEAR), dtype=np.uint8)


def nhwc_uint8(paths, size=(224, 224)):
    """Photos as one uint8 [N, H, W, 3] batch (raw RGB)."""
    return np.stack([load_rgb(p, size) for p in paths])


def imagenet_nchw(paths, size=(224, 224)):
    """Photos as one float32 [N, 3, H, W] batch: RGB / 255, ImageNet mean and std."""
    x = nhwc_uint8(paths, size).astype(np.float32) / 255.0
    x = (x - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2)).astype(np.float32)


def imagenet_labels(path):
    """Class names, line k = class k."""
    with open(path) as f:
        return [line.strip() for line in f]
