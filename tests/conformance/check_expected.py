#!/usr/bin/python3
"""tests/conformance/check_expected.py - toplu-conformance's expected-verdict check and update.

    check_expected.py TOPLU_CONFORMANCE NODE_TEST_ROOT WORKDIR

Builds small test roots in WORKDIR from real node tests (test_abs and test_neg
pass, test_adagrad is unsupported) and planted ones (test_abs_wrong: test_abs
with test_neg's expected output, a FAIL; test_abs_hang: its input is a FIFO
nobody writes, a TIMEOUT), then checks, with made-up lists, that --expected
fails on a PASS that does not pass (also when another test newly passes, which
a PASS count would not see), on a TIMEOUT, on an expected PASS missing from the
run, and on a malformed list; reports newly passing and unlisted tests; and that
--update-expected records new verdicts but refuses, leaving the file as it is,
to lower a PASS or record a TIMEOUT.  Exit 0 pass, 1 fail.
"""
import os
import shutil
import subprocess
import sys

RUNNER, NODE, WORK = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
failures = []


def check(cond, what, *context):
    print(('ok: ' if cond else 'FAIL: ') + what + ('' if cond else ''.join('\n--- ' + str(c) for c in context)),
          flush=True)
    if not cond:
        failures.append(what)


def write(path, text):
    with open(path, 'w') as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read()


def conf(root, *args):
    p = subprocess.run([RUNNER, '--all', root, '--jobs', '2', '--timeout', '3', '--quiet'] + list(args),
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def setup():
    shutil.rmtree(WORK, ignore_errors=True)
    ok, hang = os.path.join(WORK, 'ok'), os.path.join(WORK, 'hang')
    os.makedirs(ok)
    os.makedirs(hang)
    for t in ('test_abs', 'test_neg', 'test_adagrad'):
        os.symlink(os.path.join(NODE, t), os.path.join(ok, t))
    abs_dir = os.path.join(NODE, 'test_abs')
    for name, root in (('test_abs_wrong', ok), ('test_abs_hang', hang)):
        d = os.path.join(root, name, 'test_data_set_0')
        os.makedirs(d)
        shutil.copy(os.path.join(abs_dir, 'model.onnx'), os.path.join(root, name, 'model.onnx'))
        if name == 'test_abs_wrong':
            shutil.copy(os.path.join(abs_dir, 'test_data_set_0', 'input_0.pb'), d)
            shutil.copy(os.path.join(NODE, 'test_neg', 'test_data_set_0', 'output_0.pb'), d)
        else:
            os.mkfifo(os.path.join(d, 'input_0.pb'))
            shutil.copy(os.path.join(abs_dir, 'test_data_set_0', 'output_0.pb'), d)
    return ok, hang


def main():
    ok, hang = setup()
    lst = os.path.join(WORK, 'expected.txt')
    exact = 'test_abs PASS\ntest_abs_wrong FAIL\ntest_adagrad UNSUPPORTED\ntest_neg PASS\n'

    write(lst, '# a comment\n' + exact)
    rc, out, err = conf(ok, '--expected', lst)
    check(rc == 0 and '4 as expected' in out and '0 regressions' in out, 'every verdict as expected: exit 0', out, err)

    write(lst, exact.replace('test_abs_wrong FAIL', 'test_abs_wrong PASS'))
    rc, out, err = conf(ok, '--expected', lst)
    check(rc == 1 and 'REGRESSION test_abs_wrong: expected PASS, got FAIL' in err,
          'a test expected PASS that fails: exit 1, named', out, err)

    write(lst, 'test_abs UNSUPPORTED\ntest_abs_wrong FAIL\ntest_adagrad PASS\ntest_neg PASS\n')
    rc, out, err = conf(ok, '--expected', lst)
    check(rc == 1 and 'REGRESSION test_adagrad: expected PASS, got UNSUPPORTED' in err and
          'newly passing: test_abs (expected UNSUPPORTED)' in out,
          'a new failure behind a new pass (the PASS count is unchanged): exit 1, both named', out, err)

    write(lst, 'test_abs PASS\ntest_abs_wrong UNSUPPORTED\ntest_adagrad UNSUPPORTED\ntest_gone PASS\ntest_gone2 FAIL\n')
    rc, out, err = conf(ok, '--expected', lst)
    check(rc == 1 and 'MISSING test_gone: expected PASS' in err and 'test_gone2' not in err and
          'new test, not in' in out and 'test_neg PASS' in out and
          'changed: test_abs_wrong: UNSUPPORTED -> FAIL' in out,
          'an expected PASS missing from the run fails; unlisted and changed tests are reported', out, err)
    rc, out, err = conf(ok, '--filter', 'abs', '--expected', lst)
    check(rc == 0 and 'MISSING' not in err, 'a filtered run only answers for the tests it covers', out, err)

    write(lst, 'test_abs_hang UNSUPPORTED\n')
    rc, out, err = conf(hang, '--expected', lst)
    check(rc == 1 and 'TIMEOUT test_abs_hang (expected UNSUPPORTED)' in err, 'a TIMEOUT fails: exit 1, named', out,
          err)

    write(lst, 'test_abs PASS\ntest_abs nonsense\n')
    rc, out, err = conf(ok, '--expected', lst)
    check(rc == 2 and 'expected.txt:2:' in err, 'a malformed list: exit 2, file and line named', out, err)

    # --update-expected: records new verdicts, keeps entries the run did not cover.
    write(lst, 'test_abs UNSUPPORTED\ntest_adagrad UNSUPPORTED\ntest_kept FAIL\n')
    rc, out, err = conf(ok, '--update-expected', lst)
    body = [ln for ln in read(lst).splitlines() if ln and not ln.startswith('#')]
    check(rc == 0 and body == ['test_abs PASS', 'test_abs_wrong FAIL', 'test_adagrad UNSUPPORTED', 'test_kept FAIL',
                               'test_neg PASS'] and '1 newly passing' in out,
          'update: newly passing and new tests recorded, other entries kept, sorted', out, err, body)

    for what, root, text, needle in (
            ('update refuses to lower a PASS', ok, exact.replace('test_abs_wrong FAIL', 'test_abs_wrong PASS'),
             'test_abs_wrong was PASS and is now FAIL'),
            ('update refuses to drop a PASS the run covers', ok, exact + 'test_abs_gone PASS\n',
             'test_abs_gone was PASS and is not in this run'),
            ('update refuses to record a TIMEOUT', hang, 'test_abs_hang UNSUPPORTED\n',
             'TIMEOUT test_abs_hang: a crash or timeout is never recorded')):
        write(lst, text)
        rc, out, err = conf(root, '--update-expected', lst)
        check(rc == 1 and needle in err and 'left as it is' in err and read(lst) == text,
              what + ': exit 1, the list unchanged', out, err)
    shutil.rmtree(WORK, ignore_errors=True)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
