#!/usr/bin/env python3
"""bench/experiments/trace_to_png.py: a bad trace is said in one line and exit 1, never a
traceback; a good one is drawn (with a python3 that has matplotlib: this one,
else Debian's /usr/bin/python3)."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(ROOT, "bench", "experiments", "trace_to_png.py")


def has_matplotlib(python):
    return os.path.exists(python) and subprocess.run(
        [python, "-c", "import matplotlib"], capture_output=True).returncode == 0


def drawing_python():
    for p in (sys.executable, "/usr/bin/python3"):
        if has_matplotlib(p):
            return p
    return None


def good_trace():
    ev = [{"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "rank 0"}},
          {"ph": "M", "name": "thread_name", "pid": 0, "tid": 0, "args": {"name": "train"}}]
    for step in range(4):
        t0 = step * 10000
        ev.append({"ph": "X", "name": "forward+backward", "pid": 0, "tid": 0, "ts": t0,
                   "dur": 6000, "args": {"step": step}})
        ev.append({"ph": "X", "name": "backward layer 1", "pid": 0, "tid": 0, "ts": t0 + 3000,
                   "dur": 3000})
        ev.append({"ph": "i", "name": "bucket ready 0", "pid": 0, "tid": 0, "ts": t0 + 4000})
        ev.append({"ph": "X", "name": "sync bucket 0", "pid": 0, "tid": 1, "ts": t0 + 4000,
                   "dur": 4000})
    return {"traceEvents": ev, "otherData": {"job_id": "j-test"}}


class TraceToPngTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.dir)

    def run_script(self, *args, python=None):
        return subprocess.run([python or sys.executable, SCRIPT] + list(args),
                              capture_output=True, text=True, timeout=120)

    def test_bad_traces_are_said_not_a_traceback(self):
        path = os.path.join(self.dir, "t.json")
        png = os.path.join(self.dir, "t.png")
        cases = (
            ("{half", "is not valid JSON"),
            ("5", "is not a Chrome trace"),
            ('{"traceEvents": [7]}', "event 0 is not an event object"),
            ('{"traceEvents": [{"ph": "X", "name": "a", "pid": 0, "ts": 1, "dur": 2}]}',
             "event 0 (ph X) lacks tid"),
            ('{"traceEvents": [{"ph": "X", "name": "a", "pid": 0, "tid": 0, "ts": "x",'
             ' "dur": 2}]}', "ts not a number"),
            ('{"traceEvents": [{"ph": "M", "name": "thread_name", "pid": 0, "args": 3}]}',
             "args is not an object"),
            ('{"traceEvents": []}', "has no complete events"),
        )
        for content, said in cases:
            with open(path, "w") as f:
                f.write(content)
            r = self.run_script(path, png)
            self.assertEqual(r.returncode, 1, content)
            self.assertIn(said, r.stderr, content)
            self.assertNotIn("Traceback", r.stderr, content)
            self.assertFalse(os.path.exists(png), content)
        r = self.run_script(os.path.join(self.dir, "missing.json"), png)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot read", r.stderr)
        with open(path, "w") as f:
            json.dump(good_trace(), f)
        r = self.run_script(path, png, "--steps", "0")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--steps", r.stderr)

    def test_a_good_trace_is_drawn(self):
        python = drawing_python()
        if python is None:
            self.skipTest("no python3 with matplotlib here (apt-get install python3-matplotlib)")
        path = os.path.join(self.dir, "t.json")
        with open(path, "w") as f:
            json.dump(good_trace(), f)
        png = os.path.join(self.dir, "t.png")
        r = self.run_script(path, png, "--first_step", "1", "--steps", "2", python=python)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(png, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        # A bare event list is a Chrome trace too.
        with open(path, "w") as f:
            json.dump(good_trace()["traceEvents"], f)
        r = self.run_script(path, png, python=python)
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_script(path, os.path.join(self.dir, "no", "such", "dir.png"),
                            python=python)
        self.assertEqual(r.returncode, 1)
        self.assertIn("cannot write", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


if __name__ == "__main__":
    unittest.main()
