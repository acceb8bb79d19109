#!/usr/bin/python3
"""Tests of the toplu command line (`toplu info`, `toplu run`), run by CTest
(tests/cli.cmake):

  test_cli.py TOPLU WORKDIR setup   make the test models and inputs in WORKDIR
  test_cli.py TOPLU WORKDIR CASE    run one case (see CASES at the end)

The models are tiny ONNX graphs of Add, Relu, Reshape and Identity made with
the onnx package.  Exit status 0 pass, 1 fail; nothing is skipped: a missing
input (the shared folder's MNIST model) is a failure that names it.  The shared
folder is $TOPLU_SHARED, else ../shared beside the project.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

TOPLU = WORK = None
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.abspath(os.environ.get("TOPLU_SHARED") or os.path.join(ROOT, "..", "shared"))
DTYPES = ["float32", "float16", "float64", "uint8", "int8", "int16", "int32", "int64", "bool"]


class Failure(Exception):
    pass


def check(cond, what, *context):
    if not cond:
        raise Failure(what + "".join("\n--- " + str(c) for c in context))


def path(*parts):
    return os.path.join(WORK, *parts)


def toplu(*args, expect=0):
    """Run toplu; check its exit status; return (stdout, stderr)."""
    p = subprocess.run([TOPLU] + [str(a) for a in args], capture_output=True, text=True, timeout=120)
    check(p.returncode == expect,
          "toplu %s: exit %d, expected %d" % (" ".join(map(str, args)), p.returncode, expect),
          "stdout:\n" + p.stdout, "stderr:\n" + p.stderr)
    return p.stdout, p.stderr


def fresh_dir(name):
    d = path(name)
    shutil.rmtree(d, ignore_errors=True)
    return d


# ---- setup: models and inputs ----

def setup():
    import onnx
    from onnx import TensorProto as T, helper, numpy_helper

    os.makedirs(WORK, exist_ok=True)

    def save(name, nodes, inputs, outputs, inits=(), opset=13):
        g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="toplu-test",
                              producer_version="1.0")
        m.ir_version = 8
        onnx.checker.check_model(m)
        onnx.save(m, path(name + ".onnx"))

    vi = helper.make_tensor_value_info
    # A sum over the rows added to each row: it mixes the rows of dim 0 (toplu info says so).
    save("sumrows", [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=1, axes=[0]),
                     helper.make_node("Add", ["x", "s"], ["y"])],
         [vi("x", T.FLOAT, ["N", 3])], [vi("y", T.FLOAT, ["N", 3])], opset=11)
    # y:0 = Relu(Relu(x + b) + b), b an initializer; output name needs sanitising.
    save("addrelu",
         [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["r"]),
          helper.make_node("Add", ["r", "b"], ["s2"]), helper.make_node("Relu", ["s2"], ["y:0"])],
         [vi("x", T.FLOAT, ["N", 3])], [vi("y:0", T.FLOAT, ["N", 3])],
         [numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), "b")])
    # Two batched inputs, a non-batched one, two outputs with odd names.
    save("twoin",
         [helper.make_node("Add", ["a", "c"], ["t"]), helper.make_node("Add", ["t", "bias"], ["sum/0"]),
          helper.make_node("Relu", ["a"], ["relu a"])],
         [vi("a", T.FLOAT, ["batch", 4]), vi("c", T.FLOAT, ["batch", 4]), vi("bias", T.FLOAT, [4])],
         [vi("sum/0", T.FLOAT, ["batch", 4]), vi("relu a", T.FLOAT, ["batch", 4])])
    # Reshape [B, 2, 3] -> [B, 6] (0 copies dim 0) -> Identity.
    save("reshape",
         [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Identity", ["r"], ["y"])],
         [vi("x", T.FLOAT, ["p2o.DynamicDimension.0", 2, 3])], [vi("y", T.FLOAT, ["p2o.DynamicDimension.0", 6])],
         [numpy_helper.from_array(np.array([0, 6], np.int64), "shape")])
    # Reshape to [-1]: the output's dim 0 does not follow the batch.
    save("flatten_all",
         [helper.make_node("Reshape", ["x", "shape"], ["y"])],
         [vi("x", T.FLOAT, ["N", 3])], [vi("y", T.FLOAT, [None])],
         [numpy_helper.from_array(np.array([-1], np.int64), "shape")])
    # Symbolic spatial dims.
    save("spatial", [helper.make_node("Relu", ["x"], ["y"])],
         [vi("x", T.FLOAT, ["N", 3, "H", "W"])], [vi("y", T.FLOAT, ["N", 3, "H", "W"])])
    # Batch fixed to 1 in the file.
    save("fixed1",
         [helper.make_node("Add", ["x", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])],
         [vi("x", T.FLOAT, [1, 3])], [vi("y", T.FLOAT, [1, 3])],
         [numpy_helper.from_array(np.array([1.0, -2.0, 0.25], np.float32), "b")])
    # Dim 0 fixed to 7 (a static batch: Relu keeps the rows apart).
    save("fixed7", [helper.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [7, 3])], [vi("y", T.FLOAT, [7, 3])])
    # Dim 0 fixed to 7 and mixed (Softmax over axis 0): runs 7 rows at a time only.
    save("fixed7_mix", [helper.make_node("Softmax", ["x"], ["y"], axis=0)], [vi("x", T.FLOAT, [7, 3])],
         [vi("y", T.FLOAT, [7, 3])])
    # A scalar input.
    save("scalar", [helper.make_node("Relu", ["x"], ["y"])], [vi("x", T.FLOAT, [])], [vi("y", T.FLOAT, [])])
    # No inputs at all: a constant output.
    save("noinput", [helper.make_node("Constant", [], ["y"], value=numpy_helper.from_array(np.ones((2, 2), np.float32)))],
         [], [vi("y", T.FLOAT, [2, 2])])
    # No batch dim anywhere, inputs of other lengths: Reshape of data [2, 3, 4] by shape [4] (a value input).
    save("reshape_fixed", [helper.make_node("Reshape", ["data", "shape"], ["reshaped"])],
         [vi("data", T.FLOAT, [2, 3, 4]), vi("shape", T.INT64, [4])], [vi("reshaped", T.FLOAT, [4, 2, 3, 1])])
    # Batch fixed to 1 and a value input of one element: Unsqueeze(x [1, 3], axes [1]).
    save("unsqueeze_fixed1", [helper.make_node("Unsqueeze", ["x", "axes"], ["y"])],
         [vi("x", T.FLOAT, [1, 3]), vi("axes", T.INT64, [1])], [vi("y", T.FLOAT, [1, 1, 3])])
    # IsNaN on rows: NaN inputs are its data (--allow-nonfinite).
    save("isnan", [helper.make_node("IsNaN", ["x"], ["y"])], [vi("x", T.FLOAT, ["N", 2])], [vi("y", T.BOOL, ["N", 2])])
    # Models toplu refuses: an op it lacks, an opset older than any it supports, a string input.
    g = helper.make_graph([helper.make_node("Foo", ["x"], ["y"], domain="com.example")], "foo",
                          [vi("x", T.FLOAT, ["N", 3])], [vi("y", T.FLOAT, ["N", 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("com.example", 1)])
    m.ir_version = 8
    onnx.save(m, path("unsupported_op.onnx"))
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "old", [vi("x", T.FLOAT, ["N", 3])],
                          [vi("y", T.FLOAT, ["N", 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 1)])
    m.ir_version = 3
    onnx.save(m, path("opset1.onnx"))
    save("string_input", [helper.make_node("Identity", ["x"], ["y"])], [vi("x", T.STRING, ["N"])],
         [vi("y", T.STRING, ["N"])])
    # Identity for every dtype.
    for t in DTYPES:
        et = helper.np_dtype_to_tensor_dtype(np.dtype(t)) if hasattr(helper, "np_dtype_to_tensor_dtype") else \
            onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[np.dtype(t)]
        save("id_" + t, [helper.make_node("Identity", ["x"], ["y"])],
             [vi("x", et, ["N", 2])], [vi("y", et, ["N", 2])])

    rng = np.random.default_rng(7)
    np.save(path("x7.npy"), rng.standard_normal((7, 3)).astype(np.float32))
    np.save(path("x7_f64.npy"), rng.standard_normal((7, 3)))
    np.save(path("x7_rank3.npy"), rng.standard_normal((7, 3, 1)).astype(np.float32))
    np.save(path("x7_wide.npy"), rng.standard_normal((7, 4)).astype(np.float32))
    np.save(path("x7_be.npy"), rng.standard_normal((7, 3)).astype(">f4"))
    np.save(path("a9.npy"), rng.standard_normal((9, 4)).astype(np.float32))
    np.save(path("c9.npy"), rng.standard_normal((9, 4)).astype(np.float32))
    np.save(path("c8.npy"), rng.standard_normal((8, 4)).astype(np.float32))
    np.save(path("bias4.npy"), np.array([1, 2, 3, 4], np.float32))
    np.save(path("r5.npy"), rng.standard_normal((5, 2, 3)).astype(np.float32))
    np.save(path("s.npy"), np.float32(-3.5))
    np.save(path("spatial.npy"), rng.standard_normal((5, 3, 4, 6)).astype(np.float32))
    np.save(path("fixed5.npy"), rng.standard_normal((5, 3)).astype(np.float32))
    np.save(path("x17.npy"), rng.standard_normal((17, 3)).astype(np.float32))
    np.save(path("x14.npy"), rng.standard_normal((14, 3)).astype(np.float32))
    for t in DTYPES:
        v = rng.standard_normal((7, 2)) * 50
        np.save(path("d_%s.npy" % t), (v > 0) if t == "bool" else v.astype(t))
    with open(path("garbage.npy"), "wb") as f:
        f.write(b"this is not an npy file at all")
    whole = open(path("x7.npy"), "rb").read()
    with open(path("trunc.npy"), "wb") as f:
        f.write(whole[:-10])


# ---- cases ----

def addrelu_ref(x):
    b = np.array([0.5, -1.0, 2.0], np.float32)
    return np.maximum(np.maximum(x + b, 0) + b, 0)


def case_version():
    out, _ = toplu("--version")
    check(out.startswith("toplu "), "version line", out)
    out, _ = toplu("help")
    check("info" in out and "run" in out, "help lists the commands", out)
    out, _ = toplu("help", "run")
    check("--batch-size" in out and "--output" in out, "help run shows run's usage", out)
    out, _ = toplu("run", "--help")
    check("--batch-size" in out, "run --help shows the usage", out)
    _, err = toplu(expect=2)
    check("usage" in err, "no command: usage on stderr", err)
    _, err = toplu("frobnicate", expect=2)
    check("unknown command 'frobnicate'" in err, "unknown command", err)
    _, err = toplu("help", "frobnicate", expect=2)


def case_info():
    out, _ = toplu("info", path("addrelu.onnx"))
    for want in ["addrelu.onnx", "IR version:    8", "producer:      toplu-test", "opset:         13",
                 "x    float32  [N, 3]", "y:0  float32  [N, 3]", "batch:         free (dim 0 of 'x' is N)",
                 "nodes:         4 in the file", "parameters:    3, 12 bytes", "FLOPs per sample: 12"]:
        check(want in out, "info addrelu shows %r" % want, out)
    lines = out.splitlines()
    ops = [l.split() for l in lines[lines.index(next(l for l in lines if l.startswith("ops ("))) + 1:][:2]]
    check(ops == [["Add", "2"], ["Relu", "2"]], "op histogram, most frequent first", out)
    check("rows:          kept apart along dim 0" in out, "info says addrelu keeps rows apart", out)
    out, _ = toplu("info", path("sumrows.onnx"))
    check("rows:          mixed along dim 0:" in out and "(ReduceSum) works along dim 0" in out,
          "info says a sum over dim 0 mixes the rows (what run and serve decide)", out)

    out, _ = toplu("info", path("reshape.onnx"))
    check("[p2o.DynamicDimension.0, 2, 3]" in out, "symbolic dim names", out)
    check("FLOPs per sample:" in out, "FLOPs line", out)

    out, _ = toplu("info", path("spatial.onnx"))
    check("x  float32  [N, 3, H, W]" in out, "spatial dims", out)
    check("FLOPs per sample: give the symbolic dims a size, e.g. --shape x=1,3,224,224 (symbolic: dims 2 and 3 of x "
          "(H, W); the sizes shown for them are only examples: use your data's)" in out,
          "info asks for the spatial dims, with an example that works as given", out)
    # The example the hint gives is accepted as it is.
    out, _ = toplu("info", path("spatial.onnx"))
    hint = out[out.index("e.g. --shape ") + len("e.g. --shape "):].split()[0]
    out, _ = toplu("info", path("spatial.onnx"), "--shape", hint)
    check("FLOPs per sample: 150,528" in out, "the hint's example works", hint, out)
    check("ops (1 type, 1 node):" in out and "1 node per run" in out, "singular forms for one op and one node", out)
    # Dims that overflow, are too large or 0: refused with the reason.
    _, err = toplu("info", path("spatial.onnx"), "--shape", "x=1,3,48,99999999999", expect=2)
    check("dim 3 = 99999999999 is too large" in err, "a dim that would wrap: refused", err)
    _, err = toplu("info", path("spatial.onnx"), "--shape", "x=1,3,48,0", expect=2)
    check("dim 3 is 0" in err and ">= 1" in err, "a 0 dim: refused, and why", err)
    _, err = toplu("info", path("spatial.onnx"), "--shape", "x=1,3,48,H", expect=2)
    check("'H' is not a number" in err, "a symbolic name as a dim: refused, and why", err)
    _, err = toplu("info", path("spatial.onnx"), "--shape", "x=1,3,2000000,2000000", expect=2)
    check("more than toplu plans for" in err, "too many elements: refused", err)
    _, err = toplu("info", path("noinput.onnx"), "--shape", "x=1", expect=2)
    check("has no inputs at all" in err and "its inputs are" not in err, "--shape on a model without inputs", err)
    out, _ = toplu("info", path("spatial.onnx"), "--shape", "x=1,3,4,5")
    check("FLOPs per sample: 60" in out, "FLOPs with --shape", out)
    out, _ = toplu("info", path("spatial.onnx"), "--shape=x=2,3,4,5")
    check("FLOPs per sample: 60 (120 at batch 2)" in out, "FLOPs per sample with --shape at batch 2", out)
    _, err = toplu("info", path("spatial.onnx"), "--shape", "y=1,3,4,5", expect=2)
    check("no input 'y'" in err, "unknown --shape input", err)
    _, err = toplu("info", path("spatial.onnx"), "--shape", "x=1,4,4,5", expect=2)
    check("dim 1" in err and "x" in err, "fixed dim mismatch in --shape", err)
    _, err = toplu("info", path("spatial.onnx"), "--shape", "x=1,3,4", expect=2)
    check("rank 4" in err, "rank mismatch in --shape", err)
    _, err = toplu("info", path("spatial.onnx"), "--shape", "x=1,a", expect=2)
    check("usage: toplu info" in err, "bad --shape prints the usage", err)

    out, _ = toplu("info", path("fixed1.onnx"))
    check("batch:         fixed to 1 in the file" in out, "fixed batch reported", out)
    out, _ = toplu("info", path("fixed7.onnx"))
    check("batch:         fixed to 7 in the file, every input (a static batch" in out, "a static batch reported", out)
    out, _ = toplu("info", path("twoin.onnx"))
    check("but input 'bias' is [4]: toplu run passes it whole to every batch, and toplu serve gives the model "
          "max_batch_size 0" in out, "an input without a batch dim beside a free one reported", out)
    r = subprocess.run([TOPLU, "info", path("fixed1.onnx")], capture_output=True, text=True,
                       env=dict(os.environ, TOPLU_BACKENDS="bogus"))
    check(r.returncode == 2 and "TOPLU_BACKENDS" in r.stderr and "bogus" in r.stderr,
          "a bad TOPLU_BACKENDS: exit 2 naming it", r.stderr)
    out, _ = toplu("info", path("scalar.onnx"))
    check("x  float32  []" in out and "none ('x' is a scalar)" in out, "scalar input", out)
    _, err = toplu("info", expect=2)
    check("usage: toplu info" in err, "info without a model", err)
    _, err = toplu("info", path("nope.onnx"), expect=2)
    check("nope.onnx" in err and "No such file or directory" in err, "missing model file: the reason", err)
    _, err = toplu("info", WORK, expect=2)
    check("is a directory" in err, "a directory as the model", err)
    _, err = toplu("info", path("garbage.npy"), expect=2)


def case_exit_codes():
    """Bad or unsupported models are the caller's input: exit 2 from info, plan and tune alike.
    A model of string tensors loads (info and plan describe it) but tune, which measures on
    random numbers, and batch jobs, which read numbers, refuse it naming the tensor."""
    tune = ["tune", "--batch-sizes", "1", "--max-seconds", "0.1", "--out", path("out_exit_tune")]
    for name, needle in [("unsupported_op", "not supported"), ("opset1", "opset 1")]:
        for cmd in (["info"], ["plan"], tune):
            _, err = toplu(cmd[0], path(name + ".onnx"), *cmd[1:], expect=2)
            check(needle in err, "%s %s: says why" % (cmd[0], name), err)
    out, _ = toplu("info", path("string_input.onnx"), expect=0)
    check("string" in out, "info string_input: describes the string input", out)
    _, err = toplu(tune[0], path("string_input.onnx"), *tune[1:], expect=2)
    check("input 'x' is a string tensor" in err, "tune string_input: says why", err)


def case_run_single():
    d = fresh_dir("out_single")
    _, err = toplu("run", path("addrelu.onnx"), "--input", "x=" + path("x7.npy"), "--output", d)
    check("7 rows ->" in err and "rows/s" in err, "summary line", err)
    check(sorted(os.listdir(d)) == [".toplu-state", "ids.txt", "y_0.npy"],
          "one output named y_0.npy, with the job's ids and checkpoint", os.listdir(d))
    check(open(os.path.join(d, "ids.txt")).read() == "".join("%d\n" % i for i in range(7)), "ids.txt: row numbers")
    y = np.load(os.path.join(d, "y_0.npy"))
    check(y.dtype == np.float32 and y.shape == (7, 3), "output dtype/shape", y.dtype, y.shape)
    check(np.allclose(y, addrelu_ref(np.load(path("x7.npy"))), atol=1e-6), "output values", y)
    # Positional input (the only one), --quiet, big-endian input.
    d2 = fresh_dir("out_single_be")
    _, err = toplu("run", path("addrelu.onnx"), path("x7_be.npy"), "--output", d2, "--quiet")
    check(err == "", "--quiet prints nothing", err)
    y = np.load(os.path.join(d2, "y_0.npy"))
    check(np.allclose(y, addrelu_ref(np.load(path("x7_be.npy")).astype(np.float32)), atol=1e-6), "big-endian input")


def case_run_batched():
    single, batched = fresh_dir("out_b_single"), fresh_dir("out_b3")
    toplu("run", path("addrelu.onnx"), "--input", "x=" + path("x7.npy"), "--output", single)
    _, err = toplu("run", path("addrelu.onnx"), "--input", "x=" + path("x7.npy"), "--output", batched,
                   "--batch-size", "3", "--threads", "1")
    check("7 rows ->" in err and "3 batches of up to 3" in err, "summary names rows and batches", err)
    a = open(os.path.join(single, "y_0.npy"), "rb").read()
    b = open(os.path.join(batched, "y_0.npy"), "rb").read()
    check(a == b, "batch 3 over 7 rows is byte for byte the single run")
    for n in ["1", "7", "100"]:
        d = fresh_dir("out_b" + n)
        toplu("run", path("addrelu.onnx"), "--input=x=" + path("x7.npy"), "--output=" + d, "--batch-size=" + n,
              "-q")
        check(open(os.path.join(d, "y_0.npy"), "rb").read() == a, "batch %s matches" % n)
    # Two batched inputs and one whole input; two outputs.
    d1, d4 = fresh_dir("out_two"), fresh_dir("out_two4")
    args = ["--input", "a=" + path("a9.npy"), "--input", "c=" + path("c9.npy"), "--input", "bias=" + path("bias4.npy")]
    toplu("run", path("twoin.onnx"), *args, "--output", d1)
    toplu("run", path("twoin.onnx"), *args, "--output", d4, "--batch-size", "4")
    check(sorted(f for f in os.listdir(d4) if f.endswith(".npy")) == ["relu_a.npy", "sum_0.npy"],
          "two outputs, sanitised", os.listdir(d4))
    for f in ["relu_a.npy", "sum_0.npy"]:
        check(open(os.path.join(d1, f), "rb").read() == open(os.path.join(d4, f), "rb").read(), f + " batched")
    a9, c9 = np.load(path("a9.npy")), np.load(path("c9.npy"))
    check(np.allclose(np.load(os.path.join(d4, "sum_0.npy")), a9 + c9 + np.array([1, 2, 3, 4], np.float32)),
          "sum values")
    check(np.array_equal(np.load(os.path.join(d4, "relu_a.npy")), np.maximum(a9, 0)), "relu values")
    # Reshape with a copied batch dim.
    d1, d2 = fresh_dir("out_rs"), fresh_dir("out_rs2")
    toplu("run", path("reshape.onnx"), "--input", "x=" + path("r5.npy"), "--output", d1)
    toplu("run", path("reshape.onnx"), "--input", "x=" + path("r5.npy"), "--output", d2, "--batch-size", "2")
    y = np.load(os.path.join(d2, "y.npy"))
    check(np.array_equal(y, np.load(path("r5.npy")).reshape(5, 6)), "reshape values", y)
    check(open(os.path.join(d1, "y.npy"), "rb").read() == open(os.path.join(d2, "y.npy"), "rb").read(),
          "reshape batched")


def case_run_dtypes():
    for t in DTYPES:
        for bs in [None, "3"]:
            d = fresh_dir("out_dt_" + t)
            args = ["run", path("id_%s.onnx" % t), "--input", "x=" + path("d_%s.npy" % t), "--output", d, "-q"]
            if bs:
                args += ["--batch-size", bs]
            toplu(*args)
            got, want = np.load(os.path.join(d, "y.npy")), np.load(path("d_%s.npy" % t))
            check(got.dtype == want.dtype and np.array_equal(got, want), "identity %s (batch %s)" % (t, bs), got)


def case_run_scalar():
    d = fresh_dir("out_scalar")
    toplu("run", path("scalar.onnx"), "--input", "x=" + path("s.npy"), "--output", d)
    y = np.load(os.path.join(d, "y.npy"))
    check(y.shape == () and y.dtype == np.float32 and y == 0, "scalar relu", y)
    _, err = toplu("run", path("scalar.onnx"), "--input", "x=" + path("s.npy"), "--output", d, "--batch-size", "2",
                   expect=2)
    check("scalar" in err and "'x'" in err, "--batch-size with a scalar input", err)


def job_notes(err):
    """A job's notes on stderr but the engine's choices by timing (a kernel, threads), which come out as the job's
    since 2026-12-07 and depend on the timings."""
    return [l for l in err.splitlines() if "note:" in l and "(choose_kernels)" not in l and "(choose_threads)" not in l]


def case_run_fixed_batch():
    x = np.load(path("fixed5.npy"))
    want = np.maximum(x + np.array([1.0, -2.0, 0.25], np.float32), 0)
    for extra in [[], ["--batch-size", "2"], ["--batch-size", "5"]]:
        d = fresh_dir("out_fixed")
        _, err = toplu("run", path("fixed1.onnx"), "--input", "x=" + path("fixed5.npy"), "--output", d, *extra)
        notes = job_notes(err)
        check(len(notes) == 1 and "fixes the batch dim to 1" in notes[0], "one note about the fixed batch", err)
        y = np.load(os.path.join(d, "y.npy"))
        check(y.shape == (5, 3) and np.allclose(y, want), "fixed-batch model at batch 5 %s" % extra, y)
    d = fresh_dir("out_fixed1")
    _, err = toplu("run", path("fixed1.onnx"), "--input", "x=" + path("fixed5.npy"), "--output", d,
                   "--batch-size", "1")
    check(not job_notes(err), "no note at batch 1", err)
    check(np.allclose(np.load(os.path.join(d, "y.npy")), want), "batch 1 rows")


def case_run_whole():
    """Inputs that are not rows of one batch run as given, once (issue 8: every toplu run is a job)."""
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    np.save(path("rs_data.npy"), data)
    np.save(path("rs_shape.npy"), np.array([4, 2, 3, 1], np.int64))
    d = fresh_dir("out_reshape_fixed")
    toplu("run", path("reshape_fixed.onnx"), "--input", "data=" + path("rs_data.npy"),
          "--input", "shape=" + path("rs_shape.npy"), "--output", d, "-q")
    y = np.load(os.path.join(d, "reshaped.npy"))
    check(y.shape == (4, 2, 3, 1) and np.array_equal(y, data.reshape(4, 2, 3, 1)), "data [2,3,4] by shape [4]", y.shape)
    x = np.array([[1.0, -2.0, 3.0]], np.float32)
    np.save(path("uq_x.npy"), x)
    np.save(path("uq_axes.npy"), np.array([1], np.int64))
    d = fresh_dir("out_unsqueeze_fixed1")
    toplu("run", path("unsqueeze_fixed1.onnx"), "--input", "x=" + path("uq_x.npy"),
          "--input", "axes=" + path("uq_axes.npy"), "--output", d, "-q")
    y = np.load(os.path.join(d, "y.npy"))
    check(y.shape == (1, 1, 3) and np.array_equal(y[0, 0], x[0]), "fixed batch 1 with a value input", y.shape)
    d = fresh_dir("out_noinput")
    toplu("run", path("noinput.onnx"), "--output", d, "-q")
    y = np.load(os.path.join(d, "y.npy"))
    check(y.shape == (2, 2) and np.all(y == 1), "a model without inputs runs once", y)
    _, err = toplu("run", path("reshape_fixed.onnx"), "--input", "data=" + path("rs_data.npy"),
                   "--input", "shape=" + path("rs_shape.npy"), "--output", fresh_dir("out_rs_bad"),
                   "--batch-size", "1", expect=2)
    check("fixes dim 0" in err and "'data'" in err and "at least 2" in err, "a batch size below the fixed dim 0", err)


def case_run_nonfinite():
    """NaN/Inf inputs are bad rows by default; --allow-nonfinite passes them to the model."""
    x = np.array([[1.0, np.nan], [np.inf, 2.0], [3.0, 4.0]], np.float32)
    np.save(path("nan_rows.npy"), x)
    d, errs = fresh_dir("out_isnan_default"), path("isnan.errors")
    toplu("run", path("isnan.onnx"), "--input", "x=" + path("nan_rows.npy"), "--output", d, "--errors", errs, "-q")
    bad = [json.loads(line)["row"] for line in open(errs)]
    check(bad == [0, 1] and np.array_equal(np.load(os.path.join(d, "y.npy")), [[False, False]]),
          "by default the NaN and Inf rows are bad rows", bad)
    d = fresh_dir("out_isnan_allowed")
    toplu("run", path("isnan.onnx"), "--input", "x=" + path("nan_rows.npy"), "--output", d, "--allow-nonfinite", "-q")
    y = np.load(os.path.join(d, "y.npy"))
    check(y.dtype == np.bool_ and np.array_equal(y, np.isnan(x)), "--allow-nonfinite: IsNaN sees its NaN", y)


def expect_bad(args, *needles, code=2):
    d = path("out_bad")
    shutil.rmtree(d, ignore_errors=True)
    _, err = toplu("run", *args, "--output", d, expect=code)
    for n in needles:
        check(n in err, "message names %r" % n, err)
    check(not os.path.exists(d) or os.listdir(d) == [], "no output written on error", os.listdir(d) if os.path.exists(d) else "")
    return err


def case_run_errors():
    m = path("addrelu.onnx")
    expect_bad([m], "missing input 'x'", "float32 [N, 3]")
    expect_bad([m, "--input", "q=" + path("x7.npy")], "no input 'q'")
    expect_bad([m, "--input", "x=" + path("garbage.npy")], "input 'x'", "garbage.npy", "not a .npy file")
    expect_bad([m, "--input", "x=" + path("trunc.npy")], "input 'x'", "trunc.npy", "10 bytes missing")
    expect_bad([m, "--input", "x=" + path("missing.npy")], "input 'x'", "missing.npy")
    # A file of another dtype is converted to the input's, as for every source (float64 -> float32).
    d = fresh_dir("out_f64")
    toplu("run", m, "--input", "x=" + path("x7_f64.npy"), "--output", d, "-q")
    y = np.load(os.path.join(d, "y_0.npy"))
    check(y.dtype == np.float32 and np.allclose(y, addrelu_ref(np.load(path("x7_f64.npy")).astype(np.float32)), atol=1e-6),
          "float64 input converted to float32", y)
    expect_bad([m, "--input", "x=" + path("x7_rank3.npy")], "input 'x'", "x7_rank3.npy", "rank 3", "[N, 3]")
    expect_bad([m, "--input", "x=" + path("x7_wide.npy")], "input 'x'", "x7_wide.npy", "[7, 4]", "dim 1 must be 3")
    expect_bad([m, "--input", "x=" + path("x7.npy"), "--input", "x=" + path("x7.npy")], "given twice")
    expect_bad([path("nope.onnx"), "--input", "x=" + path("x7.npy")], "nope.onnx")
    t = path("twoin.onnx")
    expect_bad([t, path("a9.npy"), path("c9.npy")], "does not say which input")
    expect_bad([t, "a=" + path("a9.npy"), "c=" + path("c8.npy"), "bias=" + path("bias4.npy")], "'c'", "'a'",
               "batch")
    expect_bad([t, "a=" + path("a9.npy"), "c=" + path("c8.npy"), "bias=" + path("bias4.npy"), "--batch-size", "4"],
               "'a'", "'c'", "c8.npy")
    err = expect_bad([path("flatten_all.onnx"), "x=" + path("x7.npy"), "--batch-size", "2"], "output 'y'",
                     "does not follow the batch")
    d = fresh_dir("out_fixed7")
    toplu("run", path("fixed7.onnx"), "x=" + path("x7.npy"), "--output", d, "--batch-size", "8")
    check(np.array_equal(np.load(os.path.join(d, "y.npy")), np.maximum(np.load(path("x7.npy")), 0)), "fixed7")
    # A static batch of 7 in the file (an export without dynamic axes): rows that stay apart run in batches of
    # any size, by default of 7 (17 rows: 7, 7, 3); a model that mixes them runs 7 rows at a time only.
    x17 = np.load(path("x17.npy"))
    for extra, what in (([], "default batches of 7"), (["--batch-size", "3"], "batches of 3"),
                        (["--batch-size", "all"], "one batch of 17")):
        d = fresh_dir("out_fixed7_17")
        _, err = toplu("run", path("fixed7.onnx"), "x=" + path("x17.npy"), "--output", d, *extra)
        check(np.array_equal(np.load(os.path.join(d, "y.npy")), np.maximum(x17, 0)), "fixed7, 17 rows, " + what, err)
        check(("batches of 3 rows run anyway" in err) == (extra[1:] == ["3"]), "the note names the other batch size", err)
    expect_bad([path("fixed7_mix.onnx"), "x=" + path("x17.npy")], "last batch of 3 rows", "fixes dim 0 of its inputs to 7",
               "give it 7 rows at a time")
    expect_bad([path("fixed7_mix.onnx"), "x=" + path("x14.npy"), "--batch-size", "2"], "fixes dim 0 of its inputs to 7",
               "at 2 rows")
    d = fresh_dir("out_fixed7_mix")
    toplu("run", path("fixed7_mix.onnx"), "x=" + path("x14.npy"), "--output", d)
    x14 = np.load(path("x14.npy")).reshape(2, 7, 3)
    e = np.exp(x14 - x14.max(axis=1, keepdims=True))
    want = (e / e.sum(axis=1, keepdims=True)).reshape(14, 3)
    check(np.allclose(np.load(os.path.join(d, "y.npy")), want, atol=1e-6), "fixed7_mix, 14 rows: two batches of 7")
    # Usage errors print the usage.
    for args in [[m, "x=" + path("x7.npy"), "--batch-size", "0"], [m, "x=" + path("x7.npy"), "--batch-size", "x"],
                 [m, "x=" + path("x7.npy"), "--threads", "-1"], [m, "x=" + path("x7.npy"), "--frob"],
                 [m, "x=" + path("x7.npy"), "--batch-size"]]:
        err = expect_bad(args, "usage: toplu run")
    _, err = toplu("run", m, "x=" + path("x7.npy"), expect=2)
    check("--output" in err and "usage: toplu run" in err, "no --output", err)
    _, err = toplu("run", expect=2)
    check("usage: toplu run" in err, "run without arguments", err)
    # flatten_all runs fine without --batch-size.
    d = fresh_dir("out_flat")
    toplu("run", path("flatten_all.onnx"), "x=" + path("x7.npy"), "--output", d)
    check(np.load(os.path.join(d, "y.npy")).shape == (21,), "flatten without --batch-size")


def case_mnist():
    model = os.path.join(SHARED, "models", "mnist", "mnist.onnx")
    check(os.path.isfile(model), "the MNIST model %s is missing (the shared folder: $TOPLU_SHARED or ../shared)" % model)
    p = subprocess.run([TOPLU, "info", model], capture_output=True, text=True)
    check(p.returncode == 0, "info mnist", p.stdout, p.stderr)
    check("Input3" in p.stdout and "fixed to 1" in p.stdout, "mnist info", p.stdout)
    rng = np.random.default_rng(3)
    np.save(path("mnist_in.npy"), (rng.random((5, 1, 28, 28)) * 255).astype(np.float32))
    outs = []
    for extra in [[], ["--batch-size", "2"]]:
        d = fresh_dir("out_mnist%d" % len(outs))
        _, err = toplu("run", model, "--input", "Input3=" + path("mnist_in.npy"), "--output", d, *extra)
        notes = job_notes(err)
        check(len(notes) == 1 and "fixes the batch dim to 1" in notes[0], "one note for the fixed batch", err)
        outs.append(np.load(os.path.join(d, "Plus214_Output_0.npy")))
    check(outs[0].shape == (5, 10) and np.allclose(outs[0], outs[1], rtol=1e-4, atol=1e-3), "mnist batched", outs)


CASES = {
    "version": case_version,
    "info": case_info,
    "exit_codes": case_exit_codes,
    "run_single": case_run_single,
    "run_batched": case_run_batched,
    "run_dtypes": case_run_dtypes,
    "run_scalar": case_run_scalar,
    "run_fixed_batch": case_run_fixed_batch,
    "run_errors": case_run_errors,
    "run_whole": case_run_whole,
    "run_nonfinite": case_run_nonfinite,
    "mnist": case_mnist,
}


def main():
    global TOPLU, WORK
    if len(sys.argv) != 4 or (sys.argv[3] != "setup" and sys.argv[3] not in CASES):
        sys.exit("usage: test_cli.py TOPLU WORKDIR setup|" + "|".join(CASES))
    TOPLU, WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if sys.argv[3] == "setup":
        setup()
        return 0
    try:
        CASES[sys.argv[3]]()
    except Failure as e:
        print("FAIL: " + str(e))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
