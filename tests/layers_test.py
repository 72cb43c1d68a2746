#!/usr/bin/env python3
"""tests/layers.py on small trees that keep or break each of its rules:
compiled with cc, read with nm, as it reads the relay."""
import os
import subprocess
import sys
import tempfile
import unittest

LAYERS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "layers.py")


def module(name, calls=(), pad=0):
    """include/NAME.h declaring NAME_do, relay/NAME.c defining it, calling
    each of calls' NAME_do, and pad lines of comment."""
    inc = "".join('#include "%s.h"\n' % c for c in calls)
    body = "".join("\t%s_do();\n" % c for c in calls)
    header = "#ifndef %s_H\n#define %s_H\nvoid %s_do(void);\n#endif\n" % (name.upper(), name.upper(), name)
    source = '#include "%s.h"\n%s%s\nvoid %s_do(void)\n{\n%s}\n' % (name, inc, "/* */\n" * pad, name, body)
    return {"include/%s.h" % name: header, "relay/%s.c" % name: source}


def drain(calls):
    """relay/drain.c: drain_run calls each of calls' NAME_do."""
    inc = "".join('#include "%s.h"\n' % c for c in calls)
    body = "".join("\t%s_do();\n" % c for c in calls)
    return {
        "include/drain.h": "#ifndef DRAIN_H\n#define DRAIN_H\nint drain_run(void);\n#endif\n",
        "relay/drain.c": '#include "drain.h"\n%s\nint drain_run(void)\n{\n%s\treturn 0;\n}\n' % (inc, body),
    }


def run(files):
    with tempfile.TemporaryDirectory() as root:
        for path, text in files.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        os.makedirs(os.path.join(root, "build"))
        for path in files:
            if path.startswith("relay/"):
                obj = os.path.join("build", os.path.basename(path)[:-2] + ".o")
                subprocess.run(["cc", "-Iinclude", "-c", "-o", obj, path], cwd=root, check=True)
        out = subprocess.run([sys.executable, LAYERS, "build"], cwd=root, capture_output=True, text=True)
        return out.returncode, out.stdout + out.stderr


class Layers(unittest.TestCase):
    def test_layered_tree_passes(self):
        rc, out = run({**drain(["a"]), **module("a", ["b"]), **module("b")})
        self.assertEqual(rc, 0, out)
        self.assertIn("0 circles", out)
        self.assertIn("walk enters 2 files: a drain", out)

    def test_call_back_up_is_a_circle(self):
        files = {**drain(["a"]), **module("a", ["b"]), **module("b", ["c"]), **module("c", ["a"])}
        rc, out = run(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("circle: a <-> b <-> c", out)
        self.assertIn("c uses a", out)

    def test_long_source_fails(self):
        rc, out = run({**drain(["a"]), **module("a", pad=600)})
        self.assertEqual(rc, 1, out)
        self.assertIn("relay/a.c: 605 lines (at most 600", out)

    def test_long_walk_fails(self):
        names = ["m%02d" % i for i in range(12)]
        files = drain(names)
        for n in names:
            files.update(module(n))
        rc, out = run(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("enters 13 files (at most 12)", out)


if __name__ == "__main__":
    unittest.main()
