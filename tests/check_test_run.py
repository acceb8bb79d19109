#!/usr/bin/python3
"""tests/check_test_run.py - did a CTest run test what it should?  (scripts/test.sh)

CTest counts a skipped test (SKIP_RETURN_CODE, exit 77) as no failure, and a
test that was never registered (a dependency missing at configure time, a
fragment that dropped it) is not counted at all.  This check, run by
scripts/test.sh after each `ctest --output-junit FILE`, fails the run when:

  - a test named in tests/expected-tests.txt is not registered, or disabled;
  - a registered test that the run selected (all of them, or all but those
    with a label given by --exclude-label) is missing from the JUnit file;
  - a test skipped (JUnit status "notrun": exit 77, or its program missing),
    or passed while printing a skip marker (cmocka's "[  SKIPPED ]", or a
    line starting "SKIP:", "skip:" or "skipped:"), and is not allowed to in
    tests/allowed-skips.txt ("NAME  why it cannot run here", one a line):
    a skip is only for what truly cannot exist on the machine.
It prints a summary (registered, ran, passed, failed, skipped with reasons,
allowed skips, registered tests missing from the list) and exits 1 on any of
the above, else 0.  Failed tests are counted; ctest's own exit status reports
them.

  check_test_run.py --build DIR --junit FILE [--exclude-label L] [--expected F] [--allowed-skips F]
  check_test_run.py --build DIR --write-expected F   the registered tests, sorted, into F
  check_test_run.py --self-test                      the check against made-up runs

Registered tests come from `ctest --test-dir DIR --show-only=json-v1` (or
--registered-json FILE, a saved copy of that output).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP_MARKER = re.compile(r'^\s*(\[  SKIPPED \]|SKIP:|skip:|skipped:)', re.M)


def read_list(path):
    """Lines of path without comments ('#') and blank lines: {first word: rest}."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.split('#', 1)[0].strip()
            if line:
                name, _, rest = line.partition(' ')
                out[name] = rest.strip()
    return out


def registered_tests(build, json_file=None):
    """{name: {'labels': [...], 'disabled': bool}} of the tests registered in build."""
    if json_file:
        with open(json_file) as f:
            data = json.load(f)
    else:
        p = subprocess.run(['ctest', '--test-dir', build, '--show-only=json-v1'], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f'check_test_run: ctest --show-only in {build} failed: {p.stderr.strip()[-400:]}')
        data = json.loads(p.stdout)
    tests = {}
    for t in data.get('tests', []):
        props = {p['name']: p['value'] for p in t.get('properties', [])}
        labels = props.get('LABELS', [])
        tests[t['name']] = {'labels': labels if isinstance(labels, list) else [labels],
                            'disabled': bool(props.get('DISABLED', False))}
    return tests


def junit_results(path):
    """{name: (status, skip message, output)} from a ctest --output-junit file."""
    out = {}
    for tc in ET.parse(path).getroot().iter('testcase'):
        sk = tc.find('skipped')
        so = tc.find('system-out')
        out[tc.get('name')] = (tc.get('status'), sk.get('message', '') if sk is not None else '',
                               so.text or '' if so is not None else '')
    return out


def check(registered, results, expected, allowed, exclude_labels, out=sys.stdout):
    """The check itself; returns the list of problems (empty: the run is complete)."""
    problems, notes = [], []
    for name in sorted(expected):
        if name not in registered:
            problems.append(f'{name}: in tests/expected-tests.txt but not registered (a dependency missing at '
                            'configure time, or a tests/*.cmake fragment no longer adds it)')
        elif registered[name]['disabled']:
            problems.append(f'{name}: registered but DISABLED')
    extra = sorted(set(registered) - set(expected))
    selected = [n for n, t in sorted(registered.items())
                if not t['disabled'] and not set(t['labels']) & set(exclude_labels)]
    counts = {'run': 0, 'fail': 0, 'skipped': 0}
    allowed_seen = []
    for name in selected:
        if name not in results:
            problems.append(f'{name}: registered and selected but not in the run\'s results (did not run)')
            continue
        status, why, output = results[name]
        skipped = None
        if status == 'notrun':
            skipped = why or 'not run'
            first = next((ln for ln in output.splitlines() if ln.strip()), '')
            if first:
                skipped += f' ({first.strip()[:200]})'
        elif status == 'run':
            m = SKIP_MARKER.search(output)
            if m:
                line = output[m.start():].split('\n', 1)[0].strip()
                skipped = f'passed but skipped part of itself: {line[:200]}'
        if status == 'fail':
            counts['fail'] += 1
        elif skipped is None:
            counts['run'] += 1
        if skipped is not None:
            counts['skipped'] += 1
            if name in allowed:
                allowed_seen.append(f'{name}: {skipped} -- allowed: {allowed[name]}')
            else:
                problems.append(f'{name}: SKIPPED: {skipped} (not in tests/allowed-skips.txt: a skip is a failure)')
    print(f'check_test_run: {len(registered)} registered ({len(expected)} expected), {len(selected)} selected, '
          f'{counts["run"]} passed, {counts["fail"]} failed, {counts["skipped"]} skipped '
          f'({len(allowed_seen)} allowed)', file=out)
    for a in allowed_seen:
        print(f'  skipped, allowed: {a}', file=out)
    if extra:
        notes.append(f'registered but not in tests/expected-tests.txt (add them: scripts/test.sh --update-test-list): '
                     + ', '.join(extra))
    for n in notes:
        print(f'  note: {n}', file=out)
    for p in problems:
        print(f'  FAIL: {p}', file=out)
    return problems


def self_test():
    """The check finds exactly the planted problems in made-up runs."""
    reg = {'a': {'labels': ['unit'], 'disabled': False}, 'b': {'labels': ['slow'], 'disabled': False},
           'c': {'labels': [], 'disabled': False}}
    ok = {'a': ('run', '', 'ok\n'), 'b': ('run', '', ''), 'c': ('run', '', '')}
    cases = [
        ('complete run', reg, ok, {'a': '', 'b': '', 'c': ''}, {}, [], []),
        ('an unexpected skip (exit 77)', reg, {**ok, 'b': ('notrun', 'SKIP_RETURN_CODE=77', 'skip: no model\n')},
         {'a': '', 'b': '', 'c': ''}, {}, [], ['b: SKIPPED: SKIP_RETURN_CODE=77 (skip: no model)']),
        ('an allowed skip', reg, {**ok, 'b': ('notrun', 'SKIP_RETURN_CODE=77', '')},
         {'a': '', 'b': '', 'c': ''}, {'b': 'no GPU here'}, [], []),
        ('a cmocka skip inside a passing test', reg,
         {**ok, 'a': ('run', '', '[ RUN      ] x\n[  SKIPPED ] x\n[  PASSED  ] 0 test(s).\n')},
         {'a': '', 'b': '', 'c': ''}, {}, [], ['a: SKIPPED: passed but skipped part of itself: [  SKIPPED ] x']),
        ('an expected test not registered', {k: v for k, v in reg.items() if k != 'c'}, ok,
         {'a': '', 'b': '', 'c': ''}, {}, [], ['c: in tests/expected-tests.txt but not registered']),
        ('a disabled test', {**reg, 'c': {'labels': [], 'disabled': True}}, ok, {'a': '', 'b': '', 'c': ''}, {}, [],
         ['c: registered but DISABLED']),
        ('a selected test that did not run', reg, {k: v for k, v in ok.items() if k != 'a'},
         {'a': '', 'b': '', 'c': ''}, {}, [], ['a: registered and selected but not in the run']),
        ('a test excluded by label need not run', reg, {k: v for k, v in ok.items() if k != 'b'},
         {'a': '', 'b': '', 'c': ''}, {}, ['slow'], []),
        ('a missing program', reg, {**ok, 'c': ('notrun', 'Unable to find executable', '')},
         {'a': '', 'b': '', 'c': ''}, {}, [], ['c: SKIPPED: Unable to find executable']),
        ('an extra registered test is a note, not a failure', reg, ok, {'a': '', 'b': ''}, {}, [], []),
    ]
    bad = 0
    for what, r, res, exp, allow, excl, want in cases:
        buf = tempfile.TemporaryFile('w+')
        got = check(r, res, exp, allow, excl, out=buf)
        buf.seek(0)
        text = buf.read()
        good = len(got) == len(want) and all(any(g.startswith(w) for g in got) for w in want)
        if what == 'an allowed skip':
            good = good and 'skipped, allowed: b:' in text and 'no GPU here' in text
        if what.startswith('an extra'):
            good = good and 'note: registered but not in tests/expected-tests.txt' in text and ': c' in text
        print(('ok: ' if good else 'FAIL: ') + what + ('' if good else f': got {got}, want {want}\n{text}'))
        bad += not good
    # The JUnit reader on a file of the shape ctest 3.25 writes.
    with tempfile.NamedTemporaryFile('w', suffix='.xml', delete=False) as f:
        f.write('<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="x" tests="2">\n'
                '<testcase name="a" classname="a" time="0.1" status="run"><system-out>ok</system-out></testcase>\n'
                '<testcase name="b" classname="b" time="0" status="notrun"><skipped message="SKIP_RETURN_CODE=77"/>'
                '<system-out>skip: x</system-out></testcase>\n</testsuite>\n')
    jr = junit_results(f.name)
    os.unlink(f.name)
    good = jr == {'a': ('run', '', 'ok'), 'b': ('notrun', 'SKIP_RETURN_CODE=77', 'skip: x')}
    print(('ok: ' if good else 'FAIL: ') + f'JUnit results read ({jr})')
    bad += not good
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--build')
    ap.add_argument('--junit')
    ap.add_argument('--registered-json')
    ap.add_argument('--exclude-label', action='append', default=[])
    ap.add_argument('--expected', default=os.path.join(HERE, 'expected-tests.txt'))
    ap.add_argument('--allowed-skips', default=os.path.join(HERE, 'allowed-skips.txt'))
    ap.add_argument('--write-expected')
    ap.add_argument('--self-test', action='store_true')
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    if not a.build and not a.registered_json:
        ap.error('--build or --registered-json is needed')
    registered = registered_tests(a.build, a.registered_json)
    if a.write_expected:
        old, head = {}, []
        if os.path.exists(a.write_expected):
            old = read_list(a.write_expected)
            with open(a.write_expected) as f:
                head = [ln for ln in f.read().splitlines() if ln.startswith('#')]
        gone = sorted(set(old) - set(registered))
        with open(a.write_expected + '.tmp', 'w') as f:
            for ln in head:
                f.write(ln + '\n')
            for n in sorted(registered):
                f.write(n + '\n')
        os.replace(a.write_expected + '.tmp', a.write_expected)
        print(f'check_test_run: wrote {len(registered)} test names to {a.write_expected}'
              + (f'; no longer registered, removed: {", ".join(gone)}' if gone else ''))
        return 0
    if not a.junit:
        ap.error('--junit is needed')
    problems = check(registered, junit_results(a.junit), read_list(a.expected), read_list(a.allowed_skips),
                     a.exclude_label)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
