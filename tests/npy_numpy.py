#!/usr/bin/python3
"""NPY interoperability with numpy, for tests/test_npy.c (see tests/npy.cmake).

  npy_numpy.py gen DIR    write .npy files with numpy for test_npy to read
  npy_numpy.py check DIR  check the files test_npy wrote: numpy.load reads
                          them and they are byte for byte what numpy.save
                          writes for the same arrays

Values follow value(dtype, i) below; tests/test_npy.c computes the same.
"""
import io
import os
import sys

import numpy as np

DTYPES = ["float32", "float16", "float64", "uint8", "int8", "uint16", "int16",
          "uint32", "int32", "uint64", "int64", "bool"]
# the shapes test_npy writes each dtype in (names as in out_<dtype>_<name>.npy)
SHAPES = ["2x3", "scalar", "7", "2x0x5", "3x1x4"]


def values(dtype, n):
    """Element i: bool i % 3 == 0; unsigned (7i) % 11; others ((7i) % 11 - 3), halved for floats."""
    i = np.arange(n, dtype=np.int64)
    k = (7 * i) % 11
    if dtype == "bool":
        return (i % 3 == 0)
    if dtype.startswith("uint"):
        return k.astype(dtype)
    if dtype.startswith("float"):
        return ((k - 3) * 0.5).astype(dtype)
    return (k - 3).astype(dtype)


def array(dtype, shape):
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    return values(dtype, n).reshape(shape)


def gen(d):
    os.makedirs(d, exist_ok=True)
    for t in DTYPES:
        np.save(os.path.join(d, t + ".npy"), array(t, (2, 3)))
        big = array(t, (2, 3)).astype(np.dtype(t).newbyteorder(">"))
        np.save(os.path.join(d, "be_" + t + ".npy"), big)
    np.save(os.path.join(d, "scalar_float32.npy"), np.float32(2.5))
    np.save(os.path.join(d, "vec_int64.npy"), array("int64", (5,)))
    np.save(os.path.join(d, "empty_float32.npy"), np.zeros((0, 4), np.float32))
    np.save(os.path.join(d, "rank8_uint8.npy"), array("uint8", (1, 2, 1, 2, 1, 2, 1, 3)))
    np.save(os.path.join(d, "rank9_uint8.npy"), np.zeros((1,) * 9, np.uint8))
    np.save(os.path.join(d, "fortran_float32.npy"), np.asfortranarray(array("float32", (2, 3))))
    np.save(os.path.join(d, "complex64.npy"), np.zeros((2,), np.complex64))
    for v in [(1, 0), (2, 0), (3, 0)]:
        with open(os.path.join(d, "v%d_int32.npy" % v[0]), "wb") as f:
            np.lib.format.write_array(f, array("int32", (4, 2)), version=v)


def check(d):
    bad = checked = 0
    for name in sorted(os.listdir(d)):
        if not name.endswith(".npy"):
            continue
        # out_<dtype>_<d0>x<d1>...npy; "scalar" for shape ()
        stem = name[4:-4]
        t, _, dims = stem.rpartition("_")
        shape = () if dims == "scalar" else tuple(int(x) for x in dims.split("x"))
        want = array(t, shape)
        path = os.path.join(d, name)
        got = np.load(path)
        if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
            print("%s: numpy.load gives %s %s %r, expected %s %s %r" %
                  (name, got.dtype, got.shape, got, want.dtype, want.shape, want))
            bad += 1
            continue
        b = io.BytesIO()
        np.save(b, want)
        if open(path, "rb").read() != b.getvalue():
            print("%s: bytes differ from numpy.save:\n  toplu %r\n  numpy %r" %
                  (name, open(path, "rb").read()[:200], b.getvalue()[:200]))
            bad += 1
            continue
        print("%s: ok" % name)
        checked += 1
    # every file test_npy writes (tests/test_npy.c, test_write_for_numpy: each dtype in each of these shapes), all
    # checked: none missing, none unexpected
    want = {"out_%s_%s.npy" % (t, s) for t in DTYPES for s in SHAPES}
    found = {n for n in os.listdir(d) if n.endswith(".npy")}
    if found != want:
        print("files in %s: %d missing (%s), %d unexpected (%s)" %
              (d, len(want - found), sorted(want - found)[:5], len(found - want), sorted(found - want)[:5]))
        bad += 1
    if checked != len(want):
        print("%d of the %d files checked ok in %s" % (checked, len(want), d))
        bad += 1
    if bad:
        sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("gen", "check"):
        sys.exit(__doc__)
    (gen if sys.argv[1] == "gen" else check)(sys.argv[2])
