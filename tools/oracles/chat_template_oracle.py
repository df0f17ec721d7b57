# Reference renders of chat templates by Python's jinja2, configured as Hugging Face
# transformers renders chat templates (the shared data's chat-templates/render.py):
#
#   chat_template_oracle.py SHARED_DIR [REAL_MODELS_DIR]
#
# writes, into tests/data/:
#   chat_template_extra.json       the 17 shared templates x our own conversations (braces,
#                                  quotes, tabs, empty contents, long histories, unicode), in
#                                  cases.json's format, rendered by render.py's render();
#   chat_template_constructs.json  one small template per construct (statements, whitespace
#                                  control, expressions, filters, tests, methods, undefined
#                                  values, errors) with its variables and jinja2's output;
#   chat_template_smollm2.json     (with REAL_MODELS_DIR) the template inside the real
#                                  SmolLM2-135M-Instruct GGUF, read with the `gguf` package,
#                                  rendered for every conversation with the file's BOS/EOS text.
# Needs jinja2 (and gguf for the last file). The build and the tests never run it.
import json, os, sys

SHARED = sys.argv[1]
sys.path.insert(0, os.path.join(SHARED, "chat-templates"))
import render as shared_render  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "data")

LONG_HISTORY = [{"role": "system", "content": "You answer in one line."}]
for i in range(30):
    LONG_HISTORY.append({"role": "user", "content": f"Question {i}: what is {i} * {i}?"})
    LONG_HISTORY.append({"role": "assistant", "content": f"{i * i}"})
LONG_HISTORY.append({"role": "user", "content": "And the sum of all of them?"})

CONVS = {
    "braces": [{"role": "user", "content": "Render {{ name }} and {% if x %}y{% endif %} and {# c #} literally: {'a': {}}"}],
    "quotes": [{"role": "user", "content": "He said \"it's\" and 'fine' \\ \\n `code` \"\"\"doc\"\"\""},
               {"role": "assistant", "content": "'single' \"double\""},
               {"role": "user", "content": "Again: ' \" '"}],
    "tabs_and_space": [{"role": "user", "content": "\tdef f():\n\t\treturn 1\n\n   "},
                       {"role": "assistant", "content": "  \n\tok\t\n"},
                       {"role": "user", "content": "\r\nwindows\r\nlines\r\n"}],
    "empty": [{"role": "system", "content": ""}, {"role": "user", "content": ""},
              {"role": "assistant", "content": ""}, {"role": "user", "content": ""}],
    "empty_user_only": [{"role": "user", "content": ""}],
    "long_history": LONG_HISTORY,
    "unicode": [{"role": "user", "content": "Ünïcödé: 日本語, עברית, emoji 🚀👩‍💻, combining e\u0301, nbsp\u00a0end, zero\u200bwidth"},
                {"role": "assistant", "content": "ß → SS? Σσς"},
                {"role": "user", "content": "\u2028line separator and \U0001F600"}],
    "code": [{"role": "system", "content": "Complete the function."},
             {"role": "user", "content": "```python\ndef add(a, b):\n    \"\"\"Return a + b.\"\"\"\n```\nJSON: {\"k\": [1, 2, {\"n\": null}]}"}],
    "two_systems": [{"role": "system", "content": "First."}, {"role": "system", "content": "Second."},
                    {"role": "user", "content": "Hi"}],
    "assistant_last": [{"role": "user", "content": "Start a function"},
                       {"role": "assistant", "content": "def f(x):\n    return"}],
}

# (template, variables) pairs: each construct on its own; expected output or error by jinja2.
CONSTRUCTS = [
    # whitespace control, trim_blocks, lstrip_blocks
    ("a  {%- if true %} b {% endif -%}  c", {}),
    ("line\n  {% if true %}\n  x\n  {% endif %}\nend", {}),
    ("{% for i in [1,2] %}\n{{ i }}\n{% endfor %}\n", {}),
    ("  {%+ if true %}kept{% endif +%}\nnext", {}),
    ("x {# comment #}\n  {# own line #}\ny", {}),
    ("{{- '  a  ' -}}  \n{{ 'b' }} {{- 'c' }}", {}),
    ("{% raw %}{{ not evaluated }}{% endraw %} after", {}),
    ("\t{% if true %}tab{% endif %}\n", {}),
    ("a\r\nb {% if true %}\r\nc{% endif %}\r\n{{ 'd\r\ne' }}\r\n", {}),
    ("  {% for m in l %}  x  {% endfor %}  \n", {"l": [1, 2]}),
    ("{{ 'a' }}  {% if true %}\n  y{% endif %}", {}),
    ("{{ 'a' }}\n{% if true %}\n  {{ 'b' }}\n{% endif %}\n", {}),
    # literals and operators
    ("{{ 'a\\tb\\n' ~ \"q\\\"\" ~ 'x\\x41\\u00e9' }}", {}),
    ("{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }}", {}),
    ("{{ 1.5 + 1 }} {{ 0.1 + 0.2 }} {{ 1e20 }} {{ 1.0 }} {{ 3 / 1 }} {{ 1e-7 }}", {}),
    ("{{ 'ab' * 3 }} {{ [1] * 3 }} {{ [1, 2] + [3] }} {{ 'a' ~ 1 ~ none ~ true }}", {}),
    ("{{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }}", {}),
    ("{{ 'b' in 'abc' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ not 'x' in 'y' }}", {}),
    ("{{ none or 'x' }} {{ 0 and 1 }} {{ [] or {} }} {{ 'a' and 'b' }} {{ not none }}", {}),
    ("{{ 'yes' if 1 else 'no' }} {{ 'yes' if 0 else 'no' }} [{{ 'x' if false }}]", {}),
    ("{{ [1, 'a', none, true, 1.5, (1,), (1, 2), {'k': [1]}] }}", {}),
    ("{{ \"it's\" }} {{ [\"it's\", 'say \"hi\"', 'both \\' \"'] }}", {}),
    ("{{ -3 | abs }} {{ - 2 ** 2 }} {{ (-2) ** 2 }}", {}),
    # indexing and slicing
    ("{{ l[0] }} {{ l[-1] }} {{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[5:] }} {{ s[1:3] }} {{ s[::-1] }}", {"l": [1, 2, 3, 4], "s": "héllo"}),
    ("{{ d.a }} {{ d['a'] }} {{ d.b.c }} {{ d['b']['c'] }} {{ l.0 }}", {"d": {"a": 1, "b": {"c": 2}}, "l": [5]}),
    ("[{{ d.missing }}] [{{ l[10] }}] [{{ d.missing is defined }}]", {"d": {"a": 1}, "l": [1]}),
    ("{{ d.items() | list }}", {"d": {"items": 3}}),
    ("{{ d['items'] }}", {"d": {"items": 3}}),
    # statements
    ("{% for a, b in d.items() %}{{ a }}={{ b }};{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/{{ loop.length }}/{{ loop.first }}/{{ loop.last }} {% endfor %}", {"d": {"z": 1, "a": 2, "m": 3}}),
    ("{% for x in l if x > 1 %}{{ x }}:{{ loop.index }}:{{ loop.last }} {% else %}none{% endfor %}", {"l": [1, 2, 3]}),
    ("{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("{% for x in l %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{{ x }}{% endfor %}", {"l": [1, 2, 3, 4, 5]}),
    ("{% for x in l %}{{ loop.previtem }}>{{ x }}>{{ loop.nextitem }}|{{ loop.cycle('a', 'b') }} {% endfor %}", {"l": [1, 2, 3]}),
    ("{% for x in 'abc' %}{{ x }}-{% endfor %}{% for k in {'p': 1, 'q': 2} %}{{ k }}{% endfor %}", {}),
    ("{% for i in range(3) %}{% for j in range(i) %}{{ i }}{{ j }} {% endfor %}{% endfor %}{{ range(2, 10, 3) | list }}", {}),
    ("{% if a %}A{% elif b %}B{% elif c %}C{% else %}D{% endif %}", {"a": 0, "b": "", "c": [1]}),
    ("{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + i %}{{ x }}{% endfor %} {{ x }}", {}),
    ("{% set ns = namespace(total=0, names=[]) %}{% for i in [1, 2, 3] %}{% set ns.total = ns.total + i %}{% set ns.names = ns.names + [i] %}{% endfor %}{{ ns.total }} {{ ns.names }}", {}),
    ("{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set t = 1, 2 %}{{ t }}", {}),
    ("{% set block %}  inner {{ 1 + 1 }}\n{% endset %}[{{ block }}]", {}),
    ("{% filter upper %}shout {{ 'this' }}{% endfilter %}", {}),
    ("{% filter trim %}\n   padded   \n{% endfilter %}|", {}),
    ("{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }} {{ greet() }}", {}),
    ("{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1) | int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("{% macro outer() %}[{{ inner() }}]{% endmacro %}{% macro inner() %}in{% endmacro %}{{ outer() }}", {}),
    ("{% set g = 'global' %}{% macro m() %}{{ g }}{% endmacro %}{{ m() }}", {}),
    # filters
    ("{{ '  x  ' | trim }}|{{ 'xxaxx' | trim('x') }}|{{ x | trim }}|{{ 'ab' | upper }}{{ 'AB' | lower }}|{{ 'hello wORLD' | title }}|{{ 'hello World' | capitalize }}", {}),
    ("{{ {'b': 1, 'a': [1, 2.5, 'é\\n', none, true]} | tojson }}", {}),
    ("{{ {'a': [1, {}], 'b': {'c': []}} | tojson(indent=2) }}", {}),
    ("{{ d | tojson }}", {"d": {"z": 1, "a": "\u2028 \u0001 \" \\ /"}}),
    ("{{ d | tojson(sort_keys=true) }}", {"d": {"z": 1, "a": 2}}),
    ("{{ l | length }} {{ 'héllo' | length }} {{ d | length }} {{ x | length }} {{ l | count }}", {"l": [1, 2], "d": {"a": 1}}),
    ("{{ l | join }} {{ l | join(', ') }} {{ ds | join('-', attribute='n') }}", {"l": [1, "a", None], "ds": [{"n": 1}, {"n": 2}]}),
    ("{{ x | default('d') }} {{ '' | default('e') }} {{ '' | default('e', true) }} {{ none | default('f') }} {{ x | d('g') }}", {}),
    ("{{ 'a-b-a' | replace('a', 'x') }} {{ 'aaa' | replace('a', 'b', 2) }}", {}),
    ("{{ d | items | list }} {% for k, v in d | items %}{{ k }}{{ v }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("{{ 'ab' | list }} {{ d | list }} {{ l | first }} {{ l | last }} {{ 'xy' | first }}", {"d": {"b": 1}, "l": [3, 4]}),
    ("{{ ['A', 'a', 'b', 'B', 'c'] | unique | list }} {{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1] | sort(reverse=true) }}", {}),
    ("{{ ms | selectattr('role', 'equalto', 'user') | list | length }} {{ ms | rejectattr('role', 'equalto', 'user') | map(attribute='content') | list }}", {"ms": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]}),
    ("{{ ts | selectattr('type', 'defined') | map(attribute='type') | unique | list }} {{ ts | selectattr('type') | list | length }}", {"ts": [{"type": "x"}, {"name": "y"}, {"type": "x"}, {"type": ""}]}),
    ("{{ l | select('odd') | list }} {{ l | reject('equalto', 2) | list }} {{ l | map('string') | join('+') }} {{ l | sum }} {{ l | max }} {{ l | min }}", {"l": [1, 2, 3]}),
    ("{{ [{'a': 1}, {'b': 2}] | map(attribute='a') | list }} {{ [{'a': 1}, {'b': 2}] | map(attribute='a', default=0) | list }}", {}),
    ("{{ 1.7 | int }} {{ '3' | int }} {{ '3.9' | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ 3 | float }} {{ '2.5' | float }} {{ true | int }}", {}),
    ("{{ 12 | string ~ 'x' }} {{ [1, 'a'] | string }} {{ none | string }}", {}),
    ("{{ 'a\\nb\\n\\nc' | indent }}|{{ 'a\\nb' | indent(2, true) }}|{{ 'a\\n\\nb\\n' | indent(2, blank=true) }}|{{ 'x' | indent('> ', first=true) }}", {}),
    ("{{ '<a href=\"x\">&' | e }} {{ 'raw' | safe }} {{ 'a b  c' | wordcount }} {{ 'abc' | reverse }} {{ [1, 2] | reverse | list }}", {}),
    ("{{ '%s is %d' | format('x', 3) }} {{ 2.567 | round(1) }} {{ 2.5 | round }} {{ -3 | abs }}", {}),
    ("{{ {'b': 1, 'a': 2} | dictsort }}", {}),
    # tests
    ("{{ x is defined }} {{ x is undefined }} {{ none is none }} {{ 1 is none }} {{ 'a' is string }} {{ 1 is string }} {{ {} is mapping }} {{ [] is mapping }}", {}),
    ("{{ [] is iterable }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ x is iterable }} {{ [] is sequence }} {{ {} is sequence }} {{ 1 is sequence }}", {}),
    ("{{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ 'a' is number }} {{ 1 is integer }} {{ true is integer }} {{ 1.0 is float }} {{ true is boolean }} {{ 1 is boolean }}", {}),
    ("{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 'a' is equalto 'a' }} {{ 2 is eq 3 }} {{ 'ab' is lower }} {{ 'AB' is upper }}", {}),
    ("{{ 1 is not none }} {{ x is not defined }} {{ 'a' is not string }} {{ 2 is in [1, 2] }} {{ 1 is lt 2 }} {{ 3 is ge 3 }}", {}),
    ("{{ range is callable }} {{ 'x' is callable }}", {}),
    # methods
    ("{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ 'a.b'.rstrip('.b') }}", {}),
    ("{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'abc'.split('b') }}", {}),
    ("{{ 'hello'.startswith('he') }} {{ 'hello'.endswith('lo') }} {{ 'hello'.startswith(('x', 'h')) }} {{ 'hello'.endswith('x') }}", {}),
    ("{{ 'Ab'.upper() }} {{ 'Ab'.lower() }} {{ 'ab cd'.title() }} {{ 'ab CD'.capitalize() }} {{ 'a-b'.replace('-', '+') }} {{ 'abcb'.find('b') }} {{ 'abcb'.count('b') }}", {}),
    ("{{ ', '.join(['a', 'b']) }} {{ '{} and {}'.format(1, 'x') }} {{ '{0}{0}'.format('r') }}", {}),
    ("{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys() | list }} {{ d.values() | list }} {{ d.items() | list }}", {"d": {"a": 1, "b": 2}}),
    ("{{ l.index(2) }} {{ l.count(1) }}", {"l": [1, 2, 1]}),
    # globals
    ("{{ dict(a=1, b='x') }} {{ namespace(a=1).a }} {{ range(3) | list }}", {}),
    # undefined as jinja2's default Undefined treats it
    ("[{{ x }}] [{% for i in x %}i{% endfor %}] [{{ x == 'a' }}] [{{ x != 1 }}] [{{ 'a' in x }}] [{{ x ~ 'a' }}] [{{ not x }}] [{% if x %}t{% else %}f{% endif %}]", {}),
    ("[{{ x | list }}] [{{ x | items | list }}] [{{ x | join }}] [{{ x | upper }}] [{{ x | string }}]", {}),
    ("{{ x.y }}", {}),
    ("{{ x + 'a' }}", {}),
    ("{{ 'a' + x }}", {}),
    ("{{ x[0] }}", {}),
    ("{{ x() }}", {}),
    ("{{ x < 1 }}", {}),
    ("{{ x | tojson }}", {}),
    ("{{ d.m.x }}", {"d": {}}),
    ("{{ l[3].x }}", {"l": [1]}),
    ("{{ x.y is defined }}", {}),
    ("{% macro m(a) %}{{ a + 1 }}{% endmacro %}{{ m() }}", {}),
    # errors
    ("{{ raise_exception('custom message') }}", {}),
    ("{% if true %}{{ raise_exception('inside ' ~ 'if') }}{% endif %}", {}),
    ("{{ 1 + 'a' }}", {}),
    ("{{ 'a' + 1 }}", {}),
    ("{{ 1 < 'a' }}", {}),
    ("{{ l.append(4) }}", {"l": [1]}),
    ("{{ d.update({}) }}", {"d": {}}),
    ("{{ range(200000) | length }}", {}),
    ("{% macro f(a) %}{% endmacro %}{{ f(1, 2) }}", {}),
    ("{% macro f(a) %}{% endmacro %}{{ f(b=1) }}", {}),
    ("{{ 1 / 0 }}", {}),
    ("{{ 'x' in 1 }}", {}),
    ("{{ 1 in 'x' }}", {}),
    ("{{ 3 | length }}", {}),
    ("{{ 1 | items | list }}", {}),
    ("{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
]


def render_construct(template, variables):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = shared_render.tojson
    env.globals["raise_exception"] = shared_render.raise_exception
    try:
        return env.from_string(template).render(**variables), None
    except Exception as e:  # the test expects the same kind and message
        return None, f"{type(e).__name__}: {e}"


def render_case(template, name, conv, messages, agp, bos, eos):
    try:
        text, err = shared_render.render(template, messages, agp, bos, eos), None
    except Exception as e:
        text, err = None, f"{type(e).__name__}: {e}"
    return {"template": name, "conversation": conv, "add_generation_prompt": agp,
            "bos_token": bos, "eos_token": eos, "expected": text, "error": err}


def write(name, data):
    with open(os.path.join(OUT, name), "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1)
        f.write("\n")


def extra_cases():
    folder = os.path.join(SHARED, "chat-templates")
    cases = []
    for file in sorted(os.listdir(folder)):
        if not file.endswith(".jinja"):
            continue
        name = file.removesuffix(".jinja")
        bos, eos = next(v for k, v in shared_render.SPECIAL.items() if name.startswith(k))
        template = open(os.path.join(folder, file), encoding="utf-8").read()
        for conv, messages in CONVS.items():
            for agp in (True, False):
                cases.append(render_case(template, name, conv, messages, agp, bos, eos))
    write("chat_template_extra.json", {"script": "tools/oracles/chat_template_oracle.py", "conversations": CONVS, "cases": cases})


def construct_cases():
    cases = []
    for template, variables in CONSTRUCTS:
        expected, error = render_construct(template, variables)
        cases.append({"template": template, "variables": variables, "expected": expected, "error": error})
    write("chat_template_constructs.json", {"script": "tools/oracles/chat_template_oracle.py", "cases": cases})


def smollm2_cases(real_models_dir):
    import gguf
    path = os.path.join(real_models_dir, "SmolLM2-135M-Instruct.Q4_1.gguf")
    reader = gguf.GGUFReader(path)
    def field(key):
        f = reader.fields[key]
        return f.contents()
    template = field("tokenizer.chat_template")
    tokens = field("tokenizer.ggml.tokens")
    bos = tokens[int(field("tokenizer.ggml.bos_token_id"))]
    eos = tokens[int(field("tokenizer.ggml.eos_token_id"))]
    convs = dict(shared_render.CONVS)
    convs.update(CONVS)
    cases = [render_case(template, "SmolLM2-135M-Instruct.Q4_1.gguf", conv, messages, agp, bos, eos)
             for conv, messages in convs.items() for agp in (True, False)]
    write("chat_template_smollm2.json", {"script": "tools/oracles/chat_template_oracle.py", "model": os.path.basename(path),
                                         "chat_template": template, "conversations": convs, "cases": cases})


if __name__ == "__main__":
    extra_cases()
    construct_cases()
    if len(sys.argv) > 2:
        smollm2_cases(sys.argv[2])
