#!/usr/bin/env python3
"""Host-side judgement of what tests/container/run.sh got from the container.

  judge.py serve EXPECTED EVENTS OUTPUT
      OUTPUT is `rendergate serve`'s stdout on EVENTS (examples/events.ndjson);
      EXPECTED (events.expected) names every rendered render's verdict kind,
      or none. Each must get exactly one verdict of that kind (none: no
      verdict), and no other verdict may come.

  judge.py corpus DEVIATIONS PROFILE OUTPUT
      OUTPUT holds corpus.sh's CASE and DETAIL lines. Every case's gate kind
      must equal bare HAProxy's, unless DEVIATIONS lists the case (for this
      profile or all) with its reason; a listed case that agrees is stale and
      fails too, so the list stays true.

Prints a summary; exits 1 on any failure, each one named on stderr.
"""

import collections
import json
import sys


def serve(expected_path, events_path, output_path):
    expected = {}
    with open(expected_path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                render, kind = line.split()
                expected[render] = kind
    with open(events_path) as f:
        rendered = [json.loads(line)["render"] for line in f
                    if line.strip() and json.loads(line).get("type") == "rendered"]
    if sorted(rendered) != sorted(expected):
        return fail([f"{expected_path} names renders {sorted(expected)}, {events_path} renders {sorted(rendered)}"])
    verdicts = collections.defaultdict(list)
    other = collections.Counter()
    with open(output_path) as f:
        for number, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                out = json.loads(line)
            except ValueError:
                return fail([f"serve's output line {number} is not JSON: {line[:200]}"])
            if out.get("type") != "verdict":
                other[out.get("type")] += 1
                continue
            if out["ok"] and not out["refused"]:
                kind = "pass"
            elif out["refused"] and not out["ok"]:
                kind = "refused"
            elif not out["ok"] and not out["refused"]:
                kind = "could-not-run"
            else:
                kind = "unreadable"
            verdicts[out["render"]].append((kind, out.get("message", "")))
    problems = []
    for render, kind in expected.items():
        got = verdicts.get(render, [])
        if kind == "none":
            if got:
                problems.append(f"render {render}: expected no verdict, got {got}")
        elif len(got) != 1:
            problems.append(f"render {render}: {len(got)} verdicts, expected 1: {got}")
        elif got[0][0] != kind:
            problems.append(f"render {render}: verdict {got[0][0]}, expected {kind}; message: {got[0][1]}")
    for render, got in verdicts.items():
        if render not in expected:
            problems.append(f"render {render}: a verdict for a render events.expected does not name: {got}")
    total = sum(len(v) for v in verdicts.values())
    print(f"serve: {total} verdicts for {len(expected)} renders "
          f"({', '.join(f'{r} {k[0][0]}' for r, k in sorted(verdicts.items()))}); "
          f"other outputs: {dict(other)}")
    return fail(problems)


def corpus(deviations_path, profile, output_path):
    deviations = {}
    with open(deviations_path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            name, _, reason = line.strip().partition(" ")
            case, _, only = name.partition("@")
            if not reason.strip():
                return fail([f"{deviations_path}: {name} has no reason"])
            if not only or only == profile:
                deviations[case] = reason.strip()
    cases, details = {}, collections.defaultdict(list)
    with open(output_path, errors="replace") as f:
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if fields[0] == "CASE" and len(fields) == 6:
                cases[fields[1]] = fields[2:]
            elif fields[0] == "DETAIL" and len(fields) >= 4:
                details[fields[1]].append(f"{fields[2]}: {chr(9).join(fields[3:])}")
    problems = []
    agree = listed = 0
    by_bare = collections.Counter()
    for name, (gate, bare, gate_exit, bare_exit) in cases.items():
        by_bare[bare] += 1
        if gate == bare:
            agree += 1
            if name in deviations:
                problems.append(f"{name}: listed in deviations.txt but both sides say {gate}: remove it")
        elif name in deviations:
            listed += 1
            print(f"  deviation (listed): {name}: gate {gate}, bare {bare}: {deviations[name]}")
        else:
            shown = "\n      ".join(line for line in details[name] if line.split(": ", 1)[1].strip())
            problems.append(f"{name}: gate {gate} (exit {gate_exit}), bare {bare} (exit {bare_exit})\n      {shown}")
    print(f"corpus: {len(cases)} cases, {agree} agree, {listed} listed deviations, "
          f"{len(cases) - agree - listed} disagree; bare: "
          + ", ".join(f"{n} {k}" for k, n in sorted(by_bare.items())))
    return fail(problems)


def fail(problems):
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"] and len(sys.argv) == 5:
        sys.exit(serve(*sys.argv[2:]))
    if sys.argv[1:2] == ["corpus"] and len(sys.argv) == 5:
        sys.exit(corpus(*sys.argv[2:]))
    sys.exit(__doc__)
