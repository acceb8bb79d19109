"""tests/test_install.py - install libtoplu and embed it as a user would (tests/install.cmake).

usage: test_install.py BUILD_DIR CMAKE CC SHARED_DIR

1. cmake --install BUILD_DIR --prefix SCRATCH: the CLI, the headers, libtoplu.a, libtoplu.so,
   toplu.pc and the CMake package are there.
2. The installed libraries define no global symbol but the public API (toplu_ then a letter or
   digit): nm of libtoplu.a (defined globals) and of libtoplu.so (dynamic exports).
3. tests/install/consumer.c (it defines pl_buf_free, srv_http_close and onnx__model_proto__unpack
   itself) built with `pkg-config --cflags --libs toplu` (the shared library) and with the static
   library plus `pkg-config --static --libs toplu`'s dependencies; each runs MNIST on the fixture's
   eight digits against ONNX Runtime's logits.
4. The same program built by a CMake project with find_package(toplu) and toplu::toplu, shared and
   with -DTOPLU_STATIC=ON, run the same way; a build configured with TOPLU_SHARED=OFF writes a toplu.pc
   whose Libs carry the static library's dependencies.
5. Every public header compiles alone as C11 with -Wall -Wextra -Wpedantic -Werror, and toplu.h
   as C++17 when a C++ compiler is installed.
"""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

BUILD, CMAKE, CC, SHARED = sys.argv[1:5]
SRC = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
failures = []


def check(cond, what, detail=''):
    print(('ok   ' if cond else 'FAIL ') + what + ('' if cond else f': {detail}'))
    if not cond:
        failures.append(what)
    return cond


def run(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, **kw)
    return p.returncode, p.stdout + p.stderr


work = tempfile.mkdtemp(prefix='toplu-install-')
prefix = os.path.join(work, 'prefix')
fix = os.path.join(SHARED, 'fixtures', 'mnist')
with open(os.path.join(fix, 'meta.json')) as f:
    meta = json.load(f)
model = os.path.join(SHARED, meta['model'].split(':', 1)[1])
consumer_args = [model, os.path.join(fix, 'input_0.npy'), os.path.join(fix, 'output_0.npy'),
                 str(meta['tolerance']['max_abs'])]

code, out = run([CMAKE, '--install', BUILD, '--prefix', prefix])
check(code == 0, 'cmake --install into a scratch prefix', out[-800:])
libs = glob.glob(os.path.join(prefix, 'lib*', '**', 'libtoplu.a'), recursive=True)
libdir = os.path.dirname(libs[0]) if libs else os.path.join(prefix, 'lib')
for rel in ('bin/toplu', 'include/toplu/toplu.h', 'include/toplu/session.h'):
    check(os.path.isfile(os.path.join(prefix, rel)), f'installed: {rel}')
for name in ('libtoplu.a', 'libtoplu.so', 'pkgconfig/toplu.pc', 'cmake/toplu/toplu-config.cmake',
             'cmake/toplu/toplu-config-version.cmake'):
    check(os.path.exists(os.path.join(libdir, name)), f'installed: LIBDIR/{name}', libdir)

# 2. only the public names
public = re.compile(r'^toplu_[a-z0-9]')
code, out = run(['nm', '-g', '--defined-only', os.path.join(libdir, 'libtoplu.a')])
defined = [l.split()[-1] for l in out.splitlines() if len(l.split()) == 3]
# a named OpenMP critical section's lock (.gomp_critical_user_NAME) is a common symbol no C name can clash with
others = [n for n in defined if not public.match(n) and not n.startswith('.gomp_critical_user_')]
check(code == 0 and len(defined) > 100 and not others,
      f'libtoplu.a: {len(defined)} global definitions, all public toplu_* names', others[:10])
code, out = run(['nm', '-D', '--defined-only', os.path.join(libdir, 'libtoplu.so')])
exported = [l.split()[-1] for l in out.splitlines() if len(l.split()) == 3]
others = [n for n in exported if not public.match(n)]
check(code == 0 and len(exported) > 100 and not others,
      f'libtoplu.so: {len(exported)} exports, all public toplu_* names', others[:10])
check('toplu_session_run' in exported and 'toplu_model_load' in exported, 'libtoplu.so exports the API', exported[:5])

# 3. pkg-config, shared and static
env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, 'pkgconfig'))
consumer = os.path.join(SRC, 'tests', 'install', 'consumer.c')
code, flags = run(['pkg-config', '--cflags', '--libs', 'toplu'], env=env)
check(code == 0 and '-ltoplu' in flags, 'pkg-config --cflags --libs toplu', flags)
exe = os.path.join(work, 'consumer_so')
code, out = run([CC, '-std=c11', '-Wall', '-Wextra', '-Wpedantic', '-Werror', consumer, '-o', exe,
                 *flags.split(), f'-Wl,-rpath,{libdir}', '-lm'])
if check(code == 0, 'the consumer builds against libtoplu.so with pkg-config\'s flags alone', out[-1500:]):
    code, out = run([exe, *consumer_args])
    check(code == 0 and out.startswith('ok 8 rows'), 'and runs MNIST as ONNX Runtime does', out[-500:])
    code, out = run(['ldd', exe])
    check('libtoplu.so.0' in out, 'it is linked to libtoplu.so.0', out)
code, flags = run(['pkg-config', '--static', '--cflags', '--libs', 'toplu'], env=env)
static_flags = [os.path.join(libdir, 'libtoplu.a') if f == '-ltoplu' else f for f in flags.split()]
exe = os.path.join(work, 'consumer_a')
code, out = run([CC, '-std=c11', consumer, '-o', exe, *static_flags, '-lm'])
if check(code == 0, 'the consumer links libtoplu.a with pkg-config --static\'s dependencies', out[-1500:]):
    code, out = run([exe, *consumer_args])
    check(code == 0 and out.startswith('ok 8 rows'), 'and runs MNIST as ONNX Runtime does (static)', out[-500:])
    code, out = run(['ldd', exe])
    check('libtoplu' not in out, 'no libtoplu.so in the static build', out)

# 4. find_package(toplu)
proj = os.path.join(work, 'proj')
os.makedirs(proj)
shutil.copy(consumer, proj)
with open(os.path.join(proj, 'CMakeLists.txt'), 'w') as f:
    f.write('cmake_minimum_required(VERSION 3.20)\nproject(consumer C)\n'
            'find_package(toplu 0.1 REQUIRED)\nadd_executable(consumer consumer.c)\n'
            'target_link_libraries(consumer PRIVATE toplu::toplu m)\n')
for label, extra in (('shared', []), ('static', ['-DTOPLU_STATIC=ON'])):
    b = os.path.join(work, f'b_{label}')
    code, out = run([CMAKE, '-S', proj, '-B', b, f'-DCMAKE_PREFIX_PATH={prefix}', f'-DCMAKE_C_COMPILER={CC}',
                     '-DCMAKE_BUILD_RPATH=' + libdir, *extra])
    if check(code == 0, f'find_package(toplu) ({label})', out[-1500:]):
        code, out = run([CMAKE, '--build', b])
        if check(code == 0, f'a CMake project builds with toplu::toplu ({label})', out[-1500:]):
            code, out = run([os.path.join(b, 'consumer'), *consumer_args])
            check(code == 0 and out.startswith('ok 8 rows'), f'and runs MNIST ({label})', out[-500:])

# 4b. a build without the shared library (TOPLU_SHARED off, tests off: configured only): -ltoplu is then the static
#     library, so toplu.pc's Libs carries its dependencies (they were only in Libs.private: 2863 undefined references)
cfg = os.path.join(work, 'noshared')
code, out = run([CMAKE, '-S', SRC, '-B', cfg, '-DTOPLU_SHARED=OFF', '-DBUILD_TESTING=OFF', f'-DCMAKE_C_COMPILER={CC}'])
if check(code == 0, 'configure with TOPLU_SHARED=OFF and BUILD_TESTING=OFF', out[-800:]):
    with open(os.path.join(cfg, 'dist', 'toplu.pc')) as f:
        libs = next((l for l in f if l.startswith('Libs:')), '')
    check('-ltoplu' in libs and '-ldnnl' in libs and '-ljansson' in libs,
          'without libtoplu.so, toplu.pc\'s Libs names the static library\'s dependencies', libs)

# 5. the headers alone, and as C++
inc = os.path.join(prefix, 'include')
for h in sorted(glob.glob(os.path.join(inc, 'toplu', '*.h'))):
    src = os.path.join(work, 'one.c')
    with open(src, 'w') as f:
        f.write(f'#include <toplu/{os.path.basename(h)}>\nint main(void) {{ return 0; }}\n')
    code, out = run([CC, '-std=c11', '-Wall', '-Wextra', '-Wpedantic', '-Werror', '-I', inc, '-c', src,
                     '-o', os.path.join(work, 'one.o')])
    check(code == 0, f'{os.path.basename(h)} compiles alone as C11', out[-800:])
cxx = shutil.which('g++') or shutil.which('clang++')
if cxx:
    src = os.path.join(work, 'one.cc')
    with open(src, 'w') as f:
        f.write('#include <toplu/toplu.h>\nint main() { toplu_error_t e{}; return (int)sizeof e == 0; }\n')
    code, out = run([cxx, '-std=c++17', '-Wall', '-Wextra', '-Werror', '-I', inc, '-c', src,
                     '-o', os.path.join(work, 'one.o')])
    check(code == 0, f'toplu.h compiles as C++17 ({os.path.basename(cxx)})', out[-800:])
else:
    print('note: no C++ compiler installed: toplu.h not compiled as C++')

shutil.rmtree(work, True)
print(f'{len(failures)} failure(s)')
sys.exit(1 if failures else 0)
