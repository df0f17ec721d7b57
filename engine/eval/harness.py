"""The test harness: main.py of every sandboxed run, `python -I -B main.py FIRST_LINE`.

program.py holds the candidate's program, the prompt and the completion (the lines before
FIRST_LINE), then the tests. probe.json says what to do besides the tests (the engine
writes it, see engine/eval/test_runner.cpp). In order:

1. the checks that need no tests: the candidate's program parses and compiles, running it
   as a module neither raises nor exits (a hang is the run's wall-clock limit), and it
   defines the function the prompt names;
2. on request, the behaviour probe: that function called on inputs derived from the
   tests and the prompt (the arguments of the tests' calls and of the docstring's
   examples, variations of them, and values that suit each parameter's annotation or
   name), each call under a CPU-time limit; the outcome of each call (a value, None, the type of an exception, or no result) is reported with a
   fingerprint that other candidates' outcomes can be compared with;
3. on request, the docstring's `>>>` examples, run by Python's own doctest module, each
   one counted as a test;
4. the tests, each top-level assert (module level, and directly in check()) counted on
   its own, so that partial passes can rank.

Everything is reported through file descriptor 3, one line per fact, strings as JSON.
"done F" is written only after the tests returned: an early exit, of any kind, leaves it
out. os._exit keeps the program's own atexit handlers and threads from changing the
outcome. The harness runs in the candidate's own interpreter, so a candidate can forge
reports: the harness checks correctness, the sandbox is the security boundary.

When the candidate's lines do not parse on their own (or the tests do not), the program
runs as one piece exactly as human-eval runs it, with the tests only.
"""
import __future__
import ast
import copy
import hashlib
import io
import itertools
import json
import os
import signal
import sys
import time
import traceback

CHANNEL = 3
failures = 0  # failed asserts and examples
shown = 0  # tracebacks printed for failed asserts (at most 3)


def report(*words):
    try:
        os.write(CHANNEL, (" ".join(str(w) for w in words) + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def text(value):
    """A string as one JSON token: a report line never breaks."""
    return json.dumps(value, ensure_ascii=True)


def short(value, limit=160):
    value = value.strip()
    return value if len(value) <= limit else value[: limit - 3] + "..."


def finish(status):
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(status)


def describe(error):
    """'NameError: name 'x' is not defined', on one line."""
    try:
        return short(traceback.format_exception_only(type(error), error)[-1])
    except Exception:
        return type(error).__name__


# --- CPU-time limits -----------------------------------------------------------------

class OverLimit(BaseException):
    """Raised inside the candidate's code when its CPU time for one call runs out. A
    BaseException, so that the candidate's own `except Exception` does not swallow it."""


armed = False


def on_limit(signum, frame):
    if armed:
        raise OverLimit()


class cpu_limit:
    """At most `seconds` of CPU time (user and system) for the block: ITIMER_PROF counts the
    process's CPU time, so a loaded machine does not cut a call that would finish."""

    def __init__(self, seconds):
        self.seconds = seconds

    def __enter__(self):
        global armed
        armed = True
        signal.signal(signal.SIGPROF, on_limit)
        signal.setitimer(signal.ITIMER_PROF, self.seconds)

    def __exit__(self, *exception):
        global armed
        armed = False
        signal.setitimer(signal.ITIMER_PROF, 0)
        return False


class Capture(io.TextIOBase):
    """What a probed call prints: kept up to `limit` characters, the rest counted only."""

    def __init__(self, limit):
        self.parts, self.size, self.limit = [], 0, limit

    def writable(self):
        return True

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if self.size < self.limit:
            self.parts.append(s[: self.limit - self.size])
        self.size += len(s)
        return len(s)

    def value(self):
        return "".join(self.parts) + ("..." if self.size > self.limit else "")


# --- Checks ----------------------------------------------------------------------------

def compile_candidate(candidate):
    """(tree, code, None) when the candidate's lines parse and compile on their own, else
    (None, None, why)."""
    try:
        tree = ast.parse(candidate, "program.py")
        return tree, compile(tree, "program.py", "exec"), None
    except SyntaxError as error:
        where = " (line %d)" % error.lineno if error.lineno else ""
        return None, None, "%s: %s%s" % (type(error).__name__, error.msg, where)
    except Exception as error:  # null bytes, nesting too deep for the parser
        return None, None, describe(error)


def prompt_function(tree, entry_point, prompt_lines):
    """The prompt's definition of the entry point (the last function the prompt defines when
    no entry point is named): a top-level def that starts within the prompt's lines."""
    found = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= prompt_lines:
            if not entry_point or node.name == entry_point:
                found = node
                if entry_point:
                    break
    return found


def future_flags(namespace):
    """The __future__ features the candidate imported, for compiling the tests alike."""
    flags = 0
    for value in list(namespace.values()):
        if isinstance(value, __future__._Feature):
            flags |= value.compiler_flag
    return flags


# --- Inputs for the behaviour probe ------------------------------------------------------

# Values for a parameter of each kind, when the docstring gives none (or to add to its own).
POOLS = {
    "int": [0, 1, 2, 3, -1, 5, 10],
    "float": [0.0, 1.0, 2.5, -1.5, 10.0],
    "bool": [True, False],
    "str": ["", "a", "abc", "Hello World", "aab ba", "x y z"],
    "list_int": [[], [1], [1, 2, 3], [3, -1, 2, 0], [5, 5, 2, 8]],
    "list_float": [[], [1.0], [1.5, 2.0, -3.0]],
    "list_str": [[], ["a"], ["ab", "c"], ["hello", "world", "hi"]],
    "dict": [{}, {"a": 1}, {"a": 3, "b": 1, "c": 2}],
    "tuple": [(), (1,), (1, 2, 3)],
}

NAMES = {
    "int": {"n", "m", "k", "i", "j", "x", "y", "z", "a", "b", "c", "num", "number", "count", "size",
            "length", "start", "end", "low", "high", "base", "exp", "power", "digit", "limit", "step",
            "index", "idx", "year", "age", "width", "height", "depth", "total", "amount", "times"},
    "str": {"s", "string", "text", "word", "name", "sentence", "line", "char", "ch", "prefix",
            "suffix", "sub", "substring", "pattern", "sep", "delimiter", "letter", "message", "msg",
            "key", "password", "date", "str1", "str2", "s1", "s2", "txt", "phrase", "needle", "haystack"},
    "list_int": {"nums", "numbers", "xs", "ys", "lst", "arr", "array", "values", "items", "elements",
                 "data", "l", "seq", "sequence", "ints", "list", "list1", "list2", "lst1", "lst2",
                 "scores", "prices", "grades", "a_list", "vals", "digits"},
    "list_str": {"words", "strings", "names", "lines", "texts", "sentences", "tokens", "letters"},
    "dict": {"d", "dct", "dictionary", "mapping", "table", "counts", "dic"},
    "float": {"rate", "ratio", "price", "temperature", "threshold", "weight", "f", "value_f"},
    "bool": {"flag", "reverse", "strict", "enabled"},
}


def kind_of_value(value):
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str"
    if isinstance(value, tuple):
        return "tuple"
    if isinstance(value, list):
        if value and all(isinstance(v, str) for v in value):
            return "list_str"
        if value and all(isinstance(v, float) for v in value):
            return "list_float"
        return "list_int"
    if isinstance(value, dict):
        return "dict"
    return None


def kind_of_annotation(annotation):
    a = annotation.replace("typing.", "").replace(" ", "")
    for wrapper in ("Optional[", "Union["):
        if a.startswith(wrapper):
            a = a[len(wrapper):].split(",")[0].rstrip("]")
    lower = a.lower()
    for container in ("list", "sequence", "iterable", "collection"):
        if lower.startswith(container):
            inner = lower[len(container):]
            return "list_str" if "str" in inner else "list_float" if "float" in inner else "list_int"
    for prefix, kind in (("dict", "dict"), ("mapping", "dict"), ("tuple", "tuple"), ("str", "str"),
                         ("float", "float"), ("bool", "bool"), ("int", "int")):
        if lower.startswith(prefix):
            return kind
    return None


def kind_of_name(name):
    lower = name.lower()
    for kind, names in NAMES.items():
        if lower in names:
            return kind
    if lower.endswith(("str", "text", "word", "name")):
        return "str"
    if lower.endswith("s") and len(lower) > 2:
        return "list_int"
    return None


def variants(value):
    """Inputs near a docstring example's argument: edge cases and small changes."""
    if isinstance(value, bool):
        return [not value]
    if isinstance(value, int):
        return [0, 1, -1, value + 1, value - 1, 2 * value, -value]
    if isinstance(value, float):
        return [0.0, -value, 2 * value, value + 0.5]
    if isinstance(value, str):
        return ["", value[:1], value[::-1], value.upper(), value + value, value[1:]]
    if isinstance(value, (list, tuple)):
        kind = type(value)
        out = [kind(), kind(value[:1]), kind(value[::-1]), kind(value) + kind(value[:1]), kind(value[1:])]
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            out.append(kind(-v for v in value))
        return out
    if isinstance(value, dict):
        return [{}, dict(list(value.items())[:1])]
    return []


def literal_calls(source, entry_point):
    """The calls of the entry point with literal arguments in a docstring example's or the
    tests' source (where HumanEval's check(candidate) names the function `candidate`)."""
    try:
        tree = ast.parse(source, mode="exec")
    except SyntaxError:
        return []
    calls = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in (entry_point, "candidate")):
            continue
        if any(k.arg is None for k in node.keywords):
            continue
        try:
            args = [ast.literal_eval(a) for a in node.args]
            kwargs = {k.arg: ast.literal_eval(k.value) for k in node.keywords}
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        calls.append((args, kwargs))
    return calls


def derive_inputs(function, examples, tests, limit):
    """Up to `limit` distinct (args, kwargs): the tests' and the examples' own calls first
    (where a wrong candidate is most likely to show it), then each of their arguments varied
    in turn, then values that suit each parameter, combined."""
    spec = function.args
    positional = spec.posonlyargs + spec.args
    required = len(positional) - len(spec.defaults)
    calls = literal_calls(tests, function.name)
    for example in examples:
        calls += literal_calls(example.source, function.name)

    def kind(j, parameter):
        if parameter.annotation is not None:
            found = kind_of_annotation(ast.unparse(parameter.annotation))
            if found:
                return found
        for args, _ in calls:
            if j < len(args) and kind_of_value(args[j]):
                return kind_of_value(args[j])
        return kind_of_name(parameter.arg) or "int"

    kinds = [kind(j, p) for j, p in enumerate(positional[:required])]
    keyword_only = {p.arg: POOLS[kind(-1, p)][1] for p, d in zip(spec.kwonlyargs, spec.kw_defaults) if d is None}

    inputs, seen = [], set()

    def add(args, kwargs):
        key = repr((args, sorted(kwargs.items())))
        if key not in seen and len(inputs) < limit:
            seen.add(key)
            inputs.append((list(args), dict(kwargs)))

    for args, kwargs in calls:
        add(args, kwargs)
    varied_limit = max(len(inputs), limit * 2 // 3)
    for args, kwargs in calls:
        per_position = [variants(v) for v in args]
        for turn in range(max((len(v) for v in per_position), default=0)):
            for j, options in enumerate(per_position):
                if turn < len(options) and len(inputs) < varied_limit:
                    add(args[:j] + [options[turn]] + args[j + 1:], kwargs)
    pools = [POOLS[k] for k in kinds]
    for turn in range(max((len(p) for p in pools), default=1)):
        add([p[(turn + j) % len(p)] for j, p in enumerate(pools)], keyword_only)
    return inputs


def call_text(name, args, kwargs):
    parts = [repr(a) for a in args] + ["%s=%r" % item for item in kwargs.items()]
    return "%s(%s)" % (name, ", ".join(parts))


# --- Outcomes ----------------------------------------------------------------------------

def canon(value, depth=0):
    """A text equal for values that tests would find equal: floats to 12 digits, sets and
    dicts in sorted order (their order follows the process's hash seed), iterators read out,
    no memory addresses."""
    if depth > 20:
        return "..."
    if value is None or isinstance(value, (bool, int, str, bytes)):
        return repr(value)
    if isinstance(value, float):
        if value != value:
            return "nan"
        return repr(float("%.12g" % value) + 0.0)
    if isinstance(value, list):
        return "[" + ", ".join(canon(v, depth + 1) for v in value) + "]"
    if isinstance(value, tuple):
        inner = ", ".join(canon(v, depth + 1) for v in value)
        return "(" + inner + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, (set, frozenset)):
        return type(value).__name__ + "{" + ", ".join(sorted(canon(v, depth + 1) for v in value)) + "}"
    if isinstance(value, dict):
        items = sorted(canon(k, depth + 1) + ": " + canon(v, depth + 1) for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if hasattr(value, "__next__") and hasattr(value, "__iter__"):
        return "iterator" + canon(list(itertools.islice(value, 1000)), depth + 1)
    shown = repr(value)
    if " at 0x" in shown:
        return "<%s>" % type(value).__qualname__
    return shown


def probe(function, name, inputs, call_seconds, probe_seconds):
    """Calls `function` on each input and reports each outcome:
    output I value|none|raise|timeout|skipped KEY SHOWN, and printed I TEXT when it printed."""
    spent = 0.0
    for i, (args, kwargs) in enumerate(inputs):
        report("input", i, text(call_text(name, args, kwargs)))
        if spent >= probe_seconds:
            report("output", i, "skipped", "-", text("not run: the probe's time ran out"))
            continue
        capture = Capture(400)
        saved = sys.stdout, sys.stderr
        started = time.process_time()
        try:
            sys.stdout = sys.stderr = capture
            with cpu_limit(call_seconds):
                result = function(*copy.deepcopy(args), **copy.deepcopy(kwargs))
                if result is None:
                    kind, key, shown = "none", "-", "None"
                else:
                    kind, shown = "value", canon(result)
                    key = hashlib.sha256(shown.encode("utf-8", "replace")).hexdigest()[:20]
        except OverLimit:
            kind, key, shown = "timeout", "-", "no result within %g s of CPU time" % call_seconds
        except BaseException as error:
            kind, key, shown = "raise", type(error).__name__, "raises " + describe(error)
        finally:
            sys.stdout, sys.stderr = saved
            spent += time.process_time() - started
        report("output", i, kind, key, text(short(shown, 200)))
        if capture.size:
            report("printed", i, text(capture.value()))


# --- Docstring examples ------------------------------------------------------------------

def parse_examples(docstring, name):
    """The docstring's >>> examples as doctest's parser reads them; none when it cannot read
    them (doctest would run none either). doctest (and pdb with it) is imported only for a
    docstring that has examples."""
    if not docstring or ">>>" not in docstring:
        return []
    import doctest
    try:
        return doctest.DocTestParser().get_examples(docstring, name)
    except ValueError:
        return []


def run_examples(examples, docstring, name, namespace, example_seconds):
    """Each example, as doctest runs it (its option directives included), in a copy of the
    module's namespace that the examples share, as doctest does. Reports examples N, then
    example I ok|fail TEXT for each one not skipped."""
    global failures
    import doctest

    class ExampleRunner(doctest.DocTestRunner):
        """doctest's own runner; it only keeps what went wrong with the example it ran."""

        problem = None

        def report_start(self, out, test, example):
            self.problem = None

        def report_failure(self, out, test, example, got):
            self.problem = "expected %s, got %s" % (short(example.want, 60) or "nothing",
                                                    short(got, 60) or "nothing")

        def report_unexpected_exception(self, out, test, example, exc_info):
            over = exc_info[0] is OverLimit
            self.problem = "no result within its CPU time" if over else "raised " + describe(exc_info[1])

    runner = ExampleRunner(verbose=False)
    counted = [e for e in examples if not e.options.get(doctest.SKIP)]
    report("examples", len(counted))
    globs = namespace  # DocTest copies what it is given: the module's namespace stays untouched
    for i, example in enumerate(counted):
        test = doctest.DocTest([example], globs, name, "program.py", None, docstring)
        try:
            with cpu_limit(example_seconds):
                result = runner.run(test, out=lambda _: None, clear_globs=False)
        except OverLimit:  # ran out outside the example's own code
            result, runner.problem = doctest.TestResults(1, 1), "no result within its CPU time"
        globs = test.globs  # what the example defined goes on to the next ones
        call = short(example.source, 60)
        if result.failed:
            failures += 1
            report("example", i, "fail", text("%s: %s" % (call, runner.problem or "failed")))
        else:
            report("example", i, "ok", text(call))


# --- The tests -------------------------------------------------------------------------

def show(error):
    try:
        traceback.print_exception(type(error), error, error.__traceback__)
    except Exception:
        pass


def record(index, error):
    global failures, shown
    if error is None:
        report("assert %d ok" % index)
        return
    failures += 1
    report("assert %d fail" % index)
    if isinstance(error, MemoryError):
        report("memory")
    if shown < 3:
        shown += 1
        show(error)


def compared(got, expected):
    """The message of a failed `assert got == expected`: what each side was."""
    def shown(value):
        try:
            return short(repr(value), 120)
        except Exception:
            return "<unprintable %s>" % type(value).__name__
    return "expected %s, got %s" % (shown(expected), shown(got))


def with_values(statement):
    """`assert a == b` without a message gets one that says what a and b were, the sides
    evaluated once (as assignment expressions) as the plain assert evaluates them."""
    test = statement.test
    if statement.msg is not None or not isinstance(test, ast.Compare) or len(test.ops) != 1 \
            or not isinstance(test.ops[0], ast.Eq):
        return statement
    left = ast.NamedExpr(ast.Name("__specula_got__", ast.Store()), test.left)
    right = ast.NamedExpr(ast.Name("__specula_expected__", ast.Store()), test.comparators[0])
    message = ast.Call(ast.Name("__specula_compared__", ast.Load()),
                       [ast.Name("__specula_got__", ast.Load()), ast.Name("__specula_expected__", ast.Load())], [])
    node = ast.Assert(ast.Compare(left, [ast.Eq()], [right]), message)
    return ast.copy_location(node, statement)


def counted(statement, index):
    statement = with_values(statement)

    def call(argument):
        return ast.Expr(ast.Call(ast.Name("__specula_assert__", ast.Load()),
                                 [ast.Constant(index), argument], []))
    handler = ast.ExceptHandler(ast.Name("Exception", ast.Load()), "__specula_error__",
                                [call(ast.Name("__specula_error__", ast.Load()))])
    node = ast.Try([statement], [handler], [call(ast.Constant(None))], [])
    return ast.copy_location(node, statement)


def instrument(tree, first_line):
    count = 0

    def rewrite(body):
        nonlocal count
        out = []
        for statement in body:
            if isinstance(statement, ast.Assert) and statement.lineno >= first_line:
                out.append(counted(statement, count))
                count += 1
            else:
                out.append(statement)
        return out

    tree.body = rewrite(tree.body)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check" and node.lineno >= first_line:
            node.body = rewrite(node.body)
    return count


def execute(code, namespace, stage):
    """Runs module code; an exception or exit ends the run (after reporting it for `stage`,
    "import" for the candidate's own lines)."""
    try:
        exec(code, namespace)
    except MemoryError as error:
        report("memory")
        if stage:
            report("check", stage, "fail", text("raises MemoryError"))
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        finish(1)
    except SystemExit as error:
        if stage:
            report("check", stage, "fail", text("exits (SystemExit %r)" % (error.code,)))
        report("exit %r" % (error.code,))
        finish(error.code if isinstance(error.code, int) else 1)
    except BaseException as error:
        if stage:
            report("check", stage, "fail", text("raises " + describe(error)))
        traceback.print_exception(type(error), error, error.__traceback__.tb_next)
        finish(1)


def fresh_namespace():
    return {"__name__": "__main__", "__builtins__": __builtins__, "__specula_assert__": record,
            "__specula_compared__": compared}


def run_whole(source, first_line):
    """The program as one piece, the tests counted (human-eval's program, unchanged)."""
    report("whole")
    try:
        tree = ast.parse(source, "program.py")
    except (SyntaxError, ValueError) as error:
        traceback.print_exception(type(error), error, None)
        finish(1)
    report("asserts %d" % instrument(tree, first_line))
    execute(compile(ast.fix_missing_locations(tree), "program.py", "exec"), fresh_namespace(), None)
    report("done %d" % failures)
    finish(1 if failures else 0)


def parse_tests(tests, first_line):
    """The tests' lines on their own, numbered as in program.py; None when they do not parse."""
    try:
        return ast.parse("\n" * (first_line - 1) + tests, "program.py")
    except (SyntaxError, ValueError):
        return None


def split(source, first_line):
    """The candidate's lines (before `first_line`) and the tests' lines of program.py."""
    cut = 0
    for _ in range(first_line - 1):
        cut = source.find("\n", cut) + 1
        if cut == 0:
            return source, ""
    return source[:cut], source[cut:]


def check_and_probe(tree, namespace, options, tests):
    """The entry point check, then the probe (on the inputs of `tests`, the tests' source,
    among others) and the docstring's examples when asked."""
    entry_point = options.get("entry_point", "")
    node = prompt_function(tree, entry_point, int(options.get("prompt_lines", 0)))
    name = entry_point or (node.name if node else "")
    function = namespace.get(name) if name else None
    if name:
        if callable(function):
            report("check entry ok")
        else:
            report("check entry fail", text("defines no function %s()" % name))
            function = None
    docstring = ast.get_docstring(node, clean=False) if node else None
    examples = parse_examples(docstring, name)
    if options.get("behaviour") and function is not None and node is not None:
        inputs = derive_inputs(node, examples, tests, int(options["max_inputs"]))
        report("inputs", len(inputs))
        probe(function, name, inputs, float(options["call_seconds"]), float(options["probe_seconds"]))
    if options.get("examples") and examples:
        run_examples(examples, docstring, name, namespace, float(options["example_seconds"]))


def main():
    first_line = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    sys.argv = ["program.py"]
    report("start")
    try:
        with open("probe.json", encoding="utf-8") as f:
            options = json.load(f)
    except OSError:
        options = {}
    with open("program.py", encoding="utf-8", errors="replace") as f:
        source = f.read()
    candidate, tests = split(source, first_line)
    tree, code, why = compile_candidate(candidate)
    test_tree = parse_tests(tests, first_line) if code else None
    report("check syntax " + ("ok" if code else "fail " + text(why)))
    if test_tree is None:
        run_whole(source, first_line)

    namespace = fresh_namespace()
    execute(code, namespace, "import")
    report("check import ok")
    check_and_probe(tree, namespace, options, tests)

    if not test_tree.body:
        report("tests none")
    report("asserts %d" % instrument(test_tree, first_line))
    code = compile(ast.fix_missing_locations(test_tree), "program.py", "exec", flags=future_flags(namespace),
                   dont_inherit=True)
    execute(code, namespace, None)
    report("done %d" % failures)
    finish(1 if failures else 0)


main()
