"""tests/test_cpu_check.py - a toplu binary on a CPU that lacks what it was built for (tests/cli.cmake).

usage: test_cpu_check.py TOPLU

Runs `toplu --version` and `toplu info MODEL` under QEMU's user-mode emulator (Debian's qemu-user) as an Intel
Nehalem, a CPU without AVX: a build made with -march=native (TOPLU_NATIVE, the default) must say which
instructions it needs and exit 1, never die on SIGILL (until 2026-12-06 it did, with no message); a build that
needs nothing past the baseline runs.  Then as an AMD EPYC Milan (Zen 3: AVX2 and FMA, no AVX-512): the same
rule.
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
sys.exit(1 if fails else 0)
