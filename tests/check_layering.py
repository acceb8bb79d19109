#!/usr/bin/env python3
"""Layering and library-manners check for toplu's sources.

Usage: check_layering.py [ROOT]      check ROOT (default: the project root)
       check_layering.py --self-test check that the checks catch bad files

The layer order is read from the layer table of ROOT/docs/design.md (its
"level" column: a layer may include headers of its own level and below),
so the table and this check cannot drift apart.  It fails, printing one
`file:line: why` per offence, when

- a file under src/<layer>/ includes "<higher layer>/x.h" (quoted includes
  only; "toplu/*.h" public headers are allowed everywhere; a quoted include
  without a folder is the file's own layer: a neighbour or a generated
  header; tools/ may include anything);
- a folder under src/ is not in the table;
- src/ prints to stdout or stderr itself (printf, puts, perror, putchar,
  fprintf/fputs/fputc to stderr/stdout, vfprintf(stderr/stdout)): the
  library reports through the caller's toplu_log_fn (toplu/log.h);
- a string in src/ names a command-line flag ("--mem-fraction"): messages
  name option fields, the CLI translates;
- a string in src/ speaks as a CLI command ("toplu tune: ...");
- a header under src/ declares a name `toplu_x` (one underscore) that no
  public header (include/toplu/*.h) declares: public names are `toplu_`,
  internal ones `toplu__` (libuv's uv_/uv__), so a reader tells them apart.

Comments are stripped before the text checks (not before the include check,
which only reads #include lines).
"""
import os
import re
import sys
import tempfile

FLAG_RE = re.compile(r'"[^"\n]*(?<![\w-])--[a-z][a-z0-9-]+[^"\n]*"')
PRINT_RE = re.compile(r'(?<![\w.])(printf|puts|perror|putchar)\s*\(|\bf(printf|puts|putc)\s*\([^;]*\b(stderr|stdout)\b'
                      r'|\bvfprintf\s*\(\s*(stderr|stdout)')
CLI_RE = re.compile(r'"toplu [a-z]+: ')
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
TABLE_ROW_RE = re.compile(r'^\|\s*(\d+)\s*\|\s*`([a-z_]+)`\s*\|')
NAME_RE = re.compile(r'\btoplu_[a-z0-9][a-z0-9_]*\b')


def read_layers(design_md):
    """{layer: level} from the design page's layer table (| level | `layer` | owns |)."""
    layers = {}
    in_section = False
    with open(design_md, encoding='utf-8') as f:
        for line in f:
            if line.startswith('## '):
                in_section = line.strip() == '## Layers'
                continue
            m = TABLE_ROW_RE.match(line) if in_section else None
            if m:
                layers[m.group(2)] = int(m.group(1))
    return layers


def strip_comments(text):
    text = re.sub(r'/\*.*?\*/', lambda m: '\n' * m.group(0).count('\n'), text, flags=re.S)
    return re.sub(r'//[^\n]*', '', text)


def sources(root, top):
    base = os.path.join(root, top)
    for d, _, files in os.walk(base):
        for name in sorted(files):
            if name.endswith(('.c', '.h')):
                yield os.path.join(d, name)


def check(root):
    """Offences as 'file:line: why' strings (paths relative to root)."""
    design = os.path.join(root, 'docs', 'design.md')
    try:
        layers = read_layers(design)
    except OSError as e:
        return [f'docs/design.md:1: cannot read the layer table: {e.strerror}']
    if not layers:
        return ['docs/design.md:1: no layer table (rows "| level | `layer` | owns |" under "## Layers")']
    out = []
    public = set()
    for path in sources(root, 'include'):
        with open(path, encoding='utf-8', errors='replace') as f:
            public.update(NAME_RE.findall(strip_comments(f.read())))
    for top in ('src', 'tools'):
        for path in sources(root, top):
            rel = os.path.relpath(path, root)
            parts = rel.split(os.sep)
            own = parts[1] if top == 'src' and len(parts) > 2 else None
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read()
            if top == 'src':
                if own is None:
                    out.append(f'{rel}:1: a source file outside src/<layer>/')
                    continue
                if own not in layers:
                    out.append(f'{rel}:1: layer \'{own}\' is not in docs/design.md\'s layer table')
                    continue
                for i, line in enumerate(text.splitlines(), 1):
                    m = INCLUDE_RE.match(line)
                    if not m:
                        continue
                    inc = m.group(1)
                    if '/' not in inc:
                        continue  # a neighbour or a generated header: own layer
                    dep = inc.split('/', 1)[0]
                    if dep == 'toplu':
                        continue  # public headers are allowed everywhere
                    if dep not in layers:
                        out.append(f'{rel}:{i}: includes "{inc}": \'{dep}\' is not a layer of docs/design.md')
                    elif layers[dep] > layers[own]:
                        out.append(f'{rel}:{i}: includes "{inc}": layer {own} (level {layers[own]}) includes '
                                   f'the higher layer {dep} (level {layers[dep]})')
                for i, line in enumerate(strip_comments(text).splitlines(), 1):
                    if PRINT_RE.search(line):
                        out.append(f'{rel}:{i}: prints to stdout/stderr; report through the caller\'s toplu_log_fn')
                    if FLAG_RE.search(line):
                        out.append(f'{rel}:{i}: a message names a command-line flag; name the option field')
                    if CLI_RE.search(line):
                        out.append(f'{rel}:{i}: a message speaks as a CLI command ("toplu <cmd>: ")')
                    if path.endswith('.h'):
                        for name in NAME_RE.findall(re.sub(r'"[^"\n]*"', '""', line)):
                            if name not in public:
                                out.append(f'{rel}:{i}: internal name {name}: not in include/toplu/, so spell it '
                                           f'toplu__{name[6:]}')
    return out


def self_test():
    """Build a small tree with one offence of each kind and check each is found."""
    with tempfile.TemporaryDirectory(prefix='toplu-layering-') as root:
        os.makedirs(os.path.join(root, 'docs'))
        os.makedirs(os.path.join(root, 'src', 'core'))
        os.makedirs(os.path.join(root, 'src', 'plan'))
        os.makedirs(os.path.join(root, 'src', 'mystery'))
        os.makedirs(os.path.join(root, 'tools'))
        os.makedirs(os.path.join(root, 'include', 'toplu'))
        with open(os.path.join(root, 'include', 'toplu', 'api.h'), 'w') as f:
            f.write('int toplu_public_call(void);\n')
        with open(os.path.join(root, 'docs', 'design.md'), 'w') as f:
            f.write('# x\n\n## Layers\n\n| level | layer | owns |\n| --- | --- | --- |\n'
                    '| 0 | `core` | a |\n| 5 | `plan` | b |\n\n## Other\n\n| 9 | `nope` | c |\n')
        files = {
            'src/core/bad.c': ('#include "plan/planner.h"\n'            # 1: core includes plan
                               '#include "toplu/planner.h"\n'           # fine: public
                               '#include "local.h"\n'                   # fine: own layer
                               '#include "nope/x.h"\n'                  # 4: not a layer (table row outside ## Layers)
                               'void f(void) {\n'
                               '  printf("x");\n'                       # 6: print
                               '  fprintf(stderr, "y");\n'              # 7: print
                               '  /* fprintf(stderr, "in a comment"); */\n'
                               '  g("mem_fraction must be in (0, 1]");\n'
                               '  g("use --mem-fraction");\n'           # 10: flag
                               '  g("toplu tune: no");\n'               # 11: CLI words
                               '  // g("--in-a-comment");\n'
                               '  snprintf(buf, n, "x");\n'
                               '  fprintf(f, "to a caller\'s stream");\n'
                               '}\n'),
            'src/plan/ok.c': '#include "core/error.h"\n#include "plan/arch.h"\n',
            'src/plan/names.h': ('int toplu_public_call(void);\n'          # fine: public
                                 'int toplu__inner(void);\n'               # fine: internal spelling
                                 'int toplu_inner_call(void);\n'),         # 3: internal with one underscore
            'src/mystery/m.c': 'int x;\n',
            'tools/cmd.c': '#include "plan/planner.h"\nint main(void) { printf("--flag"); }\n',
        }
        for rel, text in files.items():
            with open(os.path.join(root, rel), 'w') as f:
                f.write(text)
        got = sorted(check(root))
        want_prefixes = sorted([
            'src/core/bad.c:1: includes "plan/planner.h"',
            'src/core/bad.c:4: includes "nope/x.h"',
            'src/core/bad.c:6: prints',
            'src/core/bad.c:7: prints',
            'src/core/bad.c:10: a message names a command-line flag',
            'src/core/bad.c:11: a message speaks as a CLI command',
            'src/mystery/m.c:1: layer \'mystery\' is not in',
            'src/plan/names.h:3: internal name toplu_inner_call',
        ])
        ok = len(got) == len(want_prefixes) and all(g.startswith(w) for g, w in zip(got, want_prefixes))
        if not ok:
            print('self-test FAILED: expected offences starting with', file=sys.stderr)
            for w in want_prefixes:
                print('  ' + w, file=sys.stderr)
            print('got', file=sys.stderr)
            for g in got:
                print('  ' + g, file=sys.stderr)
            return 1
        print(f'self-test passed: {len(got)} planted offences found, none else')
        return 0


def main(argv):
    if len(argv) > 1 and argv[1] == '--self-test':
        return self_test()
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    offences = check(root)
    for o in offences:
        print(o)
    layers = read_layers(os.path.join(root, 'docs', 'design.md')) if os.path.isfile(
        os.path.join(root, 'docs', 'design.md')) else {}
    order = ' < '.join('/'.join(sorted(n for n, l in layers.items() if l == lv)) for lv in sorted(set(layers.values())))
    if offences:
        print(f'{len(offences)} offences (layer order from docs/design.md: {order})')
        return 1
    print(f'layering and manners: clean (layer order from docs/design.md: {order})')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
