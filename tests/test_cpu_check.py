"""tests/test_cpu_check.py - a toplu binary on a CPU that lacks what it was built for (tests/cli.cmake).

usage: test_cpu_check.py TOPLU MODEL [CC LIBTOPLU_SO FIXTURE_DIR]

Runs `toplu --version` and `toplu info MODEL` under QEMU's user-mode emulator (Debian's qemu-user) as an Intel
Nehalem, a CPU without AVX: a build made with -march=native (TOPLU_NATIVE, the default) must say which
instructions it needs and exit 1, never die on SIGILL (until 2026-12-06 it did, with no message); a build that
needs nothing past the baseline runs.  Then as an AMD EPYC Milan (Zen 3: AVX2 and FMA, no AVX-512): the same
rule.
With CC and LIBTOPLU_SO, tests/install/consumer.c is built against the shared library and run the same way on
MNIST: toplu_model_load must fail with TOPLU_ERR_UNSUPPORTED naming the missing instructions (exit 1, "libtoplu
was built for a CPU with"), or run.
"""
import os
import shutil
import subprocess
import sys

TOPLU = sys.argv[1]
MODEL = sys.argv[2]
qemu = shutil.which('qemu-x86_64')
if not qemu:
    print('FAIL: qemu-x86_64 is not installed (scripts/install-deps.sh installs qemu-user)')
    sys.exit(1)
fails = 0
for cpu in ('Nehalem', 'EPYC-Milan'):
    for args in (['--version'], ['info', MODEL]):
        p = subprocess.run([qemu, '-cpu', cpu, TOPLU, *args], capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, GOMP_SPINCOUNT='3000'))
        said = 'this binary was built for a CPU with' in p.stderr
        ok = (p.returncode == 1 and said) or (p.returncode == 0 and not said)
        print(('ok  ' if ok else 'FAIL') + f' {cpu}: toplu {" ".join(args)}: exit {p.returncode}'
              + (' (says which instructions it needs)' if said else ''))
        if not ok:
            print(p.stderr.strip()[-400:])
            fails += 1
if len(sys.argv) >= 6:
    cc, so, fix = sys.argv[3], sys.argv[4], sys.argv[5]
    import tempfile
    d = tempfile.mkdtemp(prefix='toplu-cpu-')
    exe = os.path.join(d, 'consumer')
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'install', 'consumer.c')
    inc = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'include')
    p = subprocess.run([cc, '-std=c11', src, '-I', inc, so, f'-Wl,-rpath,{os.path.dirname(so)}', '-lm', '-o', exe],
                       capture_output=True, text=True)
    if p.returncode:
        print('FAIL the consumer does not build: ' + p.stderr[-400:])
        fails += 1
    else:
        cargs = [MODEL, os.path.join(fix, 'input_0.npy'), os.path.join(fix, 'output_0.npy'), '0.0025']
        for cpu in ('Nehalem', 'EPYC-Milan'):
            p = subprocess.run([qemu, '-cpu', cpu, exe, *cargs], capture_output=True, text=True, timeout=600)
            said = 'libtoplu was built for a CPU with' in p.stdout
            ok = (p.returncode == 1 and said) or (p.returncode == 0 and p.stdout.startswith('ok 8 rows'))
            print(('ok  ' if ok else 'FAIL') + f' {cpu}: a program on libtoplu.so: exit {p.returncode}'
                  + (' (toplu_model_load says which instructions the library needs)' if said else ''))
            if not ok:
                print((p.stdout + p.stderr).strip()[-400:])
                fails += 1
    shutil.rmtree(d, True)
sys.exit(1 if fails else 0)
