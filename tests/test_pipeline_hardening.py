#!/usr/bin/python3
"""Hardening tests of batch inference jobs (issue 14, the pipeline and CLI side), run by CTest
(tests/pipeline_hardening.cmake):

  test_pipeline_hardening.py TOPLU WORKDIR setup   the tiny models and files of test_pipeline.py, and more
  test_pipeline_hardening.py TOPLU WORKDIR CASE    run one case (see CASES at the end)

Each case reproduces a defect found by trying toplu as an adversarial user would and checks the fix:
the real values written, exit statuses and messages.  Exit status 0 pass, 1 fail.
"""
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_pipeline as tp  # noqa: E402  (its helpers: check, toplu, fresh, path, read_jsonl)

check, toplu, fresh, path, read_jsonl, Failure = tp.check, tp.toplu, tp.fresh, tp.path, tp.read_jsonl, tp.Failure


def save_model(name, in_dtype, out_dtype, in_dims, op='Identity'):
    import onnx
    from onnx import helper
    vi = helper.make_tensor_value_info
    g = helper.make_graph([helper.make_node(op, ['x'], ['y'])], name, [vi('x', in_dtype, in_dims)],
                          [vi('y', out_dtype, in_dims)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='toplu-test')
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path(name + '.onnx'))


def setup():
    from onnx import TensorProto as T
    tp.setup()
    save_model('id_i8', T.INT8, T.INT8, ['N', 3])
    save_model('id_i64', T.INT64, T.INT64, ['N', 3])


# ---- item 10: absurd batch sizes ----

def case_batch_bound():
    out = fresh('bb.jsonl')
    # 2^63-1 used to wrap the chunk count: "0 processed", then "every one of the 37 rows failed" and an
    # empty output under the final name
    _, err = toplu('run', path('addrelu.onnx'), '--input', path('x37.npy'), '--output', out,
                   '--batch-size', str(2**63 - 1), expect=2)
    check('--batch-size 9223372036854775807: at most 2^40 rows' in err, 'a batch size above 2^40 is refused', err)
    check(not os.path.exists(out), 'nothing is written for a refused batch size')
    # the largest allowed one runs every row in one chunk, like all
    _, err = toplu('run', path('addrelu.onnx'), '--input', path('x37.npy'), '--output', out,
                   '--batch-size', str(2**40))
    rows = read_jsonl(out)
    x = np.load(path('x37.npy'))
    check([r['id'] for r in rows] == list(range(37)), 'every row once, in order', rows[:3])
    got = np.array([r['outputs']['y'] for r in rows], np.float32)
    check(np.array_equal(got, tp.addrelu(x)), 'the values of Relu(x + b)', got[:2])
    check('37 processed, 0 failed' in err and ' 1 batch of up to ' in err, 'one batch', err)


# ---- item 8: NaN, Inf and out-of-range values into integer inputs ----

def case_int_inputs():
    x = np.array([[1, 2, 3], [np.nan, 1, 2], [np.inf, 0, 0], [-np.inf, 0, 0], [300, 0, 0], [-4.6, 127, -128]],
                 np.float32)
    np.save(path('f6.npy'), x)
    with open(path('f6.csv'), 'w') as f:
        f.write('1,2,3\nnan,1,2\ninf,0,0\n-inf,0,0\n300,0,0\n-4.6,127,-128\n')
    with open(path('f6.jsonl'), 'w') as f:
        for row in ([1, 2, 3], [1, 2, 1e300], [1, 2, 3.4e38], [0, 0, -9e18], [300, 0, 0], [-4.6, 127, -128]):
            f.write(json.dumps({'x': row}) + '\n')
    want_reasons = {'npy': ['NaN, which int8', 'Inf, which int8', '-Inf, which int8', '300, outside the range of int8'],
                    'csv': ['NaN, which int8', 'Inf, which int8', '-Inf, which int8', '300, outside the range of int8'],
                    'jsonl': ['1e+300, outside', '3.4', '-9e+18, outside', '300, outside the range of int8']}
    for kind in ('npy', 'csv', 'jsonl'):
        out, errs = fresh('int_%s.jsonl' % kind), fresh('int_%s.errors' % kind)
        _, err = toplu('run', path('id_i8.onnx'), '--input', path('f6.' + kind), '--output', out, '--errors', errs)
        rows = read_jsonl(out)
        check([(r['id'], r['outputs']['y']) for r in rows] == [(0, [1, 2, 3]), (5, [-5, 127, -128])],
              '%s: only the rows int8 can hold, rounded to nearest' % kind, rows)
        bad = read_jsonl(errs)
        check([b['row'] for b in bad] == [1, 2, 3, 4], '%s: rows 1-4 are bad rows' % kind, bad)
        for b, want in zip(bad, want_reasons[kind]):
            check(want in b['error'] and b['stage'] == 'read', '%s row %d: the reason (%s)' % (kind, b['row'], want), b)
        check('2 processed, 4 failed' in err, '%s: counted as failed, not processed' % kind, err)
    # int64: the float .npy's NaN row is bad too (it used to become 0)
    out, errs = fresh('int_i64.jsonl'), fresh('int_i64.errors')
    toplu('run', path('id_i64.onnx'), '--input', path('f6.npy'), '--output', out, '--errors', errs)
    check([r['outputs']['y'] for r in read_jsonl(out)] == [[1, 2, 3], [300, 0, 0], [-5, 127, -128]],
          'int64 holds 300', read_jsonl(out))
    check([b['row'] for b in read_jsonl(errs)] == [1, 2, 3], 'NaN and +-Inf rows are bad for int64', read_jsonl(errs))
    # int64 from text keeps every digit (it went through a double: 2^53 + 1 came back as 2^53), and an integer
    # literal beyond int64 is a bad row, not rounded to the bound
    big = [[9007199254740993, -9223372036854775808, 1], [123456789012345678, 9223372036854775807, 2]]
    with open(path('i64.csv'), 'w') as f:
        f.write(''.join(','.join(map(str, r)) + '\n' for r in big) + '1,-9223372036854775809,3\n')
    with open(path('i64.jsonl'), 'w') as f:
        f.write(''.join(json.dumps({'x': r}) + '\n' for r in big))
    for kind in ('csv', 'jsonl'):
        out, errs = fresh('i64_%s' % kind), fresh('i64_%s.errors' % kind)
        toplu('run', path('id_i64.onnx'), '--input', path('i64.' + kind), '--output', out + '/', '--errors', errs,
              '--csv-header', 'no')
        got = np.load(os.path.join(out, 'y.npy'))
        check(got.dtype == np.int64 and got.tolist() == big, '%s: int64 values exact' % kind, got.tolist())
        bad = read_jsonl(errs) if os.path.exists(errs) else []
        want = [2] if kind == 'csv' else []
        check([b['row'] for b in bad] == want and all('outside the range of int64' in b['error'] for b in bad),
              '%s: a literal beyond int64 is a bad row' % kind, bad)


# ---- item 4: files no toplu job wrote are not destroyed ----

def case_overwrite():
    m, x = path('addrelu.onnx'), path('x37.npy')
    # a user's database: refused, tables kept; --overwrite replaces it
    db = fresh('user.sqlite')
    c = sqlite3.connect(db)
    c.execute('CREATE TABLE mine(a)')
    c.execute("INSERT INTO mine VALUES ('keep me')")
    c.commit()
    c.close()
    _, err = toplu('run', m, '--input', x, '--output', db, expect=2)
    check('is a database no toplu job wrote (it holds the table mine)' in err and '--overwrite' in err,
          'a foreign database is refused, naming its table and --overwrite', err)
    check(sqlite3.connect(db).execute('SELECT a FROM mine').fetchall() == [('keep me',)], 'its table is intact')
    toplu('run', m, '--input', x, '--output', db, '--overwrite')
    rows = sqlite3.connect(db).execute('SELECT id FROM results ORDER BY rowid').fetchall()
    check(rows == [(str(i),) for i in range(37)], '--overwrite writes the results', rows[:3])
    toplu('run', m, '--input', x, '--output', db)  # toplu's own database: replaced without asking
    # unrelated JSONL and CSV files
    for name in ('user.jsonl', 'user.csv'):
        out = fresh(name)
        with open(out, 'w') as f:
            f.write('precious\n')
        _, err = toplu('run', m, '--input', x, '--output', out, expect=2)
        check('exists and no toplu job wrote it' in err and '--overwrite' in err, '%s is refused' % name, err)
        check(open(out).read() == 'precious\n', '%s is intact' % name)
        toplu('run', m, '--input', x, '--output', out, '--overwrite')
        check(len(open(out).read().splitlines()) == 37 + (name.endswith('.csv')), '%s replaced when asked' % name)
        toplu('run', m, '--input', x, '--output', out)  # now toplu's: a rerun replaces it
    # an errors file of someone else is not emptied, even when no row fails
    notes, out = fresh('notes.txt'), fresh('notes_out.jsonl')
    with open(notes, 'w') as f:
        f.write('my notes\n')
    _, err = toplu('run', m, '--input', x, '--output', out, '--errors', notes, expect=2)
    check('--errors %s exists and no toplu job wrote it' % notes in err, 'a foreign errors file is refused', err)
    check(open(notes).read() == 'my notes\n' and not os.path.exists(out), 'it is intact, nothing written')
    # toplu's own errors file is replaced on a fresh run
    errs, out = fresh('sq.errors'), fresh('sq_out.jsonl')
    toplu('run', path('sqrt.onnx'), '--input', path('sqrt20.npy'), '--output', out, '--errors', errs)
    toplu('run', path('sqrt.onnx'), '--input', path('sqrt20.npy'), '--output', out, '--errors', errs)
    check([e['row'] for e in read_jsonl(errs)] == [3, 11], 'a rerun rewrites its own errors file', read_jsonl(errs))
    # a foreign ids.txt in a folder output
    d = fresh('userdir')
    os.makedirs(d)
    with open(os.path.join(d, 'ids.txt'), 'w') as f:
        f.write('foreign\n')
    _, err = toplu('run', m, '--input', x, '--output', d, expect=2)
    check('holds ids.txt, which this job would replace' in err, 'a foreign ids.txt is refused', err)
    check(open(os.path.join(d, 'ids.txt')).read() == 'foreign\n', 'ids.txt intact')
    toplu('run', m, '--input', x, '--output', d, '--overwrite')
    check(open(os.path.join(d, 'ids.txt')).read().split() == [str(i) for i in range(37)], 'replaced when asked')
    # the same through a job file
    job = path('overwrite_job.json')
    out = fresh('user2.jsonl')
    with open(out, 'w') as f:
        f.write('precious\n')
    for flag, code in ((False, 2), (True, 0)):
        with open(job, 'w') as f:
            json.dump({'model': m, 'input': x, 'output': out, 'overwrite': flag}, f)
        toplu('run', '--job', job, expect=code)
    check(len(read_jsonl(out)) == 37, 'job file "overwrite": true replaces it')


# ---- item 2: two jobs on one output ----

def case_two_writers():
    big = path('big.npy')
    if not os.path.exists(big):
        np.save(big, np.random.default_rng(5).standard_normal((300000, 3)).astype(np.float32))
    # the same folder named another way by the second job (a symbolic link to it, "DIR/.") shares the lock
    big_rev = path('big_rev.npy')
    if not os.path.exists(big_rev):
        np.save(big_rev, np.load(big)[::-1].copy())
    link = path('two_dir_link')
    if os.path.lexists(link):
        os.remove(link)
    link_dir, dot_dir = fresh('two_dir_l'), fresh('two_dir_d')
    os.makedirs(link_dir)
    os.symlink(link_dir, link)
    for out, other in ((fresh('two_dir'), None), (fresh('two.jsonl'), None), (link_dir, link),
                       (dot_dir, dot_dir + '/.')):
        cmd = [tp.TOPLU, 'run', path('addrelu.onnx'), '--input', big, '--output', out, '--batch-size', '1000', '-q']
        # the second job reads other rows (reversed): mixed writes cannot pass for one job's output
        cmd2 = [tp.TOPLU, 'run', path('addrelu.onnx'), '--input', big_rev, '--output', other or out, '--batch-size',
                '1000', '-q']
        first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # the second starts once the first holds the lock (its part files exist)
        part = os.path.join(out, '.y.npy.part') if not out.endswith('.jsonl') else path('.two.jsonl.part')
        for _ in range(2000):
            if os.path.exists(part) or first.poll() is not None:
                break
            threading.Event().wait(0.005)
        running = first.poll() is None
        second = subprocess.run(cmd2, capture_output=True, text=True)
        first.communicate()
        check(first.returncode == 0, '%s: the first job succeeds' % out)
        check(running, '%s: the first job was still running when the second started' % out)
        check(second.returncode == 2 and 'another job is writing' in second.stderr,
              '%s: the second job (as %s) is refused' % (out, other or out), second.stderr)
        x = np.load(big)
        got = np.load(os.path.join(out, 'y.npy')) if not out.endswith('.jsonl') else \
            np.array([r['outputs']['y'] for r in read_jsonl(out)], np.float32)
        check(got.shape == x.shape and np.array_equal(got, tp.addrelu(x)), '%s: one job\'s rows, intact' % out)


# ---- item 5: finished outputs are checked against their checkpoint ----

def case_verify_outputs():
    m, x = path('addrelu.onnx'), path('x37.npy')
    for name in ('cut.jsonl', 'cut.csv', 'cut.sqlite', 'cutdir'):
        out = fresh(name)
        toplu('run', m, '--input', x, '--output', out, '--batch-size', '8')
        _, err = toplu('run', m, '--input', x, '--output', out, '--batch-size', '8', '--resume')
        check('complete already (37 rows' in err, '%s: an intact output is complete' % name, err)
        if name.endswith('.sqlite'):
            c = sqlite3.connect(out)
            c.execute('DELETE FROM results WHERE rowid > 5')
            c.commit()
            c.close()
            want = 'holds 5 rows in results, its checkpoint says 37'
        elif name == 'cutdir':
            ids = os.path.join(out, 'ids.txt')
            with open(ids) as f:
                keep = f.readlines()[:5]
            with open(ids, 'w') as f:
                f.writelines(keep)
            want = 'ids.txt holds other bytes'
        else:
            with open(out) as f:
                keep = f.readlines()[:5]
            with open(out, 'w') as f:
                f.writelines(keep)
            want = 'holds %d bytes, its checkpoint says' % sum(len(k) for k in keep)
        _, err = toplu('run', m, '--input', x, '--output', out, '--batch-size', '8', '--resume', expect=2)
        check('is not what its job wrote' in err and want in err and 'without --resume' in err,
              '%s: a cut output is not called complete' % name, err)
        toplu('run', m, '--input', x, '--output', out, '--batch-size', '8')  # a fresh run redoes it
    # merge: a shard cut from 13 to 3 lines is refused, not joined into 27 of 37 rows
    shards = []
    for k in range(3):
        out = fresh('vshard%d.jsonl' % k)
        toplu('run', m, '--input', x, '--output', out, '--shard', '%d/3' % k)
        shards.append(out)
    merged = fresh('vmerged.jsonl')
    toplu('merge', '--output', merged, *shards)
    check([r['id'] for r in read_jsonl(merged)] == list(range(37)), 'intact shards merge to 37 rows')
    with open(shards[1]) as f:
        keep = f.readlines()[:3]
    with open(shards[1], 'w') as f:
        f.writelines(keep)
    merged = fresh('vmerged.jsonl')
    _, err = toplu('merge', '--output', merged, *shards, expect=2)
    check('shard %s (1/3) is not what its job wrote' % shards[1] in err, 'a cut shard is refused', err)
    check(not os.path.exists(merged), 'nothing merged')
    # .npy shards: one shard's array cut
    dirs = []
    for k in range(2):
        out = fresh('vdir%d' % k)
        toplu('run', m, '--input', x, '--output', out, '--shard', '%d/2' % k)
        dirs.append(out)
    y = os.path.join(dirs[0], 'y.npy')
    with open(y, 'rb') as f:
        data = f.read()
    with open(y, 'wb') as f:
        f.write(data[:-24])
    _, err = toplu('merge', '--output', fresh('vdirm'), *dirs, expect=2)
    check('y.npy holds other bytes' in err, 'a cut .npy shard is refused', err)


# ---- item 3: decompression bombs ----

def png_bomb(p, w, h):
    """A valid PNG of w x h black RGB pixels whose data holds only the first 200 rows (35 KB for 60000^2)."""
    import struct
    import zlib

    def chunk(t, d):
        return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
    z = zlib.compressobj(9)
    comp = b''.join(z.compress(b'\0' * (w * 3 + 1)) for _ in range(200)) + z.flush()
    with open(p, 'wb') as f:
        f.write(b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, 2, 0, 0, 0)) +
                chunk(b'IDAT', comp) + chunk(b'IEND', b''))


def jpeg_bomb(p, w, h):
    """A small JPEG whose frame header (SOF0) is patched to declare w x h pixels."""
    from PIL import Image
    import io
    b = io.BytesIO()
    Image.new('RGB', (16, 16), (10, 20, 30)).save(b, 'JPEG')
    data = bytearray(b.getvalue())
    k = data.index(b'\xff\xc0')
    data[k + 5:k + 9] = bytes([h >> 8, h & 255, w >> 8, w & 255])
    with open(p, 'wb') as f:
        f.write(bytes(data))


def case_image_bomb():
    import resource
    d = fresh('bombs')
    os.makedirs(d)
    png_bomb(os.path.join(d, 'a_bomb.png'), 60000, 60000)
    jpeg_bomb(os.path.join(d, 'b_bomb.jpg'), 60000, 60000)
    shutil.copy(path('images', 'rgb.png'), os.path.join(d, 'c_ok.png'))
    out, errs = fresh('bombs.jsonl'), fresh('bombs.errors')
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    _, err = toplu('run', path('img_f32.onnx'), '--input', d, '--output', out, '--errors', errs,
                   '--preprocess', 'resize=4x4')
    rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    check(rss_kb < 1024 * 1024 or rss_kb == before, 'the bombs are not decoded (max RSS %d KB)' % rss_kb)
    check([r['id'] for r in read_jsonl(out)] == ['c_ok.png'], 'the good image has its result', read_jsonl(out))
    bad = {b['id']: b['error'] for b in read_jsonl(errs)}
    check(set(bad) == {'a_bomb.png', 'b_bomb.jpg'}, 'both bombs are bad rows', bad)
    check('PNG of 60000x60000 pixels is above the limit of 268435456 pixels' in bad['a_bomb.png'], 'PNG reason', bad)
    check('JPEG of 60000x60000 pixels is above the limit of 268435456 pixels' in bad['b_bomb.jpg'], 'JPEG reason', bad)
    check('1 processed, 2 failed' in err, 'counted as failed', err)
    # the limit is settable: --max-image-pixels, and the job file's max_image_pixels
    out, errs = fresh('bombs2.jsonl'), fresh('bombs2.errors')
    toplu('run', path('img_f32.onnx'), '--input', d, '--output', out, '--errors', errs, '--preprocess', 'resize=4x4',
          '--max-image-pixels', '1199', expect=1)
    check(any('PNG of 40x30 pixels is above the limit of 1199 pixels' in b['error'] for b in read_jsonl(errs)),
          'a 40x30 image is above 1199 pixels', read_jsonl(errs))
    toplu('run', path('img_f32.onnx'), '--input', d, '--output', out, '--errors', errs, '--preprocess', 'resize=4x4',
          '--max-image-pixels', '1200')
    check([r['id'] for r in read_jsonl(out)] == ['c_ok.png'], 'and 1200 admits it')
    _, err = toplu('run', path('img_f32.onnx'), '--input', d, '--output', out, '--max-image-pixels', '0', expect=2)
    check("--max-image-pixels '0'" in err, 'a limit of 0 is refused', err)


# ---- item 11 (part): flag values that are not paths ----

def case_flag_paths():
    m, x = path('addrelu.onnx'), path('x37.npy')
    _, err = toplu('run', m, '--input', x, '--output', path('fp.jsonl'), '--errors', '', expect=2)
    check('--errors: needs a file' in err and 'too long' not in err, '--errors "" is named as empty', err)
    cwd = fresh('fp_cwd')
    os.makedirs(cwd)
    _, err = toplu('run', m, '--input', x, '--output', '-q', expect=2, cwd=cwd)
    check("--output '-q': looks like an option" in err and os.listdir(cwd) == [], '--output -q makes no folder', err)
    _, err = toplu('run', m, '--input', x, '--output', path('fp.jsonl'), '--errors', '--fail-fast', expect=2, cwd=cwd)
    check("--errors '--fail-fast': looks like an option" in err and os.listdir(cwd) == [], '--errors --fail-fast', err)
    # an errors file that cannot be written is the caller's to fix: exit 2 when the job is made (it was 1, after
    # the run had started), and nothing is left behind
    _, err = toplu('run', m, '--input', x, '--output', fresh('fp_e1.jsonl'), '--errors', '/dev/null/e.jsonl', expect=2)
    check('/dev/null exists and is not a directory' in err, '--errors through a file: exit 2', err)
    d = fresh('fp_errdir')
    os.makedirs(d)
    _, err = toplu('run', m, '--input', x, '--output', fresh('fp_e2.jsonl'), '--errors', d, expect=2)
    check('is a directory' in err and os.listdir(d) == [], '--errors naming a folder: exit 2', err)
    _, err = toplu('run', m, '--input', x, '--output', fresh('fp_e3.jsonl'), '--errors', '/proc/toplu-errors.jsonl',
                   expect=2)
    check('cannot write in its folder' in err, '--errors where nothing may be written (/proc): exit 2', err)
    # a FIFO as the output or the errors file is refused at once (both hung, waiting for a reader)
    for name, flag in (('fp_fifo.db', '--output'), ('fp_fifo.jsonl', '--output'), ('fp_fifo.errors', '--errors')):
        fifo = fresh(name)
        os.mkfifo(fifo)
        args = ['--output', fresh('fp_e5.jsonl'), '--errors', fifo] if flag == '--errors' else ['--output', fifo]
        _, err = toplu('run', m, '--input', x, *args, expect=2, timeout=60)
        check('is not a regular file' in err, '%s a FIFO (%s): exit 2 at once' % (flag, name), err)
        os.remove(fifo)
    ok = fresh('fp_e4.errors')
    toplu('run', m, '--input', x, '--output', fresh('fp_e4.jsonl'), '--errors', ok)
    check(os.path.exists(ok) and os.path.getsize(ok) == 0, 'a writable errors location still works', ok)


# ---- item 11 (rest): CSV dialects, empty fields, hex ----

def write(name, text, mode='w'):
    with open(path(name), mode, newline='') as f:
        f.write(text)
    return path(name)


def csv_run(src, *extra, expect=0):
    out, errs = fresh('dialect.jsonl'), fresh('dialect.errors')
    _, err = toplu('run', path('id4.onnx'), '--input', src, '--output', out, '--errors', errs, *extra, expect=expect)
    rows = [(r['id'], r['outputs']['y']) for r in read_jsonl(out)] if os.path.exists(out) else None
    bad = [(b['row'], b['error']) for b in read_jsonl(errs)] if os.path.exists(errs) else []
    return rows, bad, err


def case_csv_dialects():
    # an empty field on line 1 used to make it a header: the row was lost without a word
    rows, bad, err = csv_run(write('empty.csv', '1,,3,4\n5,6,7,8\n'))
    check(rows == [(1, [5, 6, 7, 8])], 'the full row is read', rows)
    check(bad == [(0, 'line 1: field 2 is empty')], 'the row with an empty field is a bad row', bad)
    check('1 processed, 1 failed' in err, 'counted', err)
    # and in a later row
    rows, bad, _ = csv_run(write('empty2.csv', 'a,b,c,d\n1,2,3,4\n5,6,,8\n'))
    check(rows == [(0, [1, 2, 3, 4])] and bad == [(1, 'line 3: field 3 is empty')], 'empty field on line 3', rows, bad)
    # a first line of column indices (pandas writes 0,1,2,3 for unnamed columns) is read as a header, and said
    # so as a warning that --quiet does not hide (a row of data 0,1,2,3 would otherwise be lost unseen)
    rows, bad, err = csv_run(write('index_hdr.csv', '0,1,2,3\n5,6,7,8\n'), '-q')
    check(rows == [(0, [5, 6, 7, 8])] and 'warning:' in err and 'column indices 0..3' in err and
          '--csv-header no' in err, 'an index header is a warning under -q', rows, err)
    # hexadecimal (and other strtod extras) used to be read: 0x10 as 16
    rows, bad, _ = csv_run(write('hex.csv', '0x10,1,2,3\n4,5,6,7\n1e2,-.5,+3.,4E-1\n'), expect=0)
    check(bad == [(0, "line 1: field 1 ('0x10') is not a decimal number")], '0x10 is a bad row', bad)
    check([r[0] for r in rows] == [1, 2] and rows[1][1] == [100, -0.5, 3, 0.4], 'decimal forms are read', rows)
    # a first line that mixes names and numbers is no header: a bad row
    rows, bad, _ = csv_run(write('mixed.csv', 'a,1,2,3\n4,5,6,7\n'))
    check(rows == [(1, [4, 5, 6, 7])] and bad == [(0, "line 1: field 1 ('a') is not a decimal number")],
          'a mixed first line is a bad row', rows, bad)
    # names are a header, as before
    rows, bad, _ = csv_run(write('names.csv', 'a,b,"c d",e\n4,5,6,7\n'))
    check(rows == [(0, [4, 5, 6, 7])] and bad == [], 'a header of names is skipped', rows, bad)
    # CR-only and CR LF line ends used to be one line: "only a header, no rows"
    for name, text in (('cr.csv', 'a,b,c,d\r1,2,3,4\r5,6,7,8\r'), ('crlf.csv', 'a,b,c,d\r\n1,2,3,4\r\n\r\n5,6,7,8\r\n')):
        rows, bad, _ = csv_run(write(name, text))
        check(rows == [(0, [1, 2, 3, 4]), (1, [5, 6, 7, 8])] and bad == [], '%s: two rows' % name, rows, bad)
    rows, bad, _ = csv_run(write('crbad.csv', 'a,b,c,d\r1,2,3,4\r5,x,7,8\r'))
    check(bad == [(1, "line 3: field 2 ('x') is not a decimal number")], 'CR-only files number their lines', bad)
    # ';' and tab separated: detected from line 1, a note says so
    for name, text, what in (('semi.csv', 'a;b;c;d\n1;2;3;4\n5;6;7;8\n', "';'"),
                             ('tab.csv', 'a\tb\tc\td\n1\t2\t3\t4\n5\t6\t7\t8\n', 'tabs'),
                             ('semi_nohead.csv', '1;2;3;4\n5;6;7;8\n', "';'")):
        rows, bad, err = csv_run(write(name, text))
        check(rows == [(0, [1, 2, 3, 4]), (1, [5, 6, 7, 8])] and bad == [], '%s: two rows' % name, rows, bad, err)
        check('fields separated by %s (detected from line 1; give --csv-delimiter to choose)' % what in err,
              '%s: the note names the delimiter' % name, err)
    # or chosen: --csv-delimiter and the job file's csv_delimiter
    pipe = write('pipe.csv', '1|2|3|4\n5|6|7|8\n')
    rows, bad, _ = csv_run(pipe, '--csv-delimiter', '|')
    check(rows == [(0, [1, 2, 3, 4]), (1, [5, 6, 7, 8])], '--csv-delimiter |', rows, bad)
    _, _, err = csv_run(pipe, expect=2)
    check("line 2: field 1 ('5|6|7|8') is not a decimal number (line 1 was taken as a header)" in err,
          'an undetected | is not split, and the message says how line 1 was taken', err)
    job = path('delim_job.json')
    with open(job, 'w') as f:
        json.dump({'model': path('id4.onnx'), 'input': pipe, 'output': fresh('dj.jsonl'), 'csv_delimiter': '|'}, f)
    toplu('run', '--job', job)
    check([r['outputs']['y'] for r in read_jsonl(path('dj.jsonl'))] == [[1, 2, 3, 4], [5, 6, 7, 8]], 'job file key')
    rows, bad, err = csv_run(write('tab_chosen.csv', '1\t2\t3\t4\n'), '--csv-delimiter', 'tab')
    check(rows == [(0, [1, 2, 3, 4])], '--csv-delimiter tab', rows, err)
    _, err = toplu('run', path('id4.onnx'), '--input', pipe, '--output', fresh('dj2.jsonl'), '--csv-delimiter', 'x',
                   expect=2)
    check("--csv-delimiter 'x': expected" in err, 'a bad delimiter is a usage error', err)
    # two CSV files: a bad row's error names the file its line is in ("line 3: field 2 ('x') ..." did not say
    # which of the two; fresh-user finding of 2026-12-05), and "1 field", not "1 fields"
    ca = write('two_a.csv', '1,2,3,4\n3,4,5,6\n5,x,7,8\n7,8,9,1\n')
    cc = write('two_c.csv', '1,2,3,4\n3\n5,6,7,8\n7,8,9,1\n')
    out, errs = fresh('two_csv.jsonl'), fresh('two_csv.errors')
    toplu('run', path('twoin.onnx'), '--input', 'a=' + ca, '--input', 'c=' + cc, '--output', out, '--errors', errs)
    bad = [(b['row'], b['error']) for b in read_jsonl(errs)]
    check(bad == [(1, "%s: line 2: 1 field, input 'c' takes 4 per row ([2, 2])" % cc),
                  (2, "%s: line 3: field 2 ('x') is not a decimal number" % ca)],
          'two CSV sources: each bad row names its file', bad)
    check([r['id'] for r in read_jsonl(out)] == [0, 3], 'and the good rows are kept', read_jsonl(out))


# ---- item 9 (input side): unbounded reads ----

def case_unbounded_reads():
    import resource
    m = path('id4.onnx')
    # a 300 MiB line (sparse: no disk used) is a bad row, never read into memory
    big = fresh('longline.jsonl')
    with open(big, 'w') as f:
        f.write(json.dumps({'x': [1, 2, 3, 4]}) + '\n')
    with open(big, 'r+b') as f:
        f.truncate(os.path.getsize(big) + (300 << 20))
    with open(big, 'ab') as f:
        f.write(b'\n' + json.dumps({'x': [5, 6, 7, 8]}).encode() + b'\n')
    out, errs = fresh('longline_out.jsonl'), fresh('longline.errors')
    _, err = toplu('run', m, '--input', big, '--output', out, '--errors', errs, timeout=120)
    rss_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    check(rss_kb < 200 * 1024, 'the long line is not read (max RSS %d KB)' % rss_kb)
    check([r['outputs']['y'] for r in read_jsonl(out)] == [[1, 2, 3, 4], [5, 6, 7, 8]], 'the other rows', err)
    bad = read_jsonl(errs)
    check([b['row'] for b in bad] == [1] and
          'line 2: %d bytes, above the line limit of 67108864 bytes (max_line_bytes)' % (300 << 20) in bad[0]['error'],
          'the long line is a bad row naming the limit', bad)
    # the limit is settable: --max-line-bytes and the job file's max_line_bytes
    src = write('lines.csv', '1,2,3,4\n10,20,30,40.000000\n5,6,7,8\n')
    rows, bad, _ = csv_run(src, '--max-line-bytes', '12')
    check([r[0] for r in rows] == [0, 2] and bad == [(1, 'line 2: 18 bytes, above the line limit of 12 bytes '
                                                         '(max_line_bytes)')], '--max-line-bytes 12', rows, bad)
    job = path('line_job.json')
    with open(job, 'w') as f:
        json.dump({'model': m, 'input': src, 'output': fresh('lj.jsonl'), 'max_line_bytes': 12}, f)
    toplu('run', '--job', job)
    check(len(read_jsonl(path('lj.jsonl'))) == 2, 'job file max_line_bytes')
    _, err = toplu('run', m, '--input', src, '--output', fresh('lj2.jsonl'), '--max-line-bytes', '5', expect=2)
    check('%s: line 1: 7 bytes, above the line limit of 5 bytes (--max-line-bytes)' % src in err,
          'a first line above the limit is an error naming the file', err)
    # a FIFO named .csv / .jsonl / .npy used to hang: refused at once, naming it
    for name in ('fifo.csv', 'fifo.jsonl', 'fifo.npy'):
        fifo = fresh(name)
        os.mkfifo(fifo)
        _, err = toplu('run', m, '--input', fifo, '--output', fresh('fifo_out.jsonl'), expect=2, timeout=20)
        check('source %s is a FIFO; sources are regular files' % fifo in err, '%s is refused' % name, err)
    # labels: /dev/zero used to grow to GBs; a FIFO hung; a huge file was read whole
    logits = path('logits.onnx')
    fifo = path('fifo.csv')
    huge = fresh('huge_labels.txt')
    with open(huge, 'wb') as f:
        f.truncate((64 << 20) + 1)
    for lab, want in (('/dev/zero', '/dev/zero is a character device; toplu reads only regular files'),
                      (fifo, '%s is a FIFO; toplu reads only regular files' % fifo),
                      (huge, '%s: 67108865 bytes, above the limit of 67108864 bytes (the largest labels file)' % huge)):
        _, err = toplu('run', logits, '--input', path('logits.npy'), '--output', fresh('lab_out.jsonl'),
                       '--postprocess', 'argmax', '--labels', lab, expect=2, timeout=20)
        check(want in err, 'labels %s refused' % lab, err)


# ---- item 6: ids that need escaping; item 11: unreadable symlinks in an image folder ----

def case_ids_escaped():
    d = fresh('oddnames')
    os.makedirs(d)
    for name in ('a.png', 'b\nc.png', 'd\\e.png', 'g.png'):
        shutil.copy(path('images', 'rgb.png'), os.path.join(d, name))
    shutil.copy(path('images', 'rgb.png'), os.fsencode(d) + b'/f\xff.png')
    os.symlink('no-such-file.png', os.path.join(d, 'dangling.png'))
    os.symlink('loop.jpg', os.path.join(d, 'loop.jpg'))
    m, pre = path('img_f32.onnx'), 'resize=4x4'
    good = ['a.png', 'b\nc.png', 'd\\e.png', 'g.png']
    want_bad = {'dangling.png': 'a dangling symbolic link (its target does not exist)',
                'f\ufffd.png': 'the file name is not valid UTF-8 (byte 0xff at offset 1); rename it',
                'loop.jpg': 'a symbolic link loop'}

    def check_errors(errs, what):
        with open(errs, 'rb') as f:
            raw = f.read()
        lines = [json.loads(line.decode('utf-8')) for line in raw.splitlines()]  # valid UTF-8 and JSON
        check({b['id']: b['error'] for b in lines} == want_bad, '%s: the bad rows and why' % what, lines)
        check([b['row'] for b in lines] == [3, 4, 6], '%s: their rows' % what, lines)

    # a folder output: ids.txt has one line per row, escaped
    out, errs = fresh('odd_dir'), fresh('odd.errors')
    _, err = toplu('run', m, '--input', d, '--output', out, '--errors', errs, '--preprocess', pre)
    y = np.load(os.path.join(out, 'y.npy'))
    with open(os.path.join(out, 'ids.txt'), 'rb') as f:
        ids = f.read()
    check(ids == b'a.png\nb\\nc.png\nd\\\\e.png\ng.png\n', 'ids.txt escapes \\n and \\\\', ids)
    check(len(ids.splitlines()) == y.shape[0] == 4, 'one id line per row of y.npy', ids, y.shape)
    check('4 processed, 3 failed' in err, 'the symlinks and the non-UTF-8 name are counted as failed', err)
    check_errors(errs, 'folder')
    # JSONL: every line valid JSON, the ids as they are
    out, errs = fresh('odd.jsonl'), fresh('odd2.errors')
    toplu('run', m, '--input', d, '--output', out, '--errors', errs, '--preprocess', pre)
    check([r['id'] for r in read_jsonl(out)] == good, 'JSONL ids', read_jsonl(out))
    check_errors(errs, 'jsonl')
    # shards merged: the same ids.txt as one job
    dirs = []
    for k in range(2):
        dirs.append(fresh('odd_shard%d' % k))
        toplu('run', m, '--input', d, '--output', dirs[-1], '--preprocess', pre, '--shard', '%d/2' % k)
    merged = fresh('odd_merged')
    toplu('merge', '--output', merged, *dirs)
    with open(os.path.join(merged, 'ids.txt'), 'rb') as f:
        check(f.read() == ids, 'merged ids.txt is the one job\'s')
    # a glob lists the dangling symlink too
    out, errs = fresh('odd_glob.jsonl'), fresh('odd_glob.errors')
    toplu('run', m, '--input', os.path.join(d, 'd*.png'), '--output', out, '--errors', errs, '--preprocess', pre)
    check([r['id'] for r in read_jsonl(out)] == ['d\\e.png'], 'glob: the readable one', read_jsonl(out))
    check([(b['id'], b['error']) for b in read_jsonl(errs)] == [('dangling.png', want_bad['dangling.png'])],
          'glob: the dangling symlink is a bad row', read_jsonl(errs))


# ---- item 11 (rest): killed while renaming a two-output folder's files ----

def case_interrupted_rename():
    m, a = path('twoin.onnx'), path('a9.npy')
    args = ('run', m, '--input', 'a=' + a, '--input', 'c=' + a)
    full = fresh('ren_full')
    toplu(*args, '--output', full)
    files = {n: open(os.path.join(full, n), 'rb').read() for n in ('sum.npy', 'prod.npy', 'ids.txt')}
    check(sorted(os.listdir(full)) == ['.toplu-state', 'ids.txt', 'prod.npy', 'sum.npy'], 'a finished folder', os.listdir(full))
    # the state a SIGKILL leaves after both arrays were renamed: ids.txt, renamed last, still .ids.txt.part,
    # the checkpoint "finishing"
    out = fresh('ren_cut')
    shutil.copytree(full, out)
    os.rename(os.path.join(out, 'ids.txt'), os.path.join(out, '.ids.txt.part'))
    state = os.path.join(out, '.toplu-state')
    with open(state) as f:
        st = json.load(f)
    check(st['phase'] == 'complete', 'the finished checkpoint says complete', st)
    st['phase'] = 'finishing'
    with open(state, 'w') as f:
        json.dump(st, f)
    # a reader: merge refuses it as unfinished rather than joining arrays without their ids
    _, err = toplu('merge', '--output', fresh('ren_merged'), out, expect=2)
    check('is not complete: finish it (resume its job) first' in err, 'merge refuses a folder without ids.txt', err)
    # --resume finishes the renames: the same files as the job that was not interrupted
    _, err = toplu(*args, '--output', out, '--resume')
    for n, data in files.items():
        check(open(os.path.join(out, n), 'rb').read() == data, '%s as the uninterrupted job wrote it' % n)
    check(sorted(os.listdir(out)) == ['.toplu-state', 'ids.txt', 'prod.npy', 'sum.npy'], 'no part left', os.listdir(out))
    with open(state) as f:
        check(json.load(f)['phase'] == 'complete', 'complete now')
    _, err = toplu(*args, '--output', out, '--resume')
    check('complete already (9 rows' in err, 'and a second resume says so', err)
    # a checkpoint that stops inside a chunk is refused naming that row (the message said "row 0": the row was
    # read after the loaded state was freed; fresh-user finding of 2026-12-05)
    bad = fresh('ren_badrow')
    shutil.copytree(full, bad)
    with open(os.path.join(bad, '.toplu-state')) as f:
        st = json.load(f)
    st['phase'], st['next_row'] = 'running', 5
    with open(os.path.join(bad, '.toplu-state'), 'w') as f:
        json.dump(st, f)
    _, err = toplu(*args, '--output', bad, '--resume', expect=2)
    check('stops at row 5, not a chunk boundary (rows 0..9' in err, 'a checkpoint inside a chunk names its row', err)


# ---- item 4 (rest): toplu merge --output does not destroy files no toplu job wrote ----

def case_merge_overwrite():
    m, x = path('addrelu.onnx'), path('x37.npy')
    for ext in ('.jsonl', '.sqlite', ''):
        shards = []
        for k in range(2):
            shards.append(fresh('mo_shard%d%s' % (k, ext)))
            toplu('run', m, '--input', x, '--output', shards[-1], '--shard', '%d/2' % k)
        out = fresh('mo_user' + ext)
        if ext == '.jsonl':
            with open(out, 'w') as f:
                f.write('precious\n')
            want = 'exists and no toplu job wrote it'
        elif ext == '.sqlite':
            c = sqlite3.connect(out)
            c.execute('CREATE TABLE mine(a)')
            c.execute("INSERT INTO mine VALUES ('keep me')")
            c.commit()
            c.close()
            want = 'is a database no toplu job wrote (it holds the table mine)'
        else:
            os.makedirs(out)
            with open(os.path.join(out, 'ids.txt'), 'w') as f:
                f.write('foreign\n')
            want = 'holds ids.txt, which the merge would replace, and no toplu job wrote it'
        _, err = toplu('merge', '--output', out, *shards, expect=2)
        check(want in err and 'give --overwrite to replace it' in err, '%s: a foreign output is refused' % ext, err)
        if ext == '.jsonl':
            check(open(out).read() == 'precious\n', 'the file is intact')
        elif ext == '.sqlite':
            check(sqlite3.connect(out).execute('SELECT a FROM mine').fetchall() == [('keep me',)], 'its table is intact')
        else:
            check(open(os.path.join(out, 'ids.txt')).read() == 'foreign\n', 'ids.txt is intact')
        toplu('merge', '--output', out, *shards, '--overwrite')
        toplu('merge', '--output', out, *shards)  # now the merge's own output: replaced without asking
        if ext == '.jsonl':
            got = [r['id'] for r in read_jsonl(out)]
        elif ext == '.sqlite':
            got = [int(r[0]) for r in sqlite3.connect(out).execute('SELECT id FROM results ORDER BY rowid')]
        else:
            got = [int(v) for v in open(os.path.join(out, 'ids.txt')).read().split()]
        check(got == list(range(37)), '%s: merged when asked, and again' % ext, got[:5])
    # a job's own output (its checkpoint beside it) is replaced by a merge without asking
    shards = []
    for k in range(2):
        shards.append(fresh('mo_jshard%d.jsonl' % k))
        toplu('run', m, '--input', x, '--output', shards[-1], '--shard', '%d/2' % k)
    out = fresh('mo_job.jsonl')
    toplu('run', m, '--input', x, '--output', out)
    toplu('merge', '--output', out, *shards)
    check(len(read_jsonl(out)) == 37, 'a job output is replaced')


# ---- item 4 (rest): results into a table of their own inside a user's database, when asked ----

def user_db(db, view=False):
    """A user's database: table mine (two rows), an index on it, optionally a view."""
    c = sqlite3.connect(db)
    c.execute('CREATE TABLE mine(a TEXT, b INTEGER)')
    c.executemany('INSERT INTO mine VALUES (?, ?)', [('keep me', 1), ('and me', 2)])
    c.execute('CREATE INDEX mine_b ON mine(b)')
    if view:
        c.execute('CREATE VIEW v AS SELECT a FROM mine')
    c.commit()
    c.close()


def db_query(db, sql, *args):
    c = sqlite3.connect('file:%s?mode=ro' % db, uri=True, timeout=30)
    try:
        return c.execute(sql, args).fetchall()
    finally:
        c.close()


def table_state(db, table):
    """The checkpoint of a --sqlite-table job (row 'state:TABLE' of toplu_job), or None."""
    try:
        r = db_query(db, "SELECT value FROM toplu_job WHERE key = ?", 'state:' + table.lower())
    except sqlite3.OperationalError:
        return None
    return json.loads(r[0][0]) if r else None


def case_sqlite_table():
    import random
    import signal
    import time
    m, x = path('addrelu.onnx'), path('x37.npy')
    mine = [('keep me', 1), ('and me', 2)]
    # the reference: a plain JSONL run of the same job
    ref = fresh('st_ref.jsonl')
    toplu('run', m, '--input', x, '--output', ref, '--postprocess', 'argmax')
    want = [(str(r['id']), r['argmax']) for r in read_jsonl(ref)]
    check(len(want) == 37 and len({a for _, a in want}) > 1, 'the reference has 37 rows of more than one class', want)
    # into a user's database: the results table created beside the user's, nothing else touched
    db = fresh('st_user.sqlite')
    user_db(db, view=True)
    schema = db_query(db, "SELECT type, name, sql FROM sqlite_master WHERE name IN ('mine', 'mine_b', 'v') ORDER BY name")
    _, err = toplu('run', m, '--input', x, '--output', db, '--sqlite-table', 'preds', '--postprocess', 'argmax')
    check('37 processed, 0 failed' in err, 'the job ran', err)
    check(db_query(db, 'SELECT a, b FROM mine ORDER BY rowid') == mine, "the user's table is intact")
    check(db_query(db, "SELECT type, name, sql FROM sqlite_master WHERE name IN ('mine', 'mine_b', 'v') ORDER BY name")
          == schema, "the user's table, index and view are unchanged")
    got = db_query(db, 'SELECT id, argmax FROM preds ORDER BY rowid')
    check(got == want, 'preds: the ids and argmax of the JSONL run, in order', got[:5])
    check(not [f for f in os.listdir(os.path.dirname(db)) if f.startswith('.st_user.sqlite.part')],
          'no part database: the rows went into the database itself')
    st = table_state(db, 'preds')
    check(st and st['phase'] == 'complete' and st['processed'] == 37, 'its checkpoint is complete', st)
    _, err = toplu('run', m, '--input', x, '--output', db, '--sqlite-table', 'preds', '--postprocess', 'argmax',
                   '--resume')
    check('complete already (37 rows' in err, 'resume of a finished table: nothing to do', err)
    # verify before complete: a cut table is not called complete
    c = sqlite3.connect(db)
    c.execute("DELETE FROM preds WHERE id IN ('30', '31', '32')")
    c.commit()
    c.close()
    _, err = toplu('run', m, '--input', x, '--output', db, '--sqlite-table', 'preds', '--postprocess', 'argmax',
                   '--resume', expect=2)
    check('holds 34 rows in preds, its checkpoint says 37' in err and 'without --resume' in err,
          'resume refuses a table cut after its job', err)
    # a fresh run replaces toplu's own table without asking (the name's case aside), the user's table stays
    toplu('run', m, '--input', x, '--output', db, '--sqlite-table', 'PREDS', '--postprocess', 'argmax')
    check(db_query(db, 'SELECT id, argmax FROM preds ORDER BY rowid') == want, 'rewritten whole')
    check(db_query(db, 'SELECT a, b FROM mine ORDER BY rowid') == mine, "the user's table is still intact")
    # the user's own table is not replaced unless asked; then only that table is
    _, err = toplu('run', m, '--input', x, '--output', db, '--sqlite-table', 'mine', expect=2)
    check('output table mine in %s exists and no toplu job wrote it' % db in err and '--overwrite' in err,
          "a user's table is refused, naming it and --overwrite", err)
    check(db_query(db, 'SELECT a, b FROM mine ORDER BY rowid') == mine, 'it is intact')
    _, err = toplu('run', m, '--input', x, '--output', db, '--sqlite-table', 'v', expect=2)
    check('holds a view named v, not a table' in err, 'a view of that name is refused', err)
    # a whole-database run on it is refused as before (the user's tables would go)
    _, err = toplu('run', m, '--input', x, '--output', db, expect=2)
    check('is a database no toplu job wrote' in err, 'without --sqlite-table the database is not replaced', err)
    # bad names are refused before anything is written, naming the flag
    for bad, why in (('a b', 'not an SQL identifier'), ('1x', 'must start with a letter'),
                     ('x;DROP TABLE mine', 'not an SQL identifier'), ('toplu_job', 'holds the checkpoints'),
                     ('SQLite_x', "SQLite's own"), ('t' * 65, 'longer than 64 bytes'), ('', 'empty')):
        _, err = toplu('run', m, '--input', x, '--output', db, '--sqlite-table', bad, expect=2)
        check("--sqlite-table '%s': " % bad in err and why in err, 'bad name %r refused: %s' % (bad, why), err)
    out = fresh('st_notdb.jsonl')
    _, err = toplu('run', m, '--input', x, '--output', out, '--sqlite-table', 'preds', expect=2)
    check("--sqlite-table 'preds': the output %s is not an SQLite database" % out in err and not os.path.exists(out),
          'only for SQLite outputs', err)
    check(db_query(db, 'SELECT a, b FROM mine ORDER BY rowid') == mine and
          db_query(db, 'SELECT count(*) FROM preds') == [(37,)], 'nothing refused changed the database')
    # --overwrite: the user's table mine dropped and recreated, every other table untouched
    toplu('run', m, '--input', x, '--output', db, '--sqlite-table', 'mine', '--postprocess', 'argmax', '--overwrite')
    check(db_query(db, 'SELECT id, argmax FROM mine ORDER BY rowid') == want, '--overwrite replaces that table')
    check(db_query(db, 'SELECT id, argmax FROM preds ORDER BY rowid') == want, 'and leaves preds alone')
    # a job file's "sqlite_table"; a wrong type is refused
    job = path('st_job.json')
    db2 = fresh('st_job.sqlite')
    user_db(db2)
    with open(job, 'w') as f:
        json.dump({'model': m, 'input': x, 'output': db2, 'postprocess': 'argmax', 'sqlite_table': 'fromjob'}, f)
    toplu('run', '--job', job)
    check(db_query(db2, 'SELECT id, argmax FROM fromjob ORDER BY rowid') == want and
          db_query(db2, 'SELECT a, b FROM mine ORDER BY rowid') == mine, 'job file: the table, beside the user\'s')
    with open(job, 'w') as f:
        json.dump({'model': m, 'input': x, 'output': db2, 'sqlite_table': 7}, f)
    _, err = toplu('run', '--job', job, expect=2)
    check('"sqlite_table": 7: expected a string' in err, 'job file: a number is refused', err)
    # a database that does not exist yet is created, in a new folder
    db3 = os.path.join(fresh('st_newdir'), 'sub', 'new.db')
    toplu('run', m, '--input', x, '--output', db3, '--sqlite-table', 'preds', '--postprocess', 'argmax')
    check(db_query(db3, 'SELECT id, argmax FROM preds ORDER BY rowid') == want, 'a new database gets the table')
    # merge does not join tables of --sqlite-table jobs, and says so
    _, err = toplu('merge', '--output', fresh('st_merged.sqlite'), db3, expect=2)
    check('holds the results of a job run with --sqlite-table (its table preds)' in err and
          'without --sqlite-table' in err, 'merge refuses them naming the flag', err)
    _, err = toplu('merge', '--output', fresh('st_merged.sqlite'), db3, '--force', expect=2)
    check('--sqlite-table' in err, 'with --force too', err)

    # SIGKILL at random points, then --resume: every row exactly once, the user's table intact
    rng = np.random.default_rng(14)
    big = path('st_big.npy')
    n = 60000
    np.save(big, rng.standard_normal((n, 3)).astype(np.float32))
    base = ['run', m, '--input', big, '--postprocess', 'argmax', '--batch-size', '2', '--checkpoint-every', '0.01',
            '-q']
    ref = fresh('st_big_ref.jsonl')
    toplu(*base, '--output', ref)
    want = [(str(r['id']), r['argmax']) for r in read_jsonl(ref)]
    db = fresh('st_crash.sqlite')
    user_db(db)
    cmd = [tp.TOPLU] + base + ['--output', db, '--sqlite-table', 'preds', '--resume']
    rnd = random.Random(int(os.environ.get('TOPLU_TEST_SEED', '0')))
    targets = [0.0] + sorted(rnd.uniform(0.05, 0.9) for _ in range(4))
    kills, seen, hot = 0, [], 0
    for frac in targets:
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if frac == 0.0:
            time.sleep(rnd.uniform(0.0, 0.05))
        else:
            while p.poll() is None:
                st = table_state(db, 'preds')
                if st and st['processed'] >= frac * n:
                    break
                time.sleep(0.002)
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
            kills += 1
        p.communicate()
        # whatever the moment, the table holds exactly the rows its checkpoint counts, the user's table is whole:
        # checked on a copy (a kill inside a transaction leaves a hot journal, which the first connection that
        # may write rolls back; the next --resume must meet it, not this check)
        snap = fresh('st_snap.sqlite')
        if os.path.exists(snap + '-journal'):
            os.unlink(snap + '-journal')
        shutil.copyfile(db, snap)
        if os.path.exists(db + '-journal'):
            shutil.copyfile(db + '-journal', snap + '-journal')
            hot += os.path.getsize(db + '-journal') > 0
        c = sqlite3.connect(snap)
        has_job = c.execute("SELECT name FROM sqlite_master WHERE name = 'toplu_job'").fetchall()
        st = c.execute("SELECT value FROM toplu_job WHERE key = 'state:preds'").fetchall() if has_job else []
        st = json.loads(st[0][0]) if st else None
        have = c.execute('SELECT count(*) FROM preds').fetchall()[0][0] if st else None
        check(st is None or have == st['processed'], "after a kill the table holds its checkpoint's rows", have, st)
        check(c.execute('SELECT a, b FROM mine ORDER BY rowid').fetchall() == mine, "the user's table survives the kill")
        c.close()
        seen.append(have)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    check(r.returncode == 0, 'resume after the kills', r.stderr)
    check(kills >= 3, 'killed %d times (wanted 3 or more)' % kills)
    got = db_query(db, 'SELECT id, argmax FROM preds ORDER BY rowid')
    check(got == want and len({i for i, _ in got}) == n,
          'after %d kills the table equals the JSONL run, every row once, in order' % kills, len(got))
    check(db_query(db, 'SELECT a, b FROM mine ORDER BY rowid') == mine, "the user's table is intact at the end")
    st = table_state(db, 'preds')
    check(st['phase'] == 'complete' and st['processed'] == n, 'complete', st)
    check(len({v for v in seen if v and v < n}) >= 2, 'killed with rows committed and more to come', seen)
    print('ok: %d kills (%d left a journal), rows in the table after each: %s' % (kills, hot, seen))


# ---- a fresh user's session (2026-12-05): files a job writes over its own, silent bad rows, top-k past the classes ----

def case_fresh_user():
    m = path('logits.onnx')  # x [N, 6] -> y [N, 6]
    x = np.arange(18, dtype=np.float32).reshape(3, 6) + 0.5  # not 0,1,...: a first line of column indices is a header
    write('fu_bad.csv', '\n'.join([','.join('%g' % v for v in x[0]), 'abc', ','.join('%g' % v for v in x[2])]) + '\n')
    src = 'x=' + path('fu_bad.csv')
    # 1. an errors file inside a directory output: ids.txt had its error lines overwritten by the ids (exit 0)
    od = fresh('fu_dir')
    for inner in ('ids.txt', '.ids.txt.part', '.toplu-state', 'y.npy', 'errs.jsonl'):
        _, err = toplu('run', m, '--input', src, '--output', od, '--errors', os.path.join(od, inner), expect=2)
        check('lies inside the output directory' in err and 'write it elsewhere' in err,
              f'--errors {inner} inside the .npy output directory: refused', err)
    check(not os.path.exists(os.path.join(od, 'ids.txt')), 'nothing written for a refused errors file')
    # SQLite's journals beside the database and its part file
    db = fresh('fu.sqlite')
    for j in ('fu.sqlite-journal', 'fu.sqlite-wal', '.fu.sqlite.part-wal', '.fu.sqlite.part-journal'):
        _, err = toplu('run', m, '--input', src, '--output', db, '--errors', path(j), expect=2)
        check('are the same file' in err and 'journal' in err, f'--errors {j}: the output\'s journal, refused', err)
    # 2. a bad row without an errors file is named in a warning, shown under -q too (it had left no trace
    # but the count)
    out = fresh('fu.jsonl')
    _, err = toplu('run', m, '--input', src, '--output', out, '-q')
    check(len(read_jsonl(out)) == 2, 'the two good rows are written')
    check("warning: row 1 (id 1) failed in read and is left out: line 2: field 1 ('abc') is not a decimal number" in err
          and 'give --errors FILE' in err, 'the bad row, its reason and --errors named under -q', err)
    write('fu_bad7.csv', '\n'.join(['a,b,c,d,e,f'] + ['%d,1,1,1,1,1' % i if i % 2 == 0 else 'z' for i in range(15)]) + '\n')
    _, err = toplu('run', m, '--input', 'x=' + path('fu_bad7.csv'), '--output', fresh('fu7.jsonl'), '-q')
    named = err.count('failed in read and is left out')
    check(named == 5 and '7 rows failed in all' in err, f'7 bad rows: 5 named, then the count ({named} named)', err)
    _, err = toplu('run', m, '--input', src, '--output', fresh('fu2.jsonl'), '--errors', fresh('fu2.errors'), '-q')
    check('left out' not in err and len(read_jsonl(path('fu2.errors'))) == 1, 'with --errors: no warning, the file has it', err)
    # 3. top-k past the classes the model fixes: refused (.npy had padded index -1 and score NaN, CSV empty
    # fields, JSONL fewer entries)
    np.save(path('fu_x.npy'), x)
    _, err = toplu('run', m, '--input', 'x=' + path('fu_x.npy'), '--output', fresh('fu_tk'), '--postprocess', 'topk=7',
                   expect=2)
    check("--postprocess topk=7: output 'y' has 6 classes a row; give K <= 6" in err, 'topk=7 of 6 classes: refused', err)
    toplu('run', m, '--input', 'x=' + path('fu_x.npy'), '--output', fresh('fu_tk6'), '--postprocess', 'topk=6', '-q')
    idx = np.load(os.path.join(path('fu_tk6'), 'topk_index.npy'))
    check(idx.shape == (3, 6) and (idx[:, 0] == 5).all() and (idx[:, 5] == 0).all(), 'topk=6 of 6: every class, best first')
    # 4. an index or a view under --sqlite-table's name: --overwrite does not replace it, so it is not suggested
    # (it was, and then failed with exit 1)
    udb = fresh('fu_user.db')
    c = sqlite3.connect(udb)
    c.execute('CREATE TABLE t(a)')
    c.execute('CREATE INDEX ix ON t(a)')
    c.execute('CREATE VIEW vv AS SELECT 1')
    c.commit()
    c.close()
    for name, kind in (('ix', 'an index'), ('vv', 'a view')):
        for extra in ((), ('--overwrite',)):
            _, err = toplu('run', m, '--input', 'x=' + path('fu_x.npy'), '--output', udb, '--sqlite-table', name,
                           *extra, expect=2)
            check(f'holds {kind} named {name}, not a table' in err and 'overwrite' not in err,
                  f'--sqlite-table {name} {" ".join(extra)}: exit 2, no --overwrite advice', err)
    # 5. two files for one input (a shell's expanded glob): the message says to quote it
    np.save(path('fu_y.npy'), x)
    _, err = toplu('run', m, '--input', path('fu_x.npy'), '--input', path('fu_y.npy'), '--output', fresh('fu5.jsonl'),
                   expect=2)
    check("input 'x' is given twice" in err and 'quote it' in err, 'an input given twice: the glob hint', err)


# ---- a third fresh user (sharding, merge, errors files): data lost without a word ----

def case_shards_merge():
    m = path('logits.onnx')  # x [N, 6] -> y [N, 6]
    big = path('big.npy')
    if not os.path.exists(big):
        np.save(big, np.random.default_rng(5).standard_normal((300000, 3)).astype(np.float32))
    ar = path('addrelu.onnx')
    x = np.arange(24, dtype=np.float32).reshape(4, 6) + 0.5
    np.save(path('sm_x.npy'), x)
    xs = 'x=' + path('sm_x.npy')
    # 1. merge took no lock: it replaced a running job's output (NUL bytes, then the job's rows; both exit 0)
    shards = []
    for k in range(2):
        shards.append(fresh('sm_s%d.jsonl' % k))
        toplu('run', ar, '--input', path('x37.npy'), '--output', shards[-1], '--shard', '%d/2' % k, '-q')
    out = fresh('sm_busy.jsonl')
    job = subprocess.Popen([tp.TOPLU, 'run', ar, '--input', big, '--output', out, '--batch-size', '1000', '-q'],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(2000):
        if os.path.exists(path('.sm_busy.jsonl.part')) or job.poll() is not None:
            break
        threading.Event().wait(0.005)
    running = job.poll() is None
    _, err = toplu('merge', '--output', out, *shards, '--overwrite', expect=2)
    job.communicate()
    check(running and job.returncode == 0, 'the job was running when the merge started, and finished', job.returncode)
    check('another job is writing output' in err, 'a merge over a running job\'s output is refused', err)
    check(len(read_jsonl(out)) == 300000, 'the job\'s output is whole')
    # 2. one errors file given to two shards: the second emptied the first's records (one after the other) or
    # interleaved them (at once)
    write('sm_bad.csv', '\n'.join(['1,2,3,4,5,6', 'bad', '1,2,3,4,5,6', 'bad']) + '\n')
    src = 'x=' + path('sm_bad.csv')
    errs = fresh('sm_errs.jsonl')
    toplu('run', m, '--input', src, '--output', fresh('sm_e0.jsonl'), '--shard', '0/2', '--errors', errs, '-q')
    first = open(errs).read()
    check(len(first.splitlines()) == 1 and '"row": 1' in first.replace('"row":1', '"row": 1'), 'shard 0: its bad row', first)
    _, err = toplu('run', m, '--input', src, '--output', fresh('sm_e1.jsonl'), '--shard', '1/2', '--errors', errs,
                   '-q', expect=2)
    check('holds the records of another job' in err and 'sm_e0.jsonl' in err and 'its own errors file' in err,
          'shard 1 refuses shard 0\'s errors file', err)
    check(open(errs).read() == first, 'shard 0\'s records are intact')
    toplu('run', m, '--input', src, '--output', path('sm_e0.jsonl'), '--shard', '0/2', '--errors', errs, '-q')
    check(open(errs).read() == first, 'shard 0 itself may rerun with its errors file')
    toplu('run', m, '--input', src, '--output', path('sm_e1.jsonl'), '--shard', '1/2', '--errors', errs, '-q',
          '--overwrite')
    check('"row": 3' in open(errs).read().replace('"row":3', '"row": 3'), 'with --overwrite shard 1 takes it over')
    errs2 = fresh('sm_errs2.jsonl')
    job = subprocess.Popen([tp.TOPLU, 'run', ar, '--input', big, '--output', fresh('sm_e2.jsonl'), '--batch-size',
                            '1000', '--errors', errs2, '-q'], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(2000):
        if os.path.exists(path('.sm_e2.jsonl.part')) or job.poll() is not None:
            break
        threading.Event().wait(0.005)
    running = job.poll() is None
    _, err = toplu('run', m, '--input', src, '--output', fresh('sm_e3.jsonl'), '--errors', errs2, expect=2)
    job.communicate()
    check(running and 'another job is writing --errors' in err, 'an errors file in use is refused', err)
    # 3. a .npy output directory: a later job removed every .npy there, the user's own too
    od = fresh('sm_dir')
    toplu('run', m, '--input', xs, '--output', od, '-q')
    np.save(os.path.join(od, 'mine.npy'), x)
    _, err = toplu('run', m, '--input', xs, '--output', od, '--postprocess', 'argmax', '-q', expect=2)
    check('holds mine.npy' in err and 'no toplu job or merge wrote it' in err, 'the user\'s .npy is refused', err)
    check(np.array_equal(np.load(os.path.join(od, 'mine.npy')), x), 'and kept')
    os.remove(os.path.join(od, 'mine.npy'))
    toplu('run', m, '--input', xs, '--output', od, '--postprocess', 'argmax', '-q')
    check(sorted(os.listdir(od)) == ['.toplu-state', 'argmax.npy', 'ids.txt'], 'the earlier job\'s y.npy is replaced',
          os.listdir(od))
    # 4. merge left an earlier merge's files beside its own; 5. merge --overwrite replaced the job's input
    raw, am = [], []
    for k in range(2):
        raw.append(fresh('sm_raw%d' % k))
        am.append(fresh('sm_am%d' % k))
        toplu('run', m, '--input', xs, '--output', raw[-1], '--shard', '%d/2' % k, '-q')
        toplu('run', m, '--input', xs, '--output', am[-1], '--shard', '%d/2' % k, '--postprocess', 'argmax', '-q')
    mo = fresh('sm_merged')
    toplu('merge', '--output', mo, *raw, '-q')
    check(np.array_equal(np.load(os.path.join(mo, 'y.npy')), x), 'the raw shards merged')
    toplu('merge', '--output', mo, *am, '-q')
    check(sorted(os.listdir(mo)) == ['.toplu-state', 'argmax.npy', 'ids.txt'] and
          list(np.load(os.path.join(mo, 'argmax.npy'))) == [5] * 4, 'the earlier merge\'s y.npy is gone',
          os.listdir(mo))
    before = open(path('sm_bad.csv')).read()
    jl = fresh('sm_in.jsonl')
    with open(jl, 'w') as f:
        for i in range(4):
            f.write(json.dumps({'id': str(i), 'x': x[i].tolist()}) + '\n')
    jshards = []
    for k in range(2):
        jshards.append(fresh('sm_j%d.jsonl' % k))
        toplu('run', m, '--input', jl, '--output', jshards[-1], '--shard', '%d/2' % k, '-q')
    jl_text = open(jl).read()
    for extra in ((), ('--overwrite',)):
        _, err = toplu('merge', '--output', jl, *jshards, *extra, expect=2)
        check('is the input' in err and 'that the shards\' job read' in err, 'merge over the input %s: refused' %
              ' '.join(extra), err)
    check(open(jl).read() == jl_text and open(path('sm_bad.csv')).read() == before, 'the inputs are intact')
    # 6. outputs of the wrong type; 7. what is not a shard, said so
    os.makedirs(fresh('sm_isdir.jsonl'))
    _, err = toplu('merge', '--output', path('sm_isdir.jsonl'), *jshards, expect=2)
    check('is a directory' in err, 'a directory named .jsonl: exit 2', err)
    write('sm_plain', 'x\n')
    _, err = toplu('merge', '--output', path('sm_plain'), *raw, expect=2)
    check('exists and is not a directory' in err, 'a file where a .npy directory goes: exit 2', err)
    all_ = fresh('sm_all.jsonl')
    toplu('merge', '--output', all_, *jshards, '-q')
    _, err = toplu('merge', '--output', fresh('sm_again.jsonl'), all_, expect=2)
    check('is the output of a merge' in err, 'a merged output given as a shard', err)
    link = fresh('sm_link.jsonl')
    os.symlink(jshards[0], link)
    toplu('merge', '--output', fresh('sm_linked.jsonl'), link, jshards[1], '-q')
    check([str(r['id']) for r in read_jsonl(path('sm_linked.jsonl'))] == ['0', '1', '2', '3'], 'a linked shard merges')
    os.rename(jshards[0], path('sm_moved.jsonl'))
    _, err = toplu('merge', '--output', fresh('sm_inc.jsonl'), *jshards, expect=2)
    check('is not complete' in err and '--resume' in err, 'a shard whose output is missing beside its checkpoint', err)
    _, err = toplu('run', m, '--input', xs, '--output', fresh('sm_pp.jsonl'), '--postprocess', 'argmax,argmax',
                   expect=2)
    check('argmax after argmax' in err, 'argmax twice: said so', err)
    # a tune file whose recommended_batch_size is no batch size: said so (was 'no recommended_batch_size in it')
    write('sm_tune.json', '{"recommended_batch_size": -4}')
    _, err = toplu('run', m, '--input', xs, '--output', fresh('sm_tb.jsonl'), '--batch-size', 'auto', '--tune',
                   path('sm_tune.json'), expect=2)
    check('recommended_batch_size is -4, not a batch size' in err, 'a bad recommended_batch_size named', err)


# ---- a fresh operator's trial (2026-12-06): what a resume or merge must notice, and what must not kill a job ----

def case_operator():
    import resource
    import signal
    import onnx
    from onnx import TensorProto as T, helper, numpy_helper
    from PIL import Image
    x = path('x37.npy')
    # 1. weights in an external data file: replacing them beside an unchanged .onnx file is another model
    #    (the checkpoint hashed the .onnx file only, so a resume or merge mixed two weights' rows, exit 0)
    d = fresh('op_ext')
    os.makedirs(d)
    vi = helper.make_tensor_value_info
    b = numpy_helper.from_array(np.array([0.5, -1.0, 2.0], np.float32), 'b')
    g = helper.make_graph([helper.make_node('Add', ['x', 'b'], ['y'])], 'ext', [vi('x', T.FLOAT, ['N', 3])],
                          [vi('y', T.FLOAT, ['N', 3])], [b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='toplu-test')
    m.ir_version = 8
    model = os.path.join(d, 'ext.onnx')
    onnx.save_model(m, model, save_as_external_data=True, all_tensors_to_one_file=True, location='ext.bin',
                    size_threshold=0)
    weights = os.path.join(d, 'ext.bin')
    check(os.path.getsize(weights) == 12, 'the bias is in ext.bin', os.listdir(d))
    out = os.path.join(d, 'o.jsonl')
    toplu('run', model, '--input', 'x=' + x, '--output', out, '-q')
    before = read_jsonl(out)
    st = os.stat(weights)
    with open(weights, 'r+b') as f:
        f.write(np.array([9.0], np.float32).tobytes())
    os.utime(weights, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and time: rsync -t would leave that
    _, err = toplu('run', model, '--input', 'x=' + x, '--output', out, '--resume', expect=2)
    check('ext.bin differs (content)' in err and 'another job' in err,
          'resume after the external weights changed: refused, naming the weights file', err)
    check(read_jsonl(out) == before, 'and the output is untouched')
    shards = []
    for k in (0, 1):
        if k == 1:
            with open(weights, 'r+b') as f:
                f.write(np.array([7.0], np.float32).tobytes())
        shards.append(os.path.join(d, 's%d.jsonl' % k))
        toplu('run', model, '--input', 'x=' + x, '--output', shards[-1], '--shard', '%d/2' % k, '-q')
    _, err = toplu('merge', '--output', os.path.join(d, 'm.jsonl'), *shards, expect=2)
    check('external data' in err and 'ext.bin' in err, 'merge of shards run on other external weights: refused', err)
    # a byte-identical copy of the model (a new mtime) resumes: the whole file is hashed
    out2 = os.path.join(d, 'c.jsonl')
    toplu('run', model, '--input', 'x=' + x, '--output', out2, '-q')
    shutil.copy(model, os.path.join(d, 'tmp.onnx'))
    os.replace(os.path.join(d, 'tmp.onnx'), model)
    _, err = toplu('run', model, '--input', 'x=' + x, '--output', out2, '--resume')
    check('complete already' in err, 'a byte-identical copy of the model resumes a complete job', err)
    # a complete job whose output is gone runs again, and says so
    os.remove(out2)
    _, err = toplu('run', model, '--input', 'x=' + x, '--output', out2, '--resume')
    check('is gone; running the whole job again' in err and len(read_jsonl(out2)) == 37,
          'resume of a complete job whose output was removed: a warning, the whole job again', err)

    # 2. decode=full is part of the preprocessing a resume compares (it was left out: two decodes mixed)
    imgs = fresh('op_img')
    os.makedirs(imgs)
    rng = np.random.RandomState(3)
    Image.fromarray(rng.randint(0, 256, (600, 800, 3), np.uint8)).save(os.path.join(imgs, 'a.jpg'), quality=90)
    io = fresh('op_img.jsonl')
    pre = 'resize=100x75,color=rgb,layout=nhwc,dtype=uint8'
    toplu('run', path('img_u8.onnx'), '--input', imgs, '--output', io, '--preprocess', pre + ',decode=full', '-q')
    _, err = toplu('run', path('img_u8.onnx'), '--input', imgs, '--output', io, '--preprocess', pre, '--resume',
                   expect=2)
    check('decode=full' in err, 'resume with the other decode: refused, the setting named', err)

    # 3. a closed log pipe and a file size limit do not kill the job: the job finishes (SIGPIPE) or the write
    #    fails with a message naming the file, exit 1 (SIGXFSZ killed it: exit 141 and 153, no message)
    op = fresh('op_pipe.jsonl')
    r, w = os.pipe()
    os.close(r)
    p = subprocess.run([tp.TOPLU, 'run', path('addrelu.onnx'), '--input', 'x=' + x, '--output', op], stderr=w,
                       stdout=subprocess.DEVNULL, timeout=120)
    os.close(w)
    check(p.returncode == 0 and len(read_jsonl(op)) == 37, 'stderr a closed pipe: the job finishes, exit 0',
          p.returncode)
    big = path('op_big.npy')
    np.save(big, np.random.RandomState(1).rand(4000, 3).astype(np.float32))
    of = fresh('op_fsize.jsonl')

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)

    p = subprocess.run([tp.TOPLU, 'run', path('addrelu.onnx'), '--input', 'x=' + big, '--output', of, '-q'],
                       capture_output=True, text=True, timeout=120, preexec_fn=limit)
    check(p.returncode == 1 and 'File too large' in p.stderr and 'op_fsize.jsonl' in p.stderr and
          'run the same command with --resume' in p.stderr,
          'a file size limit: exit 1, the file named, --resume suggested', p.returncode, p.stderr)
    _, err = toplu('run', path('addrelu.onnx'), '--input', 'x=' + big, '--output', of, '--resume', '-q')
    check(len(read_jsonl(of)) == 4000, 'and a resume completes it', err)

    # 4. an output name whose checkpoint name would pass 255 bytes: refused before any row (it failed mid-job)
    long_out = path('n' * 236 + '.jsonl')
    _, err = toplu('run', path('addrelu.onnx'), '--input', 'x=' + x, '--output', long_out, expect=2)
    check('past the file system\'s limit of 255 bytes on a name' in err and not os.path.exists(long_out),
          'a 242-byte output name: refused at the start', err)

    #    and inside a directory output, a model output's file (.NAME.npy.part) past the limit: refused at the start
    #    (the job ran, then failed on "cannot remove the earlier ...": File name too long)
    vi = helper.make_tensor_value_info
    long_name = 'y' * 250
    gl = helper.make_graph([helper.make_node('Relu', ['x'], [long_name])], 'longout', [vi('x', T.FLOAT, ['N', 3])],
                           [vi(long_name, T.FLOAT, ['N', 3])])
    ml = helper.make_model(gl, opset_imports=[helper.make_opsetid('', 13)])
    ml.ir_version = 8
    onnx.save(ml, path('op_longout.onnx'))
    od = fresh('op_longdir')
    _, err = toplu('run', path('op_longout.onnx'), '--input', 'x=' + x, '--output', od + '/', expect=2)
    check('model output' in err and 'past the file system' in err and (not os.path.isdir(od) or not os.listdir(od)),
          'a model output whose file name would pass 255 bytes in a directory output: refused at the start', err)

    # 5. an SQLite output another connection holds locked: "locked", not "not an SQLite database" (which asked
    #    for overwrite)
    db = fresh('op_lock.sqlite')
    toplu('run', path('addrelu.onnx'), '--input', 'x=' + x, '--output', db, '-q')
    holder = subprocess.Popen([sys.executable, '-c',
                               'import sqlite3, sys, time\n'
                               'c = sqlite3.connect(sys.argv[1], isolation_level=None)\n'
                               'c.execute("BEGIN EXCLUSIVE"); print("locked", flush=True); time.sleep(14)\n', db],
                              stdout=subprocess.PIPE, text=True)
    holder.stdout.readline()
    try:
        _, err = toplu('run', path('addrelu.onnx'), '--input', 'x=' + x, '--output', db, '--overwrite', expect=2)
    finally:
        holder.kill()
        holder.wait()
    check('is locked by another connection' in err and 'not an SQLite database' not in err,
          'a locked SQLite output: said to be locked, refused even with --overwrite', err)

    # 6. a merge killed after its output's rename, before its checkpoint: the next merge replaces it (it refused:
    #    "no toplu job wrote it")
    if shutil.which('strace'):
        md = fresh('op_merge')
        os.makedirs(md)
        sh = []
        for k in (0, 1):
            sh.append(os.path.join(md, 'p%d.jsonl' % k))
            toplu('run', path('addrelu.onnx'), '--input', 'x=' + x, '--output', sh[-1], '--shard', '%d/2' % k, '-q')
        p = subprocess.run(['strace', '-f', '-o', '/dev/null', '-P', './.m.jsonl.toplu-state.tmp', '-e', 'trace=openat',
                            '-e', 'inject=openat:signal=SIGKILL:when=2', tp.TOPLU, 'merge', '--output', 'm.jsonl', *sh],
                           cwd=md, capture_output=True, text=True, timeout=120)
        check(p.returncode != 0 and os.path.exists(os.path.join(md, 'm.jsonl')),
              'the merge killed at its last checkpoint write, its output in place', p.returncode, os.listdir(md))
        _, err = toplu('merge', '--output', 'm.jsonl', *sh, cwd=md)
        check(len(read_jsonl(os.path.join(md, 'm.jsonl'))) == 37, 'the next merge replaces it', err)
    else:
        raise Failure('strace is not installed (scripts/install-deps.sh installs it): the merge kill is not tried')


# ---- length buckets on text models (a fresh NLP user's trial, 2026-12-06) ----

def case_buckets_text():
    import onnx
    from onnx import TensorProto as T, helper, numpy_helper
    vi = helper.make_tensor_value_info
    E = np.array([[3.0], [1.0], [10.0], [100.0], [1000.0], [7.0]], np.float32)  # id 0 (the padding id) is 3
    P = np.array([[0.5], [0.25], [0.125], [0.0625], [0.03125], [0.015625]], np.float32)  # 6 positions

    def model(name, mask_name, out_dim, positions=False):
        nodes = [helper.make_node('Gather', ['E', 'ids'], ['e'], axis=0)]  # [N, S, 1]
        x = 'e'
        if positions:
            nodes += [helper.make_node('Shape', ['ids'], ['sh']),
                      helper.make_node('Gather', ['sh', 'one'], ['s'], axis=0),
                      helper.make_node('Range', ['zero', 's', 'one'], ['pos']),
                      helper.make_node('Gather', ['P', 'pos'], ['pe'], axis=0),  # [S, 1]: fails past 6
                      helper.make_node('Add', ['e', 'pe'], ['ep'])]
            x = 'ep'
        nodes += [helper.make_node('Cast', [mask_name], ['mf'], to=T.FLOAT),
                  helper.make_node('Unsqueeze', ['mf', 'ax2'], ['mu']),
                  helper.make_node('Mul', [x, 'mu'], ['masked']),
                  helper.make_node('ReduceSum', ['masked', 'ax1'], ['y'], keepdims=0),  # [N, 1]
                  helper.make_node('Reshape', ['masked', 'flat'], ['tok'])]  # [N, S]: S * 1 through -1
        g = helper.make_graph(nodes, name, [vi('ids', T.INT64, ['N', 'S']), vi(mask_name, T.INT64, ['N', 'S'])],
                              [vi('y', T.FLOAT, ['N', 1]), vi('tok', T.FLOAT, ['N', out_dim])],
                              [numpy_helper.from_array(E, 'E'), numpy_helper.from_array(P, 'P'),
                               numpy_helper.from_array(np.array([1], np.int64), 'ax1'),
                               numpy_helper.from_array(np.array([2], np.int64), 'ax2'),
                               numpy_helper.from_array(np.array([0, -1], np.int64), 'flat'),
                               numpy_helper.from_array(np.array(1, np.int64), 'one'),
                               numpy_helper.from_array(np.array(0, np.int64), 'zero')])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], producer_name='toplu-test')
        m.ir_version = 8
        onnx.save(m, path(name + '.onnx'))
        return path(name + '.onnx')

    rows = [[1, 2], [3, 4, 5, 1, 2], [2], [5, 4, 3, 2, 1]]
    src = fresh('bt_rows.jsonl')
    with open(src, 'w') as f:
        for r in rows:
            f.write(json.dumps({'ids': r, 'padding_mask': [1] * len(r)}) + '\n')
    # 1. a mask named padding_mask with 1 at the tokens (KerasNLP's): padded with 0, read off the rows' values
    #    (the name alone said "key padding mask": padded with 1, the padding ids (E[0] = 3) joined every sum, exit 0)
    out = fresh('bt_keras.jsonl')
    toplu('run', model('bt_keras', 'padding_mask', 'S'), '--input', src, '--output', out, '--batch-size', '4',
          '--length-buckets', 'auto', '-q')
    got = [r['outputs']['y'][0] for r in read_jsonl(out)]
    want = [float(sum(E[i][0] for i in r)) for r in rows]
    check(got == want, 'a padding_mask with 1 at the tokens, bucketed: the unpadded sums', got, want)
    # 2. a token-level output whose dim the model names otherwise ('T' here, as torch names an output's dim when
    #    only the inputs have dynamic axes): shape inference shows it follows the sequence, rows cut back
    out = fresh('bt_named.jsonl')
    _, err = toplu('run', model('bt_named', 'padding_mask', 'T'), '--input', src, '--output', out, '--batch-size', '4',
                   '--length-buckets', 'auto')
    lens = [len(r['outputs']['tok']) for r in read_jsonl(out)]
    check(lens == [len(r) for r in rows] and "output 'tok' follows the sequence length" in err,
          'a token-level output named otherwise: cut back to each row, and said so', lens, err)
    # 3. a model with 6 positions: rows of 5 tokens padded to 16 fail their batch and alone; run again at their own
    #    length they succeed (they failed: "index 6 is out of range", exit 0 with failed rows)
    out, errs = fresh('bt_pos.jsonl'), fresh('bt_pos.err')
    toplu('run', model('bt_pos', 'padding_mask', 'S', positions=True), '--input', src, '--output', out,
          '--batch-size', '4', '--length-buckets', 'auto', '--errors', errs, '-q')
    got = [r['outputs']['y'][0] for r in read_jsonl(out)]
    want = [float(sum(E[i][0] + P[k][0] for k, i in enumerate(r))) for r in rows]
    check(len(got) == 4 and np.allclose(got, want) and os.path.getsize(errs) == 0,
          'rows that fit the position table but not their bucket: run at their own length', got, want)
    # 4. toplu plan at the sequence length it assumes (128) past the position table: the error names the
    #    assumption (it named the node alone), and the failure is a shape's (TOPLU_ERR_SHAPE: 400 from a server)
    _, err = toplu('plan', path('bt_pos.onnx'), expect=2)
    check('out of range' in err and 'symbolic dims assumed' in err and 'S = 128' in err.replace('dim 1 = 128', 'S = 128'),
          'toplu plan past the position table: the assumed sequence length named', err)


def case_postprocess_outputs():
    """postprocess output=NAME, and argmax/topk in the output's own values (a fresh user's findings of 2026-12-06)."""
    from onnx import TensorProto as T, helper, numpy_helper
    vi = helper.make_tensor_value_info
    save = tp.save_graph

    # y = 2x [N, 4]; t = x.T [4, N] (dim 0 is not the rows); s = sqrt(x) (NaN where x < 0); tot = sum(x) [N, 1]
    two = numpy_helper.from_array(np.array(2, np.float32), 'two')
    ax = numpy_helper.from_array(np.array([1], np.int64), 'ax')
    m = save('pp_multi', [helper.make_node('Mul', ['x', 'two'], ['y']),
                          helper.make_node('Transpose', ['x'], ['t'], perm=[1, 0]),
                          helper.make_node('Sqrt', ['x'], ['s']),
                          helper.make_node('ReduceSum', ['x', 'ax'], ['tot'], keepdims=1)],
             [vi('x', T.FLOAT, ['N', 4])],
             [vi('y', T.FLOAT, ['N', 4]), vi('t', T.FLOAT, [4, 'N']), vi('s', T.FLOAT, ['N', 4]),
              vi('tot', T.FLOAT, ['N', 1])], [two, ax])
    x = np.array([[1, 2, 3, 4], [4, -1, 2, 0], [0.5, 0.25, -0.5, 8], [9, 1, 1, 1], [-3, 0, 0, 2], [1, 1, 1, 1]],
                 np.float32)
    src = fresh('pp_x.npy')
    np.save(src, x)
    # 1. raw,output=y writes y alone; the transposed output and the NaN of sqrt stop nothing (every output was
    #    written and checked: the .npy job refused 't', rows with NaN in 's' failed)
    for kind in ('d', 'jsonl', 'csv', 'sqlite'):
        out = fresh('pp_y' + ('' if kind == 'd' else '.' + kind))
        errs = fresh('pp_y_%s.err' % kind)
        _, err = toplu('run', m, '--input', src, '--output', out, '--batch-size', '2', '--postprocess', 'raw,output=y',
                       '--errors', errs)
        if kind == 'd':
            got = np.load(os.path.join(out, 'y.npy'))
            names = sorted(n for n in os.listdir(out) if not n.startswith('.'))
            check(names == ['ids.txt', 'y.npy'] and np.array_equal(got, 2 * x), '.npy directory: y alone', names, got)
        elif kind == 'jsonl':
            rows = read_jsonl(out)
            check(len(rows) == 6 and all(list(r['outputs']) == ['y'] for r in rows) and
                  [r['outputs']['y'] for r in rows] == (2 * x).tolist(), 'JSONL: y alone, every row', rows)
        elif kind == 'csv':
            with open(out) as f:
                lines = f.read().splitlines()
            check(lines[0] == 'id,y_0,y_1,y_2,y_3' and len(lines) == 7, 'CSV: y\'s columns alone', lines[:2])
        else:
            db = sqlite3.connect(out)
            rows = [json.loads(o) for (o,) in db.execute('SELECT outputs FROM results ORDER BY CAST(id AS INTEGER)')]
            db.close()
            check(len(rows) == 6 and all(list(r) == ['y'] for r in rows), 'SQLite: y alone', rows)
        check(os.path.getsize(errs) == 0 and '6 processed, 0 failed' in err, '%s: no row failed' % kind, err)
    # 2. argmax of y with the transposed output beside it, in batches of 2: runs (it was refused)
    out = fresh('pp_am.jsonl')
    toplu('run', m, '--input', src, '--output', out, '--batch-size', '2', '--postprocess', 'argmax,output=y', '-q')
    got = [r['argmax'] for r in read_jsonl(out)]
    check(got == np.argmax(x, 1).tolist(), 'argmax of y in batches of 2', got)
    # 4. refused specs and combinations (exit 2)
    for spec, words in (('argmax,raw', 'raw with'), ('softmax,softmax', 'softmax again'), ('argmax,', 'empty item'),
                        ('argmax,output=y,output=s', 'output= given twice'), ('raw,raw', 'raw again')):
        _, err = toplu('run', m, '--input', src, '--output', fresh('pp_bad.jsonl'), '--postprocess', spec, expect=2)
        check(words in err, 'postprocess %s refused' % spec, err)
    # an output the model does not have: the error lists those it has (a fresh user's finding of 2026-12-07)
    _, err = toplu('run', m, '--input', src, '--output', fresh('pp_bad.jsonl'), '--postprocess', 'raw,output=nope',
                   expect=2)
    check("output=nope: the model has no such output (it has 'y', 't', 's', 'tot')" in err,
          'postprocess output=nope refused, naming the outputs', err)
    labels = fresh('pp_labels.txt')
    with open(labels, 'w') as f:
        f.write('a\nb\nc\nd\n')
    _, err = toplu('run', m, '--input', src, '--output', fresh('pp_bad.jsonl'), '--labels', labels, expect=2)
    check('raw writes no classes' in err, 'labels with raw refused', err)
    # 5. argmax/topk in the output's own values: int64 past 2^53, float64 past float32, NaN ranked first
    big = 9007199254740993
    mi = save('pp_i64', [helper.make_node('Identity', ['k'], ['k2'])], [vi('k', T.INT64, ['N', 3])],
              [vi('k2', T.INT64, ['N', 3])])
    k = np.array([[big + 2, big + 3, big - 3], [1, 2, 2]], np.int64)
    np.save(fresh('pp_k.npy'), k)
    out = fresh('pp_k.jsonl')
    toplu('run', mi, '--input', path('pp_k.npy'), '--output', out, '--postprocess', 'argmax', '-q')
    got = [r['argmax'] for r in read_jsonl(out)]
    check(got == [1, 1], 'argmax of int64 past 2^53 (numpy: [1, 1])', got)
    mf = save('pp_f64', [helper.make_node('Identity', ['d'], ['d2'])], [vi('d', T.DOUBLE, ['N', 3])],
              [vi('d2', T.DOUBLE, ['N', 3])])
    d = np.array([[0.3000000001, 0.3000000002, 0.1], [1e-50, 2e-50, 0]], np.float64)
    np.save(fresh('pp_d.npy'), d)
    out = fresh('pp_d_dir')
    toplu('run', mf, '--input', path('pp_d.npy'), '--output', out, '--postprocess', 'topk=3', '-q')
    idx, sc = np.load(os.path.join(out, 'topk_index.npy')), np.load(os.path.join(out, 'topk_score.npy'))
    check(idx.tolist() == [[1, 0, 2], [1, 0, 2]] and sc.dtype == np.float64 and np.array_equal(sc[:, 0], d[:, 1]),
          'topk of float64: ranked and scored in float64', idx, sc)
    out = fresh('pp_nan.jsonl')
    toplu('run', m, '--input', src, '--output', out, '--postprocess', 'topk=2,output=s', '--allow-nonfinite', '-q')
    tops = [[e['index'] for e in r['topk']] for r in read_jsonl(out)]
    check(tops[1] == [1, 0] and tops[2] == [2, 3], 'topk with NaN: NaN first wherever it is (torch.topk)', tops)
    # 6. JSON: bool as true/false, -0.0 kept
    mb = save('pp_bool', [helper.make_node('Greater', ['x', 'zero'], ['g']), helper.make_node('Mul', ['x', 'mzero'], ['nz'])],
              [vi('x', T.FLOAT, ['N', 4])], [vi('g', T.BOOL, ['N', 4]), vi('nz', T.FLOAT, ['N', 4])],
              [numpy_helper.from_array(np.array(0, np.float32), 'zero'),
               numpy_helper.from_array(np.array(-0.0, np.float32), 'mzero')])
    out = fresh('pp_bool.jsonl')
    toplu('run', mb, '--input', src, '--output', out, '-q')
    with open(out) as f:
        first = f.readline()
    r = json.loads(first)
    check(r['outputs']['g'] == [True, True, True, True] and '-0.0' in first and
          all(isinstance(v, float) for v in r['outputs']['nz']), 'JSONL: bool as true/false, -0.0 as a float', first)
    # 7. a sink that stops the job: the summary says so before the error (it read as a finished job's)
    mv = save('pp_var', [helper.make_node('Identity', ['v'], ['v2'])], [vi('v', T.FLOAT, ['N', 'L'])],
              [vi('v2', T.FLOAT, ['N', 'L'])])
    src_v = fresh('pp_v.jsonl')
    with open(src_v, 'w') as f:  # the odd row after the first 16, which the setup reads (7c)
        for n in (3,) * 17 + (5,):
            f.write(json.dumps({'v': [1.0] * n}) + '\n')
    _, err = toplu('run', mv, '--input', src_v, '--output', fresh('pp_v_dir'), '--batch-size', '1', expect=1)
    check('stopped by the error below' in err and 'need the same shapes' in err, 'the summary of a stopped job', err)
    # 7c. ... among the first 16 rows: refused before anything runs, by shape inference, naming both rows (a
    #     segmentation job over photos of other sizes stopped after its first chunk had been written, 2026-12-06)
    src_w = fresh('pp_w.jsonl')
    with open(src_w, 'w') as f:
        for n in (3, 3, 5):
            f.write(json.dumps({'v': [1.0] * n}) + '\n')
    out_w = fresh('pp_w_dir')
    _, err = toplu('run', mv, '--input', src_w, '--output', out_w, '--batch-size', '1', expect=2)
    check("rows 0 and 2 give output 'v2' the shapes [3] and [5]" in err and 'need the same shapes' in err and
          not os.path.exists(out_w), '.npy rows of other shapes among the first 16: exit 2 before the job runs, no '
          'output', err)
    out_wj = fresh('pp_w.jsonl.out.jsonl')
    toplu('run', mv, '--input', src_w, '--output', out_wj, '--batch-size', '1', '-q')
    check([len(r['outputs']['v2']) for r in read_jsonl(out_wj)] == [3, 3, 5], 'the same rows into JSON Lines: each '
          'its own length')
    # 7b. output=NAME of an output stored whole (dim 0 not the rows, one batch into a directory): NAME's own data
    #     (output 0's went into NAME's file), and the messages do not suggest output= to who gave it
    out = fresh('pp_t_dir')
    toplu('run', m, '--input', src, '--output', out, '--postprocess', 'raw,output=t', '-q')
    got = np.load(os.path.join(out, 't.npy'))
    check(np.array_equal(got, x.T), 'raw,output=t stored whole: the transpose itself', got)
    _, err = toplu('run', m, '--input', src, '--output', fresh('pp_t.jsonl'), '--postprocess', 'raw,output=t', expect=2)
    check("output 't'" in err and 'raw,output=NAME' not in err, 'output=t into JSONL: refused without suggesting output=', err)
    # 7c. a checkpoint of a text sink written before bools became true/false is not resumed into one file of both
    out = fresh('pp_fmt.jsonl')
    toplu('run', m, '--input', src, '--output', out, '--batch-size', '2', '--postprocess', 'raw,output=y', '-q')
    state = os.path.join(os.path.dirname(out), '.pp_fmt.jsonl.toplu-state')
    with open(state) as f:
        ck = json.load(f)
    check(ck['job'].get('text_format') == 'bools true/false, -0.0', 'the checkpoint records the text format', ck['job'])
    del ck['job']['text_format']
    with open(state, 'w') as f:
        json.dump(ck, f)
    _, err = toplu('run', m, '--input', src, '--output', out, '--batch-size', '2', '--postprocess', 'raw,output=y',
                   '--resume', expect=2)
    check('bools 0/1' in err and 'true/false' in err, 'an older text format: resume refused, saying why', err)
    # 7d. topk of an int64 output: scores in float64 (float32 rounded past 2^24)
    out = fresh('pp_k_dir')
    toplu('run', mi, '--input', path('pp_k.npy'), '--output', out, '--postprocess', 'topk=2', '-q')
    sc = np.load(os.path.join(out, 'topk_score.npy'))
    check(sc.dtype == np.float64 and sc[1].tolist() == [2.0, 2.0], 'topk of int64: float64 scores', sc)
    # 8. a resume with another postprocess says both in the spec's words (it quoted "argmax,output=0,labels=0,k=0")
    out = fresh('pp_res.jsonl')
    toplu('run', m, '--input', src, '--output', out, '--postprocess', 'argmax,output=y', '-q')
    _, err = toplu('run', m, '--input', src, '--output', out, '--postprocess', 'topk=2,output=s', '--resume', expect=2)
    check('postprocess was argmax of output #0, now topk=2 of output #2' in err, 'resume: postprocess in words', err)


CASES = {
    'batch_bound': case_batch_bound,
    'int_inputs': case_int_inputs,
    'overwrite': case_overwrite,
    'two_writers': case_two_writers,
    'verify_outputs': case_verify_outputs,
    'image_bomb': case_image_bomb,
    'flag_paths': case_flag_paths,
    'csv_dialects': case_csv_dialects,
    'unbounded_reads': case_unbounded_reads,
    'ids_escaped': case_ids_escaped,
    'interrupted_rename': case_interrupted_rename,
    'merge_overwrite': case_merge_overwrite,
    'sqlite_table': case_sqlite_table,
    'fresh_user': case_fresh_user,
    'shards_merge': case_shards_merge,
    'operator': case_operator,
    'buckets_text': case_buckets_text,
    'postprocess_outputs': case_postprocess_outputs,
}


def main():
    if len(sys.argv) != 4 or (sys.argv[3] != 'setup' and sys.argv[3] not in CASES):
        sys.exit('usage: test_pipeline_hardening.py TOPLU WORKDIR setup|' + '|'.join(CASES))
    tp.TOPLU, tp.WORK = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if sys.argv[3] == 'setup':
        setup()
        return 0
    try:
        CASES[sys.argv[3]]()
    except Failure as e:
        print('FAIL: ' + str(e))
        return 1
    print('ok')
    return 0


if __name__ == '__main__':
    sys.exit(main())
